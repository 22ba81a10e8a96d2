"""Element-type arithmetic for the reference evaluator: how values of each XLA type are held while
an op computes on them, how results are rounded or wrapped back into the type, and the numeric
algorithms that numpy lacks (XLA's convert, bitcast-convert, reduce-precision, total order, erf, a cube
root that does not depend on the host's libm).

The rules follow XLA's HloEvaluator (hlo_evaluator_typed_visitor.h, literal.cc) and XLA:CPU:
  - floats narrower than f32 (f16, bf16, f8*, f4*) compute in f32 and round once, to nearest
    even, back to their type; f64 values reach them through f32, as Eigen's half/bfloat16
    constructors and XLA's convert emitter do;
  - integers narrower than a byte (s1/s2/s4, u1/u2/u4, stored one per byte by ml_dtypes) compute in
    int8/uint8 and wrap to their width; every integer result wraps (two's complement).

Everything here is vectorized numpy on whole arrays; nothing loops over elements in Python.
This module touches no HLO: it works on numpy arrays and `PrimitiveType`s only.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.types import F32, F64, PRIMITIVE_TYPES, PrimitiveType, from_dtype

if sys.byteorder != "little":  # bitcast-convert splits values in little-endian memory order
    raise ImportError("hlocc's evaluator assumes a little-endian host")

_UINT_OF_BITS = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}

# -- types --------------------------------------------------------------------------------------


def ptype_of(array: np.ndarray) -> PrimitiveType:
    """The XLA type whose storage dtype `array` has."""
    return from_dtype(np.asarray(array).dtype)


def is_narrow_float(pt: PrimitiveType) -> bool:
    """A float type that computes in f32 (f16, bf16, the f8 and f4 types)."""
    return pt.is_float and pt.bits < 32


def is_sub_byte(pt: PrimitiveType) -> bool:
    return pt.is_integer and pt.bits < 8


def signed_twin(pt: PrimitiveType) -> PrimitiveType:
    """The signed integer type of `pt`'s width (s8 for u8, s4 for u4...)."""
    return PRIMITIVE_TYPES[f"s{pt.bits}"]


def unsigned_twin(pt: PrimitiveType) -> PrimitiveType:
    return PRIMITIVE_TYPES[f"u{pt.bits}"]


def component_type(pt: PrimitiveType) -> PrimitiveType:
    """The real type of a complex type's parts (f32 for c64, f64 for c128)."""
    return F32 if pt.name == "c64" else F64


def int_bounds(pt: PrimitiveType) -> tuple[int, int]:
    """(lowest, max) of an integer type as Python ints."""
    if pt.is_signed:
        return -(1 << (pt.bits - 1)), (1 << (pt.bits - 1)) - 1
    return 0, (1 << pt.bits) - 1


def width_mask(bits: int) -> np.uint64:
    return np.uint64((1 << bits) - 1)


# -- holding values while computing -------------------------------------------------------------


def int_compute_dtype(pt: PrimitiveType) -> np.dtype:
    """The numpy dtype integer ops compute in: the type's own, or int8/uint8 below a byte."""
    if is_sub_byte(pt):
        return np.dtype(np.int8 if pt.is_signed else np.uint8)
    return pt.dtype


def as_int(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Integer values of `x` in the dtype integer ops on `pt` compute in."""
    return np.asarray(x).astype(int_compute_dtype(pt), copy=False)


def as_wide_int(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Integer (or pred) values of `x` as int64, or uint64 for unsigned types."""
    return np.asarray(x).astype(np.uint64 if pt.is_unsigned else np.int64, copy=False)


def wrap_int(values: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Integer `values` (any numpy integer dtype) wrapped to `pt`'s width, in `pt`'s dtype."""
    values = np.asarray(values)
    if not is_sub_byte(pt):
        return values.astype(pt.dtype, copy=False)  # numpy integer casts wrap
    low = values.astype(np.uint64) & width_mask(pt.bits)
    if pt.is_signed:
        signed = low.astype(np.int64)
        low = np.where(signed >= (1 << (pt.bits - 1)), signed - (1 << pt.bits), signed)
    return low.astype(pt.dtype)


def as_float(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Float values of `x` in the dtype float ops on `pt` compute in (f32 for narrow floats)."""
    x = np.asarray(x)
    return x.astype(np.float32) if is_narrow_float(pt) else x


def round_float(values: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Float `values` (f32 or f64) rounded to nearest even into float type `pt`; f64 reaches the
    types narrower than f32 through f32."""
    values = np.asarray(values)
    with np.errstate(all="ignore"):
        if pt.bits < 64 and values.dtype == np.float64:
            values = values.astype(np.float32)
        return _nan_as_xla(values, values.astype(pt.dtype, copy=False), pt)


def _nan_as_xla(source: np.ndarray, narrowed: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """`narrowed` (`source` cast by ml_dtypes) with XLA's value for a NaN where `pt` has no NaN code:
    f4e2m1fn gives -0 for either sign (XLA's EmitF16ToF4e2m1fn; ml_dtypes the zero of the opposite
    sign). The f6 types keep ml_dtypes' zeros."""
    if pt.name != "f4e2m1fn" or narrowed.size == 0:
        return narrowed
    nan = np.isnan(source)
    return np.where(nan, np.array(-0.0, pt.dtype), narrowed) if nan.any() else narrowed


def comparable(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Values of `x` in a dtype numpy compares natively (f32 for narrow floats, int8/uint8 for
    sub-byte ints); the conversion is exact, so orderings are those of the type."""
    if is_narrow_float(pt):
        return as_float(x, pt)
    if is_sub_byte(pt):
        return as_int(x, pt)
    return np.asarray(x)


# -- bits ---------------------------------------------------------------------------------------


def reinterpret(x: np.ndarray, dtype) -> np.ndarray:
    """The bytes of `x` (any shape, 0-d included) viewed as `dtype`, flattened to 1-d: numpy
    refuses itemsize-changing views of 0-d and non-contiguous arrays."""
    x = np.asarray(x)
    return (x if x.flags.c_contiguous else x.copy(order="C")).reshape(-1).view(dtype)


def to_bits(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """The bit pattern of each element (types up to 64 bits) as uint64, in `x`'s shape."""
    shape = np.shape(x)
    if pt.bits >= 8:
        return reinterpret(x, _UINT_OF_BITS[pt.bits]).astype(np.uint64).reshape(shape)
    return (reinterpret(x, np.uint8).astype(np.uint64) & width_mask(pt.bits)).reshape(shape)


def from_bits(bits: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """Elements of type `pt` with the given bit patterns (uint64, low `pt.bits` bits used)."""
    bits = np.asarray(bits, dtype=np.uint64)
    if pt.bits >= 8:
        return reinterpret(bits.astype(_UINT_OF_BITS[pt.bits]), pt.dtype).reshape(bits.shape)
    return reinterpret((bits & width_mask(pt.bits)).astype(np.uint8), pt.dtype).reshape(bits.shape)


def bit_length(bits: np.ndarray) -> np.ndarray:
    """Number of significant bits of each uint64 (0 for 0), by binary search over shifts."""
    x = np.asarray(bits, dtype=np.uint64)
    length = np.zeros(x.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        high = (x >> np.uint64(step)) != 0
        length += np.where(high, step, 0)
        x = np.where(high, x >> np.uint64(step), x)
    return length + (x != 0)


def _has_sign_bit(pt: PrimitiveType) -> bool:
    return pt.name != "f8e8m0fnu"


def total_order_key(x: np.ndarray, pt: PrimitiveType) -> np.ndarray:
    """An int64 key per float whose integer order is XLA's total order: -NaN < -inf < ... <
    -0.0 < +0.0 < ... < +inf < +NaN (sign-magnitude bit patterns; NaNs ordered by payload);
    keys are equal exactly when the bit patterns are."""
    if pt.bits == 64:
        signed = reinterpret(x, np.int64).reshape(np.shape(x))
        # Flip the magnitude bits of negatives: two's complement order becomes sign-magnitude.
        return signed ^ ((signed >> np.int64(63)) & np.int64(0x7FFF_FFFF_FFFF_FFFF))
    bits = to_bits(x, pt).astype(np.int64)
    if not _has_sign_bit(pt):
        return bits
    sign = np.int64(1 << (pt.bits - 1))
    magnitude = bits & (sign - 1)
    return np.where((bits & sign) != 0, -1 - magnitude, magnitude)


# -- convert ------------------------------------------------------------------------------------


def _float_to_int(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """Truncate toward zero, saturating to dst's range; NaN becomes 0 (XLA's literal.cc)."""
    wide = np.asarray(x).astype(np.float64)  # exact for every float type
    lo, hi = int_bounds(dst)
    nan = np.isnan(wide)
    above = wide >= float(hi)  # float(hi) rounds up to 2^k when hi is not exact, as C++ does
    below = wide <= float(lo)
    inside = ~(nan | above | below)
    with np.errstate(all="ignore"):
        truncated = np.trunc(np.where(inside, wide, 0.0)).astype(np.uint64 if dst.is_unsigned else np.int64)
    result = np.where(above, np.array(hi, truncated.dtype), truncated)
    result = np.where(below, np.array(lo, truncated.dtype), result)
    return wrap_int(result, dst)


def _to_real(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """Convert a pred, integer or float array to the non-complex, non-pred type `dst`."""
    if src.is_pred:
        x, src = np.asarray(x).astype(np.uint8), PRIMITIVE_TYPES["u8"]
    if src.is_integer:
        wide = as_wide_int(x, src)
        if dst.is_integer:
            return wrap_int(wide, dst)
        return round_float(wide.astype(np.float64 if dst.bits == 64 else np.float32), dst)
    if dst.is_integer:
        return _float_to_int(x, src, dst)
    if dst.bits >= 32:
        return np.asarray(x).astype(dst.dtype)
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        if x.dtype == np.float64 and rounds_once_through_f32(dst):  # (ml_dtypes' own f64 cast rounds twice)
            return _nan_as_xla(x, _f32_rounded_to_odd(x).astype(dst.dtype), dst)
        return _nan_as_xla(x, x.astype(np.float32).astype(dst.dtype), dst)


def rounds_once_through_f32(dst: PrimitiveType) -> bool:
    """Whether f64 → `dst` rounds once, as XLA converts f64 to the 8-bit and narrower float types
    (directly; its f64 → bf16/f16 goes through f32 and rounds twice): through f32 rounded to odd,
    whose 24 bits are more than two past theirs, the second rounding is then the only one (a value
    just above a midpoint of f8 no longer rounds to the midpoint first). Not f8e8m0fnu, a scale type
    without a mantissa."""
    return dst.is_float and dst.bits <= 8 and dst.name != "f8e8m0fnu"


def _f32_rounded_to_odd(x: np.ndarray) -> np.ndarray:
    """f64 values as f32 rounded to odd: truncated toward zero, the last bit set where inexact (the
    kernels' form: codegen/elemental/ops.py `_f32_rounded_to_odd`)."""
    narrow = x.astype(np.float32)
    back = narrow.astype(np.float64)
    inexact = back != x  # (False for NaN)
    away = np.where(x < 0, back < x, back > x)
    bits = narrow.view(np.uint32) - away.astype(np.uint32)
    return (bits | inexact.astype(np.uint32)).view(np.float32)


def convert(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """XLA `convert` from `src` to `dst` (see elementwise.py's `convert` for the rules)."""
    x = np.asarray(x)
    if src == dst:
        return x.copy()
    if dst.is_pred:
        return comparable(x, src) != 0
    if src.is_complex:
        if dst.is_complex:
            return x.astype(dst.dtype)
        part = component_type(src)
        return _to_real(x.real.copy(), part, dst)
    if dst.is_complex:
        part = component_type(dst)
        out = np.zeros(x.shape, dtype=dst.dtype)
        out.real = _to_real(x, src, part)
        return out
    return _to_real(x, src, dst)


# -- bitcast-convert ----------------------------------------------------------------------------


def bitcast_convert(x: np.ndarray, src: PrimitiveType, dst: PrimitiveType) -> np.ndarray:
    """Reinterpret bits. Equal widths keep the shape; a wider source splits into `ratio` narrow
    elements along a new minor dimension, and a narrower source's minor dimension (of size
    `ratio`) fuses into one element. Pieces are in little-endian order: element 0 of the
    minor dimension holds the least significant bits (host memory order on x86/ARM)."""
    x = np.asarray(x)
    byte_aligned = src.bits % 8 == 0 and dst.bits % 8 == 0
    if src.bits == dst.bits:
        if byte_aligned:
            return reinterpret(x, dst.dtype).reshape(x.shape).copy()
        return from_bits(to_bits(x, src), dst)
    if src.bits > dst.bits:
        ratio = src.bits // dst.bits
        if byte_aligned:
            return reinterpret(x, dst.dtype).reshape(x.shape + (ratio,)).copy()
        shifts = np.arange(ratio, dtype=np.uint64) * np.uint64(dst.bits)
        return from_bits((to_bits(x, src)[..., None] >> shifts) & width_mask(dst.bits), dst)
    ratio = dst.bits // src.bits
    if x.ndim == 0 or x.shape[-1] != ratio:
        raise UnsupportedError(f"bitcast-convert {src}→{dst} needs a minor dimension of size {ratio}, "
                               f"got shape {list(x.shape)}")
    if byte_aligned:
        return reinterpret(x, dst.dtype).reshape(x.shape[:-1]).copy()
    shifts = np.arange(ratio, dtype=np.uint64) * np.uint64(src.bits)
    return from_bits(np.bitwise_or.reduce(to_bits(x, src) << shifts, axis=-1), dst)


# -- reduce-precision ---------------------------------------------------------------------------


# Float types reduce-precision works on bit by bit: (uint dtype, exponent bits, mantissa bits).
_IEEE_LAYOUT = {"f16": (np.uint16, 5, 10), "bf16": (np.uint16, 8, 7), "f32": (np.uint32, 8, 23),
                "f64": (np.uint64, 11, 52)}


def reduce_precision(x: np.ndarray, pt: PrimitiveType, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision (EmitReducePrecisionIR; HloEvaluator's is the same on f32/f64) on the
    bits of f16, bf16, f32 and f64 values; the f8/f4 types go through f32 and round back.
    Mantissa: round to nearest even by adding a bias and truncating, a carry into the exponent
    being correct. Exponent: values above the reduced maximum become ±inf, values at or below
    the reduced minimum exponent become ±0 (denormals are flushed, not rounded). NaN stays the
    same NaN, bit for bit, also when mantissa_bits is 0 (XLA:CPU's result; jax 0.10.2)."""
    if exponent_bits < 1 or mantissa_bits < 0:
        raise UnsupportedError(f"reduce-precision needs exponent_bits >= 1 and mantissa_bits >= 0, "
                               f"got {exponent_bits}, {mantissa_bits}")
    value = np.asarray(x)
    layout = _IEEE_LAYOUT.get(pt.name)
    if layout is None:
        value, layout = value.astype(np.float32), _IEEE_LAYOUT["f32"]
    uint, src_exp, src_man = layout
    bits = reinterpret(value, uint).reshape(value.shape).copy()
    one = uint(1)
    if mantissa_bits < src_man:
        shift = uint(src_man - mantissa_bits)
        last_bit = one << shift
        bias = (last_bit >> one) - one + ((bits & last_bit) >> shift)
        bits = (bits + bias) & ~(last_bit - one)
    if exponent_bits < src_exp:
        sign_mask = one << uint(src_exp + src_man)
        exp_mask = ((one << uint(src_exp)) - one) << uint(src_man)
        bias = (1 << (src_exp - 1)) - 1
        reduced_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exp_mask
        overflows = exponent > (uint(bias + reduced_bias) << uint(src_man))
        underflows = exponent <= (uint(bias - reduced_bias) << uint(src_man))
        signed_zero = bits & sign_mask
        bits = np.where(overflows, signed_zero | exp_mask, bits)
        bits = np.where(underflows, signed_zero, bits)
    result = reinterpret(bits.astype(uint), value.dtype).reshape(value.shape)
    nan = np.isnan(value.astype(np.float64))
    result = np.where(nan, value, result)
    return result if result.dtype == pt.dtype else round_float(result, pt)


# -- stochastic-convert -------------------------------------------------------------------------


def stochastic_convert(x: np.ndarray, random: np.ndarray, src: PrimitiveType, random_type: PrimitiveType,
                       dst: PrimitiveType) -> np.ndarray:
    """XLA's stochastic rounding of floats to integers (StochasticConvertDecomposer): with
    f = frac(|x|) and `random` an unsigned integer as wide as x, round |x| up when
    random < trunc(f * 2^bits), then restore the sign; x <= lowest (converted to x's type) gives
    lowest, x >= max gives max; NaN gives 0. XLA defines it for signed results; unsigned
    results follow the same steps (so negative x gives 0)."""
    if not (src.is_float and random_type.is_unsigned and random_type.bits == src.bits and dst.is_integer):
        raise UnsupportedError(f"stochastic-convert takes a float and an unsigned integer of its width to an "
                               f"integer, got {src}, {random_type} -> {dst}")
    wide = np.asarray(x).astype(np.float64)  # exact; every step below is exact in f64
    with np.errstate(all="ignore"):
        magnitude = np.abs(wide)
        whole = np.floor(magnitude)
        fixed = (magnitude - whole) * float(1 << random_type.bits)
        threshold = _float_to_int(fixed, F64, random_type)
        round_up = as_wide_int(random, random_type) < as_wide_int(threshold, random_type)
        truncated = as_wide_int(_float_to_int(whole, F64, dst), dst)
        truncated = np.where(round_up, truncated + np.array(1, truncated.dtype), truncated)
        result = np.where(wide < 0, np.array(0, truncated.dtype) - truncated, truncated)
    lo, hi = int_bounds(dst)
    # XLA compares x with lowest/max converted to x's own type.
    lo_in_src = _to_real(np.array(lo, dtype=np.int64 if lo < 0 else np.uint64), PRIMITIVE_TYPES["s64"], src)
    hi_in_src = _to_real(np.array(hi, dtype=np.uint64), PRIMITIVE_TYPES["u64"], src)
    result = np.where(wide <= float(lo_in_src), np.array(lo).astype(result.dtype), result)
    result = np.where(wide >= float(hi_in_src), np.array(hi).astype(result.dtype), result)
    return wrap_int(result, dst)


# -- erf ----------------------------------------------------------------------------------------

_TWO_OVER_SQRT_PI = 1.1283791670955126
_ONE_OVER_SQRT_PI = 0.5641895835477563
_SERIES_LIMIT = 1.0
# erf(x) = 2/sqrt(pi) Σ (-1)ⁿ x^(2n+1) / (n! (2n+1)); 20 terms reach 1e-19 for |x| < 1.
_SERIES = [(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(20)]
_FRACTION_TERMS = 200  # enough for 1 ulp from |x| = 1 on
_ERFC_ZERO = 30.0  # erfc(30) underflows in f64: erf is exactly ±1 beyond


def _exp_minus_square(x: np.ndarray) -> np.ndarray:
    """exp(-x*x) for x >= 0 with x*x split into an exact high part and a small low part, so the
    result keeps its accuracy where x*x is large (its rounding error would be amplified)."""
    high = x.astype(np.float32).astype(np.float64)  # 24 significant bits: high*high is exact
    low = x - high
    return np.exp(-high * high) * np.exp(-(low * (x + high)))


def _erfc_fraction(a: np.ndarray) -> np.ndarray:
    """erfc(a) for a >= 1 from Laplace's continued fraction
    erfc(a) = exp(-a²)/sqrt(pi) · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + ...)))), evaluated from the tail."""
    fraction = a.copy()
    for k in range(_FRACTION_TERMS, 0, -1):
        fraction = a + (k / 2.0) / fraction
    return _ONE_OVER_SQRT_PI * _exp_minus_square(a) / fraction


def erf(x: np.ndarray) -> np.ndarray:
    """erf for float64 arrays, within 2 ulp of a correctly rounded result: the Maclaurin series
    for |x| < 1, 1 - erfc(|x|) from erfc's continued fraction beyond (where erfc's own error is
    scaled down by erfc/erf). erf(±inf) = ±1, erf(NaN) = NaN, and erf is odd (erf(-0.0) = -0.0)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    near = a < _SERIES_LIMIT
    far = ~near & ~np.isnan(a)
    magnitude = np.ones_like(a)
    with np.errstate(all="ignore"):
        square = a[near] * a[near]
        series = np.full_like(square, _SERIES[-1])
        for coefficient in reversed(_SERIES[:-1]):
            series = series * square + coefficient
        magnitude[near] = _TWO_OVER_SQRT_PI * a[near] * series
        magnitude[far] = 1.0 - _erfc_fraction(np.minimum(a[far], _ERFC_ZERO))
    return np.where(np.isnan(x), x, np.copysign(magnitude, x))


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(p, e) with p = fl(a * b) and a * b = p + e exactly (Dekker's product, Veltkamp's split; no
    FMA in numpy). Operands well inside the exponent range (cbrt's are in [0.5, 2))."""
    def split(x):
        c = 134217729.0 * x  # 2^27 + 1
        hi = c - (c - x)
        return hi, x - hi
    p = a * b
    (ah, al), (bh, bl) = split(a), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def cbrt(x: np.ndarray) -> np.ndarray:
    """Real cube root of f64 values, correctly rounded but for rare ties of the last bit. numpy's
    np.cbrt is the host's: AVX-512 builds run an accurate SIMD routine, others glibc's cbrt, which
    is off by up to 2 ulp (cbrt(27) = 3.0000000000000004) and would make the reference depend on the
    machine. Here: x = t * 2^(3j) with t in [0.5, 4) (frexp: exact, denormals too), y = cbrt(t) from
    numpy, one Newton step on the residual t - y^3 computed exactly, then y * 2^j."""
    x = np.asarray(x, np.float64)
    mantissa, exponent = np.frexp(x)
    rest = np.mod(exponent, 3)
    t = np.ldexp(np.abs(mantissa), rest)
    y = np.cbrt(t)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        square, square_error = _two_product(y, y)
        cube, cube_error = _two_product(square, y)
        residual = ((t - cube) - cube_error) - square_error * y  # t - y^3 (t - cube is exact: Sterbenz)
        refined = y + residual / (3.0 * y * y)
    regular = np.isfinite(x) & (x != 0)
    return np.where(regular, np.copysign(np.ldexp(refined, (exponent - rest) // 3), x), x)
