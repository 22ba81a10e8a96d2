"""`make_op` builds from a template after the first op of a class and argument types
(codegen/ir/builder.py): the ops must be the ones the constructor builds."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import IndexType, f32, f64, i1, i32, i64
from xdsl.ir import Block

from hlocc.codegen.ir.builder import KernelBuilder, make_op


@pytest.fixture
def values():
    block = Block(arg_types=[i32, i32, f32, f32, i1, i64, IndexType()])
    return block.args


CASES = [
    (arith.AddiOp, (0, 1)),
    (arith.MulfOp, (2, 3)),
    (arith.SelectOp, (4, 0, 1)),
    (arith.ExtFOp, (2, f64)),
    (math.ExpOp, (2,)),
    (arith.ShRUIOp, (0, 1)),
]


@pytest.mark.parametrize("op_class, spec", CASES, ids=[c.__name__ for c, _ in CASES])
def test_template_op_is_the_constructors(values, op_class, spec):
    args = [values[a] if isinstance(a, int) else a for a in spec]
    expected = op_class(*args)
    for _ in range(2):  # the first from the constructor, the second from the template
        op = make_op(op_class, *args)
        assert type(op) is op_class
        assert str(op) == str(expected)
        assert op.properties == expected.properties and op.attributes == expected.attributes
        assert list(op.operands) == list(expected.operands)
        assert [r.type for r in op.results] == [r.type for r in expected.results]
        op.verify()


def test_predicates_and_types_get_their_own_templates(values):
    a, b, x, y, _, wide, _ = values
    block = Block()
    builder = KernelBuilder(block)
    results = [builder.cmpi("ult", a, b), builder.cmpi("eq", a, b), builder.cmpf("olt", x, y),
               builder.cmpi("ult", a, b), builder.cmpi("slt", wide, wide)]
    assert [str(v.owner) for v in results] == [str(o) for o in (
        arith.CmpiOp(a, b, "ult"), arith.CmpiOp(a, b, "eq"), arith.CmpfOp(x, y, "olt"),
        arith.CmpiOp(a, b, "ult"), arith.CmpiOp(wide, wide, "slt"))]
    # Each op owns its property dictionary: changing one leaves the next template-built op alone.
    results[0].owner.properties["predicate"] = results[1].owner.properties["predicate"]
    assert str(builder.cmpi("ult", a, b).owner) == str(arith.CmpiOp(a, b, "ult"))


def test_constants_that_compare_equal_keep_their_own_bits():
    """`constant` reuses an earlier constant's attribute only for the same bits: a -NaN (x86's
    default NaN) built first was once reused for JAX's canonical +NaN (repr gives 'nan' for both),
    and a sort comparator then ordered NaNs before every number."""
    import struct

    def bits(value):
        b = KernelBuilder(Block())
        op = b.constant(value, f64).owner
        return struct.pack("<d", op.value.value.data)

    negative_nan = struct.unpack("<d", bytes.fromhex("000000000000f8ff"))[0]
    assert bits(negative_nan) == bytes.fromhex("000000000000f8ff")
    assert bits(float("nan")) == bytes.fromhex("000000000000f87f")
    assert bits(-0.0) == bytes.fromhex("0000000000000080")
    assert bits(0.0) == bytes.fromhex("0000000000000000")
    import numpy as np  # integers stay integers in the key: 2**62 + 1 is not 2**62 (as a float it would be)
    for value in (np.int64(2**62), np.int64(2**62 + 1)):
        assert KernelBuilder(Block()).constant(value, i64).owner.value.value.data == value
