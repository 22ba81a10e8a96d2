"""Autotuning of generated matmul kernels on the CPU (issue 17 step 5): the tuner that
codegen/schedule/choice.py asks when `autotune` is `cached` or `full`.

    cached: the winner stored for this problem's key, if any; else the analytic schedule
            (no timing, ever: a cache hit or the model);
    full:   a stored winner, or else time the candidates (the analytic schedule and its
            neighbours: KC halved and doubled, the model's best register blocks of two other widths
            (9 x 48 and 14 x 32 on AVX-512, 6 x 16 and 2 x 32 on AVX2), a B prefetch 8 steps ahead, bf16
            pairs on vdpbf16ps where the host has it), store the fastest.

The key (text) is what changes the best choice: the problem's shape bucket (B, M, N, K each
rounded up to a power of two: neighbouring sizes share a winner), the element types, the
operands' and output's maps (layouts, transposes), a digest of the epilogue, the host CPU and its
features, and `TUNING_VERSION`. Winners are entries of the persistent cache (runtime/cache.py:
HLOCC_CACHE_DIR, owner-only directory, plain data: the schedule's fields as JSON in the entry's
plan, never pickled) under "gemm-autotune" keys; with the cache off, `full` tunes every time.

Candidates are compiled from the fusion itself with the schedule forced, outside the kernel cache,
and timed on random inputs (the minimum of `RUNS` warmed runs, as in Triton's and TVM's CPU
runners, on the thread pool's current thread count). A candidate that fails to compile (an
illegal point, e.g. a block too large for the scratch) counts as infinitely slow. Only kernels
that are compiled are tuned: a kernel the in-process or persistent kernel cache already holds
keeps the schedule it was compiled with (clear it with `hlocc cache clear` to tune again).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import time

import numpy as np

from hlocc.codegen.schedule import MatmulSchedule, use_schedule
from hlocc.codegen.schedule.choice import MatmulProblem, register_blocks, set_tuner
from hlocc.codegen.target import vector_isa
from hlocc.runtime.cache import persistent_cache

TUNING_VERSION = 2
RUNS = 3


def _bucket(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length()) if x > 0 else 0


@functools.cache
def _cpu() -> str:
    import llvmlite.binding as llvm

    from hlocc.runtime.jit import host_cpu_features

    return f"{llvm.get_host_cpu_name()} {host_cpu_features()}"


def tuning_key(problem: MatmulProblem) -> str:
    """The persistent cache key of a problem's winner (module doc)."""
    epilogue = hashlib.sha256(problem.epilogue.encode()).hexdigest()[:16]
    return (f"gemm-autotune v{TUNING_VERSION}\nbucket: {'x'.join(str(_bucket(s)) for s in problem.sizes)}\n"
            f"types: {','.join(problem.element_types)}\nlayouts: {problem.layouts}\nepilogue: {epilogue}\n"
            f"cpu: {_cpu()}")


def candidates(problem: MatmulProblem, analytic: MatmulSchedule) -> list[MatmulSchedule]:
    """The analytic schedule and its neighbours (module doc), legal for the problem's sizes."""
    _, m, n, k = problem.sizes
    out = [analytic]
    for kc in (analytic.kc // 2, analytic.kc * 2):
        if 16 <= kc <= max(k, 16) and kc != analytic.kc:
            out.append(dataclasses.replace(analytic, kc=min(kc, k)))
    best_of_width = {}
    for mr, nr in register_blocks():  # best first: the first block of each other width
        best_of_width.setdefault(nr, (mr, nr))
    for mr, nr in list(best_of_width.values())[1:3]:
        if m >= mr:
            mc = max(mr, analytic.mc // mr * mr)
            nc = max(nr, analytic.nc // nr * nr)
            out.append(dataclasses.replace(analytic, mr=mr, nr=nr, mc=mc, nc=nc))
    out.append(dataclasses.replace(analytic, prefetch=8))
    if problem.element_types[:2] == ("bf16", "bf16") and vector_isa().bf16_dot:
        kc = analytic.kc + analytic.kc % 2 if analytic.kc < k else analytic.kc
        out.append(dataclasses.replace(analytic, k_pairs=True, kc=kc))
    return list(dict.fromkeys(out))


def time_schedule(computation, schedule: MatmulSchedule, runs: int = RUNS) -> float:
    """Milliseconds of the fusion compiled with `schedule` (min of warmed runs); inf if it fails."""
    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.errors import HloError

    try:
        with use_schedule(schedule):
            kernel = compile_fusion(computation, use_cache=False)
    except HloError:
        return float("inf")
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(p.shape.dims).astype(p.shape.element_type.dtype) for p in computation.parameters]
    kernel(*args)
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        kernel(*args)
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


def tune(problem: MatmulProblem, analytic: MatmulSchedule | None, mode: str) -> MatmulSchedule | None:
    """The tuner registered with `choice.set_tuner` (module doc)."""
    cache = persistent_cache()
    key = tuning_key(problem)
    entry = cache.get(key) if cache is not None else None
    if entry is not None:
        try:
            return MatmulSchedule(**{f: tuple(v) if isinstance(v, list) else v
                                     for f, v in entry.plan["schedule"].items()})
        except (KeyError, TypeError):
            pass  # an entry of another layout: tune again in `full`
    if mode != "full" or analytic is None or problem.computation is None:
        return None
    timings = [(time_schedule(problem.computation, s), s) for s in candidates(problem, analytic)]
    best_ms, best = min(timings, key=lambda t: t[0])
    if best_ms == float("inf"):
        return None
    if cache is not None:
        cache.put(key, {"schedule": dataclasses.asdict(best),
                        "timings_ms": [[ms, dataclasses.asdict(s)] for ms, s in timings if ms != float("inf")]},
                  b"")
    return best


set_tuner(tune)

__all__ = ["RUNS", "TUNING_VERSION", "candidates", "time_schedule", "tune", "tuning_key"]
