"""The whole-program plan in the persistent cache (backends/cpu/program_cache.py): a warm compile
of the same text parses the optimized module the disk holds and runs no HLO pass; its outputs are
bit-identical to the cold compile's. Each test gets its own cache directory and empty in-memory
caches."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.backends.cpu import program_cache
from hlocc.backends.cpu.kernel import clear_kernel_cache
from hlocc.codegen.target import cpu_target
from hlocc.compiler import clear_compile_cache, default_gemm
from hlocc.runtime.cache import CacheWarning, PersistentCache

# Two fusions after the passes (the reduce, then the elementwise tail), a constant folded away.
MODULE = """HloModule planned

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,300] parameter(0)
  z = f32[] constant(0)
  two = f32[] constant(2)
  t = f32[64,300] broadcast(two), dimensions={}
  m = f32[64,300] multiply(x, t)
  r = f32[64] reduce(m, z), dimensions={1}, to_apply=add
  ROOT e = f32[64] exponential(r)
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(directory))
    _forget()
    yield directory
    _forget()


def _forget() -> None:
    clear_kernel_cache()
    clear_compile_cache()


def _input() -> np.ndarray:
    return np.random.default_rng(5).standard_normal((64, 300)).astype(np.float32) * 0.01


def _key(**options) -> str:
    settings = dict(verify=True, seed=0, hlo_passes=True, gemm=default_gemm("cpu")) | options
    return program_cache.program_key(MODULE, cpu_target(), **settings)


def _planned(exe) -> bool:
    """Whether the compile came from a program plan: looked one up and stored none (a compile
    from the input stores its plan), running no HLO optimization (the pipeline's prologue and
    epilogue run on every compile)."""
    times = exe.compile_times_ms
    planned = "program_cache_lookup" in times and "program_cache_store" not in times
    assert not planned or ("hlo-passes" not in times and "hlo:priority-fusion" not in times)
    return planned


def test_a_plan_hit_skips_the_hlo_passes_and_gives_bit_identical_outputs(cache_dir):
    x = _input()
    cold = hlocc.compile(MODULE, backend="cpu")
    assert "hlo:priority-fusion" in cold.compile_times_ms and "program_cache_store" in cold.compile_times_ms
    reference = cold(x)
    np.testing.assert_allclose(reference, np.exp((2 * x.astype(np.float64)).sum(axis=1)), rtol=1e-5)
    assert PersistentCache(cache_dir).get(_key()) is not None
    _forget()
    warm = hlocc.compile(MODULE, backend="cpu")
    assert _planned(warm) and "verify" not in warm.compile_times_ms
    assert not any(k == "kernel:emit" for k in warm.compile_times_ms)  # and the kernels from the kernel cache
    assert warm(x).tobytes() == reference.tobytes()
    assert warm.module.to_string() == cold.runner.module.to_string()  # the optimized module, as stored


@pytest.mark.parametrize("option", [dict(seed=1), dict(hlo_passes=False), dict(gemm="codegen"), dict(verify=False)])
def test_a_changed_option_misses(cache_dir, option):
    hlocc.compile(MODULE, backend="cpu")
    _forget()
    exe = hlocc.compile(MODULE, backend="cpu", **option)
    assert not _planned(exe)
    assert _key(**option) != _key()
    assert PersistentCache(cache_dir).get(_key(**option)) is not None  # stored under its own key


def test_a_changed_text_target_or_version_misses(cache_dir, monkeypatch):
    from dataclasses import replace

    assert program_cache.program_key(MODULE + "\n", cpu_target(), seed=0) != program_cache.program_key(
        MODULE, cpu_target(), seed=0)
    assert program_cache.program_key(MODULE, replace(cpu_target(), check_bounds=True), seed=0) != \
        program_cache.program_key(MODULE, cpu_target(), seed=0)
    hlocc.compile(MODULE, backend="cpu")
    _forget()
    environment = program_cache.environment_key()
    monkeypatch.setattr(program_cache, "environment_key", lambda: environment.replace("versions: hlocc ",
                                                                                      "versions: hlocc 99.0+"))
    assert not _planned(hlocc.compile(MODULE, backend="cpu"))


@pytest.mark.parametrize("damage", ["bit-flipped", "other-format", "unparsable"])
def test_a_damaged_plan_is_compiled_again_with_one_warning(cache_dir, damage):
    x = _input()
    reference = hlocc.compile(MODULE, backend="cpu")(x)
    cache = PersistentCache(cache_dir)
    path = cache.path(_key())
    if damage == "bit-flipped":
        data = bytearray(path.read_bytes())
        data[-20] ^= 0x04  # in the module text: the checksum catches it
        path.write_bytes(bytes(data))
    elif damage == "other-format":
        cache.put(_key(), {"format": "schedule-as-json 9"}, b"{}")
    else:
        cache.put(_key(), {"format": program_cache.PLAN_FORMAT}, b"HloModule m\nENTRY e {\n  ROOT x = f32[ parameter(0)\n}")
    _forget()
    with pytest.warns(CacheWarning, match="compiling again") as caught:
        exe = hlocc.compile(MODULE, backend="cpu")
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert "hlo:priority-fusion" in exe.compile_times_ms  # compiled from the input
    assert exe(x).tobytes() == reference.tobytes()
    _forget()
    assert _planned(hlocc.compile(MODULE, backend="cpu"))  # the entry was written again, whole


def test_a_forced_matmul_schedule_skips_the_program_caches_and_keys_its_kernels(cache_dir):
    """Under `use_schedule` a compile neither takes a stored plan nor the in-process program, and its
    kernels' keys name the schedule: two schedules never share a generated gemm."""
    from hlocc.backends.cpu.kernel_cache import kernel_key
    from hlocc.codegen.llvm import TranslateOptions
    from hlocc.codegen.schedule import MatmulSchedule, use_schedule
    from hlocc.hlo.parser import parse_hlo

    hlocc.compile(MODULE, "cpu")  # stores the plan
    _forget()
    assert _planned(hlocc.compile(MODULE, "cpu"))
    schedule = MatmulSchedule(mc=32, nc=32, kc=32, mr=4, nr=16, parallel=True)
    with use_schedule(schedule):
        forced = hlocc.compile(MODULE, "cpu")
        assert not _planned(forced) and "program_cache" not in forced.compile_times_ms
        fusion = parse_hlo(MODULE).entry
        key = kernel_key(fusion, cpu_target(), TranslateOptions())
    np.testing.assert_allclose(forced(_input()), hlocc.compile(MODULE, "interpreter")(_input()), rtol=1e-5)
    assert key != kernel_key(fusion, cpu_target(), TranslateOptions()) and f"schedule: {schedule!r}" in key
