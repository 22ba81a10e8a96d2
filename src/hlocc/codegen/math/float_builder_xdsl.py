"""The xDSL backend of `FloatBuilder`: emits arith/math ops before an op being rewritten, and
`expand_elementwise`, which the float passes use to replace one elementwise op by a builder
function's IR.

A vector op is expanded on whole vectors of its shape: constants are splats, and the compares,
selects and integer casts, which xDSL 0.74's arith dialect verifies only on scalars, are their
`xla` stand-ins (`dialect.VECTOR_FORMS`: xla.cmpf, xla.select, xla.extui, ...), which the LLVM
translator maps to LLVM's vector instructions. Scalars keep the arith ops.

`complex_parts` takes a complex value apart for code written on (re, im) pairs.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from xdsl.dialects import arith, builtin, math, scf, vector
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, IntegerType, VectorType
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from hlocc.codegen.ir import VECTOR_FORMS
from hlocc.codegen.ir.builder import make_op
from hlocc.codegen.math.float_builder import (
    F32,
    F64,
    ElemType,
    FloatBuilder,
    FloatFormat,
    IntType,
    Val,
)
from hlocc.codegen.math.float_conversions import NARROW_FORMATS

_BINARY: dict[str, type[Operation]] = {
    "arith.addf": arith.AddfOp, "arith.subf": arith.SubfOp, "arith.mulf": arith.MulfOp,
    "arith.divf": arith.DivfOp, "arith.minimumf": arith.MinimumfOp, "arith.maximumf": arith.MaximumfOp,
    "math.copysign": math.CopySignOp,
    "arith.addi": arith.AddiOp, "arith.subi": arith.SubiOp, "arith.muli": arith.MuliOp,
    "arith.andi": arith.AndIOp, "arith.ori": arith.OrIOp, "arith.xori": arith.XOrIOp,
    "arith.shli": arith.ShLIOp, "arith.shrui": arith.ShRUIOp, "arith.shrsi": arith.ShRSIOp,
}  # fmt: skip
_UNARY: dict[str, type[Operation]] = {
    "arith.negf": arith.NegfOp, "math.absf": math.AbsFOp, "math.sqrt": math.SqrtOp,
    "math.floor": math.FloorOp, "math.ceil": math.CeilOp, "math.trunc": math.TruncOp,
    "math.roundeven": math.RoundEvenOp, "math.round": math.RoundOp,
}  # fmt: skip
_CASTS: dict[str, type[Operation]] = {
    "arith.bitcast": arith.BitcastOp, "arith.extf": arith.ExtFOp, "arith.truncf": arith.TruncFOp,
    "arith.extui": arith.ExtUIOp, "arith.trunci": arith.TruncIOp,
}  # fmt: skip


def format_of(ty: Attribute) -> FloatFormat | None:
    """The FloatFormat of an xDSL float type (f32, f64 or a narrow format), else None."""
    if ty == builtin.f32:
        return F32
    if ty == builtin.f64:
        return F64
    return NARROW_FORMATS.get(str(ty))


def xdsl_type(ty: ElemType) -> Attribute:
    if isinstance(ty, IntType):
        return IntegerType(ty.width)
    if ty == F32:
        return builtin.f32
    if ty == F64:
        return builtin.f64
    return _NARROW_XDSL_TYPES[ty.name]


_NARROW_XDSL_TYPES: dict[str, Attribute] = {
    str(t): t for t in (
        builtin.bf16, builtin.f16, builtin.Float8E5M2Type(), builtin.Float8E4M3Type(), builtin.Float8E3M4Type(),
        builtin.Float8E4M3FNType(), builtin.Float8E4M3FNUZType(), builtin.Float8E5M2FNUZType(),
        builtin.Float8E4M3B11FNUZType(), builtin.Float8E8M0FNUType(), builtin.Float4E2M1FNType(),
        builtin.Float6E2M3FNType(), builtin.Float6E3M2FNType(),
    )
}  # fmt: skip
assert set(_NARROW_XDSL_TYPES) == set(NARROW_FORMATS)


_CONSTANT_TEMPLATES: dict[tuple, tuple] = {}
"""`XdslBackend.constant`'s key, its value's Python type and the xDSL type → (result types,
properties, attributes) of the first such constant built in the process."""


class XdslBackend:
    """Inserts ops at the rewriter's insertion point, on scalars or (with `shape`) on vectors of that
    shape; constants are shared within one expansion.

    Ops are built as codegen/ir/builder.py's `make_op` builds them: by the constructor once per
    argument types, then by `create` from that op's result types, properties and attributes, and a
    constant from the properties of the first one of its value and type (a dense splat attribute
    built and checked once): the constructors were half of `expand-float-ops`' time on the
    erf/log-heavy probe, whose kernels each expand a few hundred log1p."""

    def __init__(self, rewriter: PatternRewriter, shape: Sequence[int] = ()):
        self.rewriter = rewriter
        self.shape = tuple(shape)
        self._constants: dict[tuple, SSAValue] = {}
        self._block: Block | None = None  # where ops go inside a branch; else before the op

    def _insert(self, op: Operation) -> SSAValue:
        if self._block is not None:
            self._block.add_op(op)
        else:
            self.rewriter.insert(op)
        return op.results[0]

    def fast_unless(self, slow_lanes: SSAValue, fast: Callable[[], SSAValue],
                    slow: Callable[[], SSAValue]) -> SSAValue:
        """On vectors: `scf.if` on the or-reduction of the mask, `slow` in its then-branch and `fast`
        in its else-branch (one branch per vector, which LLVM lowers to a mask test and a jump);
        on scalars: `slow` alone (`FloatBuilder.fast_unless`)."""
        if not self.shape:
            return slow()
        any_slow = self._insert(vector.ReductionOp.create(
            operands=[slow_lanes], result_types=[builtin.i1],
            properties={"kind": vector.CombiningKindAttr(vector.CombiningKindFlag.OR),
                        "fastmath": arith.FastMathFlagsAttr("none")}))
        blocks = [Block(), Block()]
        values = [self._in_block(block, fn) for block, fn in zip(blocks, (slow, fast))]
        return self._insert(scf.IfOp(any_slow, [values[0].type], [blocks[0]], [blocks[1]]))

    def _in_block(self, block: Block, fn: Callable[[], SSAValue]) -> SSAValue:
        """`fn()` built into `block`, ending in its scf.yield; constants made there stay there."""
        outer, constants = self._block, dict(self._constants)
        self._block = block
        try:
            value = fn()
            block.add_op(scf.YieldOp(value))
        finally:
            self._block, self._constants = outer, constants
        return value

    def _type(self, ty: ElemType) -> Attribute:
        t = xdsl_type(ty)
        return VectorType(t, self.shape) if self.shape else t

    def _op_class(self, arith_op: type[Operation]) -> type[Operation]:
        return VECTOR_FORMS.get(arith_op, arith_op) if self.shape else arith_op

    def constant(self, ty: ElemType, value: float | int) -> SSAValue:
        key = (ty, struct.pack("<d", value) if isinstance(value, float) else value)
        if key not in self._constants:
            t = self._type(ty)
            template = _CONSTANT_TEMPLATES.get((key, type(value), t))
            if template is not None:
                result_types, properties, attributes = template
                op = arith.ConstantOp.create(result_types=result_types, properties=dict(properties),
                                             attributes=dict(attributes))
            else:
                if self.shape:
                    attr = DenseIntOrFPElementsAttr.from_list(t, [value])
                else:
                    attr = IntegerAttr(value, t) if isinstance(ty, IntType) else FloatAttr(value, t)
                op = arith.ConstantOp(attr)
                _CONSTANT_TEMPLATES[(key, type(value), t)] = ([r.type for r in op.results], dict(op.properties),
                                                 dict(op.attributes))
            self._constants[key] = self._insert(op)
        return self._constants[key]

    def op(self, name: str, result: ElemType, operands: Sequence[SSAValue], types: Sequence[ElemType],
           predicate: str | None = None) -> SSAValue:
        if name in _BINARY:
            return self._insert(make_op(_BINARY[name], *operands))
        if name in _UNARY:
            return self._insert(make_op(_UNARY[name], operands[0]))
        if name == "math.fma":
            return self._insert(make_op(math.FmaOp, *operands))
        if name in _CASTS:
            return self._insert(make_op(self._op_class(_CASTS[name]), operands[0], self._type(result)))
        if name == "arith.cmpf":
            return self._insert(make_op(self._op_class(arith.CmpfOp), operands[0], operands[1], predicate))
        if name == "arith.cmpi":
            return self._insert(make_op(self._op_class(arith.CmpiOp), operands[0], operands[1], predicate))
        if name == "arith.select":
            return self._insert(make_op(self._op_class(arith.SelectOp), *operands))
        raise NotImplementedError(name)


def expand_elementwise(
    rewriter: PatternRewriter,
    op: Operation,
    fn: Callable[..., Val],
    operand_types: Sequence[ElemType],
    result_type: Attribute,
) -> SSAValue:
    """Emit `fn(b, *operands)` before `op` and return its value (of `result_type`, a scalar, or a
    vector of the operands' shape computed on whole vectors)."""
    shape = result_type.get_shape() if isinstance(result_type, VectorType) else ()
    b = FloatBuilder(XdslBackend(rewriter, shape))
    return fn(b, *(b.wrap(v, t) for v, t in zip(op.operands, operand_types))).raw


def complex_parts(z: SSAValue, insert: Callable[[Operation], object]) -> tuple[SSAValue, SSAValue]:
    """(re, im) of a complex value: the operands of the `complex.create` that built it, else a
    `complex.re` and a `complex.im` passed to `insert` (a builder's or a rewriter's)."""
    if isinstance(z.owner, complex_dialect.CreateOp):
        return z.owner.real, z.owner.imaginary
    re, im = complex_dialect.ReOp(z), complex_dialect.ImOp(z)
    insert(re)
    insert(im)
    return re.result, im.result
