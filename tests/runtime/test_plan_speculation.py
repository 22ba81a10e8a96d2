"""Plan-level speculation (runtime/plan_speculation.py): softmax, layernorm and RMSnorm over a
symbolic row length [?b, ?n] get a `stitched` plan (one stitch kernel over the runtime row length)
run where the row fits the on-chip budget, and the `generic` multi-kernel plan elsewhere. Each plan,
forced, matches the evaluator at sizes around every threshold: 0, 1, the vector width ± 1, the
shortest stitched row ± 1, 512 ± 1, and the budget ± 1 row."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from _programs import filecheck, softmax_text

import hlocc
from hlocc.analysis.cost_model import stitch_row_range
from hlocc.backends.cpu.executable import compile_dynamic_module
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.speculation import SpeculationOptions

RNG = np.random.default_rng(11)
LEAST, MOST = stitch_row_range("f32", 1)  # 2 and 131072 (half of a 1 MiB L2 in f32)
ROW_LENGTHS = [0, 1, 15, 16, 17, LEAST - 1, LEAST, LEAST + 1, 127, 511, 512, 513]
BUDGET_ROWS = [MOST - 1, MOST, MOST + 1]
MODES = ["on", "force:stitched", "force:generic"]

_REDUCERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# The statistics divide by the runtime row length, read with get-dimension-size (as JAX writes it).
LAYERNORM = """HloModule layernorm
""" + _REDUCERS + """
ENTRY main {
  x = {t}[?b,?n] parameter(0)
  g = {t}[?n] parameter(1)
  xf = f32[?b,?n] convert(x)
  zero = f32[] constant(0)
  sum = f32[?b] reduce(xf, zero), dimensions={1}, to_apply=add
  size = s32[] get-dimension-size(x), dimensions={1}
  nf = f32[] convert(size)
  bn = f32[?b] broadcast(nf), dimensions={}
  mean = f32[?b] divide(sum, bn)
  bmean = f32[?b,?n] broadcast(mean), dimensions={0}
  c = f32[?b,?n] subtract(xf, bmean)
  c2 = f32[?b,?n] multiply(c, c)
  ss = f32[?b] reduce(c2, zero), dimensions={1}, to_apply=add
  var = f32[?b] divide(ss, bn)
  eps = f32[] constant(1e-05)
  beps = f32[?b] broadcast(eps), dimensions={}
  rs = f32[?b] rsqrt(f32[?b] add(var, beps))
  brs = f32[?b,?n] broadcast(rs), dimensions={0}
  gf = f32[?n] convert(g)
  bg = f32[?b,?n] broadcast(gf), dimensions={1}
  y = f32[?b,?n] multiply(f32[?b,?n] multiply(c, brs), bg)
  ROOT out = {t}[?b,?n] convert(y)
}
"""

RMSNORM = """HloModule rmsnorm
""" + _REDUCERS + """
ENTRY main {
  x = {t}[?b,?n] parameter(0)
  xf = f32[?b,?n] convert(x)
  zero = f32[] constant(0)
  ss = f32[?b] reduce(f32[?b,?n] multiply(xf, xf), zero), dimensions={1}, to_apply=add
  size = s32[] get-dimension-size(x), dimensions={1}
  bn = f32[?b] broadcast(f32[] convert(size)), dimensions={}
  eps = f32[] constant(1e-06)
  beps = f32[?b] broadcast(eps), dimensions={}
  rs = f32[?b] rsqrt(f32[?b] add(f32[?b] divide(ss, bn), beps))
  brs = f32[?b,?n] broadcast(rs), dimensions={0}
  ROOT out = {t}[?b,?n] convert(f32[?b,?n] multiply(xf, brs))
}
"""

PROGRAMS = {
    "softmax": softmax_text("?n"),
    "layernorm": LAYERNORM.replace("{t}", "f32"),
    "rmsnorm_bf16": RMSNORM.replace("{t}", "bf16"),
}


@pytest.fixture(scope="module")
def compiled():
    """Each program's plan compiled once per mode, and its reference (the interpreter)."""
    return {(name, mode): compile_dynamic_module(parse_hlo(text), speculation=SpeculationOptions(mode))
            for name, text in PROGRAMS.items() for mode in MODES}


def inputs(name: str, b: int, n: int) -> list[np.ndarray]:
    import ml_dtypes

    x = RNG.standard_normal((b, n)).astype(np.float32) * 3
    if name == "rmsnorm_bf16":
        return [x.astype(ml_dtypes.bfloat16)]
    if name == "layernorm":
        return [x, RNG.standard_normal(n).astype(np.float32)]
    return [x]


@functools.cache
def reference(name: str):
    return hlocc.compile(PROGRAMS[name], "interpreter")


def check(program, name: str, b: int, n: int) -> None:
    args = inputs(name, b, n)
    want = np.asarray(reference(name)(*args), np.float32)
    got = np.asarray(program.run(args), np.float32)
    tol = 1e-2 if name.endswith("bf16") else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def plan_ran(program) -> dict[str, int]:
    """Calls per plan version since the last look, then reset."""
    counts = {v: c for v, c in program.versions.calls.items() if c}
    program.versions.calls.clear()
    return counts


def test_on_builds_two_plans_and_forcing_builds_one(compiled):
    for name in PROGRAMS:
        on = compiled[name, "on"]
        # (one row-shaped input each; the budget counts the reduced rows' type, f32, as the static pass does)
        assert [(v.name, v.predicate) for v, _ in on.versions.versions] == [
            ("stitched", f"{LEAST} <= n <= {MOST}"), ("generic", "true")], name
        assert on.template.describe()[-1].startswith("kernel stitch_"), on.to_string()
        assert sum(line.startswith("kernel ") for line in on.template.describe()) == 1  # one kernel
        # ... and no host step: layernorm's get-dimension-size is computed in the kernel, from its dims
        assert not any(line.startswith("host ") for line in on.template.describe()), on.to_string()
        assert [v.name for v, _ in compiled[name, "force:stitched"].versions.versions] == ["stitched"]
        assert compiled[name, "force:generic"].versions is None  # the multi-kernel plan only, as before
        assert not any("stitch_" in line for line in compiled[name, "force:generic"].template.describe())


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_plan_forced_matches_the_evaluator(compiled, name, mode, n):
    program = compiled[name, mode]
    if program.versions is not None:
        plan_ran(program)
    for b in (1, 3):
        check(program, name, b, n)
    if program.versions is not None:
        most = program.versions.versions[0][0].conditions[0].most
        want = "stitched" if mode == "force:stitched" or LEAST <= n <= most else "generic"
        assert plan_ran(program) == {want: 2}


@pytest.mark.slow
@pytest.mark.parametrize("n", BUDGET_ROWS)
@pytest.mark.parametrize("mode", MODES)
def test_rows_around_the_budget(compiled, mode, n):
    program = compiled["softmax", mode]
    if program.versions is not None:
        plan_ran(program)
    check(program, "softmax", 2, n)
    if program.versions is not None:
        want = "stitched" if mode == "force:stitched" or n <= MOST else "generic"
        assert plan_ran(program) == {want: 1}


def test_the_plan_is_chosen_once_per_binding(compiled):
    program = compiled["softmax", "on"]
    plan_ran(program)
    sizes = dict(program.versions.sizes)
    x = np.ones((2, 40), np.float32)
    for _ in range(3):
        program.run([x])
    assert plan_ran(program) == {"stitched": 3}
    assert program.versions.sizes["stitched"] - sizes.get("stitched", 0) <= 1  # bound once (or earlier)


def test_stitched_rows_stay_inside_their_buffers():
    from dataclasses import replace

    from hlocc.codegen.target import cpu_target

    program = compile_dynamic_module(parse_hlo(PROGRAMS["softmax"]), replace(cpu_target(), check_bounds=True),
                                     speculation=SpeculationOptions("force:stitched"))
    for b, n in ((1, 0), (1, 1), (2, 17), (3, 33), (2, 1025), (5, 512)):  # 1025: the next-row prefetch
        check(program, "softmax", b, n)


def test_stats_and_dump_show_the_plan_versions(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    monkeypatch.delenv("HLOCC_SPECULATION", raising=False)
    exe = hlocc.compile(PROGRAMS["softmax"], "cpu", dump_dir=str(tmp_path))
    for n in (64, 64, 1):
        exe(np.ones((3, n), np.float32))
    stats = exe.stats_text()
    assert f"speculation plan: version stitched if {LEAST} <= n <= {MOST}: 1 size(s), 2 call(s)" in stats
    assert "speculation plan: version generic if true: 1 size(s), 1 call(s)" in stats
    filecheck((tmp_path / "thunks.txt").read_text(),
              "CHECK:      kernel stitch_divide_fusion (stitch emitter): f32[?b,?n]\n"
              "CHECK-NOT:  kernel\n"
              f"CHECK:      speculation plan: version stitched if {LEAST} <= n <= {MOST}\n"
              "CHECK-NEXT: speculation plan: version generic if true\n"
              "CHECK:      // plan version generic if true:\n"
              "CHECK-NEXT: kernel input_reduce_fusion (loop emitter)\n"
              "CHECK:      kernel loop_divide_fusion (loop emitter)\n", tmp_path)


ATTENTION_ROWS = """HloModule attention_rows
""" + _REDUCERS + """
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

ENTRY e {
  q = f32[?s,8] parameter(0)
  w = f32[8,8] constant({...})
  p = f32[?s,8] dot(q, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[?s,?s] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  c = f32[] constant(-inf)
  m = f32[?s] reduce(s, c), dimensions={1}, to_apply=max
  mb = f32[?s,?s] broadcast(m), dimensions={0}
  d = f32[?s,?s] subtract(s, mb)
  x = f32[?s,?s] exponential(d)
  z = f32[] constant(0)
  r = f32[?s] reduce(x, z), dimensions={1}, to_apply=add
  rb = f32[?s,?s] broadcast(r), dimensions={0}
  ROOT y = f32[?s,?s] divide(x, rb)
}
"""


def test_a_module_with_products_builds_the_stitched_plan_only_and_it_runs_every_size():
    """Its products dominate the steady time: under "on" no generic plan beside the stitched one
    (module doc), which then runs at row lengths outside the budget too; the module's constant
    weights survive the copy taken before the passes."""
    weights = RNG.standard_normal((8, 8)).astype(np.float32)
    literal = "{" + ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in weights) + "}"
    text = ATTENTION_ROWS.replace("{...}", literal)
    program = compile_dynamic_module(parse_hlo(text), speculation=SpeculationOptions("on"))
    assert [v.name for v, _ in program.versions.versions] == ["stitched"]
    for s in (1, 5, LEAST + 3):
        q = RNG.standard_normal((s, 8)).astype(np.float32)
        scores = (q @ weights) @ q.T
        e = np.exp(scores - scores.max(1, keepdims=True))
        np.testing.assert_allclose(np.asarray(program.run([q])), e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-5)
    assert program.versions.calls == {"stitched": 3}
