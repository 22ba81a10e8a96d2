"""Helpers of the thunk runtime tests (test_thunks_*.py, test_library.py): poisoned run memory,
exact and tolerant comparisons against the interpreter, and what an executable compiled into."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlocc
from hlocc.compiler import clear_compile_cache
from hlocc.runtime import call_plan
from hlocc.runtime import executable as runtime_executable
from hlocc.runtime.thunks import aligned_bytes

# -- helpers (test_library.py uses them too) -------------------------------------------------------


POISON = 0xA5
"""The byte every fresh allocation of a run starts with (a negative float, an odd integer, an invalid
bool): an output or temporary that no thunk writes shows up as poison, not as whatever the memory
held before (which may be a previous run's right answer)."""


@pytest.fixture(autouse=True)
def poisoned_memory(monkeypatch):
    """Every run's fresh allocations (outputs, temporaries, copied parameters) start as POISON: the
    call plans (runtime/call_plan.py) keep no arena between calls, and the executables compiled
    before (the in-process compile cache) are forgotten, so no plan holds unpoisoned memory."""
    def poisoned(size: int) -> np.ndarray:
        data = aligned_bytes(size)
        data.fill(POISON)
        return data
    monkeypatch.setattr(runtime_executable, "aligned_bytes", poisoned)
    monkeypatch.setattr(call_plan, "aligned_bytes", poisoned)
    monkeypatch.setattr(call_plan, "EMPTY", poisoned_empty)
    monkeypatch.setattr(call_plan, "MAX_ARENAS", 0)
    clear_compile_cache()


def poisoned_empty(shape, dtype) -> np.ndarray:
    """`np.empty(shape, dtype)` whose every byte is POISON (call_plan.EMPTY: the outputs' shared
    buffer in bytes, an output of its own at its dims and dtype)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return np.full(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, POISON, np.uint8).view(dtype).reshape(shape)


def random_array(shape: tuple[int, ...], dtype, rng: np.random.Generator) -> np.ndarray:
    """Values a dtype holds exactly: small signed/unsigned integers, normal floats, random preds."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu" or dtype in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4)):
        info = ml_dtypes.iinfo(dtype)
        return rng.integers(int(info.min), int(info.max) + 1, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def assert_exact(got, ref) -> None:
    """Same structure, shapes, dtypes and bytes (so NaNs and signed zeros too)."""
    got_leaves, ref_leaves = leaves(got), leaves(ref)
    assert len(got_leaves) == len(ref_leaves)
    for k, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        g, r = np.asarray(g), np.asarray(r)
        assert (g.shape, g.dtype) == (r.shape, r.dtype), f"leaf {k}: {g.shape} {g.dtype} != {r.shape} {r.dtype}"
        assert np.ascontiguousarray(g).tobytes() == np.ascontiguousarray(r).tobytes(), f"leaf {k}:\n{g}\n!=\n{r}"


def assert_close(got, ref, rtol: float = 1e-5, atol: float = 1e-5) -> None:
    """Same structure, shapes and dtypes; values within rtol/atol (compared in f64/c128)."""
    got_leaves, ref_leaves = leaves(got), leaves(ref)
    assert len(got_leaves) == len(ref_leaves)
    for k, (g, r) in enumerate(zip(got_leaves, ref_leaves)):
        g, r = np.asarray(g), np.asarray(r)
        assert (g.shape, g.dtype) == (r.shape, r.dtype), f"leaf {k}: {g.shape} {g.dtype} != {r.shape} {r.dtype}"
        wide = np.complex128 if r.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(wide), r.astype(wide), rtol=rtol, atol=atol, err_msg=f"leaf {k}")


def run_both(text: str, *args, hlo_passes: bool = True, gemm: str | None = None):
    """(cpu executable, its result, the interpreter's result) for `args`; `gemm` as for compile."""
    exe = hlocc.compile(text, backend="cpu", hlo_passes=hlo_passes, gemm=gemm)
    ref = hlocc.compile(text, backend="interpreter")(*args)
    return exe, exe(*args), ref


def check_exact(text: str, *args, hlo_passes: bool = True):
    exe, got, ref = run_both(text, *args, hlo_passes=hlo_passes)
    assert_exact(got, ref)
    return exe, got


def host_opcodes(exe) -> list[str]:
    return sorted(op for _, op, _ in exe.runner.stats.host_ops)


def thunk_kinds(exe) -> list[str]:
    return [t.kind for t in exe.runner.program.walk()]


BOTH_PIPELINES = pytest.mark.parametrize("hlo_passes", [True, False], ids=["passes", "no_passes"])
"""With the HLO passes (fusion, simplification) and without (each op or fusion as written; an
entry every op of which a kernel computes is one kLoop fusion)."""

