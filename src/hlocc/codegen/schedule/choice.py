"""Which schedule a matmul gets: `schedule_for` is the one place the matmul emitter asks, and where
the analytic model and the autotuner's persistent cache will answer (issue 17 steps 5 and 6).

Today a fixed analytic choice (`default_schedule`): small products (under `NAIVE_BELOW`
multiply-adds) get none, the naive lowering, whose kernel compiles fastest; the others a 64 x 256
block tile with an 8 x 16 register block (8 x 1 zmm accumulators), the blocks on the thread pool
(`parallelize`); the register block is the best of a few measured
on this machine's f32 512^3 (loaded, one thread: 8x16 61 GFLOP/s, 4x16 k-unroll 4 58, 6x32 53,
4x32 31, 6x16 29; numpy's OpenBLAS 152). A schedule in force through `use_schedule` (tests, the
benchmark) wins over it. A forced schedule is not part of the in-process kernel cache's key: compile with the
cache off (`compile_fusion(..., use_cache=False)`) while one is in force.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from hlocc.codegen.schedule.builder import MatmulSchedule

_FORCED = threading.local()


@contextmanager
def use_schedule(schedule: MatmulSchedule | None) -> Iterator[None]:
    """Every matmul emitted in this thread inside the block gets `schedule` (None: naive)."""
    saved = getattr(_FORCED, "schedule", ...)
    _FORCED.schedule = schedule
    try:
        yield
    finally:
        if saved is ...:
            del _FORCED.schedule
        else:
            _FORCED.schedule = saved


NAIVE_BELOW = 32 ** 3
"""Multiply-adds under which a matmul keeps the naive lowering."""


def default_schedule(sizes: list[int]) -> MatmulSchedule | None:
    """The analytic choice for a (B, M, N, K) matmul (module doc)."""
    _, m, n, k = sizes
    if m * n * k < NAIVE_BELOW:
        return None
    # MC and NC are multiples of MR and NR; a dimension smaller than the register block is one block.
    return MatmulSchedule(mc=64, nc=256, kc=max(k, 1), mr=min(8, m), nr=min(16, n), k_unroll=1, parallel=True)


def schedule_for(sizes: list[int], element_types: tuple[str, ...]) -> MatmulSchedule | None:
    """The schedule of a (B, M, N, K) matmul of these element types (lhs, rhs, result)."""
    forced = getattr(_FORCED, "schedule", ...)
    if forced is not ...:
        return forced
    return default_schedule(sizes)


__all__ = ["NAIVE_BELOW", "default_schedule", "schedule_for", "use_schedule"]
