"""Lowered kernel IR → LLVM IR, by a direct visitor to llvmlite.ir (DESIGN: not through xDSL's llvm
dialect conversions). Input: func/arith/math/scf/vector plus the `llvm` memory ops that
`lower-tensors` produces, `xla.pure_call`, `xla.remf`, the `xla` stand-ins for arith ops on vectors
(`VECTOR_FORMS`: xla.cmpf, xla.select, xla.extui, ...; LLVM vector compares, selects and casts), and
`gpu.thread_id`/`gpu.block_id`.

Types: `index` is i64; integers and f16/f32/f64 map directly; bf16, the f8 types and f4E2M1FN only
appear as storage after `lower-narrow-floats` and map to i16/i8/i4; vectors map to LLVM vectors;
`complex<fN>` is the struct `{fN, fN}` (real part first: the memory layout of numpy's and XLA's
complex numbers), built and taken apart by `complex.create`/`complex.re`/`complex.im` (insertvalue
and extractvalue, which LLVM's SROA folds); `expand-float-ops` leaves no other complex op.

A kernel entry function (one using `gpu.thread_id`/`gpu.block_id`) becomes an internal
`always_inline` function whose last two parameters are the thread and block id. The caller (the
CPU backend's block loop, or the NVPTX wrapper) supplies them. One that uses shared memory,
barriers or shuffles becomes a *block function* that runs all threads of its block in phases
(`block_simulation.py`; its thread parameter is unused; see `LlvmTranslator.block_functions`).
Buffer arguments are `noalias` unless the caller says otherwise: buffers of one kernel never
overlap unless aliased on purpose.

Math ops that `expand-float-ops` leaves (fabs, sqrt, fma, floor, ceil, copysign, roundeven, round,
trunc) become LLVM intrinsics, which vectorize. Any other math op is an error unless
`allow_libm` is set (then it becomes an LLVM intrinsic that may call libm).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from llvmlite import ir
from xdsl.dialects import arith, func, gpu, llvm, math, scf, vector
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    ComplexType,
    DenseIntOrFPElementsAttr,
    Float16Type,
    Float32Type,
    Float64Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    VectorType,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from hlocc.codegen.block_simulation import needs_block_function, translate_block_function
from hlocc.codegen.ir import VECTOR_FORMS, AtomicUpdateOp, PureCallOp, RemFOp, SharedMemoryOp, ShuffleReduceOp, YieldOp
from hlocc.errors import HloError

I64 = ir.IntType(64)




class TranslationError(HloError):
    """Kernel IR the LLVM translator cannot handle (an op or type no lowering pass removed)."""


def llvm_type(t: Attribute) -> ir.Type:
    if isinstance(t, IndexType):
        return I64
    if isinstance(t, IntegerType):
        return ir.IntType(t.width.data)
    if isinstance(t, Float32Type):
        return ir.FloatType()
    if isinstance(t, Float64Type):
        return ir.DoubleType()
    if isinstance(t, Float16Type):
        return ir.HalfType()
    if isinstance(t, BFloat16Type):
        # Storage only: LLVM's own bfloat lowering aborts the process on some x86 hosts (scalar
        # bfloat loads/stores in SelectionDAG), so lower-narrow-floats does all bf16 arithmetic.
        return ir.IntType(16)
    if isinstance(t, AnyFloat) and t.bitwidth <= 8:
        return ir.IntType(t.bitwidth)  # f8 in an i8; f4E2M1FN in an i4 (stored one per byte, as an i8)
    if isinstance(t, ComplexType):
        part = llvm_type(t.element_type)
        return ir.LiteralStructType([part, part])
    if isinstance(t, VectorType):
        return ir.VectorType(llvm_type(t.element_type), t.get_shape()[0])
    if isinstance(t, llvm.LLVMPointerType):
        return ir.PointerType()
    if isinstance(t, llvm.LLVMArrayType):
        return ir.ArrayType(llvm_type(t.type), t.size.data)
    raise TranslationError(f"cannot translate type {t} to LLVM")


def _is_float(t: Attribute) -> bool:
    if isinstance(t, VectorType):
        t = t.element_type
    return isinstance(t, AnyFloat)


_FCMP = {"oeq": "==", "ogt": ">", "oge": ">=", "olt": "<", "ole": "<=", "one": "!=", "ord": "ord", "uno": "uno",
         "ueq": "==", "ugt": ">", "uge": ">=", "ult": "<", "ule": "<=", "une": "!="}
_ICMP_SIGNED = {"eq": "==", "ne": "!=", "slt": "<", "sle": "<=", "sgt": ">", "sge": ">="}
_ICMP_UNSIGNED = {"ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}

_MATH_INTRINSICS = {
    math.AbsFOp: "llvm.fabs", math.SqrtOp: "llvm.sqrt", math.FloorOp: "llvm.floor", math.CeilOp: "llvm.ceil",
    math.RoundEvenOp: "llvm.roundeven", math.RoundOp: "llvm.round", math.TruncOp: "llvm.trunc",
    math.CopySignOp: "llvm.copysign", math.FmaOp: "llvm.fma",
}
# Only with allow_libm: intrinsics that LLVM turns into libm calls on the CPU.
_LIBM_INTRINSICS = {
    math.ExpOp: "llvm.exp", math.LogOp: "llvm.log", math.SinOp: "llvm.sin", math.CosOp: "llvm.cos",
    math.PowFOp: "llvm.pow", math.Exp2Op: "llvm.exp2", math.Log2Op: "llvm.log2", math.Log10Op: "llvm.log10",
    math.TanhOp: "llvm.tanh", math.TanOp: "llvm.tan", math.Atan2Op: "llvm.atan2",
}


@dataclass(frozen=True)
class TranslateOptions:
    allow_libm: bool = False
    noalias: bool = True
    fast_math: frozenset[str] = field(default_factory=frozenset)


def _type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_type_suffix(t.element)}"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return {ir.HalfType: "f16", ir.FloatType: "f32", ir.DoubleType: "f64"}[type(t)]


def declare_intrinsic(module: ir.Module, name: str, overload: ir.Type, args: Sequence[ir.Type] | None = None,
                      ret: ir.Type | None = None) -> ir.Function:
    """`name.<suffix of overload>`, e.g. llvm.fabs.v16f32 (llvmlite's own helper knows no vectors)."""
    full = f"{name}.{_type_suffix(overload)}"
    existing = module.globals.get(full)
    if existing is not None:
        return existing
    n_args = {"llvm.fma": 3, "llvm.copysign": 2, "llvm.pow": 2, "llvm.atan2": 2, "llvm.maximum": 2,
              "llvm.minimum": 2, "llvm.maxnum": 2, "llvm.minnum": 2}.get(name, 1)
    fnty = ir.FunctionType(ret or overload, list(args) if args is not None else [overload] * n_args)
    return ir.Function(module, fnty, name=full)


class _FunctionTranslator:
    def __init__(self, translator: LlvmTranslator, fn: func.FuncOp, llfn: ir.Function, extra_args: dict[str, int]):
        self.t = translator
        self.fn = fn
        self.llfn = llfn
        self.values: dict[SSAValue, ir.Value] = {}
        self.extra_args = extra_args
        self.ids = {key: llfn.args[index] for key, index in extra_args.items()}  # thread / block id
        self.shared: dict[Operation, ir.Value] = {}  # xla.shared_memory → the block's buffer
        entry = llfn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)

    def v(self, value: SSAValue) -> ir.Value:
        try:
            return self.values[value]
        except KeyError:
            raise TranslationError(f"value {value} used before its definition in @{self.fn.sym_name.data}") from None

    def run(self) -> None:
        block = self.fn.body.block
        for arg, llarg in zip(block.args, self.llfn.args):
            self.values[arg] = llarg
        if self.extra_args and not self.t.gpu and needs_block_function(self.fn):
            translate_block_function(self)
            self.t.block_functions.add(self.fn.sym_name.data)
            return
        self.block(block)

    def block(self, block: Block) -> list[ir.Value] | None:
        """Translate a region's single block; return the terminator's (yield) operands."""
        for op in block.ops:
            if isinstance(op, (scf.YieldOp, YieldOp)):
                return [self.v(x) for x in op.operands]
            self.op(op)
        return None

    # -- ops ------------------------------------------------------------------------------------------
    def op(self, op: Operation) -> None:
        b = self.b
        handler = _HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
            return
        if type(op) in _MATH_INTRINSICS:
            self.intrinsic(op, _MATH_INTRINSICS[type(op)])
            return
        if type(op) in _LIBM_INTRINSICS and self.t.options.allow_libm:
            self.intrinsic(op, _LIBM_INTRINSICS[type(op)])
            return
        del b
        raise TranslationError(f"cannot translate '{op.name}' to LLVM (a lowering pass should have removed it)")

    def set(self, op: Operation, value: ir.Value) -> None:
        self.values[op.results[0]] = value

    def intrinsic(self, op: Operation, name: str) -> None:
        ty = llvm_type(op.results[0].type)
        args = [self.v(x) for x in op.operands]
        fn = declare_intrinsic(self.t.module, name, ty)
        self.set(op, self.b.call(fn, args))


def _binary(method: str):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        lhs, rhs = (ft.v(x) for x in op.operands)
        result = getattr(ft.b, method)(lhs, rhs)
        if method.startswith("f") and ft.t.options.fast_math:
            result.flags.extend(sorted(ft.t.options.fast_math))
        ft.set(op, result)
    return handle


def _minmax(kind: str, pred: str):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        a, c = (ft.v(x) for x in op.operands)
        cmp = ft.b.icmp_signed(pred, a, c) if kind == "s" else ft.b.icmp_unsigned(pred, a, c)
        ft.set(op, ft.b.select(cmp, a, c))
    return handle


def _float_minmax(name: str):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        ty = llvm_type(op.results[0].type)
        fn = declare_intrinsic(ft.t.module, name, ty)
        ft.set(op, ft.b.call(fn, [ft.v(x) for x in op.operands]))
    return handle


def _constant(ft: _FunctionTranslator, op: arith.ConstantOp) -> None:
    ft.set(op, constant_value(op.value, op.result.type))


def constant_value(value: Attribute, t: Attribute) -> ir.Constant:
    ty = llvm_type(t)
    if isinstance(value, IntegerAttr):
        return ir.Constant(ty, value.value.data)
    if isinstance(value, FloatAttr):
        return _float_constant(ty, value.value.data, t)
    if isinstance(value, DenseIntOrFPElementsAttr):
        elem_t = value.get_element_type()
        elem_ty = llvm_type(elem_t)
        values = list(value.get_values())
        n = ty.count if isinstance(ty, ir.VectorType) else ty.count
        if len(values) == 1 and n != 1:
            values = values * n
        elems = [_float_constant(elem_ty, x, elem_t) if _is_float(elem_t) else ir.Constant(elem_ty, int(x))
                 for x in values]
        return ir.Constant(ty, elems)
    raise TranslationError(f"cannot translate constant {value}")


def _float_constant(ty: ir.Type, x: float, t: Attribute) -> ir.Constant:
    if isinstance(ty, ir.IntType):  # bf16 storage (lower-narrow-floats turns f8 constants into integers)
        import ml_dtypes
        import numpy as np

        if isinstance(t, BFloat16Type):
            return ir.Constant(ty, int(np.array(x, dtype=ml_dtypes.bfloat16).view(np.uint16)))
        raise TranslationError(f"cannot translate a {t} constant")
    return ir.Constant(ty, x)


def _cmpi(ft: _FunctionTranslator, op: arith.CmpiOp) -> None:
    pred = arith.CMPI_COMPARISON_OPERATIONS[op.predicate.value.data]
    a, c = ft.v(op.lhs), ft.v(op.rhs)
    if pred in _ICMP_UNSIGNED:
        ft.set(op, ft.b.icmp_unsigned(_ICMP_UNSIGNED[pred], a, c))
    else:
        ft.set(op, ft.b.icmp_signed(_ICMP_SIGNED[pred], a, c))


def _cmpf(ft: _FunctionTranslator, op: arith.CmpfOp) -> None:
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
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        ft.set(op, getattr(ft.b, method)(ft.v(op.operands[0]), llvm_type(op.results[0].type)))
    return handle


def _trunci(ft: _FunctionTranslator, op: Operation) -> None:
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


def _index_cast(ft: _FunctionTranslator, op: arith.IndexCastOp) -> None:
    x = ft.v(op.input)
    to = llvm_type(op.result.type)
    if x.type.width == to.width:
        ft.set(op, x)
    elif x.type.width < to.width:
        ft.set(op, ft.b.sext(x, to))
    else:
        ft.set(op, ft.b.trunc(x, to))


def _bitcast(ft: _FunctionTranslator, op: arith.BitcastOp) -> None:
    x = ft.v(op.input)
    to = llvm_type(op.result.type)
    ft.set(op, x if x.type == to else ft.b.bitcast(x, to))


def _select(ft: _FunctionTranslator, op: arith.SelectOp) -> None:
    cond, a, c = (ft.v(x) for x in op.operands)
    if isinstance(a.type, ir.VectorType) and not isinstance(cond.type, ir.VectorType):
        cond = _splat(ft.b, cond, a.type.count)
    ft.set(op, ft.b.select(cond, a, c))


def _splat(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
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


def _floordivsi(ft: _FunctionTranslator, op: Operation) -> None:
    ft.set(op, _rounded_sdiv(ft.b, *(ft.v(x) for x in op.operands), up=False))


def _ceildiv(signed: bool):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        a, c = (ft.v(x) for x in op.operands)
        if signed:
            ft.set(op, _rounded_sdiv(ft.b, a, c, up=True))
        else:
            ft.set(op, ft.b.udiv(ft.b.sub(ft.b.add(a, c), ir.Constant(a.type, 1)), c))
    return handle


def _negf(ft: _FunctionTranslator, op: arith.NegfOp) -> None:
    ft.set(op, ft.b.fneg(ft.v(op.operand)))


def _absi(ft: _FunctionTranslator, op: math.AbsIOp) -> None:
    x = ft.v(op.operand)
    fn = declare_intrinsic(ft.t.module, "llvm.abs", x.type, [x.type, ir.IntType(1)])
    ft.set(op, ft.b.call(fn, [x, ir.Constant(ir.IntType(1), 0)]))


def _bit_count(name: str):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        x = ft.v(op.operands[0])
        args = [x] if name == "llvm.ctpop" else [x, ir.Constant(ir.IntType(1), 0)]
        fn = declare_intrinsic(ft.t.module, name, x.type, [a.type for a in args])
        ft.set(op, ft.b.call(fn, args))
    return handle


def _remf(ft: _FunctionTranslator, op: RemFOp) -> None:
    ft.set(op, ft.b.frem(ft.v(op.lhs), ft.v(op.rhs)))


def _for(ft: _FunctionTranslator, op: scf.ForOp) -> None:
    b = ft.b
    lb, ub, step = ft.v(op.lb), ft.v(op.ub), ft.v(op.step)
    inits = [ft.v(x) for x in op.iter_args]
    pre = b.block
    header = ft.llfn.append_basic_block("for.header")
    body = ft.llfn.append_basic_block("for.body")
    exit_ = ft.llfn.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, "iv")
    iv.add_incoming(lb, pre)
    phis = []
    for init in inits:
        phi = b.phi(init.type)
        phi.add_incoming(init, pre)
        phis.append(phi)
    b.cbranch(b.icmp_signed("<", iv, ub), body, exit_)
    b.position_at_end(body)
    block = op.body.block
    ft.values[block.args[0]] = iv
    for arg, phi in zip(block.args[1:], phis):
        ft.values[arg] = phi
    yielded = ft.block(block)
    latch = b.block
    next_iv = b.add(iv, step)
    iv.add_incoming(next_iv, latch)
    for phi, y in zip(phis, yielded):
        phi.add_incoming(y, latch)
    b.branch(header)
    b.position_at_end(exit_)
    for result, phi in zip(op.results, phis):
        ft.values[result] = phi


def _if(ft: _FunctionTranslator, op: scf.IfOp) -> None:
    b = ft.b
    cond = ft.v(op.cond)
    then_bb = ft.llfn.append_basic_block("if.then")
    else_bb = ft.llfn.append_basic_block("if.else")
    merge = ft.llfn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    incoming = []
    for bb, region in ((then_bb, op.true_region), (else_bb, op.false_region)):
        b.position_at_end(bb)
        yielded = ft.block(region.block) if region.blocks else []
        incoming.append((yielded or [], b.block))
        b.branch(merge)
    b.position_at_end(merge)
    for k, result in enumerate(op.results):
        phi = b.phi(llvm_type(result.type))
        for values, bb in incoming:
            phi.add_incoming(values[k], bb)
        ft.values[result] = phi


def _vector_extract(ft: _FunctionTranslator, op: vector.ExtractOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.extract_element(ft.v(op.vector), pos))


def _vector_insert(ft: _FunctionTranslator, op: vector.InsertOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.insert_element(ft.v(op.dest), ft.v(op.source), pos))


def _position(ft: _FunctionTranslator, static, dynamic) -> ir.Value:
    values = list(static.get_values())
    if len(values) != 1:
        raise TranslationError("only 1-D vector positions are supported")
    if values[0] >= 0:
        return ir.Constant(ir.IntType(32), values[0])
    return ft.v(dynamic[0])


def _broadcast(ft: _FunctionTranslator, op: vector.BroadcastOp) -> None:
    n = op.vector.type.get_shape()[0]
    ft.set(op, _splat(ft.b, ft.v(op.source), n))


def _gep(ft: _FunctionTranslator, op: llvm.GEPOp) -> None:
    elem = llvm_type(op.elem_type)
    indices = [ft.v(x) for x in op.ssa_indices]
    ft.set(op, ft.b.gep(ft.v(op.ptr), indices, inbounds=op.inbounds is not None, source_etype=elem))


def _load(ft: _FunctionTranslator, op: llvm.LoadOp) -> None:
    ty = llvm_type(op.dereferenced_value.type)
    ft.set(op, ft.b.load(ft.v(op.ptr), typ=ty, align=_access_align(ft, ty)))


def _store(ft: _FunctionTranslator, op: llvm.StoreOp) -> None:
    value = ft.v(op.value)
    ft.b.store(value, ft.v(op.ptr), align=_access_align(ft, value.type))


def _access_align(ft: _FunctionTranslator, ty: ir.Type) -> int:
    """On a GPU a vector access is aligned to its size (up to 16 bytes): vectorize-loads-stores only
    makes vectors at element offsets that are multiples of their length, and the runtime aligns
    every buffer to 16 bytes (backends/cuda/ptx.py BUFFER_ALIGNMENT). That is what lets NVPTX emit
    ld.global.v4. Elsewhere (CPU callers may pass any numpy array) elements' alignment."""
    if ft.t.gpu and isinstance(ty, ir.VectorType):
        size = ty.count * _align(ty)
        if size & (size - 1) == 0:
            return min(16, size)
    return _align(ty)


def _align(ty: ir.Type) -> int:
    """Element alignment: vectors are only as aligned as their elements (buffers are 64-byte
    aligned, but a vector access is at an element offset that is merely a multiple of its size),
    complex numbers as their parts (numpy aligns complex64 to 4 bytes)."""
    if isinstance(ty, ir.VectorType):
        ty = ty.element
    if isinstance(ty, ir.LiteralStructType):
        ty = ty.elements[0]
    if isinstance(ty, ir.IntType):
        return max(1, ty.width // 8)
    return {ir.HalfType: 2, ir.FloatType: 4, ir.DoubleType: 8}.get(type(ty), 1)


def _complex_create(ft: _FunctionTranslator, op: complex_dialect.CreateOp) -> None:
    agg = ir.Constant(llvm_type(op.complex.type), ir.Undefined)
    agg = ft.b.insert_value(agg, ft.v(op.real), 0)
    ft.set(op, ft.b.insert_value(agg, ft.v(op.imaginary), 1))


def _complex_part(index: int):
    def handle(ft: _FunctionTranslator, op: Operation) -> None:
        ft.set(op, ft.b.extract_value(ft.v(op.complex), index))
    return handle


def _address_of(ft: _FunctionTranslator, op: llvm.AddressOfOp) -> None:
    ft.set(op, ft.t.globals[op.global_name.root_reference.data])


def _thread_or_block_id(ft: _FunctionTranslator, op: Operation) -> None:
    ft.set(op, ft.ids["thread" if isinstance(op, gpu.ThreadIdOp) else "block"])


def _shared_memory(ft: _FunctionTranslator, op: SharedMemoryOp) -> None:
    if ft.t.gpu:
        # A static addrspace(3) array of the block; addressed through a generic pointer, which
        # NVPTX's address-space inference turns back into ld/st.shared.
        g = ir.GlobalVariable(ft.t.module, ir.ArrayType(ir.IntType(8), op.size.value.data),
                              ft.t.module.get_unique_name("shared"), addrspace=3)
        g.linkage = "internal"
        g.align = 16
        g.initializer = ir.Constant(g.value_type, ir.Undefined)
        ft.t.shared_bytes += op.size.value.data
        ft.set(op, ft.b.addrspacecast(g, ir.PointerType()))
        return
    if op not in ft.shared:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data})")
    ft.set(op, ft.shared[op])


def _barrier(ft: _FunctionTranslator, op: gpu.BarrierOp) -> None:
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")
    fn = ft.t.module.globals.get("llvm.nvvm.barrier0") or ir.Function(
        ft.t.module, ir.FunctionType(ir.VoidType(), []), name="llvm.nvvm.barrier0")
    ft.b.call(fn, [])


def _shuffle_reduce(ft: _FunctionTranslator, op: ShuffleReduceOp) -> None:
    """On a GPU: for distance = max_distance, ..., 1, each value is exchanged with lane ^ distance
    by `shfl.sync.bfly` (in 32-bit pieces) and the combiner called as (own, other)."""
    if not ft.t.gpu:
        raise TranslationError(f"'{op.name}' outside the top level of a kernel's entry function "
                               f"(@{ft.fn.sym_name.data}) cannot run on the CPU")
    combiner = ft.t.functions[op.combiner.root_reference.data]
    values = [ft.v(x) for x in op.operands]
    distance = op.max_distance.value.data
    while distance >= 1:
        others = [_shuffle_xor(ft, v, distance) for v in values]
        result = ft.b.call(combiner, values + others)
        values = [result] if len(values) == 1 else [ft.b.extract_value(result, k) for k in range(len(values))]
        distance //= 2
    for r, v in zip(op.results, values):
        ft.values[r] = v


def _shuffle_xor(ft: _FunctionTranslator, value: ir.Value, distance: int) -> ir.Value:
    """The `value` of lane ^ distance: the value taken apart into i32 words, each shuffled."""
    b = ft.b
    i32 = ir.IntType(32)
    ty = value.type
    if isinstance(ty, (ir.VectorType, ir.LiteralStructType)):
        n = ty.count if isinstance(ty, ir.VectorType) else len(ty.elements)
        out = ir.Constant(ty, ir.Undefined)
        for k in range(n):
            part = (b.extract_element(value, ir.Constant(i32, k)) if isinstance(ty, ir.VectorType)
                    else b.extract_value(value, k))
            moved = _shuffle_xor(ft, part, distance)
            out = (b.insert_element(out, moved, ir.Constant(i32, k)) if isinstance(ty, ir.VectorType)
                   else b.insert_value(out, moved, k))
        return out
    bits = _bit_width(ty)
    as_int = value if isinstance(ty, ir.IntType) else b.bitcast(value, ir.IntType(bits))
    shfl = ft.t.module.globals.get("llvm.nvvm.shfl.sync.bfly.i32") or ir.Function(
        ft.t.module, ir.FunctionType(i32, [i32] * 4), name="llvm.nvvm.shfl.sync.bfly.i32")
    words = []
    for w in range(max(1, -(-bits // 32))):
        word = b.lshr(as_int, ir.Constant(as_int.type, 32 * w)) if w else as_int
        word = b.trunc(word, i32) if bits > 32 else b.zext(word, i32) if bits < 32 else word
        words.append(b.call(shfl, [ir.Constant(i32, ft.t.lane_mask), word, ir.Constant(i32, distance),
                                   ir.Constant(i32, 31)]))
    if bits < 32:
        result = b.trunc(words[0], ir.IntType(bits))
    elif bits == 32:
        result = words[0]
    else:
        wide = ir.IntType(bits)
        result = ir.Constant(wide, 0)
        for w, word in enumerate(words):
            result = b.or_(result, b.shl(b.zext(word, wide), ir.Constant(wide, 32 * w)))
    return result if isinstance(ty, ir.IntType) else b.bitcast(result, ty)


def _bit_width(ty: ir.Type) -> int:
    if isinstance(ty, ir.IntType):
        return ty.width
    return {ir.HalfType: 16, ir.FloatType: 32, ir.DoubleType: 64}[type(ty)]


def _atomic_update(ft: _FunctionTranslator, op: AtomicUpdateOp) -> None:
    """On the CPU, load, body, store (the kernel runs serially). On a GPU, `atomicrmw` when the body
    is one add (or integer min/max) of the current value and a value defined outside; otherwise a
    compare-and-swap loop on the element's bits (LLVM widens 8- and 16-bit ones to a masked 32-bit
    CAS)."""
    b = ft.b
    ptr = ft.v(op.ptr)
    block = op.body.block
    ty = llvm_type(block.args[0].type)
    if not ft.t.gpu:
        ft.values[block.args[0]] = b.load(ptr, typ=ty, align=_align(ty))
        b.store(ft.block(block)[0], ptr, align=_align(ty))
        return
    rmw = _single_rmw(block)
    if rmw is not None:
        kind, operand = rmw
        b.atomic_rmw(kind, ptr, ft.v(operand), "monotonic")
        return
    if isinstance(ty, ir.LiteralStructType) or _bit_width(ty) not in (8, 16, 32, 64):
        raise TranslationError(f"'{op.name}' on {block.args[0].type} has no atomic form on a GPU")
    bits = ir.IntType(_bit_width(ty))
    entry = b.block
    initial = b.load(ptr, typ=ty, align=_align(ty))
    loop = ft.llfn.append_basic_block("cas.loop")
    done = ft.llfn.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    current = b.phi(ty, "current")
    current.add_incoming(initial, entry)
    ft.values[block.args[0]] = current
    new = ft.block(block)[0]
    expected = current if ty == bits else b.bitcast(current, bits)
    desired = new if ty == bits else b.bitcast(new, bits)
    pair = b.cmpxchg(ptr, expected, desired, "monotonic", "monotonic")
    seen = b.extract_value(pair, 0)
    current.add_incoming(seen if ty == bits else b.bitcast(seen, ty), b.block)
    b.cbranch(b.extract_value(pair, 1), done, loop)
    b.position_at_end(done)


_ATOMIC_KINDS = {arith.AddfOp: "fadd", arith.AddiOp: "add", arith.MaxSIOp: "max", arith.MinSIOp: "min",
                 arith.MaxUIOp: "umax", arith.MinUIOp: "umin"}


def _single_rmw(block: Block) -> tuple[str, SSAValue] | None:
    """(atomicrmw kind, the other operand) when `block` is `yield(op(current, x))` (or op(x,
    current)) for an op with an exact atomic form and x defined outside the body."""
    ops = list(block.ops)
    if len(ops) != 2 or type(ops[0]) not in _ATOMIC_KINDS or ops[1].operands[0] is not ops[0].results[0]:
        return None
    current = block.args[0]
    lhs, rhs = ops[0].operands
    other = rhs if lhs is current else lhs if rhs is current else None
    if other is None or other is current or other.owner is ops[0]:
        return None
    if isinstance(current.type, IntegerType) and current.type.width.data < 32 and ops[0].name != "arith.addi":
        return None  # NVPTX has no 8/16-bit atomic min/max: leave it to the CAS loop
    return _ATOMIC_KINDS[type(ops[0])], other


def _call(ft: _FunctionTranslator, op: Operation) -> None:
    name = op.callee.root_reference.data
    callee = ft.t.functions[name]
    result = ft.b.call(callee, [ft.v(x) for x in op.operands])
    results = list(op.results)
    if len(results) == 1:
        ft.values[results[0]] = result
    else:
        for k, r in enumerate(results):
            ft.values[r] = ft.b.extract_value(result, k)


def _return(ft: _FunctionTranslator, op: func.ReturnOp) -> None:
    values = [ft.v(x) for x in op.operands]
    if not values:
        ft.b.ret_void()
    elif len(values) == 1:
        ft.b.ret(values[0])
    else:
        agg = ir.Constant(ft.llfn.function_type.return_type, ir.Undefined)
        for k, v in enumerate(values):
            agg = ft.b.insert_value(agg, v, k)
        ft.b.ret(agg)


_HANDLERS = {
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
    scf.ForOp: _for, scf.IfOp: _if,
    vector.ExtractOp: _vector_extract, vector.InsertOp: _vector_insert, vector.BroadcastOp: _broadcast,
    llvm.GEPOp: _gep, llvm.LoadOp: _load, llvm.StoreOp: _store, llvm.AddressOfOp: _address_of,
    gpu.ThreadIdOp: _thread_or_block_id, gpu.BlockIdOp: _thread_or_block_id, SharedMemoryOp: _shared_memory,
    gpu.BarrierOp: _barrier, ShuffleReduceOp: _shuffle_reduce, AtomicUpdateOp: _atomic_update,
    func.CallOp: _call, PureCallOp: _call, func.ReturnOp: _return,
    complex_dialect.CreateOp: _complex_create, complex_dialect.ReOp: _complex_part(0),
    complex_dialect.ImOp: _complex_part(1),
}
# The xla stand-ins for arith ops on vectors translate as the arith ops do (LLVM's are elementwise).
_HANDLERS.update({vector_op: _HANDLERS[arith_op] for arith_op, vector_op in VECTOR_FORMS.items()})


class LlvmTranslator:
    def __init__(self, name: str = "kernel", options: TranslateOptions | None = None, triple: str | None = None,
                 gpu: bool = False, lane_mask: int = -1):
        """gpu: translate shared memory, barriers, shuffles and atomics for NVPTX (a kernel entry
        then runs once per GPU thread) instead of as a CPU block function. lane_mask: the lanes
        of a warp that take part in shuffles (all 32 unless a block is smaller than a warp)."""
        self.module = ir.Module(name=name)
        self.gpu = gpu
        self.lane_mask = lane_mask
        self.shared_bytes = 0  # static shared memory of the GPU kernel
        if triple:
            self.module.triple = triple
        self.options = options or TranslateOptions()
        self.functions: dict[str, ir.Function] = {}
        self.globals: dict[str, ir.GlobalVariable] = {}
        self.block_functions: set[str] = set()  # entry functions that run a whole block (block_simulation.py)

    def translate(self, module: ModuleOp) -> ir.Module:
        for op in module.ops:
            if isinstance(op, llvm.GlobalOp):
                self._global(op)
        fns = [op for op in module.ops if isinstance(op, func.FuncOp)]
        extra: dict[str, dict[str, int]] = {}
        for fn in fns:
            extra[fn.sym_name.data] = self._declare(fn)
        for fn in fns:
            _FunctionTranslator(self, fn, self.functions[fn.sym_name.data], extra[fn.sym_name.data]).run()
        return self.module

    def _declare(self, fn: func.FuncOp) -> dict[str, int]:
        ft = fn.function_type
        args = [llvm_type(t) for t in ft.inputs]
        uses_ids = any(isinstance(o, (gpu.ThreadIdOp, gpu.BlockIdOp)) for o in fn.walk())
        extra = {}
        if uses_ids:
            extra = {"thread": len(args), "block": len(args) + 1}
            args += [I64, I64]
        outs = [llvm_type(t) for t in ft.outputs]
        ret = ir.VoidType() if not outs else outs[0] if len(outs) == 1 else ir.LiteralStructType(outs)
        llfn = ir.Function(self.module, ir.FunctionType(ret, args), name=fn.sym_name.data)
        private = fn.sym_visibility is not None and fn.sym_visibility.data == "private"
        if private or uses_ids:
            llfn.linkage = "internal"
        if uses_ids:
            llfn.attributes.add("alwaysinline")
        for arg, t in zip(llfn.args, ft.inputs):
            if isinstance(t, llvm.LLVMPointerType) and self.options.noalias:
                arg.add_attribute("noalias")
        self.functions[fn.sym_name.data] = llfn
        return extra

    def _global(self, op: llvm.GlobalOp) -> None:
        ty = llvm_type(op.global_type)
        g = ir.GlobalVariable(self.module, ty, op.sym_name.data)
        g.linkage = "private"
        g.global_constant = True
        g.align = 64
        value = op.value
        elem_t = value.get_element_type()
        elem_ty = llvm_type(elem_t)
        elems = [_float_constant(elem_ty, x, elem_t) if _is_float(elem_t) else ir.Constant(elem_ty, int(x))
                 for x in value.get_values()]
        g.initializer = ir.Constant(ty, elems)
        self.globals[op.sym_name.data] = g


def translate_module(module: ModuleOp, name: str = "kernel", options: TranslateOptions | None = None,
                     triple: str | None = None) -> ir.Module:
    return LlvmTranslator(name, options, triple).translate(module)


__all__ = ["LlvmTranslator", "TranslateOptions", "TranslationError", "llvm_type", "translate_module"]
