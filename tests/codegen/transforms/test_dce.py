"""hlocc's `dce` (codegen/transforms/dce.py) erases exactly the ops xDSL's `region_dce` erases: after
every pass of the kernel pipeline, on real kernels (a softmax-like pair of reductions, a JAX corpus
program), both run on copies of the IR and give structurally equal results; and on a function whose
body is a CFG of several blocks (the fallback to xDSL's)."""

from xdsl.dialects.builtin import ModuleOp
from xdsl.dialects.cf import Cf
from xdsl.transforms.dead_code_elimination import region_dce

import hlocc
from corpus import JAX_DIR, require
from hlocc.backends.cpu.kernel import clear_kernel_cache
from hlocc.codegen import transforms
from hlocc.codegen.context import make_context, parse_module, print_module
from hlocc.codegen.transforms.dce import DeadCodeEliminationPass
from hlocc.compiler import clear_compile_cache


def _dce_both(module: ModuleOp) -> tuple[ModuleOp, ModuleOp, bool]:
    """(hlocc's result, xDSL's result, whether anything was dead) on two copies of `module`."""
    ours, reference = module.clone(), module.clone()
    DeadCodeEliminationPass().apply(make_context(), ours)
    region_dce(reference.body)
    return ours, reference, sum(1 for _ in reference.walk()) < sum(1 for _ in module.walk())


def _compare_after_each_pass(monkeypatch, text: str) -> tuple[int, int]:
    """Compile `text` for the cpu; after every kernel pass compare the two DCEs on copies of the IR.
    Returns (comparisons, those where something was dead)."""
    seen = [0, 0]

    def checked(cls):
        class Checked(cls):
            def apply(self, ctx, op):
                super().apply(ctx, op)
                ours, reference, erased = _dce_both(op)
                assert ours.is_structurally_equivalent(reference), f"after {cls.name}"
                seen[0] += 1
                seen[1] += erased
        return Checked

    for name, cls in list(transforms.PASSES.items()):
        monkeypatch.setitem(transforms.PASSES, name, checked(cls))
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    _forget_compiled()  # (compiled before, the program or its kernels would not run the passes)
    try:
        hlocc.compile(text, "cpu")
    finally:
        _forget_compiled()  # (nor would another test's compile of the same text after this one)
    return seen[0], seen[1]


def _forget_compiled() -> None:
    clear_compile_cache()
    clear_kernel_cache()


SOFTMAX = """HloModule m

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
  ex = f32[8,128] multiply(d, d)
  zero = f32[] constant(0)
  sm = f32[8] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[8,128] broadcast(sm), dimensions={0}
  ROOT p = f32[8,128] divide(ex, sb)
}
"""


def test_same_result_as_xdsl_after_every_pass(monkeypatch):
    compared, with_dead_ops = _compare_after_each_pass(monkeypatch, SOFTMAX)
    assert compared >= 18 and with_dead_ops >= 1


def test_same_result_as_xdsl_on_a_corpus_program(monkeypatch):
    require(JAX_DIR)
    compared, _ = _compare_after_each_pass(monkeypatch, (JAX_DIR / "bias_add_tanh.hlo").read_text())
    assert compared >= 18


CFG = """
builtin.module {
  func.func @f(%a : i32, %c : i1) -> i32 {
    %dead = arith.addi %a, %a : i32
    cf.cond_br %c, ^bb1, ^bb2
  ^bb1:
    %d1 = arith.muli %a, %a : i32
    %unused = arith.subi %a, %a : i32
    cf.br ^bb2
  ^bb2:
    %d2 = arith.muli %dead, %dead : i32
    func.return %a : i32
  }
}
"""


def test_a_cfg_gets_xdsls_elimination():
    ctx = make_context()
    ctx.load_dialect(Cf)  # (no kernel pass makes a CFG; `hlocc opt` may be given one)
    module = parse_module(CFG, ctx)
    ours, reference, erased = _dce_both(module)
    assert erased and print_module(ours) == print_module(reference)
    text = print_module(ours)
    assert "arith.muli" not in text and "arith.addi" not in text and "arith.subi" not in text and "cf.cond_br" in text


def test_the_pass_table_runs_hlocc_dce():
    assert transforms.PASSES["dce"] is DeadCodeEliminationPass
