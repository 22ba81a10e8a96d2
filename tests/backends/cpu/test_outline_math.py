"""`outline-math` on the CPU (codegen/transforms/outline_math.py): a kernel whose costly math
functions are called, not expanded at each use, computes the same bits as the kernel that expands
them inline (the one approximation either way), on vector bodies and scalar tails, f32, f64 and
bf16 (whose promoted ops keep their bf16 form), and its LLVM IR calls one `noinline` function per
function and type."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.codegen import pipeline

TEXT = """HloModule outline_{tag}
ENTRY e {{
  x = {t}[{n}] parameter(0)
  r = {t}[{n}] reverse(x), dimensions={{0}}
  a = {t}[{n}] sine(x)
  b = {t}[{n}] sine(r)
  c = {t}[{n}] multiply(a, b)
  d = {t}[{n}] tanh(c)
  f = {t}[{n}] tanh(a)
  g = {t}[{n}] log-plus-one(d)
  h = {t}[{n}] log-plus-one(f)
  ROOT o = {t}[{n}] add(g, h)
}}"""


def _inputs(dtype, n):
    rng = np.random.default_rng(5)
    x = rng.uniform(-40, 40, n)
    x[:6] = [0.0, -0.0, 1e-30, 3.0e9, -7.5, 1e5]  # (a tiny, a huge and a negative argument among them)
    return x.astype(dtype)


# one element per thread (1003) and whole vectors (1024); by default f32 both, f64 and bf16 whole
# vectors (their scalar forms, 2-8 s of cold compiles each on two loaded cores, in the slow set)
@pytest.mark.parametrize("t, n", [("f32", 1003), ("f32", 1024), pytest.param("f64", 1003, marks=pytest.mark.slow),
                                  ("f64", 1024), pytest.param("bf16", 1003, marks=pytest.mark.slow), ("bf16", 1024)])
def test_outlined_math_computes_the_inline_expansion_bit_for_bit(t, n, monkeypatch, tmp_path):
    import ml_dtypes

    dtype = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16}[t]
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    x = _inputs(dtype, n)
    dump = tmp_path / "dump"
    outlined = hlocc.compile(TEXT.format(tag=f"{t}_{n}_outlined", t=t, n=n), "cpu", dump_dir=str(dump))(x)
    monkeypatch.setattr(pipeline, "CPU_PIPELINE", tuple(p for p in pipeline.CPU_PIPELINE if p != "outline-math"))
    inline = hlocc.compile(TEXT.format(tag=f"{t}_{n}_inline", t=t, n=n), "cpu")(x)
    assert outlined.dtype == inline.dtype == np.dtype(dtype)
    assert outlined.tobytes() == inline.tobytes()
    reference = hlocc.compile(TEXT.format(tag=f"{t}_{n}_ref", t=t, n=n), "interpreter")(x)
    np.testing.assert_allclose(outlined.astype(np.float64), reference.astype(np.float64), rtol=2e-2 if t == "bf16"
                               else 1e-5, atol=1e-6)
    defines = [line for p in dump.iterdir() if p.name.endswith(".llvm.ll")
               for line in p.read_text().splitlines() if line.startswith("define") and "__hlocc_math." in line]
    names = {line.split('@"')[1].split('"')[0] for line in defines}
    kind = "f64" if t == "f64" else "f32"  # (bf16 math is computed in f32)
    assert {name.split(".")[1] for name in names} == {"sin", "tanh", "log1p"}, names
    assert all(name.split(".")[2].endswith(kind) and ("vector" in name) == (n == 1024) for name in names), names
    # bf16's tanh takes its cheaper form, equal after the rounding (expand_float_ops.BF16_APPROXIMATIONS)
    assert {name for name in names if name.endswith(".bf16")} == ({next(m for m in names if ".tanh." in m)}
                                                                   if t == "bf16" else set())
    assert all(line.endswith(" noinline") for line in defines), defines
