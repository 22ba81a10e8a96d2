"""Behaviour of the fusion passes beyond the FileCheck files: where they run, budgets, fixed
points, the reachability they use against cycles, and compile time about linear in module size."""

from __future__ import annotations

import pytest

import hlocc
from hlocc.hlo.verifier import verify_module
from hlocc.passes.base import HLO_PASSES
from hlocc.passes.fusible import FusionLimits, fusion_violations
from hlocc.passes.fusion_wrapper import FusionWrapper
from hlocc.passes.multi_output_fusion import MultiOutputFusion, Reachability
from hlocc.passes.priority_fusion import PriorityFusion
from hlocc.passes.rename_fusions import RenameFusions

SOFTMAX = """
HloModule softmax

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

ENTRY main {
  x = f32[128,1024] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[128] reduce(x, ninf), dimensions={1}, to_apply=max
  bmx = f32[128,1024] broadcast(mx), dimensions={0}
  sub = f32[128,1024] subtract(x, bmx)
  e = f32[128,1024] exponential(sub)
  zero = f32[] constant(0)
  s = f32[128] reduce(e, zero), dimensions={1}, to_apply=add
  bs = f32[128,1024] broadcast(s), dimensions={0}
  ROOT d = f32[128,1024] divide(e, bs)
}
"""


def fusions(comp):
    return [i for i in comp.instructions if i.opcode == "fusion"]


def test_passes_are_registered_by_name():
    for name, cls in [("priority-fusion", PriorityFusion), ("multi-output-fusion", MultiOutputFusion),
                      ("rename-fusions", RenameFusions), ("fusion-wrapper", FusionWrapper)]:
        assert HLO_PASSES[name] is cls


def test_the_pipeline_reaches_a_fixed_point():
    module = hlocc.parse_hlo(SOFTMAX)
    assert PriorityFusion().run(module)
    assert MultiOutputFusion().run(module)
    assert RenameFusions().run(module)
    text = module.to_string()
    assert not PriorityFusion().run(module)
    assert not MultiOutputFusion().run(module)
    assert not RenameFusions().run(module)
    assert module.to_string() == text
    verify_module(module)


def test_fusion_runs_in_loop_bodies_but_not_in_reducers():
    module = hlocc.parse_hlo("""
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = f32[] multiply(a, b)
  ROOT s = f32[] add(c, b)
}

cond {
  state = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  state = (s32[], f32[64]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  v = f32[64] get-tuple-element(state), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  e = f32[64] exponential(v)
  v1 = f32[64] negate(e)
  ROOT next = (s32[], f32[64]) tuple(i1, v1)
}

ENTRY main {
  x = f32[64,8] parameter(0)
  z = f32[] constant(0)
  r = f32[64] reduce(x, z), dimensions={1}, to_apply=add
  start = s32[] constant(0)
  init = (s32[], f32[64]) tuple(start, r)
  w = (s32[], f32[64]) while(init), condition=cond, body=body
  ROOT v = f32[64] get-tuple-element(w), index=1
}
""")
    PriorityFusion().run(module)
    verify_module(module)
    body = module.computation("body")
    assert len(fusions(body)) == 2  # the counter and the exp/negate chain
    assert not fusions(module.computation("add"))
    assert [i.opcode for i in module.computation("add").instructions].count("multiply") == 1


def test_custom_fusions_are_left_alone():
    module = hlocc.parse_hlo("""
fc {
  p = f32[64] parameter(0)
  ROOT n = f32[64] negate(p)
}

ENTRY main {
  x = f32[64] parameter(0)
  e = f32[64] exponential(x)
  f = f32[64] fusion(e), kind=kCustom, calls=fc
  ROOT a = f32[64] abs(f)
}
""")
    PriorityFusion().run(module)
    custom = next(i for i in module.entry.instructions if i.attrs.get("kind") == "kCustom")
    assert custom.operands[0].opcode == "exponential"
    assert custom.users[0].opcode == "abs"


def test_fusions_stay_within_the_operand_budget():
    n = 40
    lines = [f"  p{i} = f32[256] parameter({i})" for i in range(n)]
    lines.append("  s0 = f32[256] add(p0, p1)")
    for i in range(2, n):
        lines.append(f"  s{i - 1} = f32[256] add(s{i - 2}, p{i})")
    lines[-1] = lines[-1].replace(f"  s{n - 2} =", f"  ROOT s{n - 2} =")
    module = hlocc.parse_hlo("ENTRY main {\n" + "\n".join(lines) + "\n}\n")
    PriorityFusion(limits=FusionLimits(max_operands_and_outputs=16)).run(module)
    verify_module(module)
    found = fusions(module.entry)
    assert len(found) > 1
    assert all(len(f.operands) + 1 <= 16 for f in found)
    assert fusion_violations(module) == []


def test_reachability_with_levels():
    module = hlocc.parse_hlo("""
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] negate(x)
  b = f32[4] abs(a)
  c = f32[4] exponential(x)
  ROOT t = (f32[4], f32[4]) tuple(b, c)
}
""")
    comp = module.entry
    get = {i.name: i for i in comp.instructions}
    reach = Reachability(comp)
    assert reach.reachable(get["x"], get["b"]) and reach.reachable(get["a"], get["t"])
    assert not reach.reachable(get["b"], get["a"]) and not reach.connected(get["b"], get["c"])
    assert reach.connected(get["a"], get["b"])


def chain(n: int) -> hlocc.HloModule:
    lines = ["ENTRY main {", "  p = f32[1024] parameter(0)", "  q = f32[1024] parameter(1)",
             "  x0 = f32[1024] negate(p)"]
    for i in range(1, n):
        lines.append(f"  x{i} = f32[1024] {'add' if i % 2 else 'multiply'}(x{i - 1}, {'q' if i % 3 else 'p'})")
    lines += [f"  ROOT r = f32[1024] negate(x{n - 1})", "}"]
    return hlocc.parse_hlo("\n".join(lines))


def run_fusion(module) -> None:
    PriorityFusion().run(module)
    MultiOutputFusion().run(module)


def test_a_long_chain_becomes_one_fusion():
    module = chain(1000)
    run_fusion(module)
    assert len(fusions(module.entry)) == 1


def unary_chain(n: int) -> hlocc.HloModule:
    ops = ("negate", "abs", "exponential", "log")
    lines = ["ENTRY main {", "  x0 = f32[4096] parameter(0)"]
    lines += [f"  x{i} = f32[4096] {ops[i % 4]}(x{i - 1})" for i in range(1, n)]
    lines += [f"  ROOT r = f32[4096] negate(x{n - 1})", "}"]
    return hlocc.parse_hlo("\n".join(lines))


@pytest.mark.slow
def test_a_4000_op_unary_chain_fuses():
    # Compile-time growth is measured by benchmarks, not asserted here; this keeps the large case
    # running so a quadratic regression shows as a slow suite.
    module = unary_chain(4000)
    run_fusion(module)
    assert fusions(module.entry)


def test_no_side_output_of_another_size_over_symbolic_dims():
    """Static softmax makes exp(x - max) a side output of the sum's reduction fusion; over a
    symbolic batch it stays a loop fusion of its own, because kernels with runtime dims compute a
    fusion as one loop over outputs of one element count (otherwise compiled per size)."""
    from hlocc.hlo.symbolic import size_hint

    static = hlocc.parse_hlo(SOFTMAX)
    symbolic = hlocc.parse_hlo(SOFTMAX.replace("128,1024", "?b,1024").replace("f32[128]", "f32[?b]"))
    for module in (static, symbolic):
        with size_hint({}):
            PriorityFusion().run(module)
            MultiOutputFusion().run(module)
        verify_module(module)
        assert fusion_violations(module) == []
    assert [f.shape.is_tuple for f in fusions(static.entry)] == [False, True, False]
    shapes = [str(f.shape) for f in fusions(symbolic.entry)]
    assert shapes == ["f32[?b]", "f32[?b,1024]", "f32[?b]", "f32[?b,1024]"], shapes
