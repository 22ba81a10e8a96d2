"""PTX on disk (backends/cuda/ptx.py `ptx_key`, runtime/cache.py the store), checked without a GPU:
a kernel compiled again in a process that forgot it comes from the entry (no emission) with the
same PTX and launch plan; another arch misses; a damaged entry is compiled again with one warning."""

from __future__ import annotations

import pytest

from hlocc.backends.cuda import ptx
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.cache import CacheWarning, PersistentCache

FUSION = """HloModule ptx_cached

ENTRY main {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  m = f32[4096] multiply(x, y)
  ROOT t = f32[4096] tanh(m)
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(directory))
    monkeypatch.setattr(ptx, "_CACHE", {})  # this process's kernels: forgotten per test
    return directory


def _compile(arch: str = "sm_90") -> ptx.PtxKernel:
    return ptx.compile_ptx(parse_hlo(FUSION).entry, arch)


def test_a_ptx_hit_skips_emission_and_gives_the_same_kernel(cache_dir, monkeypatch):
    cold = _compile()
    assert "emit" in cold.times_ms and "cache_store" in cold.times_ms
    assert PersistentCache(cache_dir).info()["entries"] == 1
    monkeypatch.setattr(ptx, "_CACHE", {})
    warm = _compile()
    assert "emit" not in warm.times_ms and "cache_lookup" in warm.times_ms
    assert warm.ptx == cold.ptx and f".entry {warm.name}(" in warm.ptx
    assert (warm.name, warm.launch_dims, warm.shared_bytes, warm.emitter, warm.output_aliases) == (
        cold.name, cold.launch_dims, cold.shared_bytes, cold.emitter, cold.output_aliases)
    assert [s.dims for s in warm.param_shapes] == [(4096,), (4096,)]
    other = _compile("sm_80")  # another target: its own entry
    assert "emit" in other.times_ms and ".target sm_80" in other.ptx
    assert PersistentCache(cache_dir).info()["entries"] == 2


@pytest.mark.parametrize("damage", ["bit-flipped", "no-entry-symbol"])
def test_a_damaged_ptx_entry_is_compiled_again_with_one_warning(cache_dir, monkeypatch, damage):
    cold = _compile()
    cache = PersistentCache(cache_dir)
    key = ptx.ptx_key(next(iter(ptx._CACHE))[0], ptx.target_for("sm_90"), True)
    path = cache.path(key)
    if damage == "bit-flipped":
        data = bytearray(path.read_bytes())
        data[-10] ^= 0x01
        path.write_bytes(bytes(data))
    else:  # a well-formed entry whose PTX does not define the plan's kernel
        plan = cache.get(key).plan
        cache.put(key, plan, b".version 8.0\n.target sm_90\n")
    monkeypatch.setattr(ptx, "_CACHE", {})
    with pytest.warns(CacheWarning, match="compiling again") as caught:
        again = _compile()
    assert len([w for w in caught if issubclass(w.category, CacheWarning)]) == 1
    assert "emit" in again.times_ms and again.ptx == cold.ptx


SYMBOLIC = """HloModule ptx_symbolic

ENTRY main {
  x = f32[?b,?n] parameter(0)
  ROOT t = f32[?b,?n] tanh(x)
}
"""


def test_a_kernel_with_runtime_dims_keeps_its_variables_and_grid_expression_on_disk(cache_dir, monkeypatch):
    cold = ptx.compile_ptx(parse_hlo(SYMBOLIC).entry, "sm_90")
    monkeypatch.setattr(ptx, "_CACHE", {})
    warm = ptx.compile_ptx(parse_hlo(SYMBOLIC).entry, "sm_90")
    assert "emit" not in warm.times_ms and warm.ptx == cold.ptx
    assert warm.symbols == cold.symbols == ("b", "n") and warm.launch_dims == cold.launch_dims
    assert warm.launch_at((3, 1000)) == cold.launch_at((3, 1000)) and warm.launch_at((0, 5)) is None



def test_a_forced_matmul_schedule_is_part_of_the_ptx_keys(cache_dir, monkeypatch):
    """A kernel compiled under one forced schedule (the benchmark's candidates, the tuner's) is never
    handed out, from memory or from disk, under another: two warp grids give two kernels."""
    from hlocc.codegen.schedule import MatmulSchedule, use_schedule
    from hlocc.testing.gemm import gemm_fusion_text

    fusion = parse_hlo(gemm_fusion_text("bf16[64,64]", "bf16[64,64]", "f32[64,64]",
                                        "lhs_contracting_dims={1}, rhs_contracting_dims={0}")).entry
    launches = []
    for grid in ((2, 2), (2, 1), (2, 2)):
        schedule = MatmulSchedule(mc=64, nc=64, kc=32, parallel=True, warp_grid=grid,
                                  warp_tile=(32, 64 // grid[1]), stages=2)
        with use_schedule(schedule):
            launches.append(ptx.compile_ptx(fusion, "sm_90").launch_dims.threads_per_block)
        monkeypatch.setattr(ptx, "_CACHE", {})  # the third compile comes from disk
    assert launches == [128, 64, 128]
    assert PersistentCache(cache_dir).info()["entries"] == 2
