"""The IR mutation helpers the passes use (hlo/ir.py): creating instructions with inferred shapes and
unique names, cloning, replacing uses, batch removal, stable re-sorting, side effects."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.hlo.ir import HloInstruction, computation_has_side_effect
from hlocc.hlo.types import Shape
from hlocc.hlo.verifier import verify_module

TEXT = """
HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.1 = f32[] add(a, b)
}
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  add.3 = f32[4] add(x, y)
  neg = f32[4] negate(add.3)
  ROOT out = f32[4] multiply(neg, add.3)
}
"""


def users(instr):
    return sorted(u.name for u in instr.users)


def test_add_infers_the_shape_and_makes_a_unique_name():
    module = hlocc.parse_hlo(TEXT)
    entry = module.entry
    x, y = entry.parameter(0), entry.parameter(1)
    first = entry.add("add", [x, y])
    second = entry.add("add", [first, x], name="add.3")
    assert first.shape == Shape.array("f32", (4,))
    assert first.name not in ("add.1", "add.3") and second.name not in ("add.1", "add.3", first.name)
    assert users(x) == sorted(["add.3", first.name, second.name])
    entry.root = second
    verify_module(module)


def test_add_needs_the_shape_of_ops_whose_result_the_producer_chooses():
    entry = hlocc.parse_hlo(TEXT).entry
    c = entry.add("constant", (), shape=Shape.array("s32", ()), literal=np.asarray(3, np.int32))
    b = entry.add("broadcast", [c], {"dimensions": ()}, shape=Shape.array("s32", (2, 2)))
    assert b.shape.dims == (2, 2) and c.users == [b]


def test_names_stay_unique_across_many_additions():
    module = hlocc.parse_hlo(TEXT)
    names = {module.entry.add("negate", [module.entry.parameter(0)]).name for _ in range(500)}
    assert len(names) == 500
    assert not names & {i.name for c in module.computations for i in c.instructions if i.opcode != "negate"}


def test_replace_all_uses_with_keeps_users_consistent():
    module = hlocc.parse_hlo(TEXT)
    entry = module.entry
    add3 = next(i for i in entry.instructions if i.name == "add.3")
    x = entry.parameter(0)
    add3.replace_all_uses_with(x)
    assert add3.users == []
    assert users(x) == ["add.3", "neg", "out"]  # add.3 (now dead) still reads x
    assert entry.root.operands[1] is x


def test_replace_all_uses_with_moves_the_root():
    entry = hlocc.parse_hlo(TEXT).entry
    old_root, x = entry.root, entry.parameter(0)
    old_root.replace_all_uses_with(x)
    assert entry.root is x


def test_set_operand_replaces_one_position():
    entry = hlocc.parse_hlo(TEXT).entry
    out, x = entry.root, entry.parameter(0)
    add3 = out.operands[1]
    out.set_operand(1, x)
    assert out.operands[1] is x and out in x.users
    assert out not in add3.users and users(add3) == ["neg"]


def test_clone_copies_everything_but_shares_computations():
    module = hlocc.parse_hlo(TEXT)
    reduce = HloInstruction("r", "reduce", Shape.array("f32", ()), [module.entry.parameter(0), module.entry.parameter(0)],
                            {"dimensions": (0,), "to_apply": module.computation("sum")})
    clone = reduce.clone(name="r2")
    assert clone.name == "r2" and clone.attrs == reduce.attrs and clone.attrs is not reduce.attrs
    assert clone.attrs["to_apply"] is reduce.attrs["to_apply"]
    assert clone.users == [] and clone.parent is None


def test_remove_instructions_removes_a_dead_chain_at_once():
    module = hlocc.parse_hlo(TEXT)
    entry = module.entry
    x = entry.parameter(0)
    chain = [x]
    for _ in range(5):
        chain.append(entry.add("negate", [chain[-1]]))
    entry.remove_instructions(chain[1:])
    assert all(i.parent is None for i in chain[1:])
    assert users(x) == ["add.3"]
    verify_module(module)


def test_remove_instructions_refuses_live_ones():
    entry = hlocc.parse_hlo(TEXT).entry
    neg = next(i for i in entry.instructions if i.name == "neg")
    with pytest.raises(AssertionError):
        entry.remove_instructions([neg])


def test_sort_instructions_places_new_instructions_before_their_users():
    module = hlocc.parse_hlo(TEXT)
    entry = module.entry
    x = entry.parameter(0)
    new = entry.add("exponential", [x])
    entry.root.set_operand(0, new)
    entry.sort_instructions()
    order = [i.name for i in entry.instructions]
    assert order.index(new.name) < order.index("out")
    assert order[:3] == ["x", "y", "add.3"]  # the untouched prefix keeps its order


def test_side_effects_recurse_into_called_computations():
    module = hlocc.parse_hlo("""
    HloModule m
    body {
      s = s32[] parameter(0)
      t = token[] after-all()
      o = token[] outfeed(s, t), outfeed_shape=s32[]
      ROOT n = s32[] add(s, s)
    }
    cond {
      s = s32[] parameter(0)
      ROOT p = pred[] constant(false)
    }
    ENTRY main {
      z = s32[] parameter(0)
      w = s32[] while(z), condition=cond, body=body
      c = f32[2] custom-call(), custom_call_target="x", custom_call_has_side_effect=true
      d = f32[2] custom-call(), custom_call_target="y"
      ROOT r = s32[] negate(w)
    }
    """)
    byname = {i.name: i for i in module.entry.instructions}
    assert byname["w"].has_side_effect() and not byname["w"].has_side_effect_no_recurse()
    assert byname["c"].has_side_effect() and not byname["d"].has_side_effect()
    assert not byname["r"].has_side_effect()
    assert computation_has_side_effect(module.computation("body"))
    assert not computation_has_side_effect(module.computation("cond"))
