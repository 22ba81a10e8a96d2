"""Every elementwise HLO op on every element type it accepts, compiled for the CPU and compared with the
evaluator: bit for bit for integers, preds, conversions and the exactly rounded float ops (the sign of
zero counts, any NaN matches any NaN); within a stated number of ulps for the transcendental functions.

Inputs are every pair of edge values of the type (every value for types of at most 4 bits; else 0, ±1,
min, max, shift amounts around the width, ...; for floats ±0, ±inf, NaN, subnormals, the largest
finite value, huge and tiny values, rounding ties and the bounds of integer conversions) followed by
random pairs, in a 1-d shape of odd size.

To keep compile time low, one module per element type and kind of op holds every op as an independent
result of a tuple root, so it becomes one kernel, and the sweeps compile for the scalar CPU target
(one element per thread, `scalar_target`), whose kernels build 10-20x faster; the elemental numerics
are the same. The default target gets the same modules for a few types here and for all of them under
`-m slow`, twice: on the odd size (per-thread loops unrolled, every element bounds-checked) and on a
multiple of 64 elements (whole-vector loads, ops and stores). Complex numbers (c64, c128) get their
own sweep: every pair of their parts' edge values, exact ops bit for bit, functions within ulps of
the result's larger part. Every sweep must compute in kernels (no host fallback).

Known bugs outside the emitters are listed below; the sweeps leave out the elements they affect, and
tests at the end of this file check those elements and are expected to fail (strict) until the bugs
are fixed.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from _cpu_helpers import (
    COMPLEX_TYPES,
    REAL_TYPES,
    T,
    assert_complex_ulps,
    assert_exact,
    assert_ulps,
    compile_kernel,
    complex_of,
    complex_parts_type,
    edge_values,
    flatten,
    module_text,
    needs_expand_float_ops,
    pair_inputs,
    random_values,
    run_both,
    run_cpu,
    run_reference,
    scalar_target,
    shape_text,
    tuple_line,
    typed,
)

import hlocc
from hlocc.cli import random_inputs
from hlocc.errors import HloVerifyError, UnsupportedError
from hlocc.evaluator.numerics import convert as convert_values
from hlocc.evaluator.numerics import int_bounds
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.shape_rules_elementwise import _TYPE_CLASSES
from hlocc.hlo.types import from_dtype
from hlocc.hlo.verifier import verify_module

# -- known bugs outside the emitters -------------------------------------------------------------------------

SLP_MISCOMPILE = ("f8e5m2 -> f8e8m0fnu is miscompiled once LLVM's SLP vectorizer is on (LLVM 22, x86) in a kernel "
                  "that also converts to a sub-byte type (s2/u2/s4/f4e2m1fn: the per-thread loop then holds 2-4 "
                  "elements): some inputs give |x| instead of NaN or NaN instead of a power of two; right at O0/O1 and "
                  "at O3 with slp_vectorization off. The convert sweeps' kernels no longer hit it for the sub-byte "
                  "ints (since the NaN test of the f8e8m0fnu rounding is a float compare) and compile conversions to "
                  "f4e2m1fn on their own (f4e2m1fn hits it in the kernel of every core destination). It was "
                  "reached through a partial vector's loop of lanes each under its bounds branch, which is a "
                  "masked vector loop since vectorize_loads_stores.py's vectorize_masked_lanes (test_slp_miscompile)")
TRIG_HUGE = ("the complex functions' sin/cos (in c128, also for c64) keep f64's Cody-Waite reduction, accurate "
             "only below 2^33*pi/2 (~1.35e10; real f32 and f64 sin/cos/tan reduce exactly everywhere): XLA:CPU "
             "and the evaluator are accurate beyond")


def trig_range(type_name: str) -> float:
    """Where sin/cos/tan of the type are accurate (TRIG_HUGE): everywhere but for c128 and c64, whose
    functions keep f64's Cody-Waite reduction (codegen/math/approx_trig.py)."""
    return 1.35e10 if type_name in ("c128", "c64") else np.inf
SWEPT_TYPES = REAL_TYPES
CORE_TYPES = ["pred", "s1", "s2", "s4", "s8", "s16", "s32", "s64", "u1", "u2", "u4", "u8", "u16", "u32", "u64",
              "f16", "bf16", "f32", "f64", "f8e4m3fn", "f8e5m2", "f8e8m0fnu", "f4e2m1fn"]
"""The types of the default run; the other f8 types join under `-m slow`."""


def _in_group(*values, group: str, slow: bool = False, id: str | None = None):
    """A parameter of a sweep whose tests read one cached group kernel (`run_group`): on one xdist
    worker with the rest of `group`, which then compiles it once; under `-m slow` where `slow`."""
    marks = [pytest.mark.xdist_group(group)] + ([pytest.mark.slow] if slow else [])
    return pytest.param(*values, marks=marks, id=id)


def known_bug_elements(op: str, ref: np.ndarray, operands: list[np.ndarray]) -> np.ndarray:
    """Where a known bug makes the result wrong: f64 pow whose result is 0, inf or beyond 2^±64."""
    mask = np.zeros(ref.shape, bool)
    if op == "power" and ref.dtype == np.float64:
        with np.errstate(divide="ignore"):
            mask |= (np.abs(np.log2(np.abs(ref))) > 64) & np.isfinite(operands[0]) & np.isfinite(operands[1])
    return mask


def check(op: str, got: np.ndarray, ref: np.ndarray, operands: list[np.ndarray], what: str, ulps: int = 0) -> None:
    """`got` equals `ref` (within `ulps`) where no known bug applies."""
    keep = ~known_bug_elements(op, ref, operands)
    operands = [x[keep] for x in operands if x.shape == ref.shape]
    if ulps:
        assert_ulps(got[keep], ref[keep], ulps, operands, what)
    else:
        assert_exact(got[keep], ref[keep], operands, what)


# -- the ops -----------------------------------------------------------------------------------------------

# Ops with checks of their own (convert), or several variants per type (compare, select, clamp,
# reduce-precision, stochastic-convert); `complex` only makes complex numbers.
SPECIAL = {"convert", "compare", "select", "clamp", "reduce-precision", "stochastic-convert", "complex"}

# The transcendental functions (expand-float-ops' approximations, and codegen/elemental/math_functions.py's compositions of
# them) and their tolerance in ulps of the result type against the evaluator (itself within 1 ulp of
# the correctly rounded result), for f32 and f64: expand-float-ops' stated bounds plus 1, and for the
# compositions the errors of their steps. Types narrower than f32 compute in f32 and round once: 1 ulp.
TRANSCENDENTAL_ULPS: dict[str, tuple[int, int]] = {
    "exponential": (2, 3), "exponential-minus-one": (3, 4), "log": (2, 2), "log-plus-one": (3, 3),
    "logistic": (3, 4), "rsqrt": (2, 2), "cbrt": (2, 2), "sine": (2, 2), "cosine": (2, 2), "tan": (2, 3),
    "tanh": (8, 9), "erf": (7, 3), "atan2": (3, 3), "power": (2, 3),
    "acos": (3, 3), "asin": (3, 3), "acosh": (3, 3), "asinh": (3, 3), "atanh": (3, 3), "cosh": (3, 5),
    "sinh": (4, 5),
}
NARROW_ULPS = 1
TRIG = {"sine", "cosine", "tan"}


def accepts(opcode: str, type_name: str) -> bool:
    return _TYPE_CLASSES[OPCODES[opcode].types][1](T[type_name])


def _elementwise_ops(type_name: str) -> list[str]:
    return [name for name, info in OPCODES.items()
            if info.is_elementwise and name not in SPECIAL and accepts(name, type_name)]


def exact_ops(type_name: str) -> list[str]:
    approximate = T[type_name].is_float
    return [op for op in _elementwise_ops(type_name) if not (approximate and op in TRANSCENDENTAL_ULPS)]


def transcendental_ops(type_name: str) -> list[str]:
    return [op for op in _elementwise_ops(type_name) if op in TRANSCENDENTAL_ULPS] if T[type_name].is_float else []


def _name(label: str) -> str:
    return "r_" + "".join(c if c.isalnum() else "_" for c in label)


# -- running a group of ops as one kernel ----------------------------------------------------------------------

_INPUTS: dict[str, list[np.ndarray]] = {}


@functools.cache
def _run_group(key: str, text: str, target_kind: str):
    inputs = _INPUTS[key]
    return run_both(text, inputs, scalar_target() if target_kind == "scalar" else None, kernels_only=True)


def run_group(key: str, body: list[str], labels: list[str], inputs: list[np.ndarray], target_kind: str):
    """{label: (cpu result, evaluator result)} of a module whose tuple root holds one result per label
    (compiled and run once per key and target)."""
    _INPUTS[key] = inputs
    got, ref = _run_group(key, module_text(body, name=_name(key)), target_kind)
    assert len(got) == len(ref) == len(labels)
    return dict(zip(labels, zip(got, ref)))


# -- exactly computed ops ----------------------------------------------------------------------------------

REDUCE_PRECISION = [(5, 10), (8, 7), (5, 2), (4, 3), (3, 1), (2, 0), (8, 23), (11, 52)]
STOCHASTIC_RESULTS = ["s8", "s32", "s64", "u8"]
DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")


def _same_width(type_name: str) -> list[str]:
    bits = T[type_name].bits
    return [t for t in SWEPT_TYPES if t != type_name and not T[t].is_pred and T[t].bits == bits]


def exact_labels(type_name: str) -> list[str]:
    pt = T[type_name]
    labels = list(exact_ops(type_name))
    labels += [f"compare-{d}" for d in DIRECTIONS]
    if pt.is_float:
        labels += [f"compare-{d}-TOTALORDER" for d in DIRECTIONS]
    labels += ["select", "select-scalar-pred"]
    if accepts("clamp", type_name):
        labels += ["clamp", "clamp-scalar-bounds"]
    if pt.is_float:
        labels += [f"reduce-precision-e{e}m{m}" for e, m in REDUCE_PRECISION]
        labels += [f"stochastic-convert-{t}" for t in STOCHASTIC_RESULTS]
    if not pt.is_pred:
        labels += [f"bitcast-convert-{t}" for t in _same_width(type_name)]
    return labels


def _exact_inputs(type_name: str, vectorized: bool = False) -> list[np.ndarray]:
    """a, b: every pair of edge values, then random pairs (up to a multiple of 64 elements when
    `vectorized`, so that the default target's per-thread loops become whole vectors); c: b rotated
    (clamp's upper bound); p: random preds; lo, hi: scalar bounds at a third and two thirds of the
    finite edge values; a scalar pred; for floats, random unsigned integers of the float's width
    (stochastic-convert)."""
    pt = T[type_name]
    a, b = pair_inputs(type_name)
    rng = np.random.default_rng(len(type_name))
    if vectorized:
        extra = -a.size % 64
        a = np.concatenate([a, random_values(type_name, extra, rng)])
        b = np.concatenate([b, random_values(type_name, extra, rng)])
    edges = edge_values(type_name)
    ordered = np.sort(edges[np.isfinite(edges.astype(np.float64))] if pt.is_float else edges)
    lo, hi = ordered[len(ordered) // 3], ordered[2 * len(ordered) // 3]
    inputs = [a, b, np.roll(b, 7), rng.random(a.size) < 0.5, np.asarray(lo), np.asarray(hi), np.asarray(True)]
    if pt.is_float:
        inputs.append(random_values(f"u{pt.bits}", a.size, rng))
    return inputs


def _exact_line(label: str, type_name: str) -> tuple[str, str]:
    """(result element type, instruction text after the shape) of one exact op."""
    if label.startswith("compare-"):
        parts = label.split("-")
        return "pred", f"compare(a, b), direction={parts[1]}" + (f", type={parts[2]}" if len(parts) > 2 else "")
    fixed = {"select": "select(p, a, b)", "select-scalar-pred": "select(sp, a, b)", "clamp": "clamp(b, a, c)",
             "clamp-scalar-bounds": "clamp(lo, a, hi)"}
    if label in fixed:
        return type_name, fixed[label]
    if label.startswith("reduce-precision-"):
        e, m = label.removeprefix("reduce-precision-e").split("m")
        return type_name, f"reduce-precision(a), exponent_bits={e}, mantissa_bits={m}"
    if label.startswith("stochastic-convert-"):
        return label.split("-")[-1], "stochastic-convert(a, r)"
    if label.startswith("bitcast-convert-"):
        return label.removeprefix("bitcast-convert-"), "bitcast-convert(a)"
    return ("pred" if label == "is-finite" else type_name), (f"{label}(a)" if OPCODES[label].arity == 1
                                                             else f"{label}(a, b)")


def exact_group(type_name: str, target_kind: str = "scalar"):
    """The exact ops of one type as one kernel: target_kind "scalar", "default" (odd size: unrolled
    per-thread loops) or "vectorized" (the default target on a multiple of 64 elements)."""
    pt = T[type_name]
    inputs = _exact_inputs(type_name, vectorized=target_kind == "vectorized")
    n = inputs[0].size
    s = shape_text(type_name, [n])
    body = [f"a = {s} parameter(0)", f"b = {s} parameter(1)", f"c = {s} parameter(2)",
            f"p = pred[{n}] parameter(3)", f"lo = {type_name}[] parameter(4)", f"hi = {type_name}[] parameter(5)",
            "sp = pred[] parameter(6)"] + ([f"r = u{pt.bits}[{n}] parameter(7)"] if pt.is_float else [])
    labels = exact_labels(type_name)
    results = []
    for label in labels:
        result_type, line = _exact_line(label, type_name)
        results.append((_name(label), shape_text(result_type, [n])))
        body.append(f"{_name(label)} = {results[-1][1]} {line}")
    body.append(tuple_line("t", results))
    return run_group(f"exact-{type_name}-{target_kind}", body, labels, inputs, target_kind), inputs


def _exact_operands(label: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    a, b, c, p = inputs[:4]
    if label.startswith("select"):
        return [p, a, b]
    if label == "clamp":
        return [b, a, c]
    if label.startswith("stochastic-convert"):
        return [a, inputs[7]]
    return [a] if not label.startswith("compare") and label in OPCODES and OPCODES[label].arity == 1 else [a, b]


EXACT_CASES = [(t, label) for t in SWEPT_TYPES for label in exact_labels(t)]


@pytest.mark.parametrize("type_name,label", [_in_group(t, label, group=f"exact-{t}", slow=t not in CORE_TYPES)
                                                  for t, label in EXACT_CASES],
                         ids=[f"{label}-{t}" for t, label in EXACT_CASES])
def test_exact_op(type_name, label):
    results, inputs = exact_group(type_name)
    got, ref = results[label]
    check(label, got, ref, _exact_operands(label, inputs), f"{label} on {type_name}")


def _default_target_params(fast: list[str], every: list[str]) -> list:
    return [*fast, *[pytest.param(t, marks=pytest.mark.slow) for t in every if t not in fast]]


@pytest.mark.parametrize("type_name", _default_target_params(["s4", "f32"], SWEPT_TYPES))
def test_exact_ops_default_target(type_name):
    """The same modules for the default target: per-thread vector loops (unrolled: the size is odd)."""
    results, inputs = exact_group(type_name, "default")
    for label, (got, ref) in results.items():
        check(label, got, ref, _exact_operands(label, inputs), f"{label} on {type_name}")


@pytest.mark.parametrize("type_name", _default_target_params(["pred", "s16", "f64"], SWEPT_TYPES))
def test_exact_ops_vectorized(type_name):
    """The default target on a multiple of 64 elements: whole-vector loads, ops and stores."""
    results, inputs = exact_group(type_name, "vectorized")
    for label, (got, ref) in results.items():
        check(label, got, ref, _exact_operands(label, inputs), f"{label} on {type_name}")


# -- convert ----------------------------------------------------------------------------------------------

# Values that round differently when converted straight to a narrow type than through f32 (XLA goes
# through f32): f64 just above a bf16/f16 tie, and integers just above a bf16 tie once rounded to f32.
DOUBLE_ROUNDING_F64 = [1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-11 + 2.0**-40, -(1 + 2.0**-8 + 2.0**-40),
                       3 * 2.0**-20 + 2.0**-60]
DOUBLE_ROUNDING_INTS = [(1 << 24) + (1 << 16) + 1, (1 << 62) + (1 << 61) + 1, (1 << 40) + (1 << 32) + 1]


def _convert_inputs(type_name: str, vectorized: bool = False) -> np.ndarray:
    """Edge values, random values and double-rounding cases: an odd number of them, or (`vectorized`)
    a multiple of 64."""
    pt = T[type_name]
    rng = np.random.default_rng(pt.bits)
    values = [edge_values(type_name), random_values(type_name, 201, rng)]
    if type_name == "f64":
        values.append(np.array(DOUBLE_ROUNDING_F64))
    if pt.is_integer:
        lo, hi = int_bounds(pt)
        values.append(typed([v for v in DOUBLE_ROUNDING_INTS if lo <= v <= hi], pt))
    a = np.concatenate(values)
    if vectorized:
        return np.concatenate([a, random_values(type_name, -a.size % 64, rng)])
    return a if a.size % 2 else a[:-1]


def convert_group(type_name: str, destinations: tuple[str, ...], target_kind: str = "scalar"):
    """`a` (edge values, random values, double-rounding cases) converted to every destination type
    (target kinds as in `exact_group`)."""
    a = _convert_inputs(type_name, vectorized=target_kind == "vectorized")
    n = a.size
    body = [f"a = {shape_text(type_name, [n])} parameter(0)"]
    results = []
    for dst in destinations:
        results.append((f"to_{dst}", shape_text(dst, [n])))
        body.append(f"to_{dst} = {results[-1][1]} convert(a)")
    body.append(tuple_line("t", results))
    key = f"convert-{type_name}-{len(destinations)}-{target_kind}"
    return run_group(key, body, list(destinations), [a], target_kind), a


# Sources of the default run: every kind of conversion (from pred, narrow and wide, signed and unsigned
# integers, narrow and wide floats) to every core type; every other pair under -m slow.
CONVERT_SOURCES = ["pred", "s4", "u8", "s16", "u32", "s64", "u64", "f16", "bf16", "f32", "f64", "f8e4m3fn",
                   "f8e5m2", "f8e8m0fnu", "f4e2m1fn"]


CONVERT_GROUP = [t for t in SWEPT_TYPES if t != "f4e2m1fn"]
"""The destinations a conversion's kernel holds: all but f4e2m1fn, which gets a kernel of its own
(SLP_MISCOMPILE: with it, f8e5m2 -> f8e8m0fnu is miscompiled in the same kernel)."""


def _destinations(src: str, dst: str) -> tuple[str, ...]:
    """The group a conversion is compiled in: the core types, or (under -m slow) the others; f4e2m1fn
    alone."""
    if dst not in CONVERT_GROUP:
        return (dst,)
    if src not in CONVERT_SOURCES:
        return tuple(CONVERT_GROUP)
    return tuple(t for t in CONVERT_GROUP if (t in CORE_TYPES) == (dst in CORE_TYPES))


def all_conversions(src: str, target_kind: str):
    """(dst, cpu result, evaluator result, inputs) for every conversion from `src`, in the kernels of
    `_destinations`' groups."""
    for group in (tuple(CONVERT_GROUP), ("f4e2m1fn",)):
        results, a = convert_group(src, group, target_kind)
        for dst, (got, ref) in results.items():
            yield dst, got, ref, a


CONVERT_CASES = [(src, dst) for src in SWEPT_TYPES for dst in SWEPT_TYPES]


def _convert_param(src: str, dst: str):
    return _in_group(src, dst, group=f"convert-{src}-{'-'.join(_destinations(src, dst))}",
                     slow=not (src in CONVERT_SOURCES and dst in CORE_TYPES), id=f"{src}-to-{dst}")


@pytest.mark.parametrize("src,dst", [_convert_param(s, d) for s, d in CONVERT_CASES])
def test_convert(src, dst):
    results, a = convert_group(src, _destinations(src, dst))
    got, ref = results[dst]
    check("convert", got, ref, [a], f"convert {src} -> {dst}")


@pytest.mark.parametrize("src", _default_target_params(["f32"], SWEPT_TYPES))
def test_convert_default_target(src):
    for dst, got, ref, a in all_conversions(src, "default"):
        check("convert", got, ref, [a], f"convert {src} -> {dst}")


@pytest.mark.parametrize("src", _default_target_params(["bf16", "f8e4m3fn", "f4e2m1fn", "s32"], SWEPT_TYPES))
def test_convert_vectorized(src):
    """The default target on a multiple of 64 elements: every conversion on whole vectors (vectorize-
    elementwise's xla.cmpf/xla.select/xla.fptosi/..., lower-narrow-floats' vector bit manipulation)."""
    for dst, got, ref, a in all_conversions(src, "vectorized"):
        check("convert", got, ref, [a], f"convert {src} -> {dst}")


@pytest.mark.parametrize("other", ["s2", "u2", "s4"])
def test_slp_miscompile(other):
    """SLP_MISCOMPILE's kernel: 9 elements, so the last thread's 2-4 lanes are partial. Its lanes, each
    under a bounds branch, were what LLVM's SLP vectorizer miscompiled; they are one masked vector
    loop now (vectorize_masked_lanes), and right."""
    x = np.array([-1, -0.5, -2, 3, -1, -1, -4, 0.25, -8], np.float32).astype(T["f8e5m2"].dtype)
    text = module_text(["a = f8e5m2[9] parameter(0)", f"s = {other}[9] convert(a)", "e = f8e8m0fnu[9] convert(a)",
                        f"t = ({other}[9], f8e8m0fnu[9]) tuple(s, e)"])
    got, ref = run_both(text, [x], scalar_target())
    assert_exact(got[1], ref[1], [x])


# -- transcendental functions -----------------------------------------------------------------------------

def _transcendental_inputs(type_name: str, vectorized: bool = False) -> list[np.ndarray]:
    """a, b: every pair of edge values, then random values in [-1.2, 1.2] (the inverse trig functions'
    domain), [-12, 12] and of log-uniform magnitude (up to a multiple of 64 elements when
    `vectorized`); t, the argument of sin/cos/tan: a where it is below `trig_range` (b or 0 elsewhere)."""
    pt = T[type_name]
    a, b = pair_inputs(type_name)
    rng = np.random.default_rng(pt.bits + 1)
    k = 1000 + (-(a.size + 3000) % 64) if vectorized else 1000
    span = 300 if pt.bits == 64 else 30
    extra = np.concatenate([rng.uniform(-1.2, 1.2, k), rng.uniform(-12, 12, 1000),
                            np.exp(rng.uniform(-span, span, 1000)) * rng.choice([-1.0, 1.0], 1000)])
    with np.errstate(all="ignore"):
        extra = extra.astype(np.float32).astype(pt.dtype) if pt.bits < 64 else extra
    a = np.concatenate([a, extra])
    b = np.concatenate([b, rng.permutation(extra)])
    t = np.where(np.abs(a.astype(np.float64)) < trig_range(type_name), a, b)
    t = np.where(np.abs(t.astype(np.float64)) < trig_range(type_name), t, np.zeros_like(t))
    return [a, b, t]


def transcendental_group(type_name: str, target_kind: str = "scalar", ops: tuple[str, ...] | None = None):
    """The transcendental functions of one type as one kernel (target kinds as in `exact_group`)."""
    inputs = _transcendental_inputs(type_name, vectorized=target_kind == "vectorized")
    n = inputs[0].size
    s = shape_text(type_name, [n])
    body = [f"a = {s} parameter(0)", f"b = {s} parameter(1)", f"t = {s} parameter(2)"]
    labels = list(ops or transcendental_ops(type_name))
    results = []
    for op in labels:
        args = "a, b" if OPCODES[op].arity == 2 else ("t" if op in TRIG else "a")
        results.append((_name(op), s))
        body.append(f"{_name(op)} = {s} {op}({args})")
    body.append(tuple_line("t_", results))
    key = f"transcendental-{type_name}-{len(labels)}-{target_kind}"
    return run_group(key, body, labels, inputs, target_kind), inputs


def _tolerance(op: str, type_name: str) -> int:
    bits = T[type_name].bits
    return NARROW_ULPS if bits < 32 else TRANSCENDENTAL_ULPS[op][0 if bits == 32 else 1]


def _transcendental_operands(op: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    return [inputs[2]] if op in TRIG else inputs[:OPCODES[op].arity]


TRANSCENDENTAL_CASES = [(t, op) for t in SWEPT_TYPES for op in transcendental_ops(t)]


@needs_expand_float_ops()
@pytest.mark.parametrize("type_name,op", [_in_group(t, op, group=f"transcendental-{t}", slow=t not in CORE_TYPES)
                                                for t, op in TRANSCENDENTAL_CASES],
                         ids=[f"{op}-{t}" for t, op in TRANSCENDENTAL_CASES])
def test_transcendental_op(type_name, op):
    results, inputs = transcendental_group(type_name)
    got, ref = results[op]
    check(op, got, ref, _transcendental_operands(op, inputs), f"{op} on {type_name}", _tolerance(op, type_name))


# Enough to see every kind of approximation vectorized (the others under -m slow).
DEFAULT_TARGET_FUNCTIONS = ("exponential", "log", "tanh", "sine", "erf", "power", "atan2", "logistic", "cosh")


@needs_expand_float_ops()
@pytest.mark.parametrize("type_name,ops,kind", [
    ("f32", DEFAULT_TARGET_FUNCTIONS, "vectorized"),
    ("bf16", ("exponential", "log", "tanh", "erf"), "vectorized"),  # bf16 runs the f32 approximations widened
    *[pytest.param(t, None, kind, marks=pytest.mark.slow) for t in SWEPT_TYPES if T[t].is_float
      for kind in ("default", "vectorized")]])
def test_transcendental_ops_default_target(type_name, ops, kind):
    results, inputs = transcendental_group(type_name, kind, ops)
    for op, (got, ref) in results.items():
        check(op, got, ref, _transcendental_operands(op, inputs), f"{op} on {type_name}", _tolerance(op, type_name))


# -- complex numbers ------------------------------------------------------------------------------------------

def _complex_case_text(op: str, type_name: str) -> str | None:
    """A one-op module applying `op` to complex operands (or making complex results), or None where
    the verifier rejects the op on complex numbers."""
    part = complex_parts_type(type_name)
    s, ps = shape_text(type_name, [3, 5]), shape_text(part, [3, 5])
    params = [f"x = {s} parameter(0)", f"y = {s} parameter(1)", "p = pred[3,5] parameter(2)", f"f = {ps} parameter(3)"]
    lines = {"complex": f"r = {s} complex(f, f)", "convert": f"r = {s} convert(f)",
             "compare": "r = pred[3,5] compare(x, y), direction=EQ", "select": f"r = {s} select(p, x, y)",
             "clamp": f"r = {s} clamp(x, y, x)", "stochastic-convert": "r = s32[3,5] stochastic-convert(x, y)"}
    if op in lines:
        line = lines[op]
    elif op in ("abs", "real", "imag"):
        line = f"r = {ps} {op}(x)"
    else:
        line = f"r = {s} {op}({'x' if OPCODES[op].arity == 1 else 'x, y'})"
    text = module_text([*params, line])
    try:
        verify_module(parse_hlo(text))
    except HloVerifyError:
        return None
    return text


COMPLEX_CASES = [(t, op) for t in COMPLEX_TYPES for op, info in OPCODES.items()
                 if info.is_elementwise and _complex_case_text(op, t) is not None]
COMPLEX_UNDEFINED = {"maximum", "minimum", "clamp", "remainder"}
"""Ops the verifier accepts on complex numbers but the evaluator does not define (nor do kernels)."""

# Computed exactly as the evaluator computes them: complex multiply as numpy does on this host (fused
# multiply-adds where the CPU has them, `approx_complex.mul`), divide by numpy's Smith algorithm (with
# XLA's cases for zero divisors and infinite parts: `test_complex_division_by_zero_and_infinite_parts`), abs
# by numpy's larger * sqrt(r² + 1) (c64 in c128, rounded once), sign from both.
COMPLEX_EXACT_OPS = ["add", "subtract", "multiply", "divide", "negate", "abs", "sign", "real", "imag", "copy"]
# The functions and their tolerance in ulps of the result's larger part (`complex_ulp_distance`), for c128;
# c64 computes in c128 and rounds once (1 ulp). Two are the evaluator's compositions, whose own
# conditioning sets the bound: power, e^(y log x), plus 8 c128 ulp per unit of |y log x| (an error of one
# ulp in w = y log x is |w| ulps of e^w, in the evaluator as in the kernel); atan2, -i log((x + iy) /
# sqrt(x² + y²)), in ulps of at least 1 (log|q| of a quotient |q| ~ 1 carries its absolute error).
COMPLEX_FUNCTION_ULPS = {
    "exponential": 3, "exponential-minus-one": 4, "log": 2, "log-plus-one": 2, "logistic": 4, "sqrt": 1,
    "rsqrt": 1, "sine": 4, "cosine": 4, "tan": 4, "tanh": 5, "power": 4, "atan2": 4,
}
# Which argument of the trigonometric functions inside each function a known bug (TRIG_HUGE) makes wrong
# beyond `trig_range`: the imaginary part of e^z's z, the real part of sin/cos/tan's.
COMPLEX_TRIG_ARGUMENT = {"exponential": "imag", "exponential-minus-one": "imag", "logistic": "imag",
                         "tanh": "imag", "sine": "real", "cosine": "real", "tan": "real", "power": "exponent"}


def complex_labels(type_name: str) -> list[str]:
    other = "c128" if type_name == "c64" else "c64"
    return [*COMPLEX_EXACT_OPS, "complex", "compare-EQ", "compare-NE", "select", "select-scalar-pred",
            f"convert-from-{other}", *[f"convert-from-{t}" for t in SWEPT_TYPES]]


def _complex_inputs(type_name: str, vectorized: bool = False) -> list[np.ndarray]:
    """x: every pair of edge values of the parts' type as (re, im), then random values (a quarter of
    them near the unit circle), an odd number or (`vectorized`) a multiple of 64; y: x shuffled; p:
    random preds; f, g: x's parts; sp: a scalar pred."""
    rng = np.random.default_rng(T[type_name].bits)
    edges = edge_values(type_name)
    n = edges.size + 1001
    n += -n % 64 if vectorized else 0
    x = np.concatenate([edges, random_values(type_name, n - edges.size, rng)])
    y = rng.permutation(x)
    return [x, y, rng.random(n) < 0.5, x.real.copy(), y.imag.copy(), np.asarray(True)]


def _complex_line(label: str, type_name: str) -> tuple[str, str]:
    """(result element type, instruction text after the shape) of one complex op."""
    part = complex_parts_type(type_name)
    fixed = {"complex": (type_name, "complex(f, g)"), "select": (type_name, "select(p, x, y)"),
             "select-scalar-pred": (type_name, "select(sp, x, y)"), "abs": (part, "abs(x)"),
             "real": (part, "real(x)"), "imag": (part, "imag(x)")}
    if label in fixed:
        return fixed[label]
    if label.startswith("compare-"):
        return "pred", f"compare(x, y), direction={label.split('-')[1]}"
    if label.startswith("convert-from-"):
        return type_name, f"convert(c_{_name(label)})"
    return type_name, f"{label}({'x' if OPCODES[label].arity == 1 else 'x, y'})"


def _convert_sources(label: str, x: np.ndarray) -> tuple[str, np.ndarray]:
    """(source type, values) of a convert-from label: x, or its real part, converted to the source type
    (by the evaluator's conversion: only the values matter)."""
    src = label.removeprefix("convert-from-")
    part = x.real.copy()
    with np.errstate(all="ignore"):
        return src, x.astype(T[src].dtype) if T[src].is_complex else convert_values(part, from_dtype(part.dtype), T[src])


def complex_group(type_name: str, target_kind: str = "scalar"):
    """The exactly computed complex ops of one type as one kernel (target kinds as in `exact_group`)."""
    x, y, p, f, g, sp = _complex_inputs(type_name, vectorized=target_kind == "vectorized")
    n = x.size
    s, ps = shape_text(type_name, [n]), shape_text(complex_parts_type(type_name), [n])
    body = [f"x = {s} parameter(0)", f"y = {s} parameter(1)", f"p = pred[{n}] parameter(2)", f"f = {ps} parameter(3)",
            f"g = {ps} parameter(4)", "sp = pred[] parameter(5)"]
    labels = complex_labels(type_name)
    inputs = [x, y, p, f, g, sp]
    results = []
    for label in labels:
        if label.startswith("convert-from-"):
            src, values = _convert_sources(label, x)
            body.append(f"c_{_name(label)} = {shape_text(src, [n])} parameter({len(inputs)})")
            inputs.append(values)
        result_type, line = _complex_line(label, type_name)
        results.append((_name(label), shape_text(result_type, [n])))
        body.append(f"{_name(label)} = {results[-1][1]} {line}")
    body.append(tuple_line("t", results))
    return run_group(f"complex-{type_name}-{target_kind}", body, labels, inputs, target_kind), inputs


def _complex_operands(label: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    x, y, p, f, g = inputs[:5]
    if label.startswith("select"):
        return [p, x, y]
    if label == "complex":
        return [f, g]
    if label.startswith("compare"):
        return [x, y]
    return [x] if label.startswith("convert-from-") or OPCODES[label].arity == 1 else [x, y]


COMPLEX_EXACT_CASES = [(t, label) for t in COMPLEX_TYPES for label in complex_labels(t)]


@pytest.mark.parametrize("type_name,label", [_in_group(t, lb, group=f"complex-{t}") for t, lb in COMPLEX_EXACT_CASES],
                         ids=[f"{lb}-{t}" for t, lb in COMPLEX_EXACT_CASES])
def test_complex_exact_op(type_name, label):
    results, inputs = complex_group(type_name)
    got, ref = results[label]
    assert_exact(got, ref, _complex_operands(label, inputs), f"{label} on {type_name}")


@pytest.mark.parametrize("type_name,kind", [("c64", "vectorized"), pytest.param("c128", "vectorized", marks=pytest.mark.slow),
                                            *[pytest.param(t, "default", marks=pytest.mark.slow) for t in COMPLEX_TYPES]])
def test_complex_exact_ops_default_target(type_name, kind):
    """The default target: per-thread loops over complex elements (unrolled; LLVM's SLP vectorizer
    makes vectors of their parts)."""
    results, inputs = complex_group(type_name, kind)
    for label, (got, ref) in results.items():
        assert_exact(got, ref, _complex_operands(label, inputs), f"{label} on {type_name}")


def complex_function_group(type_name: str, target_kind: str = "scalar"):
    """The complex functions of one type as one kernel."""
    x, y = _complex_inputs(type_name, vectorized=target_kind == "vectorized")[:2]
    n = x.size
    s = shape_text(type_name, [n])
    body = [f"x = {s} parameter(0)", f"y = {s} parameter(1)"]
    labels = list(COMPLEX_FUNCTION_ULPS)
    for op in labels:
        body.append(f"{_name(op)} = {s} {op}({'x' if OPCODES[op].arity == 1 else 'x, y'})")
    body.append(tuple_line("t", [(_name(op), s) for op in labels]))
    return run_group(f"complex-functions-{type_name}-{target_kind}", body, labels, [x, y], target_kind), [x, y]


def check_complex_function(op: str, type_name: str, got: np.ndarray, ref: np.ndarray, x: np.ndarray,
                           y: np.ndarray) -> None:
    """`got` within the tolerance of `op` (COMPLEX_FUNCTION_ULPS) of `ref`, but where a known bug makes it
    wrong (a trigonometric argument beyond `trig_range`). An overflowing power need only be infinite
    too: the signs of its parts follow cos and sin of an angle that the rounding of y·log x can move
    across a multiple of pi/2."""
    ulps = np.full(x.shape, 1.0 if type_name == "c64" else float(COMPLEX_FUNCTION_ULPS[op]))
    with np.errstate(all="ignore"):
        w = y.astype(np.complex128) * np.log(x.astype(np.complex128))
        if op == "power":  # 8 ulp of c128 per unit of |w| (2^-29 of that in c64's ulps)
            ulps += 8 * np.nan_to_num(np.abs(w), nan=0.0, posinf=0.0) * (2.0**-29 if type_name == "c64" else 1.0)
    argument = {"imag": x.imag, "real": x.real, "exponent": w.imag}.get(COMPLEX_TRIG_ARGUMENT.get(op),
                                                                       np.zeros(x.shape))
    keep = ~(np.isfinite(argument) & (np.abs(argument) >= trig_range(type_name)))
    if op == "power":
        infinite = lambda z: np.isinf(z.real) | np.isinf(z.imag)  # noqa: E731
        keep &= ~(infinite(got) & infinite(ref))
    operands = [x[keep]] if OPCODES[op].arity == 1 else [x[keep], y[keep]]
    assert_complex_ulps(got[keep], ref[keep], ulps[keep], operands, f"{op} on {type_name}",
                        floor=1.0 if op == "atan2" else 0.0)


@needs_expand_float_ops()
@pytest.mark.parametrize("type_name,op", [_in_group(t, op, group=f"complex-functions-{t}")
                                          for t in COMPLEX_TYPES for op in COMPLEX_FUNCTION_ULPS],
                         ids=[f"{op}-{t}" for t in COMPLEX_TYPES for op in COMPLEX_FUNCTION_ULPS])
def test_complex_function(type_name, op):
    results, (x, y) = complex_function_group(type_name)
    check_complex_function(op, type_name, *results[op], x, y)


@needs_expand_float_ops()
@pytest.mark.slow
@pytest.mark.parametrize("type_name", COMPLEX_TYPES)
def test_complex_functions_vectorized(type_name):
    results, (x, y) = complex_function_group(type_name, "vectorized")
    for op, (got, ref) in results.items():
        check_complex_function(op, type_name, got, ref, x, y)


@pytest.mark.parametrize("type_name,op", [(t, op) for t, op in COMPLEX_CASES if op in COMPLEX_UNDEFINED],
                         ids=[f"{op}-{t}" for t, op in COMPLEX_CASES if op in COMPLEX_UNDEFINED])
def test_complex_ops_the_evaluator_does_not_define_are_unsupported(type_name, op):
    with pytest.raises(UnsupportedError, match=rf"unsupported: {op} on complex numbers"):
        compile_kernel(_complex_case_text(op, type_name))


def test_complex_compare_is_eq_and_ne_only():
    text = module_text(["x = c64[3] parameter(0)", "r = pred[3] compare(x, x), direction=LT"])
    try:
        verify_module(parse_hlo(text))
    except HloVerifyError:
        pytest.skip("the verifier rejects compare LT on complex numbers")
    with pytest.raises(UnsupportedError, match=r"compare with direction LT on complex numbers"):
        compile_kernel(text)


COMPLEX_INDEX_OPS = """HloModule complex_index_ops

add_c128 {
  a = c128[] parameter(0)
  b = c128[] parameter(1)
  ROOT s = c128[] add(a, b)
}

ENTRY main {
  x = c64[4,6]{0,1} parameter(0)
  u = c64[2,3] parameter(1)
  i = s32[] parameter(2)
  k = c64[2,2] constant({{(1, -1), (2, 0.5)}, {(-3, 4), (0, -0)}})
  z = c64[] constant((0.25, -8))
  padded = c64[8,6] pad(k, z), padding=2_4x1_3
  cat = c64[12,6] concatenate(padded, x), dimensions={0}
  t = c64[6,4] transpose(x), dimensions={1,0}
  dus = c64[6,4] dynamic-update-slice(t, u, i, i)
  rev = c64[6,4] reverse(dus), dimensions={0,1}
  io = c64[6,4] iota(), iota_dimension=1
  sum = c64[6,4] add(rev, io)
  w = c128[6,4] convert(sum)
  zero = c128[] constant((0, 0))
  red = c128[6] reduce(w, zero), dimensions={1}, to_apply=add_c128
  ROOT tup = (c64[12,6], c128[6]) tuple(cat, red)
}
"""


@pytest.mark.parametrize("fused", [False, True])
def test_complex_numbers_in_index_ops_and_reductions(fused):
    """Complex elements through constants (array and scalar), pad, concatenate, transpose,
    dynamic-update-slice, reverse, iota, convert and a reduce (c128 add), op by op and with the HLO
    passes' fusions."""
    rng = np.random.default_rng(5)
    x = complex_of(rng.standard_normal((4, 6)), rng.standard_normal((4, 6)), "c64")
    u = complex_of(rng.standard_normal((2, 3)), rng.standard_normal((2, 3)), "c64")
    exe = hlocc.compile(COMPLEX_INDEX_OPS, backend="cpu", hlo_passes=fused)
    assert not exe.runner.stats.host_ops, exe.runner.stats.to_string()
    for i in (np.int32(1), np.int32(7)):
        got, ref = flatten(exe(x, u, i)), run_reference(COMPLEX_INDEX_OPS, [x, u, i])
        assert_exact(got[0], ref[0], [], "index ops")
        assert_complex_ulps(got[1], ref[1], 4, [], "reduce")  # the summation order may differ


def test_bitcast_convert_between_widths_is_unsupported():
    with pytest.raises(UnsupportedError, match=r"unsupported: bitcast-convert between types of different widths"):
        compile_kernel(module_text(["x = f32[3] parameter(0)", "r = u8[3,4] bitcast-convert(x)"]))


def test_the_runtime_runs_what_no_kernel_computes_on_the_host_and_says_so():
    text = module_text(["x = f32[3] parameter(0)", "r = u8[3,4] bitcast-convert(x)"])
    exe = hlocc.compile(text, backend="cpu", hlo_passes=False)
    (name, opcode, why), = exe.runner.stats.host_ops
    assert opcode == "fusion" and "between types of different widths" in why
    inputs = random_inputs(hlocc.parse_hlo(text), 3)
    for got, ref in zip(flatten(exe(*inputs)), run_reference(text, inputs)):
        np.testing.assert_array_equal(got, ref)


def test_complex_cases_cover_the_complex_ops():
    covered = {op for _, op in COMPLEX_CASES}
    assert {"add", "multiply", "divide", "exponential", "log", "abs", "real", "imag", "complex", "convert",
            "compare", "select", "negate", "power", "atan2", "sqrt", "tanh", "copy"} <= covered
    swept = set(COMPLEX_EXACT_OPS) | set(COMPLEX_FUNCTION_ULPS) | COMPLEX_UNDEFINED | {"complex", "compare", "select",
                                                                                      "convert"}
    assert covered <= swept, covered - swept


def _opcode_of(label: str) -> str:
    prefixes = ("compare", "select", "clamp", "reduce-precision", "stochastic-convert", "bitcast-convert")
    return next((p for p in prefixes if label.startswith(p)), label)


def test_every_elementwise_opcode_is_swept():
    swept = {_opcode_of(label) for _, label in EXACT_CASES} | {op for _, op in TRANSCENDENTAL_CASES} | {"convert"}
    elementwise = {name for name, info in OPCODES.items() if info.is_elementwise}
    assert elementwise - swept == {"complex"}  # complex: test_complex_exact_op


# -- known bugs elsewhere: these fail until they are fixed ----------------------------------------------------

@pytest.mark.parametrize("line,type_name", [
    ("r = f4e2m1fn[9] convert(a)", "f32"), ("r = f32[9] convert(a)", "f4e2m1fn"),
    ("r = f4e2m1fn[9] add(a, a)", "f4e2m1fn"), ("r = pred[9] compare(a, a), direction=LT", "f4e2m1fn"),
    ("r = f4e2m1fn[9] bitcast-convert(a)", "s4"),
])
def test_f4e2m1fn_kernels(line, type_name):
    """f4e2m1fn is stored one value per byte (low 4 bits), an i4 in registers: loads, stores, math and
    bitcasts on the default target."""
    a = np.linspace(-6, 6, 9).astype(T[type_name].dtype)
    got, ref = run_both(module_text([f"a = {type_name}[9] parameter(0)", line]), [a], kernels_only=True)
    assert_exact(got[0], ref[0], [a])


@pytest.mark.parametrize("src", ["f64", "f32", "f16", "bf16", "f8e5m2", "f8e4m3fn", "f8e4m3fnuz"])
def test_nan_to_f4e2m1fn_is_negative_zero(src):
    """f4e2m1fn has no NaN: XLA gives -0 (bits 0x8) for a NaN of either sign (ml_dtypes, which both
    the kernels and the evaluator followed, gave the zero of the opposite sign)."""
    a = np.array([np.nan, np.copysign(np.nan, -1), 1.0, -7.0]).astype(T[src].dtype)  # (-7 saturates to -6)
    text = module_text([f"a = {src}[4] parameter(0)", "r = f4e2m1fn[4] convert(a)"])
    for backend in ("cpu", "interpreter"):
        got = np.asarray(hlocc.compile(text, backend)(a)).view(np.uint8)
        assert got.tolist() == [0x8, 0x8, 0x2, 0xF], (backend, got)


@pytest.mark.parametrize("type_name", ["c64", "c128"])
def test_complex_division_by_zero_and_infinite_parts(type_name):
    """XLA's quotients (EmitComplexDivide's cases), on whole vectors and in the tail: a finite x over an
    infinite y is 0 * (x·v̄), a zero divisor copysign(inf, y.re) times x's parts (numpy and the kernels
    gave NaN + NaN i for the first and x's parts over |y.re| for the second)."""
    x = [2 - 3j, 1 + 1j, 1 + 1j, complex(5, -1), complex(math.inf, 1), complex(math.nan, 0)] * 11
    y = [complex(math.inf, math.inf), complex(-0.0, 0), complex(0, -0.0), complex(-math.inf, 2), 1 + 1j, 0j] * 11
    want = [complex(-0.0, -0.0), complex(-math.inf, -math.inf), complex(math.inf, math.inf), complex(-0.0, 0.0),
            complex(math.inf, -math.inf), complex(math.nan, math.nan)] * 11
    dtype = T[type_name].dtype
    text = module_text([f"a = {type_name}[66] parameter(0)", f"b = {type_name}[66] parameter(1)",
                        f"r = {type_name}[66] divide(a, b)"])
    got = np.asarray(hlocc.compile(text, "cpu")(np.array(x, dtype), np.array(y, dtype)))
    for part in (np.real, np.imag):
        g, w = part(got), part(np.array(want, dtype))
        assert ((g == w) & (np.signbit(g) == np.signbit(w)) | np.isnan(g) & np.isnan(w)).all(), got[:6]


def test_bf16_subnormal_results():
    """bf16 conversions keep subnormals (LLVM's x86 bfloat lowering flushed them)."""
    x = np.array([9.18e-41, -1e-39, 1.1663108e-38, 5e-39, 2.0], np.float32)
    text = module_text(["a = f32[5] parameter(0)", "h = bf16[5] convert(a)", "s = bf16[5] add(h, h)",
                        "c = bf16[5] convert(a)", "t = (bf16[5], bf16[5]) tuple(s, c)"])
    for got, ref in zip(*run_both(text, [x])):
        assert_exact(got, ref, [x])


@needs_expand_float_ops()
def test_f64_power_of_large_results():
    x = np.array([1.5, 2.0, -3.0, 0.5, 0.5487972156163918, 1.3824645982263597, 7.5])
    y = np.array([1e30, 1100.0, 1e300, -2000.0, 3.200794805336849e+57, -415.2460381610954, 300.5])
    got, ref = run_both(module_text(["x = f64[7] parameter(0)", "y = f64[7] parameter(1)",
                                     "r = f64[7] power(x, y)"]), [x, y])
    assert_ulps(got[0], ref[0], TRANSCENDENTAL_ULPS["power"][1], [x, y])


@needs_expand_float_ops()
@pytest.mark.parametrize("type_name", ["f32", "f64"])
def test_trig_of_huge_arguments(type_name):
    """f32's and f64's exact reductions: within 2 ulp of the evaluator at any magnitude (f64's
    sin(1e30) was 0.0935 before its Payne-Hanek reduction, against 0.0901)."""
    x = np.array([1e11, -3e15, 1e20, 1e30, 3e38], T[type_name].dtype)
    s = shape_text(type_name, [5])
    text = module_text([f"x = {s} parameter(0)", f"s = {s} sine(x)", f"c = {s} cosine(x)", f"t = {s} tan(x)",
                        f"r = ({s}, {s}, {s}) tuple(s, c, t)"])
    for got, ref in zip(*run_both(text, [x])):
        assert_ulps(got, ref, 2, [x])


# -- size-0 and odd shapes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dims", [[0], [0, 5, 2], [3, 0], [2, 0, 3]])
def test_size_zero_elementwise(dims):
    s = shape_text("f32", dims)
    text = module_text([f"a = {s} parameter(0)", f"b = {s} parameter(1)", f"r = {s} add(a, b)"])
    got = run_cpu(text, [np.zeros(dims, np.float32)] * 2)
    assert got[0].shape == tuple(dims) and got[0].dtype == np.float32


def test_rank_two_odd_shape_and_scalars():
    """[3,5] and rank-0 operands, on the default target."""
    a = np.arange(15, dtype=np.int32).reshape(3, 5) - 7
    text = module_text(["a = s32[3,5] parameter(0)", "k = s32[] parameter(1)", "b = s32[3,5] broadcast(k), dimensions={}",
                        "m = s32[3,5] multiply(a, b)", "s = s32[3,5] shift-right-arithmetic(m, a)",
                        "d = s32[3,5] divide(m, a)", "r = (s32[3,5], s32[3,5]) tuple(s, d)"])
    got, ref = run_both(text, [a, np.int32(-3)])
    for g, r in zip(got, ref):
        assert_exact(g, r, [a])
    scalar = module_text(["a = f32[] parameter(0)", "r = f32[] sqrt(a)"])
    assert run_cpu(scalar, [np.float32(2.25)])[0] == np.float32(1.5)
