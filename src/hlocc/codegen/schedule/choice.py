"""Which schedule a matmul gets: `schedule_for` is the one place the matmul emitter asks.

In order:
1. a schedule in force through `use_schedule` (tests, the benchmark, the autotuner's candidates);
2. with `--autotune` other than `off` and a tuner registered (`set_tuner`; the CPU backend
   registers backends/cpu/gemm_tuning.py, which owns the persistent cache and the timing), what
   the tuner returns: a cached winner, or in `full` the best of the timed candidates;
3. the analytic choice (`analytic_schedule`), BLIS's model (Low et al., "Analytical modeling is
   enough for high-performance BLIS", TOMS 2016) on this machine's caches:
   - register block MR x NR: of the blocks whose accumulators, B vectors and A broadcast fit the
     target's vector registers (codegen/target.py `vector_isa`) with at least FMA latency x FMA
     pipes = 8 independent accumulators, the one with the most flops per loaded value
     (2 MR NR / (MR + NR/lanes)): 6 x 64 on AVX-512 (24 of 32 zmm), 4 x 24 on AVX2 (12 of 16 ymm);
   - KC = 128 (or K): the A micro-panel (MR x KC, 3 KiB) stays in L1 across a row of register
     blocks and a B micro-panel (KC x NR, 32 KiB) nearly fits beside it, while B's panel streams
     from L2; KC amortizes the accumulator tile's load and store per K block (1/KC of the work);
   - NC: the packed B panel (KC x NC) in a quarter of L2 (sysfs), a multiple of NR;
   - MC: as large as the per-block scratch allows, up to 768. The B panel is packed per block
     here, not shared between blocks as in BLIS (a block is one thread's unit of work), so B is
     packed M / MC times and A N / NC times: profiled at 2048^3, MC = 192 and NC = 512 spent 12%
     of the time packing. The accumulator block (MC x NC f32, tile-major) need not stay in L2: a
     tile is loaded and stored once per K block, one sequential run;
   - then MC (down to 384) and then NC and MC halve until there are at least 4 blocks per thread,
     so both cores stay busy to the end, but not below 256 x 96 (`MIN_NC`, `MIN_MC`: packing would cost more than
     the balance gains); dimensions smaller than a block give one block.
   Small products (under `NAIVE_BELOW` multiply-adds) get no schedule, the naive lowering, whose
   kernel compiles fastest; N under one vector (16) or f64 keep the unpacked scalar register block
   (8 x N): the packed micro-kernel is f32 vectors of 16.

A schedule in force is part of the kernel caches' keys (`forced_schedule_key`, in the CPU's
kernel_cache.kernel_key and the cuda backend's PTX keys) and keeps a compile off the CPU's program
cache: a kernel compiled under one schedule is never handed out under another.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from hlocc.codegen.schedule.builder import MatmulSchedule
from hlocc.codegen.schedule.microkernel import registers_needed
from hlocc.codegen.schedule.pack import SCRATCH_BYTES
from hlocc.codegen.target import Target, VectorIsa, vector_isa

_STATE = threading.local()

AUTOTUNE_MODES = ("off", "cached", "full")


@contextmanager
def use_schedule(schedule: MatmulSchedule | None) -> Iterator[None]:
    """Every matmul emitted in this thread inside the block gets `schedule` (None: naive)."""
    saved = getattr(_STATE, "schedule", ...)
    _STATE.schedule = schedule
    try:
        yield
    finally:
        if saved is ...:
            del _STATE.schedule
        else:
            _STATE.schedule = saved


def forced_schedule_key() -> str:
    """The schedule in force (`use_schedule`) as text for the kernel caches' keys: '' when none is,
    'naive' for None."""
    forced = getattr(_STATE, "schedule", ...)
    return "" if forced is ... else repr(forced) if forced is not None else "naive"


@contextmanager
def autotune_mode(mode: str) -> Iterator[None]:
    """Matmuls compiled in this thread inside the block are tuned per `mode` (off, cached, full)."""
    if mode not in AUTOTUNE_MODES:
        from hlocc.errors import ArgumentError
        raise ArgumentError(f"autotune='{mode}': choose one of {', '.join(AUTOTUNE_MODES)}")
    saved = getattr(_STATE, "mode", "cached")
    _STATE.mode = mode
    try:
        yield
    finally:
        _STATE.mode = saved


def current_autotune_mode() -> str:
    return getattr(_STATE, "mode", "cached")


@dataclass(frozen=True)
class MatmulProblem:
    """What a schedule is chosen for: (B, M, N, K), element types (lhs, rhs, result), the operand
    and output maps as text (layouts, transposes) and the epilogue's text; `computation`, the
    fused computation (not part of the problem's identity), lets a tuner compile candidates."""

    sizes: tuple[int, int, int, int]
    element_types: tuple[str, str, str]
    layouts: str = ""
    epilogue: str = ""
    computation: object = field(default=None, compare=False, hash=False)


Tuner = Callable[[MatmulProblem, MatmulSchedule | None, str], MatmulSchedule | None]
_TUNER: list[Tuner] = []


def set_tuner(tuner: Tuner | None) -> None:
    """Register the tuner `schedule_for` asks when autotuning is on (None: none)."""
    _TUNER[:] = [tuner] if tuner is not None else []


@dataclass(frozen=True)
class CacheSizes:
    l1: int = 48 << 10
    l2: int = 1 << 20


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


@functools.cache
def host_caches() -> CacheSizes:
    """The L1 data and L2 sizes of cpu0 (sysfs), or 48 KiB and 1 MiB when they cannot be read."""
    sizes = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            if not entry.startswith("index"):
                continue
            level, kind, size = (_read(os.path.join(base, entry, name)) for name in ("level", "type", "size"))
            scale = {"K": 1 << 10, "M": 1 << 20}.get(size[-1], 1)
            if kind in ("Data", "Unified") and level in ("1", "2"):
                sizes[int(level)] = int(size.rstrip("KM")) * scale
    except (OSError, ValueError):
        pass
    return CacheSizes(sizes.get(1, CacheSizes.l1), sizes.get(2, CacheSizes.l2))


KC, MC = 128, 768
"""The K block and the rows of a block where the model leaves a range (module doc)."""

MIN_NC, MIN_MC = 256, 96
"""The smallest block the split for threads makes: a block packs B's panel (1/MC of its work) and
A's block (1/NC), so small blocks would spend a tenth of their time packing."""

NAIVE_BELOW = 32 ** 3
"""Multiply-adds under which a matmul keeps the naive lowering (passes/gemm_fusion.py's auto
choice keeps the same value: that layer cannot import this one)."""

FMA_LATENCY, FMA_PIPES = 4, 2
"""Zen 3-5 and Skylake-X/Sapphire Rapids: 4-cycle vfmadd, two FMA pipes or ports (256-bit on Zen 3,
512-bit on the others)."""


def register_blocks(isa: VectorIsa | None = None) -> list[tuple[int, int]]:
    """The register blocks MR x NR that fit `isa`'s registers (the target's by default) with at
    least FMA latency x pipes independent accumulators, best first: the most flops per loaded
    value (2 MR NR / (MR + NR/lanes)), then the taller block (module doc)."""
    isa = isa or vector_isa()
    scored = []
    for vectors in range(1, 5):
        nr = vectors * isa.lanes
        for mr in range(1, 32):
            if registers_needed(mr, nr, isa.lanes) <= isa.registers and mr * vectors >= FMA_LATENCY * FMA_PIPES:
                scored.append((-2 * mr * nr / (mr + vectors), -mr, (mr, nr)))
    return [block for *_, block in sorted(scored)]


def register_block(isa: VectorIsa | None = None) -> tuple[int, int]:
    """The MR x NR of the analytic model (module doc): 6 x 64 on AVX-512, 4 x 24 on AVX2."""
    return register_blocks(isa)[0]


def _round_down(x: int, step: int) -> int:
    return max(step, x // step * step)


def analytic_schedule(sizes: list[int] | tuple[int, ...], element_types: tuple[str, ...] = ("f32",) * 3,
                      caches: CacheSizes | None = None, threads: int | None = None) -> MatmulSchedule | None:
    """The analytic choice for a (B, M, N, K) matmul (module doc)."""
    b, m, n, k = sizes
    if m * n * k < NAIVE_BELOW:
        return None
    if "f64" in element_types or n < vector_isa().lanes or k == 0:
        isa, nr = vector_isa(), min(16, n)
        mr = min(8, m)  # the tallest block of up to 8 rows that fits the registers (AVX2: 6 x 16)
        while mr > 1 and registers_needed(mr, nr, isa.lanes) > isa.registers:
            mr -= 1
        return MatmulSchedule(mc=64, nc=256, kc=max(k, 1), mr=mr, nr=nr, parallel=True)
    caches = caches or host_caches()
    threads = threads or os.cpu_count() or 1
    mr, nr = register_block()
    kc = min(k, KC)
    nc = min(_round_down(caches.l2 // 4 // (4 * kc), nr), -(-n // nr) * nr)
    ncp = nc
    mc = min(MC, -(-m // mr) * mr, _round_down((SCRATCH_BYTES // 4 - kc * ncp) // (ncp + kc), mr))

    def blocks(mc: int, nc: int) -> int:
        return b * -(-m // mc) * -(-n // nc)
    while blocks(mc, nc) < 4 * threads and (nc > MIN_NC or mc > MIN_MC):
        if mc >= 4 * MIN_MC or nc <= MIN_NC:  # A's packing (a transpose) costs more than B's
            mc = _round_down(mc // 2, mr)
        else:
            nc = _round_down(nc // 2, nr)
    return MatmulSchedule(mc=mc, nc=nc, kc=kc, mr=min(mr, m), nr=nr, k_unroll=1, parallel=True, pack=(0, 1),
                          hoist_address=True, fuse_epilogue=True)


def default_schedule(sizes: list[int]) -> MatmulSchedule | None:
    """The analytic choice for f32 operands (kept for callers that know only sizes)."""
    return analytic_schedule(sizes)


def schedule_for(sizes: list[int], element_types: tuple[str, ...], problem: MatmulProblem | None = None,
                 gpu: Target | None = None) -> MatmulSchedule | None:
    """The schedule of a (B, M, N, K) matmul of these element types (lhs, rhs, result); `gpu`: the
    GPU target it is for (schedule/gpu_choice.py: by its shared memory and SMs; no tuner there yet)."""
    forced = getattr(_STATE, "schedule", ...)
    if forced is not ...:
        return forced
    if gpu is not None:
        from hlocc.codegen.schedule.gpu_choice import gpu_schedule

        return gpu_schedule(sizes, element_types, gpu.max_shared_memory_bytes, gpu.num_cores)
    analytic = analytic_schedule(sizes, element_types)
    mode = current_autotune_mode()
    if mode == "off" or not _TUNER or analytic is None or not analytic.pack:
        return analytic
    problem = problem or MatmulProblem(tuple(sizes), tuple(element_types))
    return _TUNER[0](problem, analytic, mode) or analytic


__all__ = ["AUTOTUNE_MODES", "NAIVE_BELOW", "CacheSizes", "MatmulProblem", "analytic_schedule", "autotune_mode",
           "current_autotune_mode", "default_schedule", "forced_schedule_key", "host_caches", "register_block",
           "register_blocks", "schedule_for", "set_tuner", "use_schedule"]
