"""Which schedule a matmul gets: `schedule_for` is the one place the matmul emitter asks, and where
the analytic model and the autotuner's persistent cache will answer (issue 17 steps 5 and 6).

Today: none (the naive lowering) unless a schedule is in force through `use_schedule` (tests, the
benchmark). A forced schedule is not part of the in-process kernel cache's key: compile with the
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


def schedule_for(sizes: list[int], element_types: tuple[str, ...]) -> MatmulSchedule | None:
    """The schedule of a (B, M, N, K) matmul of these element types (lhs, rhs, result)."""
    forced = getattr(_FORCED, "schedule", ...)
    if forced is not ...:
        return forced
    return None


__all__ = ["schedule_for", "use_schedule"]
