"""The bounds-checked kernel mode (`check_bounds=True`, `hlocc run --check-bounds`): kernels that
stay in bounds give the same results as unchecked ones (the JAX corpus in checked mode), a kernel
that leaves a buffer stops with a BoundsCheckError naming the kernel, the buffer and the index, and
with the mode off the pipeline and the kernels are the usual ones."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from xdsl.dialects import arith, tensor

import hlocc
from corpus import JAX_DIR, jax_cases, run_jax_case
from hlocc.backends.cpu.kernel import compile_kernel_module
from hlocc.cli import main
from hlocc.codegen.emitters.registry import emit_fusion
from hlocc.codegen.pipeline import pipeline_for
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.codegen.transforms.check_bounds import BoundsCheckError
from hlocc.errors import UnsupportedError
from hlocc.hlo.parser import parse_hlo

CHECKED = replace(cpu_target(), check_bounds=True)
CHECKED_GPU = replace(gpu_target(), check_bounds=True)  # cuda-sim's kernels: the GPU form, simulated
NEGATE = """HloModule m
fused {
  p = f32[8] parameter(0)
  ROOT n = f32[8] negate(p)
}
ENTRY e {
  p = f32[8] parameter(0)
  ROOT f = f32[8] fusion(p), kind=kLoop, calls=fused
}"""
# The corpus cases run checked by default (the others under -m slow: they repeat the same emitters).
DEFAULT_CASES = {"sort_topk_argsort", "concat_pad_flip", "kv_cache_update", "reductions_f32",
                 "transpose_2d_3d", "int_arith_bitwise", "onehot_iota_select", "while_bisection", "mlp_f32"}


def test_the_pass_is_in_the_pipeline_only_when_asked():
    assert "check-bounds" not in pipeline_for("cpu", True)
    checked = pipeline_for("cpu", True, check_bounds=True)
    assert checked[checked.index("check-bounds") + 1] == "lower-tensors"


def _shifted_kernel(shift: int, target=CHECKED):
    """The negate kernel with every load index moved by `shift` elements."""
    fusion = parse_hlo(NEGATE).computation("fused")
    kernel = emit_fusion(fusion, target, "main", {})
    for op in [o for o in kernel.module.walk() if isinstance(o, tensor.ExtractOp)]:
        (index,) = op.indices
        c = arith.ConstantOp.from_int_and_width(shift, index.type)
        add = arith.AddiOp(index, c)
        op.parent_block().insert_ops_before([c, add], op)
        op.operands[1] = add.result
    return compile_kernel_module(kernel, target, [fusion.parameters[0].shape], [fusion.root.shape])


@pytest.mark.parametrize("target", [CHECKED, CHECKED_GPU], ids=["cpu", "cuda-sim"])
def test_a_load_outside_its_buffer_stops_with_the_kernel_buffer_and_index(target):
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(_shifted_kernel(0, target)(x)[0], -x)
    with pytest.raises(BoundsCheckError, match=r"kernel 'main' accessed parameter 0 \(f32\[8\]\) at element "
                                               r"(8|9|1[0-1]), outside \[0, 8\)"):
        _shifted_kernel(3, target)(x)
    with pytest.raises(BoundsCheckError, match=r"at element -[1-2], outside \[0, 8\)"):
        _shifted_kernel(-2, target)(x)


def test_checked_kernels_give_the_unchecked_results():
    text = """HloModule m
ENTRY e {
  p = f32[5,7]{0,1} parameter(0)
  q = f32[7] parameter(1)
  b = f32[5,7] broadcast(q), dimensions={1}
  t = f32[7,5] transpose(p), dimensions={1,0}
  s = f32[5,7] add(p, b)
  r = f32[5] reduce(s, z), dimensions={1}, to_apply=add
  z = f32[] constant(0)
  ROOT out = (f32[7,5], f32[5]) tuple(t, r)
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}"""
    rng = np.random.default_rng(0)
    args = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal(7).astype(np.float32)
    for backend in ("cpu", "cuda-sim"):
        plain = hlocc.compile(text, backend=backend)(*args)
        checked = hlocc.compile(text, backend=backend, check_bounds=True)
        assert all(k.bounds_record for k in _kernels(checked))
        for a, b in zip(plain, checked(*args)):
            np.testing.assert_array_equal(a, b)


def _kernels(exe):
    from hlocc.runtime.thunks import KernelThunk

    return [t.kernel for t in exe.runner.program.walk() if isinstance(t, KernelThunk)]


def test_a_real_gpu_does_not_check_bounds():
    with pytest.raises(UnsupportedError, match="check_bounds is implemented for the cpu and cuda-sim backends"):
        hlocc.compile(NEGATE, backend="cuda", check_bounds=True)


def test_cli_check_bounds(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(NEGATE)
    assert main(["run", str(path), "--backend", "cpu", "--check-bounds"]) == 0
    assert "f32[8]" in capsys.readouterr().out


def _cases():
    return [pytest.param(c, id=c["name"], marks=[] if c["name"] in DEFAULT_CASES else [pytest.mark.slow])
            for c in jax_cases() if c["perf"] != "yes"]


@pytest.mark.parametrize("case", _cases())
def test_jax_corpus_in_bounds_checked_mode(case):
    run_jax_case(case, JAX_DIR, "cpu", check_bounds=True)


# cuda-sim's GPU-form kernels (shared memory, warps) in checked mode: a few cases by default (the
# reductions, transposes and sort exercise what the cpu form does not), all under -m slow.
SIM_DEFAULT_CASES = {"reductions_f32", "transpose_2d_3d", "sort_topk_argsort"}


@pytest.mark.parametrize("case", [
    pytest.param(c, id=c["name"], marks=[] if c["name"] in SIM_DEFAULT_CASES else [pytest.mark.slow])
    for c in jax_cases() if c["perf"] != "yes"])
def test_jax_corpus_in_bounds_checked_mode_on_cuda_sim(case):
    run_jax_case(case, JAX_DIR, "cuda-sim", check_bounds=True)
