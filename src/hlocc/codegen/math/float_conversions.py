"""Exact conversions between f32/f64 and the narrow float formats, as integer bit manipulation
written once over `FloatBuilder` (emitted by `lower-narrow-floats`, run on numpy by its tests).

Semantics are ml_dtypes' (the reference evaluator's): round to nearest even (f8E8M0FNU, which has
no mantissa, rounds ties up as ml_dtypes does); subnormals exact; overflow gives inf for formats
that have it, NaN for the `FN`/`FNUZ` formats (no inf), the largest finite value for the
finite-only f4/f6 formats; a NaN becomes the format's quiet NaN with the input's sign (FNUZ: the
one NaN; f4/f6 have no NaN: f4E2M1FN gives -0 for either sign, as XLA does (ml_dtypes gives the zero
of the opposite sign), f6 the zero of the opposite sign, as ml_dtypes does); -0 stays -0
except in FNUZ formats (no -0). From f64 the result is rounded once (ml_dtypes goes through f32
and can round twice; the tests compare against f64 -> f32 rounded to odd, then ml_dtypes).
Widening keeps bf16/f16 NaN payloads (a shift, as ml_dtypes and
numpy do) and gives the canonical quiet NaN with the sign for the 8-bit and smaller formats.
"""

from __future__ import annotations

from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, FloatFormat, IntType, Val

#: Narrow formats by MLIR type name (parameters as in LLVM's APFloat semantics).
NARROW_FORMATS: dict[str, FloatFormat] = {f.name: f for f in (
    FloatFormat("bf16", 8, 7, 127),
    FloatFormat("f16", 5, 10, 15),
    FloatFormat("f8E5M2", 5, 2, 15),
    FloatFormat("f8E4M3", 4, 3, 7),
    FloatFormat("f8E3M4", 3, 4, 3),
    FloatFormat("f8E4M3FN", 4, 3, 7, "nan_only", "all_ones"),
    FloatFormat("f8E4M3FNUZ", 4, 3, 8, "nan_only", "negative_zero"),
    FloatFormat("f8E5M2FNUZ", 5, 2, 16, "nan_only", "negative_zero"),
    FloatFormat("f8E4M3B11FNUZ", 4, 3, 11, "nan_only", "negative_zero"),
    FloatFormat("f8E8M0FNU", 8, 0, 127, "nan_only", "all_ones", has_sign=False, has_zero=False),
    FloatFormat("f4E2M1FN", 2, 1, 1, "finite_only"),
    FloatFormat("f6E2M3FN", 2, 3, 1, "finite_only"),
    FloatFormat("f6E3M2FN", 3, 2, 3, "finite_only"),
)}


def max_finite_bits(fmt: FloatFormat) -> int:
    """Bit pattern (without sign) of the largest finite value."""
    top = fmt.max_exponent_field << fmt.mantissa_bits
    mant = (1 << fmt.mantissa_bits) - 1
    if fmt.nonfinite == "ieee":
        return top - (1 << fmt.mantissa_bits) + mant
    if fmt.nan_encoding == "all_ones":
        return top + mant - 1  # f8E4M3FN: S.1111.110; f8E8M0FNU: 254
    return top + mant


def _quiet_nan_bits(fmt: FloatFormat) -> int:
    """The canonical positive NaN (for 'negative_zero' the one NaN, the sign bit alone)."""
    if fmt.nan_encoding == "negative_zero":
        return 1 << (fmt.width - 1)
    if fmt.nan_encoding == "all_ones":
        return (fmt.max_exponent_field << fmt.mantissa_bits) | ((1 << fmt.mantissa_bits) - 1)
    return (fmt.max_exponent_field << fmt.mantissa_bits) | (1 << max(fmt.mantissa_bits - 1, 0))


# -- narrow -> f32 -------------------------------------------------------------------------------


def extend_to_f32(b: FloatBuilder, x: Val) -> Val:
    """A narrow float value widened exactly to f32."""
    fmt: FloatFormat = x.ty
    m = fmt.mantissa_bits
    v = b.extui(b.bits(x), IntType(32))
    if fmt.name == "bf16":  # the top half of an f32
        return b.from_bits(v << 16, F32)
    if fmt.name == "f8E8M0FNU":  # 2^(v - 127); v = 0 is the f32 subnormal 2^-127; 255 is NaN
        res = b.select(v.eq(0), b.const(IntType(32), 1 << 22), v << 23)
        return b.from_bits(b.select(v.eq(255), 0x7FC00000, res), F32)
    sign = (v.shru(fmt.width - 1) & 1) << 31
    a = v & ((1 << (fmt.width - 1)) - 1)
    e = a.shru(m)
    man = a & ((1 << m) - 1)
    normal = ((e + (F32.bias - fmt.bias)) << 23) | (man << (23 - m))
    tiny = b.int_to_float(man, F32) * 2.0 ** (1 - fmt.bias - m)  # subnormal: exact, normal in f32
    mag = b.select(e.eq(0), b.bits(tiny), normal)
    if fmt.nonfinite == "ieee":
        special = (0x7F800000 | (man << (23 - m))) if fmt.width >= 16 else \
            b.select(man.eq(0), b.const(IntType(32), 0x7F800000), 0x7FC00000)
        mag = b.select(e.eq(fmt.max_exponent_field), special, mag)
    elif fmt.nonfinite == "nan_only":
        nan = v.eq(_quiet_nan_bits(fmt)) if fmt.nan_encoding == "negative_zero" else a.eq(_quiet_nan_bits(fmt))
        mag = b.select(nan, b.const(IntType(32), 0x7FC00000), mag)
    return b.from_bits(sign | mag, F32)


# -- f32 / f64 -> narrow -------------------------------------------------------------------------


def _round_shift_right(b: FloatBuilder, sig: Val, shift: Val, ties_up: bool = False) -> Val:
    """sig >> shift rounded to nearest, ties to even (or up); 1 <= shift < width."""
    q = sig.shru(shift)
    rem = sig & ((sig.like(1) << shift) - 1)
    half = sig.like(1) << (shift - 1)
    up = rem.ge(half) if ties_up else rem.gt(half) | (rem.eq(half) & (q & 1).eq(1))
    return q + b.select(up, sig.like(1), 0)


def truncate(b: FloatBuilder, x: Val, fmt: FloatFormat, nan_clean: bool = False) -> Val:
    """An f32 or f64 value rounded to the narrow format `fmt` (a value of type `fmt`).

    `nan_clean` (f32 -> bf16 only): the caller knows that `x`, if it is a NaN, has a zero low half
    (a widened bf16 NaN, or the result of float ops on such values, which by LLVM's NaN semantics
    is a quieted operand NaN or the preferred NaN). Rounding keeps such a NaN a NaN with its sign
    and payload, so the canonical-NaN select is left out (a NaN result may then carry a payload).
    """
    src: FloatFormat = x.ty
    assert src in (F32, F64) and fmt.mantissa_bits < src.mantissa_bits
    ity = src.int_type
    w, M, m = src.width, src.mantissa_bits, fmt.mantissa_bits
    bits = b.bits(x)
    if fmt.name == "bf16" and src == F32:  # same exponent range: round the low half away
        # Nearest even: add 0x8000 when the kept lsb (bit 16) is set, 0x7FFF when not. A test and a
        # blend of two constants (x86: vptestnmd + vpblendmd) instead of a shift, an and and an add.
        bias = b.select((bits & 0x10000).ne(0), b.const(ity, 0x8000), 0x7FFF)
        out = (bits + bias).shru(16)
        if not nan_clean:  # one instruction (x86 vcmpunordps); the integer test |bits| > inf needs two
            out = b.select(x.isnan(), (bits.shru(w - 1) << 15) | 0x7FC0, out)
        return b.bitcast(b.trunci(out, fmt.int_type), fmt)
    sign = bits.shru(w - 1)
    is_nan = x.isnan()
    a = bits & ((1 << (w - 1)) - 1)
    if not fmt.has_sign:
        mag = _to_e8m0(b, x, a, sign, is_nan)
        return b.bitcast(b.trunci(mag, fmt.int_type), fmt)
    e_field = a.shru(M)
    normal_src = e_field.ne(0)
    sig = (a & ((1 << M) - 1)) | b.select(normal_src, b.const(ity, 1 << M), 0)
    # exponent field of the result, minus one (the implicit bit of the rounded significand adds it)
    biased_m1 = b.select(normal_src, e_field, b.const(ity, 1)) + (fmt.bias - 1 - src.bias)
    below = b.select(biased_m1.lt(0), 0 - biased_m1, 0)  # extra shift for a subnormal result
    shift = below + (M - m)
    shift = b.select(shift.gt(M + 2), b.const(ity, M + 2), shift)  # sig < 2^(M+1): more gives 0 too
    q = _round_shift_right(b, sig, shift)
    mag = (b.select(biased_m1.lt(0), b.const(ity, 0), biased_m1) << m) + q
    # overflow (inf input included): inf, NaN, or saturation, by what the format has
    max_bits = max_finite_bits(fmt)
    if fmt.nonfinite == "ieee":
        over = fmt.max_exponent_field << m
    elif fmt.nonfinite == "nan_only":
        over = _quiet_nan_bits(fmt)
    else:
        over = max_bits
    mag = b.select(mag.gt(max_bits), b.const(ity, over), mag)
    top = 1 << (fmt.width - 1)
    signed = mag | (sign << (fmt.width - 1))
    if fmt.nan_encoding == "negative_zero":  # no -0; the sign-bit pattern is NaN
        signed = b.select(mag.eq(0) | mag.eq(top), mag, signed)
        nan = b.const(ity, top)
    elif fmt.name == "f4E2M1FN":  # no NaN: XLA's EmitF16ToF4e2m1fn gives -0 for either sign
        nan = b.const(ity, top)
    elif fmt.nonfinite == "finite_only":  # no NaN: ml_dtypes gives the zero of the other sign
        nan = (sign ^ 1) << (fmt.width - 1)
    else:
        nan = (sign << (fmt.width - 1)) | _quiet_nan_bits(fmt)
    out = b.select(is_nan, nan, signed)
    return b.bitcast(b.trunci(out, fmt.int_type), fmt)


def _to_e8m0(b: FloatBuilder, x: Val, a: Val, sign: Val, is_nan: Val) -> Val:
    """f8E8M0FNU (2^(e-127), e in [0, 254], 255 NaN): the exponent rounded by the mantissa, ties up;
    negatives, zeros, inf and NaN give NaN. Below 2^-126 ml_dtypes gives e = 1 for anything above
    2^-127 and e = 0 (saturating, no zero) otherwise, and so does this."""
    src: FloatFormat = x.ty
    M = src.mantissa_bits
    ity = src.int_type
    e = a.shru(M) + (127 - src.bias)
    e = e + b.select((a & ((1 << M) - 1)).ge(1 << (M - 1)), b.const(ity, 1), 0)
    e = b.select(e.gt(255), b.const(ity, 255), e)
    ax = b.abs(x)
    e = b.select(ax.lt(2.0**-126), b.select(ax.gt(2.0**-127), b.const(ity, 1), 0), e)
    return b.select(is_nan | sign.eq(1) | a.eq(0) | a.eq(src.max_exponent_field << M), b.const(ity, 255), e)
