"""Concurrency: 8 threads compiling and running different and identical modules at once give the
results of serial runs, on the cpu backend and on cuda-sim (the kernel cache, the JIT's lock, the
launcher's thread pool and the evaluator behind host library calls are shared); and 4 processes
sharing one persistent cache directory (HLOCC_CACHE_DIR) compiling the same and different modules at
once give the serial results and leave the serial run's entries, one valid entry per key."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, jax_cases, load_npz
from hlocc.cli import flatten
from hlocc.compiler import check_arguments
from hlocc.runtime.cache import _HEADER, SUFFIX, decode_entry

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


# Each process: compile and run its modules, then save every output (in order) to an .npz.
_WORKER = textwrap.dedent("""
    import sys, numpy as np, hlocc
    from hlocc.cli import flatten
    from hlocc.compiler import check_arguments
    backend, out, *names = sys.argv[1:]
    outputs = {}
    for name in names:
        module = hlocc.parse_hlo_file(f"{JAX_DIR}/{name}.hlo")
        with np.load(f"{JAX_DIR}/{name}.in.npz") as data:
            args = check_arguments(module, [data[f"arg{i}"] for i in range(len(data.files))], cast=True)
        for i, o in enumerate(flatten(hlocc.compile(module, backend=backend)(*args))):
            outputs[f"{name}.{i}"] = np.asarray(o)
    np.savez(out, **outputs)
""")


def _valid_entries(directory) -> set[str]:
    """The entry file names in `directory`; each must decode as the entry of the key it holds, and
    be named after that key (a torn or interleaved write would fail one of the two)."""
    names = set()
    for path in directory.iterdir():
        assert not path.name.startswith(".tmp-"), f"a temporary file was left: {path.name}"
        if path.suffix != SUFFIX:
            continue
        data = path.read_bytes()
        key = data[_HEADER.size:_HEADER.size + _HEADER.unpack_from(data)[2]].decode()
        entry, problem = decode_entry(data, key)
        assert problem is None and entry is not None, f"{path.name}: {problem}"
        names.add(path.name)
    return names


def _processes(backend: str, cache, work: list[list[str]], out) -> list[dict[str, np.ndarray]]:
    env = {**os.environ, "HLOCC_CACHE_DIR": str(cache)}
    script = _WORKER.replace("{JAX_DIR}", str(JAX_DIR))
    procs = [subprocess.Popen([sys.executable, "-c", script, backend, str(out / f"{i}.npz"), *names],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, names in enumerate(work)]
    errors = [p.communicate(timeout=600)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    return [load_npz(out / f"{i}.npz") for i in range(len(work))]


@pytest.mark.slow  # five new processes importing hlocc and compiling: ~1 min on two loaded cores
@pytest.mark.parametrize("backend", ["cpu", "cuda-sim"])
def test_four_processes_sharing_a_cache_run_like_serial_runs(backend, tmp_path):
    """Every process compiles the same module and one of its own, all at once, into one fresh cache;
    a serial run (one process, one module after the other) into another fresh cache is the reference
    for the outputs and for the set of entries."""
    if not {c["name"] for c in jax_cases()} >= set(NAMES):
        pytest.skip("shared/corpus/jax is absent")
    shared, own = NAMES[0], NAMES[1:5]
    work = [[shared, name] for name in own]
    (tmp_path / "serial").mkdir()
    (tmp_path / "parallel").mkdir()
    serial = _processes(backend, tmp_path / "serial-cache", [[shared, *own]], tmp_path / "serial")[0]
    results = _processes(backend, tmp_path / "parallel-cache", work, tmp_path / "parallel")
    for names, got in zip(work, results):
        assert sorted(got) == sorted(k for k in serial if k.split(".")[0] in names)
        for key, value in got.items():
            np.testing.assert_array_equal(value, serial[key], err_msg=key)
    if (tmp_path / "serial-cache").exists():
        assert _valid_entries(tmp_path / "parallel-cache") == _valid_entries(tmp_path / "serial-cache")


@pytest.fixture
def frequent_thread_switches():
    """Threads switch every microsecond (the default is 5 ms): races in first calls show at once."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def _negate_in_threads(exe, sizes_of_thread, threads: int = 8) -> list[str]:
    """Each thread calls `exe` at its sizes; the errors and wrong results, as text."""
    import threading

    barrier, failures = threading.Barrier(threads), []

    def worker(tid: int) -> None:
        barrier.wait()
        for n in sizes_of_thread(tid):
            x = np.arange(n, dtype=np.float32)
            try:
                if not np.array_equal(exe(x), -x):
                    failures.append(f"thread {tid}, n={n}: wrong result")
            except Exception as e:  # noqa: BLE001 (what a thread saw is the finding)
                failures.append(f"thread {tid}, n={n}: {e!r}")

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    [t.start() for t in pool]
    [t.join() for t in pool]
    return failures


def test_threads_at_a_dynamic_programs_first_calls_wait_for_one_plan(frequent_thread_switches):
    """Eight threads making the first calls of a fresh dynamic executable at once: one builds the
    call plan and the binding plan, the others wait (a half-built plan was used: '_namespace',
    'numbers', a tuple index out of range)."""
    failures = []
    for trial in range(6):
        exe = hlocc.compile(f"HloModule first_calls_{trial}\nENTRY e {{\n  x = f32[?n] parameter(0)\n"
                            "  ROOT s = f32[?n] negate(x)\n}", "cpu")
        failures += _negate_in_threads(exe, lambda tid: [5 + tid, 5 + tid])
    assert not failures, failures[:4]


def test_threads_past_the_bound_sizes_drop_the_oldest_safely(frequent_thread_switches, monkeypatch):
    """Calls at more sizes than a dynamic program keeps bindings for, from eight threads: each
    drops the oldest binding without tripping over the others (KeyError, 'dictionary changed size')."""
    from hlocc.runtime import dynamic_program

    monkeypatch.setattr(dynamic_program, "MAX_BOUND_PROGRAMS", 2)
    exe = hlocc.compile("HloModule past_the_bound\nENTRY e {\n  x = f32[?n] parameter(0)\n"
                        "  ROOT s = f32[?n] negate(x)\n}", "cpu")
    failures = _negate_in_threads(exe, lambda tid: [1 + tid + 8 * k for k in range(150)])
    assert not failures, failures[:4]
    assert len(exe.program._bound) <= 2 + 8
