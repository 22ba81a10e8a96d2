"""The compilation caches of the CPU backend: the in-process program and kernel caches and the
persistent cache on disk (runtime/cache.py, backends/cpu/kernel_cache.py).

Each test gets its own cache directory and empty in-memory caches; processes that read or write
the cache at once are real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import hlocc
from hlocc.backends.cpu import kernel_cache, program_cache
from hlocc.backends.cpu.kernel import clear_kernel_cache, kernels_in_cache
from hlocc.cli import main as cli_main
from hlocc.compiler import clear_compile_cache
from hlocc.runtime.cache import MAGIC, CacheWarning, PersistentCache, decode_entry, open_cache

MODULE = """HloModule cached

ENTRY main {
  x = f32[2048] parameter(0)
  y = f32[2048] parameter(1)
  e = f32[2048] exponential(x)
  s = f32[2048] add(e, y)
  ROOT t = f32[2048] tanh(s)
}
"""

REDUCE = """HloModule cached_reduce

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[64,300] parameter(0)
  z = f32[] constant(0)
  m = f32[64,300] multiply(x, x)
  ROOT r = f32[64] reduce(m, z), dimensions={1}, to_apply=add
}
"""


def _inputs():
    rng = np.random.default_rng(7)
    return rng.standard_normal(2048).astype(np.float32), rng.standard_normal(2048).astype(np.float32)


def _expected(x, y):
    return np.tanh(np.exp(x) + y)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(directory))
    clear_kernel_cache()
    clear_compile_cache()
    yield directory
    clear_kernel_cache()
    clear_compile_cache()


def _forget() -> None:
    clear_kernel_cache()
    clear_compile_cache()


def _entries(directory, kind: str = "kernel"):
    """The cache's entries of one kind: "kernel" (object code) or "program" (a program's plan),
    told apart by their key's first line (runtime/cache.py's layout: header, then the key)."""
    prefix = {"kernel": kernel_cache.KEY_VERSION, "program": program_cache.KEY_VERSION}[kind].encode()
    header = len(MAGIC) + 32 + 4 + 4 + 8
    return sorted(p for p in directory.iterdir()
                  if p.suffix == ".hlk" and p.read_bytes()[header:header + len(prefix)] == prefix)


def _compile_stages(text=MODULE):
    exe = hlocc.compile(text, backend="cpu")
    return exe, {k.removeprefix("kernel:") for k in exe.compile_times_ms if k.startswith("kernel:")}


# -- in memory -------------------------------------------------------------------------------------
def test_the_same_text_compiled_again_is_the_same_executable(cache_dir):
    first = hlocc.compile(MODULE, backend="cpu")
    again = hlocc.compile(MODULE, backend="cpu")
    assert again.runner is first.runner
    assert set(again.compile_times_ms) == {"program_cache"}
    other_seed = hlocc.compile(MODULE, backend="cpu", seed=1)
    assert other_seed.runner is not first.runner


def test_identical_fusions_share_one_kernel_whatever_their_names(cache_dir):
    renamed = MODULE.replace("e =", "exp_0 =").replace("(e,", "(exp_0,").replace("ENTRY main", "ENTRY other")
    a = hlocc.compile(MODULE, backend="cpu")
    b = hlocc.compile(renamed, backend="cpu")
    assert b.runner is not a.runner
    from hlocc.backends.cpu.executable import kernels

    assert kernels(b.runner)[0] is kernels(a.runner)[0]
    assert "emit" not in {k.removeprefix("kernel:") for k in b.compile_times_ms if k.startswith("kernel:")}


# -- on disk ---------------------------------------------------------------------------------------
def test_a_disk_hit_loads_object_code_and_gives_bit_identical_outputs(cache_dir):
    x, y = _inputs()
    exe, stages = _compile_stages()
    fresh = exe(x, y)
    assert "emit" in stages and "cache_store" in stages
    assert len(_entries(cache_dir)) == 1
    np.testing.assert_allclose(fresh, _expected(x, y), rtol=1e-5, atol=1e-6)
    # A new process: nothing in memory, the kernel comes from the entry's object code.
    script = textwrap.dedent(f"""
        import json, sys, numpy as np, hlocc
        x = np.frombuffer(bytes.fromhex(sys.argv[1]), np.float32)
        y = np.frombuffer(bytes.fromhex(sys.argv[2]), np.float32)
        exe = hlocc.compile({MODULE!r}, backend="cpu")
        stages = sorted(k for k in exe.compile_times_ms if k.startswith("kernel:"))
        print(json.dumps({{"out": exe(x, y).tobytes().hex(), "stages": stages}}))
    """)
    proc = subprocess.run([sys.executable, "-c", script, x.tobytes().hex(), y.tobytes().hex()], capture_output=True,
                          text=True, env=os.environ, timeout=300)
    assert proc.returncode == 0, proc.stderr
    warm = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "kernel:emit" not in warm["stages"] and "kernel:load" in warm["stages"]
    assert bytes.fromhex(warm["out"]) == fresh.tobytes()


def test_an_entry_loaded_into_its_own_engine_runs_like_the_fresh_kernel(cache_dir):
    from hlocc.backends.cpu.executable import kernels
    from hlocc.backends.cpu.kernel import load_kernel

    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    exe = hlocc.compile(REDUCE, backend="cpu")
    fresh = kernels(exe.runner)[0]
    (path,) = _entries(cache_dir)
    key = next(k for k in kernels_in_cache() if kernel_cache.kernel_symbol(k) == fresh.symbol)
    entry, problem = decode_entry(path.read_bytes(), key)
    assert problem is None
    plan = kernel_cache.KernelPlan.from_json(entry.plan)
    loaded = load_kernel(plan, entry.payload, fresh.param_shapes, fresh.output_shapes, False, {})
    assert loaded.jit.engine is not fresh.jit.engine
    assert loaded(x)[0].tobytes() == fresh(x)[0].tobytes() == exe(x).tobytes()


def test_a_changed_option_cpu_feature_set_or_version_misses(cache_dir, monkeypatch):
    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.codegen.llvm import TranslateOptions
    from hlocc.hlo.parser import parse_hlo

    fusion = parse_hlo(MODULE).entry
    compile_fusion(fusion)
    assert len(_entries(cache_dir)) == 1
    _forget()
    compile_fusion(fusion)  # the same key: a hit, nothing written
    assert len(_entries(cache_dir)) == 1
    compile_fusion(fusion, translate_options=TranslateOptions(noalias=False))
    assert len(_entries(cache_dir)) == 2
    environment = kernel_cache.environment_key()
    for changed in (environment.replace("cpu: ", "cpu: +avx512-testfeature,"),
                    environment.replace("versions: hlocc ", "versions: hlocc 99.0+")):
        assert changed != environment
        _forget()
        monkeypatch.setattr(kernel_cache, "environment_key", lambda changed=changed: changed)
        before = len(_entries(cache_dir))
        kernel = compile_fusion(fusion)
        assert "emit" in kernel.times_ms
        assert len(_entries(cache_dir)) == before + 1


@pytest.mark.parametrize("damage", ["truncated", "bit-flipped", "wrong-version", "foreign"])
def test_a_damaged_entry_is_compiled_again_with_one_warning(cache_dir, damage):
    x, y = _inputs()
    exe = hlocc.compile(MODULE, backend="cpu")
    reference = exe(x, y).tobytes()
    (path,) = _entries(cache_dir)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[:len(data) // 2]
    elif damage == "bit-flipped":
        data[-100] ^= 0x10  # in the object code
    elif damage == "wrong-version":
        data[:len(MAGIC)] = b"HLOCCKC0"
    else:  # another key's entry under this key's name
        other = PersistentCache(cache_dir)
        other.put("some other kernel", {"symbol": "x"}, b"\x90" * 64)
        data = bytearray(other.path("some other kernel").read_bytes())
    path.write_bytes(bytes(data))
    _forget()
    with pytest.warns(CacheWarning, match="compiling again") as caught:
        exe2, stages = _compile_stages()
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert "emit" in stages  # compiled, not loaded
    assert exe2(x, y).tobytes() == reference
    entry, problem = decode_entry(path.read_bytes(), next(iter(kernels_in_cache())))
    assert problem is None and entry is not None  # rewritten whole


@pytest.mark.slow  # four new processes importing hlocc: ~9 s on two loaded cores
def test_four_processes_compiling_at_once_leave_one_valid_entry_per_kernel(cache_dir):
    script = textwrap.dedent(f"""
        import hashlib, numpy as np, hlocc
        x = np.linspace(-2, 2, 64 * 300, dtype=np.float32).reshape(64, 300)
        print(hashlib.sha256(hlocc.compile({REDUCE!r}, backend="cpu")(x).tobytes()).hexdigest())
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=os.environ) for _ in range(4)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
    assert len({o.strip() for o, _ in outs}) == 1
    entries = _entries(cache_dir)
    assert len(entries) == 1
    assert not [p for p in cache_dir.iterdir() if p.name.startswith(".tmp-")]
    cache = PersistentCache(cache_dir)
    exe = hlocc.compile(REDUCE, backend="cpu")  # loads the entry: valid, or it would warn
    assert set(exe.compile_times_ms) >= {"kernel:cache_lookup", "kernel:load"}
    assert "kernel:emit" not in exe.compile_times_ms
    assert cache.info()["entries"] == 2  # the kernel and the program plan


def test_a_cache_directory_writable_by_others_is_refused(tmp_path):
    directory = tmp_path / "shared-cache"
    directory.mkdir()
    os.chmod(directory, 0o777)
    with pytest.warns(CacheWarning, match="writable by others"):
        assert open_cache(directory) is None
    os.chmod(directory, 0o700)
    assert open_cache(directory) is not None


def test_a_new_cache_directory_is_private(tmp_path):
    directory = tmp_path / "a" / "cache"
    assert open_cache(directory) is not None
    assert directory.stat().st_mode & 0o777 == 0o700


def test_an_entry_writable_by_others_is_refused(tmp_path):
    cache = PersistentCache(tmp_path)
    cache.put("key", {"plan": 1}, b"code")
    assert cache.get("key").payload == b"code"
    os.chmod(cache.path("key"), 0o666)
    with pytest.warns(CacheWarning, match="writable by others"):
        assert cache.get("key") is None
    assert cache.path("key").exists()  # refused, not trusted enough to act on


def test_the_cache_is_off_with_an_empty_setting(tmp_path, monkeypatch):
    from hlocc.runtime.cache import persistent_cache

    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    assert persistent_cache() is None
    _forget()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, y = _inputs()
        np.testing.assert_allclose(hlocc.compile(MODULE, backend="cpu")(x, y), _expected(x, y), rtol=1e-5, atol=1e-6)
    _forget()


def test_eviction_keeps_the_bound_and_the_recently_used_entries(tmp_path):
    cache = PersistentCache(tmp_path, max_bytes=10_000)
    payload = b"\0" * 2000
    for n in range(12):
        cache.put(f"key {n}", {"n": n}, payload)
        os.utime(cache.path(f"key {n}"), ns=(n * 10**9, n * 10**9))  # a clear order of use
        if n == 3:
            assert cache.get("key 0") is not None  # used now: the most recent
        assert cache.info()["bytes"] <= 10_000
    assert cache.get("key 11") is not None
    assert cache.get("key 0") is not None  # used after the others were written
    assert cache.get("key 1") is None  # the least recently used went first
    assert cache.info()["entries"] == 4


def test_cli_cache_info_and_clear(cache_dir, capsys):
    hlocc.compile(MODULE, backend="cpu")
    assert cli_main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    # One kernel and the program's plan.
    assert info["enabled"] and info["entries"] == 2 and info["directory"] == str(cache_dir)
    assert cli_main(["cache", "clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert list(cache_dir.iterdir()) == []
