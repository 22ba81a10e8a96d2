"""The numpy backend of `FloatBuilder`: runs an approximation or conversion on arrays, op by op,
with the IEEE semantics the LLVM translator gives the same ops (no fast-math, no FMA contraction,
subnormals kept). Used by the accuracy and exactness tests, so what they measure is what the
compiled kernels compute.

Integers live in the smallest signed numpy container of their width (i4 in an int8, sign-extended);
floats in their numpy / ml_dtypes dtype. A shift by an amount outside [0, width), which LLVM turns
into poison, raises `PoisonError`, so a test catches code that relies on one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np

from hlocc.codegen.math.float_builder import ElemType, FloatBuilder, FloatFormat, IntType, Val


class PoisonError(ArithmeticError):
    """An op whose LLVM lowering would produce poison for some input."""


_CONTAINERS = {8: np.int8, 16: np.int16, 32: np.int32, 64: np.int64}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

#: numpy dtypes of the float formats (ml_dtypes for the narrow ones), by MLIR type name.
NUMPY_FLOAT_DTYPES: dict[str, np.dtype] = {name: np.dtype(t) for name, t in {
    "f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
    "f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2,
    "f8E4M3FNUZ": ml_dtypes.float8_e4m3fnuz, "f8E5M2FNUZ": ml_dtypes.float8_e5m2fnuz,
    "f8E4M3B11FNUZ": ml_dtypes.float8_e4m3b11fnuz, "f8E4M3": ml_dtypes.float8_e4m3,
    "f8E3M4": ml_dtypes.float8_e3m4, "f8E8M0FNU": ml_dtypes.float8_e8m0fnu,
    "f4E2M1FN": ml_dtypes.float4_e2m1fn, "f6E2M3FN": ml_dtypes.float6_e2m3fn,
    "f6E3M2FN": ml_dtypes.float6_e3m2fn,
}.items()}  # fmt: skip


def numpy_dtype(ty: ElemType) -> np.dtype:
    """The array dtype holding values of `ty`."""
    if isinstance(ty, FloatFormat):
        return NUMPY_FLOAT_DTYPES[ty.name]
    if ty.width == 1:
        return np.dtype(np.bool_)
    return np.dtype(_CONTAINERS[next(w for w in (8, 16, 32, 64) if w >= ty.width)])


def _wrap(a: np.ndarray, width: int) -> np.ndarray:
    """Two's-complement wrap of a container array to `width` bits, sign-extended."""
    shift = a.dtype.itemsize * 8 - width
    return a if shift == 0 else (a << shift) >> shift


def _unsigned(a: np.ndarray, width: int) -> np.ndarray:
    """The low `width` bits of `a` as a non-negative unsigned array."""
    u = a.view(_UNSIGNED[a.dtype.itemsize])
    return u if width == a.dtype.itemsize * 8 else u & u.dtype.type((1 << width) - 1)


def _minmax(a: np.ndarray, b: np.ndarray, take_min: bool) -> np.ndarray:
    """IEEE-2019 minimum / maximum: NaN-propagating, -0 < +0."""
    first = (a < b) if take_min else (a > b)
    tie_picks_a = np.signbit(a) if take_min else ~np.signbit(a)
    out = np.where(first | ((a == b) & tie_picks_a), a, b)
    return np.where(np.isnan(a) | np.isnan(b), a + b, out)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.copysign(np.ones_like(x), x), t)


_CMPF: dict[str, Callable] = {
    "oeq": np.equal, "ogt": np.greater, "oge": np.greater_equal, "olt": np.less, "ole": np.less_equal,
    "one": lambda a, b: (a < b) | (a > b), "ord": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "ueq": lambda a, b: ~((a < b) | (a > b)), "ugt": lambda a, b: ~(a <= b), "uge": lambda a, b: ~(a < b),
    "ult": lambda a, b: ~(a >= b), "ule": lambda a, b: ~(a > b), "une": np.not_equal,
    "uno": lambda a, b: np.isnan(a) | np.isnan(b),
}  # fmt: skip

def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b + c rounded once. f32: the f64 product is exact, so only the sum can round twice (the f64
    sum, then f32), which is off by an ulp in rare halfway cases; f64 has no exact numpy form."""
    if a.dtype != np.float32:
        raise NotImplementedError("math.fma is emulated for f32 only")
    with np.errstate(all="ignore"):
        return (a.astype(np.float64) * b + c).astype(np.float32)


_CMPI: dict[str, Callable] = {
    "eq": np.equal, "ne": np.not_equal, "slt": np.less, "sle": np.less_equal, "sgt": np.greater,
    "sge": np.greater_equal, "ult": np.less, "ule": np.less_equal, "ugt": np.greater, "uge": np.greater_equal,
}  # fmt: skip

_FLOAT_OPS: dict[str, Callable] = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
    "arith.negf": np.negative, "math.absf": np.abs, "math.sqrt": np.sqrt, "math.floor": np.floor,
    "math.ceil": np.ceil, "math.trunc": np.trunc, "math.roundeven": np.rint, "math.round": _round_half_away,
    "math.copysign": np.copysign, "math.fma": lambda a, b, c: _fma(a, b, c),
    "arith.minimumf": lambda a, b: _minmax(a, b, True), "arith.maximumf": lambda a, b: _minmax(a, b, False),
}  # fmt: skip

_INT_OPS: dict[str, Callable] = {
    "arith.addi": np.add, "arith.subi": np.subtract, "arith.muli": np.multiply,
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
}  # fmt: skip


class NumpyBackend:
    """Evaluates builder ops elementwise on numpy arrays."""

    def constant(self, ty: ElemType, value: float | int) -> np.ndarray:
        return np.asarray(value, dtype=numpy_dtype(ty))

    def op(self, name: str, result: ElemType, operands: Sequence[np.ndarray], types: Sequence[ElemType],
           predicate: str | None = None) -> np.ndarray:
        ops = [np.asarray(o) for o in operands]
        with np.errstate(all="ignore"):
            return np.asarray(self._op(name, result, ops, types, predicate))

    def fast_unless(self, slow_lanes: np.ndarray, fast: Callable[[], np.ndarray],
                    slow: Callable[[], np.ndarray]) -> np.ndarray:
        """Each lane's own path (`FloatBuilder.fast_unless`): both computed, selected by lane."""
        f, s = fast(), slow()
        return np.asarray(np.where(slow_lanes, s, f))

    def _op(self, name, result, ops, types, predicate):
        if name in _FLOAT_OPS:
            return _FLOAT_OPS[name](*ops).astype(ops[0].dtype, copy=False)
        if name == "arith.cmpf":
            return _CMPF[predicate](ops[0], ops[1])
        if name == "arith.select":
            return np.where(ops[0], ops[1], ops[2])
        if name == "arith.bitcast":
            return _bitcast(ops[0], types[0], result)
        if name in ("arith.extf", "arith.truncf"):
            return ops[0].astype(numpy_dtype(result))
        width = types[0].width
        if name == "arith.cmpi":
            a, b = ops
            if predicate[0] == "u":
                a, b = _unsigned(a, width), _unsigned(b, width)
            return _CMPI[predicate](a, b)
        if name == "arith.extui":
            return _unsigned(ops[0], width).astype(numpy_dtype(result))
        if name == "arith.trunci":
            return _wrap(ops[0].astype(numpy_dtype(result)), result.width)
        a, b = ops
        if width == 1:
            return _INT_OPS[name](a, b)
        if name in ("arith.shli", "arith.shrui", "arith.shrsi"):
            if np.any((b < 0) | (b >= width)):
                raise PoisonError(f"{name} by an amount outside [0, {width})")
            if name == "arith.shli":
                return _wrap(a << b.astype(a.dtype), width)
            if name == "arith.shrsi":
                return a >> b.astype(a.dtype)
            u = _unsigned(a, width)
            return (u >> b.astype(u.dtype)).view(a.dtype)
        return _wrap(_INT_OPS[name](a, b.astype(a.dtype)), width)


def _bitcast(a: np.ndarray, source: ElemType, result: ElemType) -> np.ndarray:
    target = numpy_dtype(result)
    if isinstance(result, IntType) and result.width < 8:  # f4/f6 -> i4/i6: low bits, sign-extended
        return _wrap(a.view(np.uint8).astype(np.int8), result.width)
    if isinstance(source, IntType) and source.width < 8:  # i4/i6 -> f4/f6
        return _unsigned(a, source.width).astype(np.uint8).view(target)
    return a.view(target)


def numpy_builder() -> FloatBuilder:
    return FloatBuilder(NumpyBackend())


def evaluate(fn: Callable[..., Val], fmt: FloatFormat, *args: np.ndarray) -> np.ndarray:
    """Run `fn(b, *vals)` on arrays converted to format `fmt`; returns the result array."""
    b = numpy_builder()
    vals = [b.wrap(np.asarray(a, dtype=numpy_dtype(fmt)), fmt) for a in args]
    return np.asarray(fn(b, *vals).raw)
