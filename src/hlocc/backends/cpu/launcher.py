"""Runs a kernel's blocks on a thread pool over all cores (DESIGN "One kernel model").

A compiled CPU kernel exports `void <name>_blocks(void **buffers, i64 first_block, i64 end_block)`,
which runs the threads of each block as an inner loop. The launcher splits the block range into
one chunk per worker: the calling thread runs the first chunk itself and the pool the others
(ctypes releases the GIL during the call, so the chunks run in parallel). Measured on the 2-vCPU
development machine, finer chunks (4 per worker, all through the pool) cost more in hand-offs
than they gained in balance: softmax over [16, 4096] took 600 µs against 190 µs now, GELU over
4M elements 1.48 ms against 1.21 ms. Small launches run in the calling thread. The caller keeps
every buffer alive until `launch` returns.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from hlocc.errors import env_int

BlocksFunction = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)

PARALLEL_MIN_ELEMENTS = 1 << 19
"""Launches covering fewer elements run serially. Waking a pool thread costs ~80-100 µs on the
2-vCPU development VM (a halted vCPU is woken through the hypervisor), so a launch pays for the
pool only past ~0.5M elements: measured with f32 add and exp kernels, serial against two threads,
262144 elements 49/142 µs against 92/153 µs, 524288 147/290 against 159/268, 1M 291/579 against
258/369 (µs, add/exp); softmax over [64, 4096] 0.25 ms serial against 0.38 ms."""


def num_workers() -> int:
    """Threads a launch may use: HLOCC_CPU_THREADS, else the CPUs this process may run on (asked
    once per value of the variable: sched_getaffinity is a system call, and launches are hot)."""
    env = os.environ.get("HLOCC_CPU_THREADS")
    workers = _WORKERS.get(env)
    if workers is None:
        workers = _WORKERS[env] = _count_workers(env)
    return workers


_WORKERS: dict[str | None, int] = {}


def _count_workers(env: str | None) -> int:
    if env and env.strip():
        return env_int("HLOCC_CPU_THREADS", 1, 1)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@functools.cache
def _pool(workers: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hlocc-cpu")


def address_table(addresses: Sequence[int]) -> ctypes.Array:
    table = (ctypes.c_void_p * max(1, len(addresses)))()
    table[:len(addresses)] = addresses
    return table


def launch(fn: BlocksFunction, buffers: Sequence[np.ndarray], blocks: int, elements: int) -> None:
    launch_addresses(fn, [b.ctypes.data for b in buffers], blocks, elements)


def launch_addresses(fn: BlocksFunction, addresses: Sequence[int], blocks: int, elements: int) -> None:
    """Run blocks [0, blocks) of `fn` over the buffers at `addresses` (the caller keeps them alive)."""
    launch_table(fn, address_table(addresses), blocks, elements)


def is_serial(blocks: int, elements: int) -> bool:
    """Whether a launch runs in the calling thread whatever the number of workers."""
    return blocks == 1 or elements < PARALLEL_MIN_ELEMENTS


def is_serial_source(blocks: str, elements: str) -> str:
    """`is_serial` as Python source over the sources of its arguments (for generated code: a
    first call at a new size evaluates it with cold caches, where each function called costs)."""
    return f"({blocks}) == 1 or ({elements}) < {PARALLEL_MIN_ELEMENTS}"


def launch_table(fn: BlocksFunction, table: ctypes.Array, blocks: int, elements: int) -> None:
    """`launch_addresses` over a prebuilt table of addresses (runtime/call_plan.py fills one per
    kernel once, and patches only the slots that change per call)."""
    workers = num_workers()
    if workers == 1 or is_serial(blocks, elements):
        fn(ctypes.addressof(table), 0, blocks)
        return
    chunks = min(blocks, workers)
    bounds = [blocks * k // chunks for k in range(chunks + 1)]
    pool = _pool(workers - 1)
    futures = [pool.submit(fn, ctypes.addressof(table), bounds[k], bounds[k + 1]) for k in range(1, chunks)]
    fn(ctypes.addressof(table), bounds[0], bounds[1])  # the calling thread takes the first chunk
    for f in futures:
        f.result()
