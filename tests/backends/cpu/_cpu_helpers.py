"""Shared by the CPU backend's correctness tests (test_cpu_*.py): build HLO text, run a module on
the cpu backend and on the evaluator (the oracle), compare results bit for bit or within ulps, and
the edge values of every element type.

Comparisons are stricter than `compare_arrays`: floats match bit for bit (the sign of zero counts;
any NaN matches any NaN, since XLA does not define NaN payloads), integers and preds exactly;
complex numbers part by part.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

import hlocc
from hlocc.evaluator.numerics import int_bounds, to_bits, total_order_key
from hlocc.hlo.types import PRIMITIVE_TYPES, PrimitiveType

T = PRIMITIVE_TYPES

INT_TYPES = ["s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16", "u32", "u64"]
WIDE_FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]
F8_TYPES = ["f8e5m2", "f8e4m3", "f8e4m3fn", "f8e4m3b11fnuz", "f8e3m4", "f8e5m2fnuz", "f8e4m3fnuz", "f4e2m1fn",
            "f8e8m0fnu"]
FLOAT_TYPES = WIDE_FLOAT_TYPES + F8_TYPES
REAL_TYPES = ["pred", *INT_TYPES, *FLOAT_TYPES]
COMPLEX_TYPES = ["c64", "c128"]


def needs_expand_float_ops():
    """A skip mark for tests of transcendental functions, which need the `expand-float-ops` pass
    (without it the LLVM translator rejects math.tanh and friends). They run once it is registered."""
    import hlocc.codegen.pipeline  # noqa: F401  (registers the passes)
    from hlocc.tools.opt import PASSES

    return pytest.mark.skipif("expand-float-ops" not in PASSES,
                              reason="needs the expand-float-ops pass (math approximations), not registered yet")


# -- HLO text ------------------------------------------------------------------------------------------


def shape_text(type_name: str, dims, layout=None) -> str:
    text = f"{type_name}[{','.join(str(d) for d in dims)}]"
    if layout is not None:
        text += "{" + ",".join(str(d) for d in layout) + "}"
    return text


def module_text(body: list[str], name: str = "m") -> str:
    """An HloModule whose entry holds `body` (instruction lines; the last one is the root)."""
    lines = [f"  {line}" for line in body]
    lines[-1] = "  ROOT " + lines[-1].lstrip()
    return f"HloModule {name}\n\nENTRY main {{\n" + "\n".join(lines) + "\n}\n"


def tuple_line(name: str, results: list[tuple[str, str]]) -> str:
    """`name = (shapes...) tuple(results...)` for (instruction name, shape text) pairs."""
    return f"{name} = ({', '.join(s for _, s in results)}) tuple({', '.join(n for n, _ in results)})"


# -- running -------------------------------------------------------------------------------------------


def flatten(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flatten(v)]
    return [value]


def run_both(text: str, inputs: list, target=None, kernels_only: bool = False
             ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(cpu outputs, evaluator outputs), each a flat list of arrays (`kernels_only` as in `run_cpu`)."""
    return run_cpu(text, inputs, target, kernels_only), run_reference(text, inputs)


# -- comparison ----------------------------------------------------------------------------------------


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or (dtype.kind == "V" and "float" in dtype.name)


def bits_of(x: np.ndarray) -> np.ndarray:
    """The bit pattern of each element as uint64 (floats) or the value as int64/uint64 (ints)."""
    x = np.asarray(x)
    pt = _ptype(x.dtype)
    if pt.is_pred:
        return x.astype(np.uint64)
    if pt.is_integer:
        return x.astype(np.uint64 if pt.is_unsigned else np.int64)
    return to_bits(x, pt)


def _ptype(dtype: np.dtype) -> PrimitiveType:
    from hlocc.hlo.types import from_dtype

    return from_dtype(dtype)


def mismatches(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Flat indices where `got` differs from `ref` bit for bit (any NaN equals any NaN; complex
    numbers where either part differs)."""
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype, (got.dtype, ref.dtype)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if ref.dtype.kind == "c":
        return np.union1d(mismatches(got.real, ref.real), mismatches(got.imag, ref.imag))
    same = bits_of(got) == bits_of(ref)
    if _is_float(ref.dtype):
        with np.errstate(invalid="ignore"):
            same |= np.isnan(got.astype(np.float64)) & np.isnan(ref.astype(np.float64))
    return np.flatnonzero(~same.reshape(-1))


def ulp_distance(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """Distance in units in the last place of the arrays' float type (NaN vs NaN is 0, NaN vs a
    number is inf; ±0 are equal)."""
    pt = _ptype(ref.dtype)
    fg, fr = got.astype(np.float64), ref.astype(np.float64)
    kg, kr = (total_order_key(v, pt) for v in (got, ref))
    # Keys of negatives are -1 - magnitude: make -0 and +0 both 0 and shift the negatives by one.
    kg = np.where(fg == 0, 0, np.where(kg < 0, kg + 1, kg))
    kr = np.where(fr == 0, 0, np.where(kr < 0, kr + 1, kr))
    # Integer differences (f64 keys need all 64 bits); they overflow only across zero.
    same_side = (kg >= 0) == (kr >= 0)
    distance = np.where(same_side, np.abs(np.where(same_side, kg - kr, 0)).astype(np.float64),
                        np.abs(kg.astype(np.float64)) + np.abs(kr.astype(np.float64)))
    nan_g, nan_r = np.isnan(fg), np.isnan(fr)
    return np.where(nan_g & nan_r, 0, np.where(nan_g ^ nan_r, np.inf, distance))


def complex_ulp_distance(got: np.ndarray, ref: np.ndarray, floor: float = 0.0) -> np.ndarray:
    """The error of complex results in ulps of the reference's larger part (or of `floor`, if that
    is larger), the larger of the two parts' errors: normwise, as the accuracy of complex functions
    is stated (a part that cancels, like the real part of expm1(z) near the imaginary axis, is
    accurate only relative to |z|). A part that is NaN or infinite must be the same (any NaN, the
    same infinity): else inf."""
    with np.errstate(over="ignore"):
        scale = np.spacing(np.maximum(np.maximum(np.abs(ref.real), np.abs(ref.imag)), ref.real.dtype.type(floor)))
    worst = np.zeros(ref.shape)
    for g, r in ((got.real, ref.real), (got.imag, ref.imag)):
        g, r = g.astype(np.float64), r.astype(np.float64)
        both_nan = np.isnan(g) & np.isnan(r)
        finite = np.isfinite(g) & np.isfinite(r)
        with np.errstate(all="ignore"):
            error = np.where(finite, np.abs(g - r) / scale.astype(np.float64), np.inf)
        error = np.where(both_nan | (g == r), 0.0, error)
        worst = np.maximum(worst, error)
    return worst


def assert_complex_ulps(got: np.ndarray, ref: np.ndarray, ulps, inputs: list[np.ndarray], what: str = "",
                        floor: float = 0.0) -> None:
    """`complex_ulp_distance` (with `floor`) within `ulps` (a number, or one per element)."""
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    distance = complex_ulp_distance(got, ref, floor).reshape(-1)
    bad = np.flatnonzero(distance > np.broadcast_to(ulps, ref.shape).reshape(-1))
    worst = float(distance.max()) if distance.size else 0.0
    assert bad.size == 0, f"{what} (worst {worst:g} ulp): {describe(bad, got, ref, inputs)}"


def describe(bad: np.ndarray, got: np.ndarray, ref: np.ndarray, inputs: list[np.ndarray], limit: int = 6) -> str:
    rows = []
    flat_in = [np.asarray(x).reshape(-1) for x in inputs]
    g, r = got.reshape(-1), ref.reshape(-1)
    for i in bad[:limit]:
        args = ", ".join(_show(x[i]) for x in flat_in if x.size == g.size)
        rows.append(f"  ({args}) -> got {_show(g[i])}, expected {_show(r[i])}")
    more = f"\n  ... {len(bad) - limit} more" if len(bad) > limit else ""
    return f"{len(bad)} of {g.size} elements differ:\n" + "\n".join(rows) + more


def _show(v) -> str:
    v = np.asarray(v)
    if v.dtype.kind == "c":
        return repr(complex(v))
    if _is_float(v.dtype):
        return f"{float(v.astype(np.float64))!r}"
    return str(v.astype(np.int64) if v.dtype.kind == "V" else v)


def assert_exact(got: np.ndarray, ref: np.ndarray, inputs: list[np.ndarray], what: str = "") -> None:
    bad = mismatches(got, ref)
    assert bad.size == 0, f"{what}: {describe(bad, got, ref, inputs)}"


def assert_ulps(got: np.ndarray, ref: np.ndarray, ulps: int, inputs: list[np.ndarray], what: str = "") -> None:
    assert got.dtype == ref.dtype and got.shape == ref.shape, (got.dtype, got.shape, ref.dtype, ref.shape)
    distance = ulp_distance(got, ref).reshape(-1)
    bad = np.flatnonzero(distance > ulps)
    worst = float(distance.max()) if distance.size else 0.0
    assert bad.size == 0, f"{what} (tolerance {ulps} ulp, worst {worst:g}): {describe(bad, got, ref, inputs)}"


# -- edge values ---------------------------------------------------------------------------------------


def int_edges(pt: PrimitiveType) -> list[int]:
    """Every value for types of at most 4 bits; else 0, ±1, ±2, 3, min, min + 1, max, max - 1,
    max / 2, and shift amounts around the width (width - 1, width, width + 1, 63, 64)."""
    lo, hi = int_bounds(pt)
    if pt.bits <= 4:
        return list(range(lo, hi + 1))
    values = {lo, lo + 1, -2, -1, 0, 1, 2, 3, 7, pt.bits - 1, pt.bits, pt.bits + 1, 63, 64, hi // 2, hi // 2 + 1,
              hi - 1, hi}
    return sorted(v for v in values if lo <= v <= hi)


def float_edges(pt: PrimitiveType) -> np.ndarray:
    """±0, ±inf, NaN, ±1, halves (rounding ties), the smallest and largest subnormals and normals, the
    largest finite value and its neighbours, huge and tiny values, and values around the bounds of
    integer conversions (2^7, 2^8, 2^15, 2^16, 2^31, 2^32, 2^63, 2^64 and their neighbours)."""
    info = ml_dtypes.finfo(pt.dtype) if pt.bits < 32 else np.finfo(pt.dtype)
    smallest_normal = float(info.smallest_normal)
    smallest_subnormal = float(info.smallest_subnormal)
    big = float(info.max)
    values = [0.0, 1.0, 0.5, 1.5, 2.5, 3.5, 0.1, 3.0, np.pi, 10.0, 100.0, 1e10, 1e30, 1e-30, 1e-7,
              smallest_subnormal, smallest_normal, smallest_normal - smallest_subnormal, big, float(info.eps),
              np.inf, 127.0, 127.5, 128.0, 128.5, 255.0, 255.5, 256.0, 32767.0, 32768.0, 65504.0, 65520.0,
              65535.0, 65536.0, 2.0**31 - 128, 2.0**31, 2.0**32, 2.0**63, 2.0**64]
    if pt.bits == 64:
        values += [2.0**31 - 1, 2.0**31 + 0.5, 2.0**32 - 1, 2.0**63 - 1024, 2.0**64 - 2048, 1e300, 1e-300]
    values = np.array(values, np.float64)
    values = np.concatenate([values, -values, [np.nan]])
    with np.errstate(all="ignore"):
        narrowed = values.astype(np.float32).astype(pt.dtype) if pt.bits < 64 else values
        wide = narrowed.astype(np.float64)
    keep = ~np.isnan(wide) | np.isnan(values)  # values a type cannot hold (fn: beyond max) would be NaN
    # Unique by bit pattern, keeping one NaN.
    _, first = np.unique(to_bits(narrowed[keep], pt), return_index=True)
    return narrowed[keep][np.sort(first)]


def complex_parts_type(type_name: str) -> str:
    return "f32" if type_name == "c64" else "f64"


def complex_of(re: np.ndarray, im: np.ndarray, type_name: str) -> np.ndarray:
    """re + i·im with the parts as given (`re + 1j * im` would turn inf parts into NaN)."""
    z = np.empty(np.shape(re), T[type_name].dtype)
    z.real, z.imag = re, im
    return z


def edge_values(type_name: str) -> np.ndarray:
    """The type's edge values; complex types: every pair of their parts' edge values."""
    pt = T[type_name]
    if pt.is_complex:
        parts = edge_values(complex_parts_type(type_name))
        re, im = np.meshgrid(parts, parts, indexing="ij")
        return complex_of(re.reshape(-1), im.reshape(-1), type_name)
    if pt.is_pred:
        return np.array([False, True])
    if pt.is_integer:
        return typed(int_edges(pt), pt)
    return float_edges(pt)


def typed(values, pt: PrimitiveType) -> np.ndarray:
    """Python ints or bools as an array of `pt`'s dtype."""
    if pt.is_pred:
        return np.array(values, bool)
    holder = np.uint64 if pt.is_unsigned else np.int64
    return np.array([int(v) for v in values], holder).astype(pt.dtype)


def random_values(type_name: str, n: int, rng: np.random.Generator) -> np.ndarray:
    pt = T[type_name]
    if pt.is_complex:
        part = complex_parts_type(type_name)
        re, im = random_values(part, n, rng), random_values(part, n, rng)
        near_one = np.exp(1j * rng.uniform(-4, 4, n // 4)) * (1 + rng.standard_normal(n // 4) * 1e-5)
        z = complex_of(re, im, type_name)
        z[: n // 4] = near_one  # |z| near 1, where log|z| cancels
        return z
    if pt.is_pred:
        return rng.random(n) < 0.5
    if pt.is_integer:
        lo, hi = int_bounds(pt)
        return rng.integers(lo, hi, size=n, endpoint=True, dtype=np.uint64 if pt.is_unsigned else np.int64
                            ).astype(pt.dtype)
    scale = 30.0 if pt.bits >= 16 else 4.0
    values = np.concatenate([rng.standard_normal(n - n // 2) * scale,
                             np.exp(rng.uniform(-20, 20, n // 2)) * rng.choice([-1.0, 1.0], n // 2)])
    with np.errstate(all="ignore"):
        return values.astype(np.float32).astype(pt.dtype) if pt.bits < 64 else values


@functools.cache
def pair_inputs(type_name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(a, b): every pair of edge values, then random pairs, padded to an odd length."""
    edges = edge_values(type_name)
    a, b = (x.reshape(-1) for x in np.meshgrid(edges, edges, indexing="ij"))
    rng = np.random.default_rng(seed)
    n = max(257, len(a) // 4) | 1
    ra, rb = random_values(type_name, n, rng), random_values(type_name, n, rng)
    total = len(a) + n
    if total % 2 == 0:
        ra, rb = ra[:-1], rb[:-1]
    return np.concatenate([a, ra]), np.concatenate([b, rb])


# -- compiling for a given target ------------------------------------------------------------------------


def scalar_target():
    """The host CPU target with one element per thread (sub-byte types: one byte). Kernels stay
    small (no per-thread vector loop to vectorize or unroll), so sweeps over every op and type
    compile 10-20x faster; the elemental numerics are the same. Tests of the default target's
    vectorized and unrolled code use `hlocc.compile` (or target=None)."""
    import dataclasses

    from hlocc.codegen.target import cpu_target

    return dataclasses.replace(cpu_target(), max_unroll=1)


def compile_cpu(text: str, target=None):
    """Parse, verify and compile for `target` (default: the host's): the cpu backend's module runner."""
    from hlocc.backends.cpu.executable import compile_module
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.verifier import verify_module

    module = parse_hlo(text)
    verify_module(module)
    return compile_module(module, target)


def compile_kernel(text: str, target=None):
    """Compile a module's entry computation as one fused kernel (no runtime, no host fallback): what
    the emitters cannot compute raises UnsupportedError here."""
    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.verifier import verify_module

    module = parse_hlo(text)
    verify_module(module)
    return compile_fusion(module.entry, target, use_cache=False)


def run_cpu(text: str, inputs: list, target=None, kernels_only: bool = False) -> list[np.ndarray]:
    """Compile for `target` and run on the cpu backend (arguments checked as an Executable does);
    `kernels_only`: fail if anything runs on the runtime's host fallback instead of a kernel."""
    from hlocc.compiler import check_arguments

    runner = compile_cpu(text, target)
    assert not (kernels_only and runner.stats.host_ops), runner.stats.host_ops
    return flatten(runner.run(check_arguments(runner.module, inputs)))


def run_reference(text: str, inputs: list) -> list[np.ndarray]:
    return flatten(hlocc.compile(text, backend="interpreter")(*inputs))


# -- out-of-bounds detection ---------------------------------------------------------------------------------


def guarded_array(nbytes: int, at_end: bool, keep: list) -> np.ndarray:
    """`nbytes` of fresh memory (uint8) right before (at_end) or right after an inaccessible page: a
    kernel reading or writing past that side of the buffer faults."""
    import ctypes
    import mmap

    page = mmap.PAGESIZE
    pages = -(-nbytes // page) + 2
    region = mmap.mmap(-1, pages * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    for guard in (base, base + (pages - 1) * page):
        if libc.mprotect(guard, page, 0) != 0:  # PROT_NONE
            raise OSError(ctypes.get_errno(), "mprotect failed")
    keep.append(region)
    offset = (pages - 1) * page - nbytes if at_end else page
    return np.frombuffer(region, dtype=np.uint8, count=nbytes, offset=offset)


def _guarded_like(shape_dims, dtype, at_end: bool, keep: list, fill: np.ndarray | None = None) -> np.ndarray:
    dtype = np.dtype(dtype)
    n = int(np.prod(shape_dims, dtype=np.int64))
    array = guarded_array(n * dtype.itemsize, at_end, keep).view(dtype).reshape(shape_dims)
    if fill is not None:
        array[...] = fill
    return array


def guarded_main(path: str) -> None:
    """Run each (module text, inputs) case of the pickle at `path` with every parameter and output buffer
    against a guard page, after its end and then before its start; print a line before each launch
    (a fault kills the process: the last line names the case) and compare with the evaluator. A case
    the backend rejects (UnsupportedError) is reported as such."""
    import pickle

    from hlocc.backends.cpu.executable import kernels

    with open(path, "rb") as f:
        cases = pickle.load(f)
    from hlocc.errors import UnsupportedError

    for i, (text, inputs) in enumerate(cases):
        try:
            runner = compile_cpu(text)
        except UnsupportedError as e:
            print(f"case {i} rejected: {e}", flush=True)
            continue
        for kernel in kernels(runner):
            _run_guarded_kernel(kernel, inputs, i)
    print("all cases ran in bounds", flush=True)


def _run_guarded_kernel(kernel, inputs: list, i: int) -> None:
    """Run one kernel of case `i` (its parameters are the module's) on guarded buffers; compare with
    the evaluator on the kernel's own fused computation."""
    from hlocc.backends.cpu.kernel import from_physical, to_physical
    from hlocc.evaluator import Evaluator

    ref = flatten(Evaluator().call(kernel.computation, inputs))
    for at_end in (True, False):
        keep: list = []
        params = [_guarded_like(s.physical_dims, s.dtype, at_end, keep, to_physical(np.asarray(x), s))
                  for x, s in zip(inputs, kernel.param_shapes)]
        outs = [_guarded_like(s.physical_dims, s.dtype, at_end, keep) for s in kernel.output_shapes]
        for out, param in kernel.output_aliases:  # outputs the kernel updates in part start as their operand
            outs[out][...] = params[param].reshape(outs[out].shape)
        print(f"case {i} guard {'after' if at_end else 'before'}", flush=True)
        kernel.run(params + outs)
        for k, (o, s, r) in enumerate(zip(outs, kernel.output_shapes, ref)):
            assert_exact(from_physical(o, s), r, [], f"case {i} output {k}")
