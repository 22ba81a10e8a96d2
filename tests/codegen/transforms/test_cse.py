"""hlocc's `cse` (codegen/transforms/cse.py) rewrites the kernel pipeline's IR exactly as xDSL's
`CommonSubexpressionElimination` does: at every `cse` of the pipeline, on real kernels (a
softmax, an erf-based GELU's expanded polynomials, a JAX corpus program), the two give the same
text."""

from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination

import hlocc
from corpus import JAX_DIR, require
from hlocc.codegen import transforms
from hlocc.codegen.context import print_module

SOFTMAX_GELU = """HloModule m

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  x = f32[8,128] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[8] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[8,128] broadcast(mx), dimensions={0}
  d = f32[8,128] subtract(x, mb)
  ex = f32[8,128] exponential(d)
  zero = f32[] constant(0)
  sm = f32[8] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[8,128] broadcast(sm), dimensions={0}
  p = f32[8,128] divide(ex, sb)
  h = f32[] constant(0.70710678)
  hb = f32[8,128] broadcast(h), dimensions={}
  xe = f32[8,128] multiply(x, hb)
  er = f32[8,128] erf(xe)
  g = f32[8,128] add(er, p)
  ROOT t = (f32[8,128], f32[8,128]) tuple(p, g)
}
"""

CORPUS = JAX_DIR / "bias_add_tanh.hlo"


def _compare_each_cse(monkeypatch, text: str) -> int:
    """Compile `text` for the cpu with every `cse` of the kernel pipeline run twice, on a copy by
    xDSL's pass and on the kernel by hlocc's; assert equal results; return how many ran."""
    ours = transforms.PASSES["cse"]
    runs = []

    class Compared(ours):
        def apply(self, ctx, op):
            reference = op.clone()
            CommonSubexpressionElimination().apply(ctx, reference)
            super().apply(ctx, op)
            assert print_module(op) == print_module(reference)
            runs.append(1)

    monkeypatch.setitem(transforms.PASSES, "cse", Compared)
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    from hlocc.backends.cpu.kernel import clear_kernel_cache
    from hlocc.compiler import clear_compile_cache

    clear_kernel_cache()  # (another test in this process may have compiled the same kernels)
    clear_compile_cache()
    hlocc.compile(text, "cpu")
    return len(runs)


def test_same_rewrites_as_xdsl_on_softmax_and_gelu(monkeypatch):
    assert _compare_each_cse(monkeypatch, SOFTMAX_GELU) >= 4


def test_same_rewrites_as_xdsl_on_a_corpus_program(monkeypatch):
    require(JAX_DIR)
    assert _compare_each_cse(monkeypatch, CORPUS.read_text()) >= 4


def test_the_pass_table_runs_hlocc_cse():
    from hlocc.codegen.transforms.cse import CommonSubexpressionEliminationPass

    assert transforms.PASSES["cse"] is CommonSubexpressionEliminationPass
