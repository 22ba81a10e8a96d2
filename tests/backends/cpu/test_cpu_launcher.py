"""The CPU launcher (backends/cpu/launcher.py): the block range split over the thread pool."""

from __future__ import annotations

import numpy as np

import hlocc
from hlocc.backends.cpu import launcher


def test_launches_split_over_the_pool_compute_every_block(monkeypatch):
    """The launcher's parallel path (one chunk per worker, the caller running the first), which
    only launches past PARALLEL_MIN_ELEMENTS take: forced here on a small launch with 3 workers, so
    the block range splits unevenly, every block is computed exactly once."""
    monkeypatch.setattr(launcher, "PARALLEL_MIN_ELEMENTS", 1)
    monkeypatch.setenv("HLOCC_CPU_THREADS", "3")
    chunks = []  # (first, end) of each chunk the pool ran
    pool = launcher._pool

    class CountingPool:
        def __init__(self, workers):
            self.pool = pool(workers)

        def submit(self, fn, table, first, end):
            chunks.append((first, end))
            return self.pool.submit(fn, table, first, end)

    monkeypatch.setattr(launcher, "_pool", CountingPool)
    n = 100_003  # blocks of the loop emitter's size do not divide it
    text = (f"HloModule m\nENTRY e {{\n p = f32[{n}]{{0}} parameter(0)\n one = f32[] constant(1)\n"
            f" b = f32[{n}]{{0}} broadcast(one), dimensions={{}}\n ROOT a = f32[{n}]{{0}} add(p, b)\n}}")
    exe = hlocc.compile(text, "cpu")
    x = np.arange(n, dtype=np.float32)
    np.testing.assert_array_equal(exe(x), x + 1)
    np.testing.assert_array_equal(exe(x), x + 1)  # the prepared launch, second call
    assert len(chunks) == 4 and chunks[0][0] > 0  # two chunks per call on the pool, the first in the caller
