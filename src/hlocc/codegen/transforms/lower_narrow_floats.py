"""`lower-narrow-floats`: no float arithmetic on bf16, f16 or the f8/f6/f4 formats remains.

1. Every arith/math float op (and xla.remf) on a narrow type is computed in f32: operands extf'd,
   the op cloned on f32 (same shape), the result truncf'd; cmpf compares the extf'd operands;
   sitofp/uitofp to a narrow type go through f32 (f64 for integers wider than 24 bits, so the
   value is exact before the one rounding); fptosi/fptoui from a narrow type extf first.
   Promotion of add/sub/mul/div/sqrt is exact (f32 has more than 2p+2 bits for every narrow p).
   A promoted bf16 op that expand-float-ops has a bf16 form of (tanh) is tagged `xla.bf16_rounded`.
2. Every arith.extf / arith.truncf from or to a narrow type becomes integer bit manipulation on
   the same-width integer (`float_conversions`: exact, round to nearest even, ml_dtypes'
   semantics for NaN, inf, overflow, subnormals and -0); an extf of a constant (or of its
   broadcast) folds to an f32 constant. To or from f64 the conversion is done directly (no double
   rounding). A conversion of a vector is done on whole vectors (its compares, selects and integer
   casts are the `xla` stand-ins of `dialect.VECTOR_FORMS`), not lane by lane. An f32 -> bf16
   truncation of a NaN-clean value (`nan_clean_values`: one whose NaNs, if any, have a zero low
   half, e.g. any arithmetic on widened bf16 values) leaves out the canonical-NaN select, which
   was 3 of the 7 vector instructions of each rounding in a bf16 elementwise chain.
3. Remaining narrow float constants become an integer constant and an arith.bitcast.

Afterwards narrow float values only appear as arith.bitcast operands/results, block arguments and
in data movement (tensor/vector loads, stores, selects), which the translator can treat as
same-width integers. Formats: bf16, f16, f8E5M2, f8E4M3, f8E3M4, f8E4M3FN, f8E4M3FNUZ,
f8E5M2FNUZ, f8E4M3B11FNUZ, f8E8M0FNU, f4E2M1FN, f6E2M3FN, f6E3M2FN (every narrow float type of
xDSL 0.74 except tf32, which no HLO type uses).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, builtin, vector
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, IntegerType, ModuleOp, VectorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from hlocc.codegen import ir as xla
from hlocc.codegen.ir import RemFOp
from hlocc.codegen.math.float_builder import F32, F64, FloatFormat
from hlocc.codegen.math.float_builder_numpy import numpy_dtype
from hlocc.codegen.math.float_builder_xdsl import expand_elementwise, format_of
from hlocc.codegen.math.float_conversions import NARROW_FORMATS, extend_to_f32, truncate
from hlocc.codegen.transforms.expand_float_ops import BF16_APPROXIMATIONS, BF16_ROUNDED
from hlocc.codegen.transforms.util import walk_ops


def _elem(ty: Attribute) -> Attribute:
    return ty.get_element_type() if isinstance(ty, VectorType) else ty


@functools.lru_cache(maxsize=256)
def _narrow(ty: Attribute) -> FloatFormat | None:
    """The narrow float format of a type's elements, or None (per type once: the name is printed)."""
    return NARROW_FORMATS.get(str(_elem(ty)))


def is_narrow_conversion(op: Operation) -> bool:
    """Whether `op` is a conversion this pass expands into integer bit manipulation (20-40 ops)."""
    return isinstance(op, arith.ExtFOp | arith.TruncFOp) and (
        _narrow(op.input.type) is not None or _narrow(op.result.type) is not None)


def _has_narrow_floats(module: ModuleOp) -> bool:
    """Whether any op reads or makes a narrow float: else every rewrite below is a no-op, and one
    walk replaces the patterns' four. Each type object is asked about once (the IR shares them;
    `_narrow`'s cache hashes a type by its parameters, which per value was the whole pass)."""
    seen: set[int] = set()  # the types are alive in the module during the walk: their ids are theirs
    for o in walk_ops(module):
        for v in (*o.operands, *o.results):
            t = v.type
            if id(t) not in seen:
                seen.add(id(t))
                if _narrow(t):
                    return True
    return False


def _with_elem(ty: Attribute, elem: Attribute) -> Attribute:
    return VectorType(elem, ty.get_shape()) if isinstance(ty, VectorType) else elem


def _is_float_compute(op: Operation) -> bool:
    """Ops computed in f32 when their operands or results are narrow floats."""
    if isinstance(op, RemFOp) or op.name.startswith("math."):
        return True
    return op.name in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf", "arith.minimumf",
                       "arith.maximumf", "arith.minnumf", "arith.maxnumf")


_INT_TO_FLOAT = (arith.SIToFPOp, arith.UIToFPOp, xla.SIToFPOp, xla.UIToFPOp)
_FLOAT_TO_INT = (arith.FPToSIOp, arith.FPToUIOp, xla.FPToSIOp, xla.FPToUIOp)


class PromoteToF32(RewritePattern):
    """A float op on a narrow type computed on f32 (operands extf'd, result truncf'd)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, arith.CmpfOp | xla.CmpfOp) and _narrow(op.lhs.type):
            lhs, rhs = (self._ext(v, rewriter) for v in (op.lhs, op.rhs))
            rewriter.replace(op, type(op).create(operands=[lhs, rhs], result_types=[op.result.type],
                                                 properties=dict(op.properties)))
        elif isinstance(op, _INT_TO_FLOAT) and _narrow(op.result.type):
            wide = builtin.f32 if _elem(op.input.type).width.data <= 24 else builtin.f64
            conv = type(op)(op.input, _with_elem(op.result.type, wide))
            rewriter.insert(conv)
            rewriter.replace(op, arith.TruncFOp(conv.result, op.result.type))
        elif isinstance(op, _FLOAT_TO_INT) and _narrow(op.input.type):
            rewriter.replace(op, type(op)(self._ext(op.input, rewriter), op.result.type))
        elif _is_float_compute(op) and len(op.results) == 1 and _narrow(op.results[0].type):
            if any(_elem(v.type) != _elem(op.results[0].type) for v in op.operands):
                return  # mixed-type ops (fpowi, ...) are not float-only compute
            f32_type = _with_elem(op.results[0].type, builtin.f32)
            operands = [self._ext(v, rewriter) for v in op.operands]
            attributes = dict(op.attributes)
            if str(_elem(op.results[0].type)) == "bf16" and op.name in BF16_APPROXIMATIONS:
                attributes[BF16_ROUNDED] = builtin.UnitAttr()  # expand-float-ops may take a cheaper form
            new = type(op).create(operands=operands, result_types=[f32_type], properties=dict(op.properties),
                                  attributes=attributes)
            rewriter.insert(new)
            rewriter.replace(op, arith.TruncFOp(new.results[0], op.results[0].type))

    @staticmethod
    def _ext(v: SSAValue, rewriter: PatternRewriter) -> SSAValue:
        ext = arith.ExtFOp(v, _with_elem(v.type, builtin.f32))
        rewriter.insert(ext)
        return ext.result


#: Narrow formats whose widening to f32 gives NaNs with a zero low half (bf16 is the top half of an
#: f32; the 8-bit and smaller formats widen NaN to the canonical 0x7FC00000). Not f16: its payload
#: lands in bits 13-22.
_NAN_CLEAN_SOURCES = frozenset(name for name, fmt in NARROW_FORMATS.items() if name == "bf16" or fmt.width <= 8)

#: Ops whose NaN result is, under LLVM's NaN semantics, an operand NaN (quieted or not, sign
#: possibly changed) or the preferred NaN 0x7FC00000: a NaN-clean result from NaN-clean operands.
#: math.tanh is here because its expansion (`approx_special.tanh`) reaches a NaN only through such
#: ops (clamp, polynomial, divide; its selects pick that result or x itself for a NaN x).
_NAN_PROPAGATING = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf", "arith.maximumf", "arith.minimumf",
    "arith.maxnumf", "arith.minnumf", "math.absf", "math.sqrt", "math.fma", "math.copysign", "math.floor",
    "math.ceil", "math.trunc", "math.round", "math.roundeven", "math.tanh",
})


def _is_nan_clean_constant(op: arith.ConstantOp) -> bool:
    attr = op.value
    if isinstance(attr, FloatAttr):
        return not np.isnan(attr.value.data)
    return isinstance(attr, DenseIntOrFPElementsAttr) and not np.isnan(np.asarray(attr.get_values(), float)).any()


def nan_clean_values(module: ModuleOp) -> set[SSAValue]:
    """f32 values that are NaN-clean: if NaN, their low 16 bits are zero (so rounding them to bf16
    by the integer sequence keeps them NaN). One forward walk: definitions precede uses."""
    clean: set[SSAValue] = set()
    for op in module.walk():
        if isinstance(op, arith.ExtFOp):
            ok = str(_elem(op.input.type)) in _NAN_CLEAN_SOURCES
        elif isinstance(op, arith.ConstantOp):
            ok = _is_nan_clean_constant(op)
        elif isinstance(op, vector.BroadcastOp):
            ok = op.source in clean
        elif isinstance(op, arith.SelectOp | xla.SelectOp):
            ok = all(v in clean for v in op.operands[1:])
        elif op.name in _NAN_PROPAGATING:
            ok = all(v in clean for v in op.operands)
        else:
            ok = False
        if ok:
            clean.update(op.results)
    return clean


def _narrow_constant(value: SSAValue) -> arith.ConstantOp | None:
    """The constant op `value` is, directly or broadcast to a vector (vectorize-elementwise's splat)."""
    owner = value.owner
    if isinstance(owner, vector.BroadcastOp):
        owner = owner.source.owner
    return owner if isinstance(owner, arith.ConstantOp) else None


def _fold_narrow_constant(op: arith.ConstantOp, result_type: Attribute) -> arith.ConstantOp | None:
    """extf(constant) as a constant of `result_type` (f32/f64, scalar or splat)."""
    attr = op.value
    if isinstance(attr, FloatAttr):
        raw = attr.value.data
    elif isinstance(attr, DenseIntOrFPElementsAttr) and attr.is_splat():
        raw = attr.get_values()[0]
    else:
        return None
    value = float(np.asarray(raw).astype(numpy_dtype(_narrow(op.result.type))).astype(np.float64))
    if isinstance(result_type, VectorType):
        return arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(result_type, [value]))
    return arith.ConstantOp(FloatAttr(value, result_type))


@dataclass
class LowerNarrowConversions(RewritePattern):
    """arith.extf / arith.truncf from or to a narrow float as integer bit manipulation."""

    nan_clean: set[SSAValue]  # truncf inputs known NaN-clean (see `nan_clean_values`)

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.ExtFOp | arith.TruncFOp):
            return
        src, dst = _narrow(op.input.type), _narrow(op.result.type)
        if src is None and dst is None or src is not None and src.name == "f16" and dst is None and native_f16_extend():
            return
        wide = format_of(_elem(op.result.type))
        if src is not None and (const := _narrow_constant(op.input)) is not None and wide in (F32, F64):
            folded = _fold_narrow_constant(const, op.result.type)
            if folded is not None:
                rewriter.replace(op, folded)
                return

        clean = op.input in self.nan_clean

        def convert(b, x):
            if src is not None:
                x = extend_to_f32(b, x)
            if dst is not None:
                return truncate(b, x, dst, nan_clean=clean)
            return b.extf(x, F64) if wide == F64 else x

        in_fmt = src or format_of(_elem(op.input.type))
        value = expand_elementwise(rewriter, op, convert, [in_fmt], op.result.type)
        rewriter.replace(op, [], [value])


@functools.cache
def native_f16_extend() -> bool:
    """Whether an f16 -> f32/f64 extf stays for LLVM (`fpext half`): where the host has F16C, whose
    vcvtph2ps is exact (NVPTX's cvt.f32.f16 is too, and the SIMT simulation runs on the host). The
    bit manipulation was ~26 ops an extension, which made an f16 program's kernels compile 6x slower
    than f32's (seven reductions over [3, 33, 65] and [2, 5, 32, 48]: 22 s against 3.5 s)."""
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get("f16c", False))


class BitcastNarrowConstant(RewritePattern):
    """A narrow float constant as an integer constant and a bitcast (or erased when unused)."""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, arith.ConstantOp) or (fmt := _narrow(op.result.type)) is None:
            return
        if not op.result.uses:
            rewriter.erase(op)
            return
        int_type = _with_elem(op.result.type, IntegerType(fmt.width))
        attr = op.value
        data = [attr.value.data] if isinstance(attr, FloatAttr) else list(attr.get_values())
        bits = [_bits_of(v, fmt) for v in data]
        if isinstance(int_type, VectorType):
            new_attr = DenseIntOrFPElementsAttr.from_list(int_type, bits)
        else:
            new_attr = IntegerAttr(bits[0], int_type)
        const = arith.ConstantOp(new_attr)
        rewriter.insert(const)
        rewriter.replace(op, arith.BitcastOp(const.result, op.result.type))


def _bits_of(value: float, fmt: FloatFormat) -> int:
    """The bit pattern of `value` rounded to `fmt`, as a signed integer of the format's width."""
    raw = int(np.asarray(value).astype(numpy_dtype(fmt)).reshape(1).view(np.uint8 if fmt.width <= 8 else np.uint16)[0])
    raw &= (1 << fmt.width) - 1
    return raw - (1 << fmt.width) if raw >> (fmt.width - 1) else raw


@dataclass(frozen=True)
class LowerNarrowFloatsPass(ModulePass):
    """Computes narrow-float math in f32 and lowers narrow conversions to bit manipulation."""

    name = "lower-narrow-floats"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not _has_narrow_floats(op):
            return
        PatternRewriteWalker(PromoteToF32(), apply_recursively=False).rewrite_module(op)
        conversions = LowerNarrowConversions(nan_clean_values(op))
        for pattern in (conversions, BitcastNarrowConstant()):
            PatternRewriteWalker(pattern, apply_recursively=False).rewrite_module(op)
