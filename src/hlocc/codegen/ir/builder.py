"""A small IR builder for emitters and passes: appends ops at an insertion point and gives back
their results, with shorthands for constants and the arith ops emitters use most.

Constants are memoised per insertion block (emitters ask for `0`, `1`, `-1` many times), so the
IR stays readable without a separate CSE run.

`op(OpClass, *args)` builds an op as `OpClass(*args)` would, but after the first op of a class with
the same argument types it copies that op's result types, properties and attributes into the
generic `create` instead of running the constructor again: xDSL's constructors build and verify
their attributes each time (`arith.CmpiOp` its predicate and i1 type, binary ops their overflow
flags), which was most of a large kernel's emission time.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IndexType, IntegerAttr, IntegerType, VectorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

INDEX = IndexType()

_CONSTANT_TEMPLATES: dict[tuple, tuple] = {}


def _value_key(value: int | float | bool) -> object:
    """A constant's value as a dictionary key that tells apart what compares equal but is not the
    same constant: a float by its bits, so -0.0 is not 0.0, and -NaN (x86's default NaN) and NaN
    payloads are not NaN (repr gives 'nan' for all of them: a -NaN constant built first was
    reused for JAX's canonical NaN, and sort comparators then put NaNs first)."""
    if isinstance(value, (float, np.floating)):
        return struct.pack("<d", float(value))
    return value
"""`KernelBuilder.constant`'s key → (properties, attributes) of the first such constant built."""

_TEMPLATES: dict[tuple, tuple] = {}
"""(OpClass, argument types and attributes) → (result types, properties, attributes) of an op
the constructor built from such arguments (see `KernelBuilder.op`)."""


def make_op(op_class: type[Operation], *args) -> Operation:
    """`op_class(*args)` for constructors whose arguments are operands (SSA values, in order) and
    attributes or strings that, with the operands' types, determine the op: built by the
    constructor once per argument types, then by `create` from that op's template."""
    key = [op_class]
    operands = []
    for arg in args:
        if isinstance(arg, SSAValue):
            operands.append(arg)
            key.append(arg.type)
        elif isinstance(arg, (str, int, Attribute)):
            key.append((type(arg), arg))
        else:  # an Operation, a list, ...: the constructor's own rules
            return op_class(*args)
    return make_op_like(tuple(key), operands, op_class, *args)


def make_op_like(key: tuple, operands: list[SSAValue], build: Callable[..., Operation], *args) -> Operation:
    """`build(*args)`, an op whose operands are `operands` (in order) and whose class, result types,
    properties and attributes `key` determines (`key[0]` its class; the operands' types belong in
    it where they matter): built by `build` once per key, then by `create` from that op's template
    (`make_op` for constructors that take lists or keywords)."""
    try:
        template = _TEMPLATES.get(key)
    except TypeError:  # an attribute that does not hash
        return build(*args)
    if template is None:
        op = build(*args)
        if not op.regions and not op.successors and list(op.operands) == operands:
            _TEMPLATES[key] = (tuple(r.type for r in op.results), dict(op.properties), dict(op.attributes))
        return op
    result_types, properties, attributes = template
    return key[0].create(operands=operands, result_types=result_types, properties=dict(properties),
                         attributes=dict(attributes))


class KernelBuilder:
    """Inserts ops at `insertion_point` (a block end by default)."""

    def __init__(self, insertion_point: InsertPoint | Block):
        if isinstance(insertion_point, Block):
            insertion_point = InsertPoint.at_end(insertion_point)
        self.insertion_point = insertion_point
        self._constants: dict[tuple, SSAValue] = {}

    # -- insertion --------------------------------------------------------------------------------
    def insert(self, op: Operation) -> Operation:
        Rewriter.insert_op(op, self.insertion_point)
        return op

    def add(self, op: Operation) -> SSAValue:
        """Insert `op` and return its single result."""
        self.insert(op)
        return op.results[0]

    def op(self, op_class: type[Operation], *args) -> SSAValue:
        """Insert `op_class(*args)` (built by `make_op`) and return its single result."""
        return self.add(make_op(op_class, *args))

    @contextmanager
    def at(self, insertion_point: InsertPoint | Block) -> Iterator[KernelBuilder]:
        """Temporarily insert elsewhere (e.g. into an scf.if region)."""
        if isinstance(insertion_point, Block):
            insertion_point = InsertPoint.at_end(insertion_point)
        saved, saved_consts = self.insertion_point, self._constants
        self.insertion_point, self._constants = insertion_point, {}
        try:
            yield self
        finally:
            self.insertion_point, self._constants = saved, saved_consts

    # -- constants --------------------------------------------------------------------------------
    def constant(self, value: int | float | bool, type_: Attribute) -> SSAValue:
        """An `arith.constant` of `value` (a scalar, or a splat of it for a vector type), memoised
        per insertion block; a constant this process built before is made by `create` from that
        op's properties (building and checking the attribute is most of a constant's cost, and
        every subgraph function asks for its own)."""
        key = (type(value), _value_key(value), type_)
        cached = self._constants.get(key)
        if cached is not None:
            return cached
        template = _CONSTANT_TEMPLATES.get(key)
        if template is not None:
            properties, attributes = template
            result = self.add(arith.ConstantOp.create(result_types=[type_], properties=dict(properties),
                                                      attributes=dict(attributes)))
            self._constants[key] = result
            return result
        if isinstance(type_, VectorType):
            elem = type_.element_type
            attr = DenseIntOrFPElementsAttr.from_list(type_, [self._scalar_value(value, elem)])
            result = self.add(arith.ConstantOp(attr, type_))
        elif isinstance(type_, (IntegerType, IndexType)):
            result = self.add(arith.ConstantOp(IntegerAttr(self._scalar_value(value, type_), type_)))
        else:
            result = self.add(arith.ConstantOp(FloatAttr(float(value), type_)))
        op = result.owner
        if [r.type for r in op.results] == [type_]:
            _CONSTANT_TEMPLATES[key] = (dict(op.properties), dict(op.attributes))
        self._constants[key] = result
        return result

    @staticmethod
    def _scalar_value(value, type_: Attribute):
        if isinstance(type_, IntegerType):
            bits = type_.width.data
            v = int(value) & ((1 << bits) - 1)
            # xDSL stores signless integer attributes in the signed range (i1 true is -1).
            return v - (1 << bits) if v >= 1 << (bits - 1) else v
        if isinstance(type_, IndexType):
            return int(value)
        return float(value)

    def index(self, value: int) -> SSAValue:
        return self.constant(int(value), INDEX)

    # -- common ops ---------------------------------------------------------------------------------
    def select(self, cond: SSAValue, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.SelectOp, cond, a, b)

    def cmpi(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.CmpiOp, a, b, pred)

    def cmpf(self, pred: str, a: SSAValue, b: SSAValue) -> SSAValue:
        return self.op(arith.CmpfOp, a, b, pred)

    def and_(self, values: Sequence[SSAValue]) -> SSAValue | None:
        result = None
        for v in values:
            result = v if result is None else self.op(arith.AndIOp, result, v)
        return result

    def in_intervals(self, values: Sequence[SSAValue], intervals) -> SSAValue | None:
        """i1: every `values[k]` lies in `intervals[k]` (inclusive Interval bounds); None if empty."""
        checks = []
        for v, iv in zip(values, intervals):
            if iv.lo == iv.hi:
                checks.append(self.cmpi("eq", v, self.index(iv.lo)))
            else:
                checks += [self.cmpi("sge", v, self.index(iv.lo)), self.cmpi("sle", v, self.index(iv.hi))]
        return self.and_(checks)
