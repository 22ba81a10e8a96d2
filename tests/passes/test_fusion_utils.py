"""The IR operations fusion passes build on (passes/fusion_utils.py): creating fusions, fusing
producers (duplicated or as extra outputs), merging siblings, absorbing a consumer; each keeps the
module valid and its values unchanged, with XLA's names."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.cli import flatten, random_inputs
from hlocc.compiler import check_arguments
from hlocc.evaluator import Evaluator
from hlocc.hlo.name_uniquer import NameUniquer
from hlocc.hlo.verifier import verify_module
from hlocc.passes.fusion_utils import FusionBuilder, fusion_outputs, is_multi_output_fusion

TEXT = """
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[8,16] parameter(0)
  y = f32[8,16] parameter(1)
  e = f32[8,16] exponential(x)
  m = f32[8,16] multiply(e, y)
  n = f32[8,16] negate(e)
  z = f32[] constant(0)
  r = f32[8] reduce(m, z), dimensions={1}, to_apply=add
  s = f32[8,16] subtract(x, y)
  ROOT t = (f32[8,16], f32[8], f32[8,16]) tuple(n, r, s)
}
"""


def module():
    return hlocc.parse_hlo(TEXT)


def named(m, name):
    return next(i for i in m.entry.instructions if i.name == name)


def values(m):
    args = check_arguments(m, random_inputs(m, seed=5), cast=True)
    return flatten(Evaluator(seed=1).run(m, args))


def assert_same(m, reference):
    verify_module(m)
    for a, b in zip(values(m), reference, strict=True):
        np.testing.assert_array_equal(a, b)


def test_name_uniquer_follows_xla():
    names = NameUniquer(["fusion", "fusion.1", "add"])
    assert [names.unique("fusion"), names.unique("fusion"), names.unique("add"), names.unique("x")] == \
        ["fusion.2", "fusion.3", "add.1", "x"]
    names.release("fusion.2")
    assert names.unique("fusion") == "fusion.2"


def test_create_fusion_wraps_the_consumer():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    builder.finish()
    assert fusion.name == "fusion" and fusion.attrs["calls"].name == "fused_computation"
    assert [op.name for op in fusion.operands] == ["e", "y"]
    assert [i.name for i in fusion.attrs["calls"].instructions] == ["param_0", "param_1", "m"]
    assert named(m, "r").operands[0] is fusion
    assert_same(m, reference)


def test_fuse_producer_duplicates_a_shared_producer():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    e = named(m, "e")
    builder.fuse_producer(fusion, e)
    builder.finish()
    assert [op.name for op in fusion.operands] == ["y", "x"]
    assert e.users == [named(m, "n")]  # still computed for its other user
    assert [i.opcode for i in fusion.attrs["calls"].post_order()] == ["parameter", "exponential", "parameter",
                                                                      "multiply"]
    assert_same(m, reference)


def test_fusing_a_fusion_inlines_it_and_drops_its_computation():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    consumer = builder.create_fusion(named(m, "r"), "kInput")
    producer = builder.create_fusion(named(m, "m"), "kLoop")
    builder.fuse_producer(consumer, producer)
    builder.remove(producer)
    builder.finish()
    assert {c.name for c in m.computations} == {"add", "main", "fused_computation"}
    assert consumer.attrs["calls"].root.opcode == "reduce"
    assert_same(m, reference)


def test_absorb_consumer_matches_fuse_producer():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    producer = builder.create_fusion(named(m, "m"), "kLoop")
    fusion = builder.absorb_consumer(producer, named(m, "r"))
    builder.finish()
    assert fusion is producer and fusion.shape == hlocc.parse_hlo(TEXT).entry.root.shape.tuple_shapes[1]
    assert [i.opcode for i in fusion.attrs["calls"].post_order()] == ["parameter", "parameter", "multiply",
                                                                      "parameter", "reduce"]
    assert [op.name for op in fusion.operands] == ["e", "y", "z"]
    assert_same(m, reference)


def test_multi_output_producer_fusion():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    builder.fuse_producer_multi_output(fusion, named(m, "e"))
    builder.finish()
    assert is_multi_output_fusion(fusion)
    assert [o.opcode for o in fusion_outputs(fusion)] == ["multiply", "exponential"]
    users = {u.name: u.attrs["index"] for u in fusion.users}
    assert sorted(users.values()) == [0, 1] and all(u.opcode == "get-tuple-element" for u in fusion.users)
    assert named(m, "n").operands[0].attrs["index"] == 1
    assert not any(i.name == "e" for i in m.entry.instructions)
    assert_same(m, reference)


def test_sibling_merge_of_a_fusion_and_an_op():
    m = module()
    reference = values(m)
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "e"), "kLoop")
    builder.merge_sibling(fusion, named(m, "s"))
    builder.finish()
    assert [o.opcode for o in fusion_outputs(fusion)] == ["exponential", "subtract"]
    assert [op.name for op in fusion.operands] == ["x", "y"]
    assert_same(m, reference)


def test_sibling_merge_of_two_multi_output_fusions_renumbers_their_users():
    m = hlocc.parse_hlo("""
ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  a = f32[4] add(x, y)
  b = f32[4] multiply(x, y)
  c = f32[4] subtract(x, y)
  d = f32[4] maximum(x, y)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(a, b, c, d)
}
""")
    reference = values(m)
    builder = FusionBuilder(m)
    first = builder.create_fusion(named(m, "a"), "kLoop")
    builder.merge_sibling(first, named(m, "b"))
    second = builder.create_fusion(named(m, "c"), "kLoop")
    builder.merge_sibling(second, named(m, "d"))
    builder.merge_sibling(first, second)
    builder.finish()
    assert [o.name for o in fusion_outputs(first)] == ["a", "b", "c", "d"]
    root = m.entry.root
    assert [op.attrs["index"] for op in root.operands] == [0, 1, 2, 3]
    assert all(op.operands[0] is first for op in root.operands)
    assert_same(m, reference)


def test_finish_restores_a_def_before_use_order():
    m = module()
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    builder.fuse_producer(fusion, named(m, "e"))
    builder.finish()
    order = {id(i): k for k, i in enumerate(m.entry.instructions)}
    for instr in m.entry.instructions:
        assert all(order[id(op)] < order[id(instr)] for op in instr.operands)
    assert [i.name for i in m.entry.instructions][:3] == ["x", "y", "e"]


def test_fused_parameters_are_named_by_number():
    m = module()
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    builder.fuse_producer(fusion, named(m, "e"))
    builder.finish()
    params = sorted((i for i in fusion.attrs["calls"].instructions if i.opcode == "parameter"),
                    key=lambda p: p.parameter_number)
    assert [p.name for p in params] == ["param_0", "param_1"]


def test_fuse_producer_rejects_a_non_operand():
    m = module()
    builder = FusionBuilder(m)
    fusion = builder.create_fusion(named(m, "m"), "kLoop")
    with pytest.raises(AssertionError, match="is not an operand"):
        builder.fuse_producer(fusion, named(m, "s"))
