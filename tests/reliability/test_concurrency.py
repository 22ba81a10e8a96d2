"""Concurrency: 8 threads compiling and running different and identical modules at once give the
results of serial runs, on the cpu backend and on cuda-sim (the kernel cache, the JIT's lock, the
launcher's thread pool and the evaluator behind host library calls are shared)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, jax_cases, load_npz
from hlocc.cli import flatten
from hlocc.compiler import check_arguments

NAMES = ["bias_add_tanh", "sort_topk_argsort", "kv_cache_update", "int_arith_bitwise", "reductions_f32",
         "concat_pad_flip", "onehot_iota_select", "while_bisection"]


def _job(name: str, backend: str) -> list[np.ndarray]:
    module = hlocc.parse_hlo_file(JAX_DIR / f"{name}.hlo")
    inputs = load_npz(JAX_DIR / f"{name}.in.npz")
    args = check_arguments(module, [inputs[f"arg{i}"] for i in range(len(inputs))], cast=True)
    exe = hlocc.compile(module, backend=backend)
    return [np.asarray(o).copy() for o in flatten(exe(*args))] + [np.asarray(o).copy() for o in flatten(exe(*args))]


def _forget_compiled_kernels() -> None:
    from hlocc.backends.cpu import kernel

    cache, lock = getattr(kernel, "_CACHE", None), getattr(kernel, "_CACHE_LOCK", None)
    if cache is not None and lock is not None:
        with lock:
            cache.clear()


@pytest.mark.parametrize("backend", ["cpu", "cuda-sim"])
def test_eight_threads_compile_and_run_like_serial_runs(backend):
    if not {c["name"] for c in jax_cases()} >= set(NAMES):
        pytest.skip("shared/corpus/jax is absent")
    serial = {name: _job(name, backend) for name in NAMES}
    _forget_compiled_kernels()  # so the threads compile, not only look up
    # every module twice (identical modules compiled at once) and all of them at once (different ones)
    work = NAMES + NAMES
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda name: _job(name, backend), work))
    for name, got in zip(work, results):
        for a, b in zip(serial[name], got):
            np.testing.assert_array_equal(a, b, err_msg=name)
