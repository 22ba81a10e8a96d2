"""lower-narrow-floats: the bit-level conversions (run through the numpy builder, the code the pass
emits) equal ml_dtypes bit for bit, and after the pass no float arithmetic on a narrow type is left."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.builtin import VectorType

import hlocc.codegen.transforms.expand_float_ops  # noqa: F401  (registers the pass)
import hlocc.codegen.transforms.lower_narrow_floats  # noqa: F401  (registers the pass)
from hlocc.codegen.llvm import LlvmTranslator
from hlocc.codegen.math import approx_special as S
from hlocc.codegen.math.float_builder import F32, F64, IntType
from hlocc.codegen.math.float_builder_numpy import numpy_builder, numpy_dtype
from hlocc.codegen.math.float_conversions import NARROW_FORMATS, extend_to_f32, truncate
from hlocc.codegen.transforms.expand_float_ops import BF16_ROUNDED, PRIMITIVE_MATH_OPS
from hlocc.codegen.transforms.lower_narrow_floats import native_f16_extend
from hlocc.tools.opt import make_context, parse_module, run_opt

FORMATS = sorted(NARROW_FORMATS)


def _container(width: int):
    return np.uint8 if width <= 8 else np.uint16


def _narrow_bits(values: np.ndarray, fmt) -> np.ndarray:
    out = values.view(_container(fmt.width))
    return out & ((1 << fmt.width) - 1) if fmt.width < 8 else out


@pytest.mark.parametrize("name", FORMATS)
def test_extend_every_bit_pattern(name):
    fmt = NARROW_FORMATS[name]
    pats = np.arange(1 << fmt.width)
    b = numpy_builder()
    ity = IntType(fmt.width)
    raw = pats.astype(numpy_dtype(ity)) if fmt.width >= 8 else ((pats << 4) >> 4).astype(np.int8)
    raw = ((raw.astype(np.int8) << (8 - fmt.width)) >> (8 - fmt.width)) if fmt.width < 8 else raw
    got = extend_to_f32(b, b.bitcast(b.wrap(raw, ity), fmt)).raw.view(np.uint32)
    want = pats.astype(_container(fmt.width)).view(numpy_dtype(fmt)).astype(np.float32).view(np.uint32)
    bad = np.nonzero(got != want)[0]
    assert not len(bad), f"{name}: pattern {hex(pats[bad[0]])} -> {hex(got[bad[0]])}, ml_dtypes {hex(want[bad[0]])}"


def _truncation_inputs(fmt, dtype, n: int) -> np.ndarray:
    """Random bit patterns, every narrow value, the midpoints between them and their neighbours,
    specials."""
    rng = np.random.default_rng(fmt.width * 7 + len(fmt.name))
    ibits = np.dtype(dtype).itemsize * 8
    random = rng.integers(0, 1 << (ibits - 1), n, dtype=np.uint64) * rng.choice([1, -1], n)
    random = random.astype(np.int32 if ibits == 32 else np.int64).view(dtype)
    pats = np.arange(1 << fmt.width).astype(_container(fmt.width))
    exact = np.unique(pats.view(numpy_dtype(fmt)).astype(np.float64))
    exact = exact[np.isfinite(exact)]
    mids = ((exact[:-1].astype(np.longdouble) + exact[1:]) / 2).astype(dtype)
    up, down = np.nextafter(mids, dtype(np.inf)), np.nextafter(mids, dtype(-np.inf))
    specials = np.array([np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38], dtype)
    return np.concatenate([random, exact.astype(dtype), mids, up, down, -mids, -up, specials])


def _round_to_odd_f32(x: np.ndarray) -> np.ndarray:
    """f64 -> f32 rounding to odd: then a second rounding to <= 22 bits is a correct one."""
    with np.errstate(all="ignore"):
        t = x.astype(np.float32)
        t = np.where(np.abs(t.astype(np.float64)) > np.abs(x), np.nextafter(t, np.float32(0)), t)
        inexact = (t.astype(np.float64) != x) & np.isfinite(x)
        return np.where(inexact, (t.view(np.uint32) | 1).view(np.float32), t)


@pytest.mark.parametrize("src", [F32, F64], ids=str)
@pytest.mark.parametrize("name", FORMATS)
def test_truncate_matches_ml_dtypes(name, src):
    fmt = NARROW_FORMATS[name]
    dtype = np.float32 if src == F32 else np.float64
    x = _truncation_inputs(fmt, dtype, 1 << 15)
    b = numpy_builder()
    got = _narrow_bits(truncate(b, b.wrap(x, src), fmt).raw, fmt)
    with np.errstate(all="ignore"):
        ref = (x if src == F32 else _round_to_odd_f32(x)).astype(numpy_dtype(fmt))
    want = _narrow_bits(ref, fmt)
    if name == "f4E2M1FN":  # no NaN code: XLA gives -0 for either sign, ml_dtypes the zero of the other sign
        want = np.where(np.isnan(x), 0x8, want)
    mismatch = got != want
    if name == "f16":  # numpy keeps NaN payloads; the pass gives the quiet NaN with the sign
        g, w = got.view(np.float16), want.view(np.float16)
        mismatch &= ~(np.isnan(g) & np.isnan(w) & (np.signbit(g) == np.signbit(w)))
    bad = np.nonzero(mismatch)[0]
    assert not len(bad), f"{name} from {src}: {x[bad[0]]!r} -> {hex(got[bad[0]])}, want {hex(want[bad[0]])}"


def test_truncate_bf16_nan_clean():
    """The f32 -> bf16 rounding without the canonical-NaN select (for NaN-clean values): every
    non-NaN input as ml_dtypes rounds it, every NaN whose low half is zero (all bf16 NaN payloads,
    quiet and signalling, both signs) still a NaN with its sign."""
    fmt = NARROW_FORMATS["bf16"]
    x = _truncation_inputs(fmt, np.float32, 1 << 15)
    x = x[~np.isnan(x)]
    hi = np.arange(1 << 16, dtype=np.uint32) << 16
    nans = hi[np.isnan(hi.view(np.float32))].view(np.float32)
    b = numpy_builder()
    got = _narrow_bits(truncate(b, b.wrap(np.concatenate([x, nans]), F32), fmt, nan_clean=True).raw, fmt)
    want = _narrow_bits(x.astype(numpy_dtype(fmt)), fmt)
    bad = np.nonzero(got[: len(x)] != want)[0]
    assert not len(bad), f"{x[bad[0]]!r} -> {hex(got[bad[0]])}, want {hex(want[bad[0]])}"
    out = got[len(x):].view(numpy_dtype(fmt)).astype(np.float32)
    assert np.isnan(out).all() and (np.signbit(out) == np.signbit(nans)).all()


NARROW_MODULE = """
func.func @k(%a: bf16, %b: bf16, %v: vector<4xf16>, %f: f8E5M2, %g: f8E4M3FNUZ, %i: i32, %d: f64)
    -> (bf16, vector<4xf16>, f8E5M2, i1, f8E4M3FNUZ, i32, f64) {
  %c = arith.constant 1.5 : bf16
  %0 = arith.addf %a, %b : bf16
  %1 = arith.divf %0, %c : bf16
  %2 = math.exp %1 : bf16
  %3 = math.powf %2, %a : bf16
  %4 = arith.mulf %v, %v : vector<4xf16>
  %5 = math.tanh %4 : vector<4xf16>
  %6 = arith.negf %f : f8E5M2
  %7 = arith.cmpf ogt, %6, %f : f8E5M2
  %8 = arith.sitofp %i : i32 to f8E4M3FNUZ
  %9 = arith.maximumf %8, %g : f8E4M3FNUZ
  %10 = arith.fptosi %9 : f8E4M3FNUZ to i32
  %11 = arith.extf %g : f8E4M3FNUZ to f64
  %12 = arith.truncf %d : f64 to bf16
  %13 = arith.select %7, %12, %3 : bf16
  func.return %13, %5, %6, %7, %9, %10, %11 : bf16, vector<4xf16>, f8E5M2, i1, f8E4M3FNUZ, i32, f64
}
"""


def _narrow_compute_ops(text: str) -> list[str]:
    module = parse_module(text, make_context())
    bad = []
    for op in module.walk():
        if not (op.name.startswith("math.") or op.name.startswith("arith.") and op.name.endswith("f")):
            continue
        if op.name in ("arith.bitcast", "arith.select", "arith.constant"):
            continue
        types = [str(v.type) for v in (*op.operands, *op.results)]
        if op.name == "arith.extf" and "f16" in types[0] and "bf16" not in types[0] and native_f16_extend():
            continue  # (a conversion LLVM makes exactly: vcvtph2ps)
        if any(n in t for t in types for n in NARROW_FORMATS):
            bad.append(f"{op.name}: {types}")
    return bad


def test_pass_leaves_no_narrow_float_compute():
    after = run_opt(NARROW_MODULE, ["lower-narrow-floats"])
    assert _narrow_compute_ops(after) == []
    assert "1.5 : bf16" not in after  # folded to f32, or an i16 constant and a bitcast


def test_pipeline_leaves_only_primitive_math_ops():
    after = run_opt(NARROW_MODULE, ["lower-narrow-floats", "expand-float-ops"])
    math_ops = {op.name for op in parse_module(after, make_context()).walk() if op.name.startswith("math.")}
    assert math_ops <= PRIMITIVE_MATH_OPS, math_ops - PRIMITIVE_MATH_OPS


@pytest.mark.parametrize("fma", [False, True], ids=["expand-float-ops", "expand-float-ops-fma"])
def test_tanh_bf16_equals_tanh_rounded_for_every_bf16(fma):
    """tanh's bf16 form (no clamp, no small-|x| select; what expand-float-ops uses for a tanh that
    lower-narrow-floats promoted from bf16) rounds to the same bf16 as the full f32 expansion, for
    all 65,536 bf16 inputs (subnormals, +-0, +-inf and NaNs included; NaNs agree up to payload)."""
    fmt = NARROW_FORMATS["bf16"]
    b = numpy_builder()
    x = extend_to_f32(b, b.bitcast(b.wrap(np.arange(1 << 16).astype(np.int16), IntType(16)), fmt))
    full, short = (S.tanh_fma, S.tanh_bf16_fma) if fma else (S.tanh, S.tanh_bf16)
    with np.errstate(all="ignore"):  # the short form's discarded lanes overflow (inf / inf)
        want, got = (_narrow_bits(truncate(b, fn(b, x), fmt, nan_clean=True).raw, fmt) for fn in (full, short))
    nan = np.isnan(want.view(numpy_dtype(fmt)).astype(np.float32))
    assert (nan == np.isnan(x.raw)).all()  # NaN for the 254 NaN inputs (both signs) and only those
    assert np.isnan(got[nan].view(numpy_dtype(fmt)).astype(np.float32)).all()
    bad = np.nonzero((got != want) & ~nan)[0]
    assert not len(bad), f"bf16 {x.raw[bad[0]]!r}: {hex(got[bad[0]])}, full expansion {hex(want[bad[0]])}"


def test_bf16_tanh_takes_its_bf16_form():
    """lower-narrow-floats tags a promoted bf16 tanh, and expand-float-ops then leaves out the clamp
    (minimumf/maximumf); an f16 tanh keeps the full form."""
    text = """
func.func @k(%a: vector<16xbf16>, %h: f16) -> (vector<16xbf16>, f16) {
  %t = math.tanh %a : vector<16xbf16>
  %u = math.tanh %h : f16
  func.return %t, %u : vector<16xbf16>, f16
}
"""
    promoted = run_opt(text, ["lower-narrow-floats"])
    assert promoted.count("math.tanh") == 2 and promoted.count(BF16_ROUNDED) == 1
    for expand in ("expand-float-ops", "expand-float-ops-fma"):
        after = run_opt(text, ["lower-narrow-floats", expand])
        module = parse_module(after, make_context())
        ops = [op.name for op in module.walk() if op.results and isinstance(op.results[0].type, VectorType)]
        assert "arith.minimumf" not in ops and "arith.maximumf" not in ops
        assert "arith.minimumf" in after  # the f16 tanh's clamp


def test_gpu_translation_keeps_trunc_of_stored_bf16():
    """The CPU translation stores a rounded bf16 vector's high halves by a shuffle
    (tests/codegen/llvm/emit_llvm_bf16_store.mlir); the NVPTX one keeps lshr + trunc."""
    text = """
func.func @store(%x: vector<4xi32>, %out: !llvm.ptr) {
  %c16 = arith.constant dense<16> : vector<4xi32>
  %s = arith.shrui %x, %c16 : vector<4xi32>
  %t = xla.trunci %s : vector<4xi32> to vector<4xi16>
  %b = arith.bitcast %t : vector<4xi16> to vector<4xbf16>
  llvm.store %b, %out : vector<4xbf16>, !llvm.ptr
  func.return
}
"""
    cpu, gpu = (str(LlvmTranslator(gpu=on_gpu).translate(parse_module(text, make_context()))) for on_gpu in (False, True))
    assert "shufflevector" in cpu and "trunc <4 x i32>" not in cpu
    assert "shufflevector" not in gpu and "trunc <4 x i32>" in gpu
