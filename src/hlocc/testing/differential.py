"""Differential runs: one module on several backends against the interpreter (the reference
evaluator), compared under the corpus tolerance policy (comparison.compare_arrays: integers and
preds exact, floats with NaN and infinities in the same places and |got - ref| <= atol + rtol|ref|)
with a tolerance per element type (TOLERANCES; XLA's own tests pick theirs the same way), looser
for f32 in a module with a dot, convolution, reduce or reduce-window (CONTRACTION_TOLERANCES): the
order of such a sum is the implementation's (the evaluator's numpy BLAS or pairwise sum, a generated
kernel's k loop or vector partials), so with cancellation two correct f32 results differ by ~K ulps
of the largest term (a 26-term row summing to -0.15 from terms of magnitude ~60: 2.2e-6 apart).

`differential(text, args, backends)` returns one `Outcome` per backend that did not match:
"mismatch" (an output differs), "crash" (an exception that is not an HloError) or "error" (an
HloError: on a valid module every backend must run it; "unsupported" when it says so). A module
the interpreter itself cannot run gives a single outcome for "interpreter"."""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hlocc.comparison import compare_arrays
from hlocc.compiler import compile as compile_module
from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.types import primitive_type

TOLERANCES = {"float64": (1e-9, 1e-12), "float32": (1e-5, 1e-6), "float16": (2e-3, 1e-3),
              "bfloat16": (1.6e-2, 1e-2)}
"""(rtol, atol) per output dtype; exact for the others."""

CONTRACTION_TOLERANCES = {"float32": (1e-4, 1e-5)}
"""TOLERANCES' entries replaced in a module with a contraction (module doc; XLA's dot tests use
ErrorSpec 1e-4 too)."""

SUMMING_OPS = ("dot", "convolution", "reduce", "reduce-window")
"""Ops whose sums an implementation may order its own way (module doc)."""


@dataclass(frozen=True)
class Outcome:
    backend: str
    kind: str  # mismatch, crash, error, unsupported
    detail: str

    def __str__(self) -> str:
        return f"{self.backend}: {self.kind}: {self.detail}"


def _leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def run_backend(text: str, args: Sequence[np.ndarray], backend: str, **options) -> list:
    return _leaves(compile_module(text, backend=backend, **options)(*args))


def _failure(backend: str, error: BaseException) -> Outcome:
    if isinstance(error, UnsupportedError):
        return Outcome(backend, "unsupported", str(error).splitlines()[0])
    if isinstance(error, HloError):
        return Outcome(backend, "error", f"{type(error).__name__}: {str(error).splitlines()[0]}")
    where = traceback.extract_tb(error.__traceback__)[-1]
    return Outcome(backend, "crash", f"{type(error).__name__}: {error} (at {where.filename}:{where.lineno})")


def compare_outputs(reference: list, got: list, contraction: bool = False) -> str | None:
    """Why `got` does not match `reference` (the policy in the module doc; `contraction`: the
    module has a dot or convolution), or None."""
    tolerances = TOLERANCES | CONTRACTION_TOLERANCES if contraction else TOLERANCES
    if len(reference) != len(got):
        return f"{len(got)} outputs, the reference has {len(reference)}"
    for i, (ref, out) in enumerate(zip(reference, got)):
        ref = np.asarray(ref)
        rtol, atol = tolerances.get(ref.dtype.name, (0.0, 0.0))
        why = compare_arrays(ref.astype(np.float64) if ref.dtype.name in ("bfloat16", "float16") else ref,
                             np.asarray(out), rtol, atol)
        if why is not None:
            return f"output {i} ({ref.dtype.name}{list(ref.shape)}): {why}"
    return None


def differential(text: str, args: Sequence[np.ndarray], backends: Sequence[str] = ("cpu", "cuda-sim"),
                 **options) -> list[Outcome]:
    """The backends' disagreements with the interpreter on `text` (module doc)."""
    try:
        reference = run_backend(text, args, "interpreter")
    except Exception as e:  # noqa: BLE001  (reported, not raised: the caller collects outcomes)
        return [_failure("interpreter", e)]
    outcomes = []
    for backend in backends:
        try:
            got = run_backend(text, args, backend, **options)
        except Exception as e:  # noqa: BLE001
            outcomes.append(_failure(backend, e))
            continue
        why = compare_outputs(reference, got, contraction=any(f" {op}(" in text for op in SUMMING_OPS))
        if why is not None:
            outcomes.append(Outcome(backend, "mismatch", why))
    return outcomes


def random_arguments(module, seed: int) -> list:
    """Arguments for `module`'s entry parameters: random values with special values mixed in (NaN,
    ±inf, ±0, ±the smallest denormal, ±1, integer extremes), one generator per parameter so removing
    one leaves the others' values unchanged."""
    return [_value(np.random.default_rng([seed, i]), p.shape) for i, p in enumerate(module.entry.parameters)]


def _value(rng: np.random.Generator, shape):
    if shape.is_tuple:
        return tuple(_value(rng, s) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    return _array(rng, shape.element_type.name, shape.dims)


def _array(rng: np.random.Generator, dtype: str, dims) -> np.ndarray:
    import ml_dtypes

    ptype = primitive_type(dtype)
    np_dtype = ptype.dtype
    n = int(np.prod(dims, dtype=np.int64))
    if ptype.is_pred:
        return rng.integers(0, 2, dims).astype(bool)
    if ptype.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(np_dtype)
    if ptype.is_float:
        info = ml_dtypes.finfo(np_dtype)
        specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, float(info.smallest_subnormal),
                             -float(info.smallest_subnormal), 1.0, -1.0], np.float64)
        values = rng.standard_normal(n) * 3
        mask = rng.random(n) < 0.15
        values[mask] = rng.choice(specials, int(mask.sum()))
        with np.errstate(over="ignore", invalid="ignore"):
            return values.astype(np_dtype).reshape(dims)
    info = ml_dtypes.iinfo(np_dtype)
    lo, hi = int(info.min), min(int(info.max), 2**63 - 1)  # u64: the largest value an int64 draw holds
    values = rng.integers(max(lo, -20), min(hi, 20) + 1, n, dtype=np.int64)
    mask = rng.random(n) < 0.1
    values[mask] = rng.choice(np.array([lo, hi, 0, -1 if lo < 0 else 1], np.int64), int(mask.sum()))
    shifts = rng.integers(0, info.bits, n) if n else np.zeros(0, np.int64)
    return np.where(rng.random(n) < 0.1, np.minimum(shifts, hi), values).astype(np_dtype).reshape(dims)


__all__ = ["CONTRACTION_TOLERANCES", "SUMMING_OPS", "TOLERANCES", "Outcome", "compare_outputs", "differential",
           "random_arguments", "run_backend"]
