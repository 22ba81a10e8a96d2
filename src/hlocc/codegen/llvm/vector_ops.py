"""Translation of vector.extract, vector.insert, vector.broadcast, vector.shuffle,
vector.create_mask and the integer vector.reduction kinds to LLVM vector instructions, and of
`xla.dot_bf16_pairs` to AVX512-BF16's vdpbf16ps intrinsic."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import vector

from hlocc.codegen.ir import DotBF16PairsOp
from hlocc.codegen.llvm.arith_ops import splat
from hlocc.codegen.llvm.types import TranslationError, declare_intrinsic

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _vector_extract(ft: FunctionTranslator, op: vector.ExtractOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.extract_element(ft.v(op.vector), pos))


def _vector_insert(ft: FunctionTranslator, op: vector.InsertOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.insert_element(ft.v(op.dest), ft.v(op.source), pos))


def _position(ft: FunctionTranslator, static, dynamic) -> ir.Value:
    values = list(static.get_values())
    if len(values) != 1:
        raise TranslationError("only 1-D vector positions are supported")
    if values[0] >= 0:
        return ir.Constant(ir.IntType(32), values[0])
    return ft.v(dynamic[0])


def _broadcast(ft: FunctionTranslator, op: vector.BroadcastOp) -> None:
    n = op.vector.type.get_shape()[0]
    ft.set(op, splat(ft.b, ft.v(op.source), n))


def _shuffle(ft: FunctionTranslator, op: vector.ShuffleOp) -> None:
    """A 1-D vector.shuffle (the reduction's lane tree, reduce_partials `combine_lanes`): shufflevector."""
    if len(op.v1.type.get_shape()) != 1:
        raise TranslationError("only 1-D vector.shuffle is supported")
    mask = list(op.mask.get_values())
    ft.set(op, ft.b.shuffle_vector(ft.v(op.v1), ft.v(op.v2),
                                   ir.Constant(ir.VectorType(ir.IntType(32), len(mask)), mask)))


def _create_mask(ft: FunctionTranslator, op: vector.CreateMaskOp) -> None:
    """vector.create_mask %k (1-D): the lanes below k, k clamped to [0, lanes] (MLIR's semantics),
    as one compare of the lane numbers with k (an AVX-512 mask register's kmov after LLVM).

    On the CPU k first passes an empty inline asm, which LLVM cannot see through: with a constant
    mask (a row grid's rows shorter than the vector) LLVM knew the masked-off lanes dead and
    shrank the constants feeding them (exp's exponent bias became 0 there), and those lanes then
    made denormals, whose microcode assists tripled exp(x[i, j] - m[i]) over rows of 7 for some
    inputs (34 against 16 us); with an unknown mask every lane computes the ordinary values."""
    if len(op.mask_dim_sizes) != 1:
        raise TranslationError("only 1-D vector.create_mask is supported")
    lanes = op.mask_vector.type.get_shape()[0]
    k = ft.v(op.mask_dim_sizes[0])
    i64, i32 = ir.IntType(64), ir.IntType(32)
    if not ft.t.gpu:
        k = ft.b.call(ir.InlineAsm(ir.FunctionType(i64, [i64]), "", "=r,0"), [k])
    k = ft.b.select(ft.b.icmp_signed("<", k, ir.Constant(i64, 0)), ir.Constant(i64, 0), k)
    k = ft.b.select(ft.b.icmp_signed(">", k, ir.Constant(i64, lanes)), ir.Constant(i64, lanes), k)
    iota = ir.Constant(ir.VectorType(i32, lanes), list(range(lanes)))
    ft.set(op, ft.b.icmp_signed("<", iota, splat(ft.b, ft.b.trunc(k, i32), lanes)))


_REDUCE_INTRINSICS = {"add": "llvm.vector.reduce.add", "mul": "llvm.vector.reduce.mul",
                      "and": "llvm.vector.reduce.and", "or": "llvm.vector.reduce.or",
                      "xor": "llvm.vector.reduce.xor"}


def _reduction(ft: FunctionTranslator, op: vector.ReductionOp) -> None:
    """vector.reduction of an integer vector without an accumulator (the `any lane` test of
    `FloatBuilder.fast_unless`: or over a vector of i1): LLVM's vector.reduce intrinsics."""
    kind = op.kind.data.value
    vec = ft.v(op.vector)
    if op.acc is not None or kind not in _REDUCE_INTRINSICS or not isinstance(vec.type.element, ir.IntType):
        raise TranslationError(f"vector.reduction <{kind}> is supported on integer vectors without an accumulator")
    fn = declare_intrinsic(ft.t.module, _REDUCE_INTRINSICS[kind], vec.type, ret=vec.type.element)
    ft.set(op, ft.b.call(fn, [vec]))


class _BFloat(ir.Type):
    """LLVM's `bfloat` (llvmlite has no such type): only the operand type of the bf16 intrinsics."""

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


_DPBF16PS = "llvm.x86.avx512bf16.dpbf16ps.512"


def _dot_bf16_pairs(ft: FunctionTranslator, op: DotBF16PairsOp) -> None:
    """vdpbf16ps: its bf16 operands are the i32 lanes bitcast to <32 x bfloat> (LLVM >= 17's
    signature of the intrinsic)."""
    pairs = ir.VectorType(_BFloat(), 32)
    acc = ft.v(op.acc)
    fn = ft.t.module.globals.get(_DPBF16PS)
    if fn is None:
        fn = ir.Function(ft.t.module, ir.FunctionType(acc.type, [acc.type, pairs, pairs]), name=_DPBF16PS)
    ft.set(op, ft.b.call(fn, [acc, ft.b.bitcast(ft.v(op.lhs), pairs), ft.b.bitcast(ft.v(op.rhs), pairs)]))


VECTOR_HANDLERS = {vector.ExtractOp: _vector_extract, vector.InsertOp: _vector_insert, vector.BroadcastOp: _broadcast,
                   vector.ShuffleOp: _shuffle, vector.CreateMaskOp: _create_mask, vector.ReductionOp: _reduction,
                   DotBF16PairsOp: _dot_bf16_pairs}
