"""Translation of arith ops (and the `xla` stand-ins `remf`, and math's integer ops absi, ctpop, ctlz)
to LLVM instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import arith, llvm, math
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, IntegerType
from xdsl.ir import Operation, SSAValue

from hlocc.codegen.ir import VECTOR_FORMS, RemFOp
from hlocc.codegen.llvm.types import constant_value, declare_intrinsic, llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


_FCMP = {"oeq": "==", "ogt": ">", "oge": ">=", "olt": "<", "ole": "<=", "one": "!=", "ord": "ord", "uno": "uno",
         "ueq": "==", "ugt": ">", "uge": ">=", "ult": "<", "ule": "<=", "une": "!="}


_ICMP_SIGNED = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}


_ICMP_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}


def _binary(method: str):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        lhs, rhs = (ft.v(x) for x in op.operands)
        result = getattr(ft.b, method)(lhs, rhs)
        if method.startswith("f") and ft.t.options.fast_math:
            result.flags.extend(sorted(ft.t.options.fast_math))
        ft.set(op, result)
    return handle


def _minmax(kind: str, pred: str):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        a, c = (ft.v(x) for x in op.operands)
        cmp = ft.b.icmp_signed(pred, a, c) if kind == "s" else ft.b.icmp_unsigned(pred, a, c)
        ft.set(op, ft.b.select(cmp, a, c))
    return handle


def _float_minmax(name: str):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        ty = llvm_type(op.results[0].type)
        fn = declare_intrinsic(ft.t.module, name, ty)
        ft.set(op, ft.b.call(fn, [ft.v(x) for x in op.operands]))
    return handle


def _constant(ft: FunctionTranslator, op: arith.ConstantOp) -> None:
    ft.set(op, constant_value(op.value, op.result.type))


def _cmpi(ft: FunctionTranslator, op: arith.CmpiOp) -> None:
    pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, c = ft.v(op.lhs), ft.v(op.rhs)
    if pred in _ICMP_UNSIGNED:
        ft.set(op, ft.b.icmp_unsigned(_ICMP_UNSIGNED[pred], a, c))
    else:
        ft.set(op, ft.b.icmp_signed(_ICMP_SIGNED[pred], a, c))


def _cmpf(ft: FunctionTranslator, op: arith.CmpfOp) -> None:
    pred = arith.CMPF_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, c = ft.v(op.lhs), ft.v(op.rhs)
    if pred == "false" or pred == "true":
        ty = ir.IntType(1)
        if isinstance(a.type, ir.VectorType):
            ty = ir.VectorType(ty, a.type.count)
        ft.set(op, ir.Constant(ty, 1 if pred == "true" else 0))
        return
    if pred.startswith("u") or pred == "uno":
        ft.set(op, ft.b.fcmp_unordered(_FCMP[pred], a, c))
    else:
        ft.set(op, ft.b.fcmp_ordered(_FCMP[pred], a, c))


def _cast(method: str):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        ft.set(op, getattr(ft.b, method)(ft.v(op.operands[0]), llvm_type(op.results[0].type)))
    return handle


def _trunci(ft: FunctionTranslator, op: Operation) -> None:
    """trunc; on the CPU a vector `trunci(shrui(x, w))` from i(2w) to iw that is only stored (the
    f32 -> bf16 rounding of a kernel's output) is the high halves of x's lanes: a bitcast to twice
    the lanes and a shuffle of the odd ones (the hosts are little-endian), which x86 does in one
    vpermt2w per two registers where lshr + trunc takes a vpsrld and a vpmovdw per register and a
    vinserti64x4 per pair. Not for a value widened again: LLVM folds trunc + zext + shl to an and."""
    src, to = op.operands[0], llvm_type(op.results[0].type)
    shift = src.owner
    if not ft.t.gpu and isinstance(to, ir.VectorType) and isinstance(shift, arith.ShRUIOp) \
            and _splat_int(shift.rhs) == to.element.width and ft.v(src).type.element.width == 2 * to.element.width \
            and _only_stored(op.results[0]):
        n = to.count
        halves = ft.b.bitcast(ft.v(shift.lhs), ir.VectorType(to.element, 2 * n))
        mask = ir.Constant(ir.VectorType(ir.IntType(32), n), [2 * k + 1 for k in range(n)])
        ft.set(op, ft.b.shuffle_vector(halves, ir.Constant(halves.type, ir.Undefined), mask))
    else:
        ft.set(op, ft.b.trunc(ft.v(src), to))


def _only_stored(value: SSAValue) -> bool:
    """Every use of `value`, through arith.bitcasts, is the value stored by an llvm.store."""
    return all(_only_stored(use.operation.result) if isinstance(use.operation, arith.BitcastOp)
               else isinstance(use.operation, llvm.StoreOp) and use.index == 0 for use in value.uses)


def _splat_int(value: SSAValue) -> int | None:
    """The integer `value` is when it is an arith.constant splat, else None."""
    const = value.owner
    if not isinstance(const, arith.ConstantOp) or not isinstance(const.value, DenseIntOrFPElementsAttr) \
            or not const.value.is_splat() or not isinstance(const.value.get_element_type(), IntegerType):
        return None
    return int(const.value.get_values()[0])


def _index_cast(ft: FunctionTranslator, op: arith.IndexCastOp) -> None:
    x = ft.v(op.input)
    to = llvm_type(op.result.type)
    if x.type.width == to.width:
        ft.set(op, x)
    elif x.type.width < to.width:
        ft.set(op, ft.b.sext(x, to))
    else:
        ft.set(op, ft.b.trunc(x, to))


def _bitcast(ft: FunctionTranslator, op: arith.BitcastOp) -> None:
    x = ft.v(op.input)
    to = llvm_type(op.result.type)
    ft.set(op, x if x.type == to else ft.b.bitcast(x, to))


def _select(ft: FunctionTranslator, op: arith.SelectOp) -> None:
    cond, a, c = (ft.v(x) for x in op.operands)
    if isinstance(a.type, ir.VectorType) and not isinstance(cond.type, ir.VectorType):
        cond = splat(ft.b, cond, a.type.count)
    ft.set(op, ft.b.select(cond, a, c))


def splat(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    vty = ir.VectorType(x.type, n)
    v = b.insert_element(ir.Constant(vty, ir.Undefined), x, ir.Constant(ir.IntType(32), 0))
    return b.shuffle_vector(v, ir.Constant(vty, ir.Undefined), ir.Constant(ir.VectorType(ir.IntType(32), n), [0] * n))


def _rounded_sdiv(b: ir.IRBuilder, a: ir.Value, c: ir.Value, up: bool) -> ir.Value:
    """Signed division rounded down (floordiv) or up (ceildiv): truncating division, then one step
    toward -inf (+inf) when there is a remainder whose sign is (is not) the divisor's opposite."""
    q = b.sdiv(a, c)
    r = b.srem(a, c)
    zero = ir.Constant(a.type, 0)
    signs = b.icmp_signed("==" if up else "!=", b.icmp_signed("<", r, zero), b.icmp_signed("<", c, zero))
    adjust = b.zext(b.and_(b.icmp_signed("!=", r, zero), signs), a.type)
    return b.add(q, adjust) if up else b.sub(q, adjust)


def _floordivsi(ft: FunctionTranslator, op: Operation) -> None:
    ft.set(op, _rounded_sdiv(ft.b, *(ft.v(x) for x in op.operands), up=False))


def _ceildiv(signed: bool):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        a, c = (ft.v(x) for x in op.operands)
        if signed:
            ft.set(op, _rounded_sdiv(ft.b, a, c, up=True))
        else:
            ft.set(op, ft.b.udiv(ft.b.sub(ft.b.add(a, c), ir.Constant(a.type, 1)), c))
    return handle


def _negf(ft: FunctionTranslator, op: arith.NegfOp) -> None:
    ft.set(op, ft.b.fneg(ft.v(op.operand)))


def _absi(ft: FunctionTranslator, op: math.AbsIOp) -> None:
    x = ft.v(op.operand)
    fn = declare_intrinsic(ft.t.module, "llvm.abs", x.type, [x.type, ir.IntType(1)])
    ft.set(op, ft.b.call(fn, [x, ir.Constant(ir.IntType(1), 0)]))


def _bit_count(name: str):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        x = ft.v(op.operands[0])
        args = [x] if name == "llvm.ctpop" else [x, ir.Constant(ir.IntType(1), 0)]
        fn = declare_intrinsic(ft.t.module, name, x.type, [a.type for a in args])
        ft.set(op, ft.b.call(fn, args))
    return handle


def _remf(ft: FunctionTranslator, op: RemFOp) -> None:
    ft.set(op, ft.b.frem(ft.v(op.lhs), ft.v(op.rhs)))


ARITH_HANDLERS = {
    arith.ConstantOp: _constant,
    arith.AddiOp: _binary("add"), arith.SubiOp: _binary("sub"), arith.MuliOp: _binary("mul"),
    arith.DivSIOp: _binary("sdiv"), arith.DivUIOp: _binary("udiv"), arith.RemSIOp: _binary("srem"),
    arith.RemUIOp: _binary("urem"), arith.AndIOp: _binary("and_"), arith.OrIOp: _binary("or_"),
    arith.XOrIOp: _binary("xor"), arith.ShLIOp: _binary("shl"), arith.ShRSIOp: _binary("ashr"),
    arith.ShRUIOp: _binary("lshr"),
    arith.AddfOp: _binary("fadd"), arith.SubfOp: _binary("fsub"), arith.MulfOp: _binary("fmul"),
    arith.DivfOp: _binary("fdiv"),
    arith.MaxSIOp: _minmax("s", ">"), arith.MinSIOp: _minmax("s", "<"),
    arith.MaxUIOp: _minmax("u", ">"), arith.MinUIOp: _minmax("u", "<"),
    arith.MaximumfOp: _float_minmax("llvm.maximum"), arith.MinimumfOp: _float_minmax("llvm.minimum"),
    arith.MaxnumfOp: _float_minmax("llvm.maxnum"), arith.MinnumfOp: _float_minmax("llvm.minnum"),
    arith.FloorDivSIOp: _floordivsi, arith.CeilDivSIOp: _ceildiv(True), arith.CeilDivUIOp: _ceildiv(False),
    arith.NegfOp: _negf, arith.CmpiOp: _cmpi, arith.CmpfOp: _cmpf, arith.SelectOp: _select,
    arith.ExtSIOp: _cast("sext"), arith.ExtUIOp: _cast("zext"), arith.TruncIOp: _trunci,
    arith.SIToFPOp: _cast("sitofp"), arith.UIToFPOp: _cast("uitofp"), arith.FPToSIOp: _cast("fptosi"),
    arith.FPToUIOp: _cast("fptoui"), arith.ExtFOp: _cast("fpext"), arith.TruncFOp: _cast("fptrunc"),
    arith.IndexCastOp: _index_cast, arith.BitcastOp: _bitcast,
    math.AbsIOp: _absi, math.CtPopOp: _bit_count("llvm.ctpop"), math.CountLeadingZerosOp: _bit_count("llvm.ctlz"),
    RemFOp: _remf,
}
# The xla stand-ins for arith ops on vectors translate as the arith ops do (LLVM's are elementwise).
ARITH_HANDLERS.update({vector_op: ARITH_HANDLERS[arith_op] for arith_op, vector_op in VECTOR_FORMS.items()})
