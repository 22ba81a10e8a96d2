"""A small typed builder over which float approximations and conversions are written once.

Each math approximation (`approx_*.py`) and each narrow-float conversion (`float_conversions.py`) is a
plain function `f(b: FloatBuilder, x: Val, ...) -> Val`. The same function either emits kernel IR
(backend `XdslBackend`, used by the `expand-float-ops` and `lower-narrow-floats` passes) or computes
on numpy arrays (backend `NumpyBackend`, used by the accuracy and exactness tests), so the tests check
the very code the passes emit.

The vocabulary is exactly what the passes may leave behind: arith ops (float and integer arithmetic,
compares, select, bitcast, extf/truncf between f32 and f64, extui/trunci) and the primitive math ops
`math.absf`, `math.sqrt`, `math.floor`, `math.ceil`, `math.trunc`, `math.roundeven`, `math.round`,
`math.copysign` (all map to vectorizable LLVM intrinsics). No fused multiply-add is used: every
product and sum is rounded on its own, which the numpy backend reproduces bit for bit and which
needs no FMA hardware. Integer <-> float conversions of small integral values use the exact
"magic number" trick instead of fptosi/sitofp, so no op can produce LLVM poison.

`Val` overloads `+ - * /` (float or integer ops by type), `& | ^ ~` (bitwise, also on i1 masks) and
`<<`; comparisons are methods (`lt`, `le`, `gt`, `ge`, `eq`, `ne`: ordered, except `ne` which is
true for NaN as in C; integers compare signed, `ult`/`ugt` unsigned). Python numbers mix freely and
become constants of the other operand's type, rounded to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

# -- element types --------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format (IEEE-like, or one of the ML formats with fewer specials).

    `nonfinite`: 'ieee' (all-ones exponent encodes inf and NaN), 'nan_only' (no inf; NaN is the
    pattern given by `nan_encoding`), 'finite_only' (neither). `nan_encoding`: 'ieee' (all-ones
    exponent, non-zero mantissa), 'all_ones' (all-ones exponent and mantissa), 'negative_zero' (the
    sign bit alone; the format has no -0).
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    nonfinite: str = "ieee"
    nan_encoding: str = "ieee"
    has_sign: bool = True
    has_zero: bool = True

    @property
    def width(self) -> int:
        return int(self.has_sign) + self.exponent_bits + self.mantissa_bits

    @property
    def int_type(self) -> IntType:
        return IntType(self.width)

    @property
    def max_exponent_field(self) -> int:
        return (1 << self.exponent_bits) - 1

    @property
    def min_normal_exponent(self) -> int:
        """Unbiased exponent of the smallest normal number."""
        return 1 - self.bias if self.has_zero else -self.bias

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class IntType:
    """A signless integer of `width` bits (i1 is the mask type of compares and selects)."""

    width: int

    def __str__(self) -> str:
        return f"i{self.width}"


ElemType = FloatFormat | IntType

F32 = FloatFormat("f32", 8, 23, 127)
F64 = FloatFormat("f64", 11, 52, 1023)
BOOL = IntType(1)
I32 = IntType(32)
I64 = IntType(64)

# -- backends -------------------------------------------------------------------------------------

#: The op names a backend must implement (MLIR names; `arith.cmpf`/`arith.cmpi` take a predicate).
OP_NAMES = frozenset({
    "arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.negf",
    "arith.minimumf", "arith.maximumf", "arith.cmpf", "arith.select", "arith.bitcast",
    "arith.extf", "arith.truncf",
    "arith.addi", "arith.subi", "arith.muli", "arith.andi", "arith.ori", "arith.xori",
    "arith.shli", "arith.shrui", "arith.shrsi", "arith.cmpi", "arith.extui", "arith.trunci",
    "math.absf", "math.sqrt", "math.floor", "math.ceil", "math.trunc", "math.roundeven",
    "math.round", "math.copysign", "math.fma",
})  # fmt: skip


class Backend(Protocol):
    """Creates constants and ops on raw values (numpy arrays, or SSA values before an op)."""

    def constant(self, ty: ElemType, value: float | int) -> Any: ...

    def op(self, name: str, result: ElemType, operands: Sequence[Any], types: Sequence[ElemType],
           predicate: str | None = None) -> Any: ...

    def fast_unless(self, slow_lanes: Any, fast: Callable[[], Any], slow: Callable[[], Any]) -> Any:
        """`FloatBuilder.fast_unless` on raw values."""
        ...


# -- values ---------------------------------------------------------------------------------------


class Val:
    """A typed value of a `FloatBuilder`."""

    __slots__ = ("b", "raw", "ty")
    __hash__ = None  # comparisons are methods; a Val is never a dict key

    def __init__(self, b: FloatBuilder, raw: Any, ty: ElemType):
        self.b, self.raw, self.ty = b, raw, ty

    @property
    def is_float(self) -> bool:
        return isinstance(self.ty, FloatFormat)

    def like(self, other: Val | float | int) -> Val:
        """`other` as a value of this value's type (Python numbers become constants)."""
        if isinstance(other, Val):
            if other.ty != self.ty:
                raise TypeError(f"operand types differ: {self.ty} and {other.ty}")
            return other
        return self.b.const(self.ty, other)

    def _arith(self, fop: str, iop: str, other: Val | float | int, swap: bool = False) -> Val:
        lhs, rhs = (self.like(other), self) if swap else (self, self.like(other))
        return self.b.op(fop if self.is_float else iop, self.ty, lhs, rhs)

    def __add__(self, o):
        return self._arith("arith.addf", "arith.addi", o)

    def __radd__(self, o):
        return self._arith("arith.addf", "arith.addi", o, swap=True)

    def __sub__(self, o):
        return self._arith("arith.subf", "arith.subi", o)

    def __rsub__(self, o):
        return self._arith("arith.subf", "arith.subi", o, swap=True)

    def __mul__(self, o):
        return self._arith("arith.mulf", "arith.muli", o)

    def __rmul__(self, o):
        return self._arith("arith.mulf", "arith.muli", o, swap=True)

    def __truediv__(self, o):
        return self._arith("arith.divf", "", o)

    def __rtruediv__(self, o):
        return self._arith("arith.divf", "", o, swap=True)

    def __neg__(self):
        return self.b.op("arith.negf", self.ty, self) if self.is_float else 0 - self

    def __and__(self, o):
        return self.b.op("arith.andi", self.ty, self, self.like(o))

    __rand__ = __and__

    def __or__(self, o):
        return self.b.op("arith.ori", self.ty, self, self.like(o))

    __ror__ = __or__

    def __xor__(self, o):
        return self.b.op("arith.xori", self.ty, self, self.like(o))

    __rxor__ = __xor__

    def __invert__(self):
        return self ^ -1 if self.ty != BOOL else self ^ 1

    def __lshift__(self, n: int | Val):
        return self.b.op("arith.shli", self.ty, self, self.like(n))

    def shru(self, n: int | Val) -> Val:
        """Logical (unsigned) shift right."""
        return self.b.op("arith.shrui", self.ty, self, self.like(n))

    def shrs(self, n: int | Val) -> Val:
        """Arithmetic (signed) shift right."""
        return self.b.op("arith.shrsi", self.ty, self, self.like(n))

    def _cmp(self, fpred: str, ipred: str, other) -> Val:
        return self.b.op("arith.cmpf" if self.is_float else "arith.cmpi", BOOL, self, self.like(other),
                         predicate=fpred if self.is_float else ipred)

    def lt(self, o):
        return self._cmp("olt", "slt", o)

    def le(self, o):
        return self._cmp("ole", "sle", o)

    def gt(self, o):
        return self._cmp("ogt", "sgt", o)

    def ge(self, o):
        return self._cmp("oge", "sge", o)

    def eq(self, o):
        return self._cmp("oeq", "eq", o)

    def ne(self, o):
        """Not equal; for floats unordered (true if either is NaN), like C's `!=`."""
        return self._cmp("une", "ne", o)

    def ult(self, o):
        return self._cmp("", "ult", o)

    def ugt(self, o):
        return self._cmp("", "ugt", o)

    def isnan(self) -> Val:
        return self.b.op("arith.cmpf", BOOL, self, self, predicate="uno")

    def __repr__(self) -> str:
        return f"Val({self.ty}, {self.raw!r})"


class FloatBuilder:
    """Typed front end over a `Backend`: checks types, rounds constants, names the primitive ops."""

    def __init__(self, backend: Backend):
        self.backend = backend

    def wrap(self, raw: Any, ty: ElemType) -> Val:
        return Val(self, raw, ty)

    def const(self, ty: ElemType, value: float | int) -> Val:
        if isinstance(ty, IntType):
            value = int(value)
            value = value & ((1 << ty.width) - 1)
            if ty.width > 1 and value >= 1 << (ty.width - 1):
                value -= 1 << ty.width  # canonical signed value
        elif ty == F32:
            with np.errstate(over="ignore"):
                value = float(np.float32(value))  # f32 literals denote their rounded value
        else:
            value = float(value)
        return Val(self, self.backend.constant(ty, value), ty)

    def op(self, name: str, result: ElemType, *operands: Val, predicate: str | None = None) -> Val:
        assert name in OP_NAMES, name
        raw = self.backend.op(name, result, [v.raw for v in operands], [v.ty for v in operands], predicate)
        return Val(self, raw, result)

    # -- float primitives (math dialect) ----------------------------------------------------------

    def abs(self, x: Val) -> Val:
        return self.op("math.absf", x.ty, x)

    def sqrt(self, x: Val) -> Val:
        return self.op("math.sqrt", x.ty, x)

    def floor(self, x: Val) -> Val:
        return self.op("math.floor", x.ty, x)

    def ceil(self, x: Val) -> Val:
        return self.op("math.ceil", x.ty, x)

    def trunc(self, x: Val) -> Val:
        return self.op("math.trunc", x.ty, x)

    def roundeven(self, x: Val) -> Val:
        return self.op("math.roundeven", x.ty, x)

    def round(self, x: Val) -> Val:
        """Round half away from zero."""
        return self.op("math.round", x.ty, x)

    def copysign(self, x: Val | float, sign: Val) -> Val:
        return self.op("math.copysign", sign.ty, sign.like(x), sign)

    def minimum(self, x: Val, y: Val | float) -> Val:
        """IEEE-2019 minimum: NaN if either is NaN, -0 < +0."""
        return self.op("arith.minimumf", x.ty, x, x.like(y))

    def maximum(self, x: Val, y: Val | float) -> Val:
        return self.op("arith.maximumf", x.ty, x, x.like(y))

    # -- control flow -----------------------------------------------------------------------------

    def fast_unless(self, slow_lanes: Val, fast: Callable[[], Val], slow: Callable[[], Val]) -> Val:
        """`fast()`, except where the i1 mask `slow_lanes` is set: `slow()` there. `slow` must be
        right on every lane and `fast` on the lanes outside the mask, where the two must agree bit
        for bit, so that which lanes share a vector never changes a result. Vector code (the xDSL
        backend on vectors) branches once per vector, taking `slow` for the whole vector when any
        lane needs it; the numpy backend takes each lane's own path, so the tests see both; scalar
        code computes `slow` alone (a branch per element would not pay, and the GPU's lanes would
        diverge)."""
        if slow_lanes.ty != BOOL:
            raise TypeError(f"fast_unless mask must be i1, not {slow_lanes.ty}")
        types: list[ElemType] = []

        def raw(fn: Callable[[], Val]) -> Callable[[], Any]:
            def build() -> Any:
                v = fn()
                types.append(v.ty)
                return v.raw
            return build

        out = self.backend.fast_unless(slow_lanes.raw, raw(fast), raw(slow))
        if len(set(types)) != 1:
            raise TypeError(f"fast_unless: the fast and slow values differ in type ({types})")
        return Val(self, out, types[0])

    # -- selection, conversion --------------------------------------------------------------------

    def select(self, cond: Val, a: Val | float | int, c: Val | float | int) -> Val:
        if cond.ty != BOOL:
            raise TypeError(f"select condition must be i1, not {cond.ty}")
        if not isinstance(a, Val):
            if not isinstance(c, Val):
                raise TypeError("select needs at least one typed operand")
            a = c.like(a)
        return self.op("arith.select", a.ty, cond, a, a.like(c))

    def bitcast(self, x: Val, ty: ElemType) -> Val:
        width = x.ty.width
        if ty.width != width:
            raise TypeError(f"bitcast between {x.ty} and {ty} changes the width")
        return self.op("arith.bitcast", ty, x)

    def bits(self, x: Val) -> Val:
        """The bit pattern of a float as the same-width integer."""
        return self.bitcast(x, x.ty.int_type)

    def from_bits(self, i: Val, fmt: FloatFormat) -> Val:
        return self.bitcast(i, fmt)

    def extf(self, x: Val, fmt: FloatFormat) -> Val:
        return self.op("arith.extf", fmt, x)

    def truncf(self, x: Val, fmt: FloatFormat) -> Val:
        return self.op("arith.truncf", fmt, x)

    def extui(self, i: Val, ty: IntType) -> Val:
        return self.op("arith.extui", ty, i) if ty.width > i.ty.width else i

    def trunci(self, i: Val, ty: IntType) -> Val:
        return self.op("arith.trunci", ty, i) if ty.width < i.ty.width else i

    def resize_int(self, i: Val, ty: IntType) -> Val:
        """Zero-extend or truncate to `ty`."""
        return self.extui(i, ty) if ty.width >= i.ty.width else self.trunci(i, ty)

    # -- helpers shared by the approximations -----------------------------------------------------

    def and_(self, *masks: Val) -> Val:
        out = masks[0]
        for m in masks[1:]:
            out = out & m
        return out

    def or_(self, *masks: Val) -> Val:
        out = masks[0]
        for m in masks[1:]:
            out = out | m
        return out

    def isinf(self, x: Val) -> Val:
        return self.abs(x).eq(float("inf"))

    def isfinite(self, x: Val) -> Val:
        return self.abs(x).lt(float("inf"))

    def signbit(self, x: Val) -> Val:
        return self.bits(x).lt(0)

    def clamp(self, x: Val, lo: float, hi: float) -> Val:
        """`x` limited to [lo, hi]; NaN stays NaN."""
        return self.minimum(self.maximum(x, lo), hi)

    def horner(self, x: Val, coeffs: Sequence[float]) -> Val:
        """c0*x^n + c1*x^(n-1) + ... + cn (highest degree first), one rounding per mul and add."""
        acc = x.like(coeffs[0])
        for c in coeffs[1:]:
            acc = acc * x + c
        return acc

    def fma(self, a: Val, b: Val, c: Val | float) -> Val:
        """a*b + c with one rounding (llvm.fma: one instruction where the target has FMA)."""
        return self.op("math.fma", a.ty, a, b, a.like(c))

    def horner_fma(self, x: Val, coeffs: Sequence[float]) -> Val:
        """`horner` with each step one fused multiply-add (what LLVM contracts it to on FMA targets)."""
        acc = x.like(coeffs[0])
        for c in coeffs[1:]:
            acc = self.fma(acc, x, c)
        return acc

    def horner_monic(self, x: Val, coeffs: Sequence[float]) -> Val:
        """x^(n+1) + c0*x^n + ... + cn (Cephes' p1evl)."""
        acc = x + coeffs[0]
        for c in coeffs[1:]:
            acc = acc * x + c
        return acc

    def magic(self, fmt: FloatFormat) -> float:
        """1.5 * 2^mantissa_bits: adding it puts an integer of magnitude < 2^(m-1) in the low bits."""
        return 1.5 * 2.0**fmt.mantissa_bits

    def float_to_int(self, x: Val) -> Val:
        """An integral-valued float with |x| < 2^(mantissa_bits-1) as the same-width integer (exact)."""
        m = self.magic(x.ty)
        return self.bits(x + m) - self.bits(x.like(m))

    def int_to_float(self, i: Val, fmt: FloatFormat) -> Val:
        """An integer with |i| < 2^(mantissa_bits-1) as a float of `fmt` (exact)."""
        m = self.const(fmt, self.magic(fmt))
        return self.from_bits(i + self.bits(m), fmt) - m

    def pow2(self, k: Val) -> Val:
        """2^k for an integral-valued float k in the normal exponent range."""
        fmt = k.ty
        return self.from_bits((self.float_to_int(k) + fmt.bias) << fmt.mantissa_bits, fmt)

    def ldexp(self, y: Val, n: Val) -> Val:
        """y * 2^n for an integral-valued float n with |n| <= 2*(bias-1), rounded once.

        The scale is applied in two halves so neither power of two overflows or underflows; the
        first product is exact for |y| in [0.5, 2], so a subnormal result is rounded only once."""
        n1 = self.floor(n * 0.5)
        return y * self.pow2(n1) * self.pow2(n - n1)

    def frexp(self, x: Val) -> tuple[Val, Val]:
        """(m, e) with x = m * 2^e, m in [sqrt(1/2), sqrt(2)), e an integral float; for positive
        finite x, subnormals included (0, inf and NaN give unspecified values)."""
        fmt = x.ty
        subnormal = x.lt(2.0**fmt.min_normal_exponent)
        scaled = self.select(subnormal, x * 2.0 ** (fmt.mantissa_bits + 1), x)
        bits = self.bits(scaled)
        mbits = fmt.mantissa_bits
        e = (bits.shru(mbits) & fmt.max_exponent_field) - fmt.bias
        m = self.from_bits((bits & ((1 << mbits) - 1)) | (fmt.bias << mbits), fmt)  # in [1, 2)
        big = m.gt(2.0**0.5)
        m = self.select(big, m * 0.5, m)
        e = self.int_to_float(e, fmt) + self.select(big, x.like(1.0), 0.0)
        e = e - self.select(subnormal, x.like(float(mbits + 1)), 0.0)
        return m, e

    def two_sum(self, a: Val, c: Val) -> tuple[Val, Val]:
        """(s, err) with s = fl(a + c) and s + err = a + c exactly (Knuth)."""
        s = a + c
        cv = s - a
        return s, (a - (s - cv)) + (c - cv)

    def split(self, a: Val) -> tuple[Val, Val]:
        """Veltkamp split: a = hi + lo with hi holding the top half of the significand."""
        factor = 2.0 ** ((a.ty.mantissa_bits + 2) // 2) + 1.0
        t = a * factor
        hi = t - (t - a)
        return hi, a - hi

    def two_prod(self, a: Val, c: Val) -> tuple[Val, Val]:
        """(p, err) with p = fl(a * c) and p + err = a * c exactly (Dekker, no FMA); needs
        |a|, |c| well below the overflow threshold / 2^27."""
        p = a * c
        ah, al = self.split(a)
        ch, cl = self.split(c)
        return p, ((ah * ch - p) + ah * cl + al * ch) + al * cl
