"""The tiled column reduction version (runtime/speculation.py `column_tiled`,
codegen/emitters/column_reduce.py): which fusions get it and with what predicate, each version
forced against the evaluator at sizes that hit and miss it, and the version each size runs."""

import numpy as np
import pytest
from _programs import filecheck

import hlocc
from hlocc.backends.cpu.executable import compile_dynamic_module
from hlocc.errors import ArgumentError
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.speculation import SpeculationOptions, column_tile_version, plan_versions

RNG = np.random.default_rng(11)

HEADER = """HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

# x.sum(axis=0) over f32[?b, ?n].
COLUMN_SUM = HEADER + """ENTRY e {
  x = f32[?b,?n] parameter(0)
  zero = f32[] constant(0)
  ROOT s = f32[?n] reduce(x, zero), dimensions={0}, to_apply=add_f
}
"""

# A bias gradient of bf16 activations (converted, scaled) and the column max beside it, over
# [?b, ?s, 48] reduced over both major dims: static columns (48 >= 16: the version always holds).
BIAS_GRAD = HEADER + """ENTRY e {
  g = bf16[?b,?s,48] parameter(0)
  w = f32[48] parameter(1)
  gf = f32[?b,?s,48] convert(g)
  wb = f32[?b,?s,48] broadcast(w), dimensions={2}
  gw = f32[?b,?s,48] multiply(gf, wb)
  zero = f32[] constant(0)
  ninf = f32[] constant(-inf)
  s = f32[48] reduce(gw, zero), dimensions={0,1}, to_apply=add_f
  c = f32[] constant(0.5)
  half = f32[48] broadcast(c), dimensions={}
  m = f32[48] reduce(gf, ninf), dimensions={0,1}, to_apply=max_f
  sh = f32[48] multiply(s, half)
  ROOT t = (f32[48], f32[48]) tuple(sh, m)
}
"""

MODES = ["on", "force:generic", "force:column_tiled"]
# 1, the vector width 16 ± 1, two chunks of 256 columns ± 1 and a partial last chunk
COLUMNS = [1, 15, 16, 17, 255, 256, 257, 300]


def ran(program) -> dict[str, int]:
    """Launches per version over the speculated fusions, then reset."""
    counts: dict[str, int] = {}
    for _, kernel in program.speculated():
        for version, calls in kernel.calls.items():
            if calls:
                counts[version] = counts.get(version, 0) + calls
            kernel.calls[version] = 0
    return counts


@pytest.fixture(scope="module")
def column_sum():
    return {mode: compile_dynamic_module(parse_hlo(COLUMN_SUM), speculation=SpeculationOptions(mode))
            for mode in MODES}


def test_a_column_reduction_gets_the_tiled_version_by_its_column_count():
    entry = parse_hlo(COLUMN_SUM).entry
    assert [str(v) for v in plan_versions(entry, 1, SpeculationOptions())] == ["column_tiled if n >= 16",
                                                                              "generic if true"]
    assert plan_versions(entry, 1, SpeculationOptions("off"))[0].name == "generic"
    assert [str(v) for v in plan_versions(parse_hlo(BIAS_GRAD).entry, 1, SpeculationOptions())] == [
        "column_tiled if true", "generic if true"]


@pytest.mark.parametrize("text", [
    # a row reduction (the minor dim reduced)
    HEADER + "ENTRY e {\n  x = f32[?b,?n] parameter(0)\n  z = f32[] constant(0)\n"
             "  ROOT s = f32[?b] reduce(x, z), dimensions={1}, to_apply=add_f\n}\n",
    # a reduced dim between kept ones
    HEADER + "ENTRY e {\n  x = f32[4,?b,?n] parameter(0)\n  z = f32[] constant(0)\n"
             "  ROOT s = f32[4,?n] reduce(x, z), dimensions={1}, to_apply=add_f\n}\n",
    # two stages: a reduce of a value computed from a reduce (a variance over the batch)
    HEADER + "ENTRY e {\n  x = f32[?b,?n] parameter(0)\n  z = f32[] constant(0)\n"
             "  s = f32[?n] reduce(x, z), dimensions={0}, to_apply=add_f\n"
             "  sb = f32[?b,?n] broadcast(s), dimensions={1}\n  d = f32[?b,?n] subtract(x, sb)\n"
             "  ROOT v = f32[?n] reduce(d, z), dimensions={0}, to_apply=add_f\n}\n",
])
def test_what_is_no_column_reduction_gets_no_tiled_version(text):
    assert column_tile_version(parse_hlo(text).entry) is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("n", COLUMNS)
def test_every_version_forced_matches_the_evaluator(column_sum, mode, n):
    program = column_sum[mode]
    for b in (1, 3, 40):
        x = RNG.standard_normal((b, n)).astype(np.float32)
        if mode == "force:column_tiled" and n < 16:
            with pytest.raises(ArgumentError, match=f"forces version 'column_tiled' but its predicate n >= 16 "
                                                    f"fails at n={n}"):
                program.run([x])
            continue
        np.testing.assert_allclose(program.run([x]), hlocc.compile(COLUMN_SUM, "interpreter")(x), rtol=1e-6,
                                   atol=1e-5)
        version = {"on": "column_tiled" if n >= 16 else "generic", "force:generic": "generic",
                   "force:column_tiled": "column_tiled"}[mode]
        assert ran(program) == {version: 1}


def test_no_rows_and_sizes_at_the_threshold_pick_their_version(column_sum):
    program = column_sum["on"]
    for n, version in ((15, "generic"), (16, "column_tiled"), (17, "column_tiled")):
        np.testing.assert_array_equal(program.run([np.zeros((0, n), np.float32)]), np.zeros(n, np.float32))
        assert ran(program) == {version: 1}, n


def test_the_tiled_version_stays_inside_its_buffers():
    from dataclasses import replace

    from hlocc.codegen.target import cpu_target

    program = compile_dynamic_module(parse_hlo(COLUMN_SUM), replace(cpu_target(), check_bounds=True),
                                     speculation=SpeculationOptions("force:column_tiled"))
    for b, n in ((1, 16), (3, 17), (5, 271), (2, 512)):
        x = RNG.standard_normal((b, n)).astype(np.float32)
        np.testing.assert_allclose(program.run([x]), x.sum(0), rtol=1e-5, atol=1e-5)


def test_bias_gradient_epilogue_and_second_output_match_the_evaluator():
    import ml_dtypes

    program = compile_dynamic_module(parse_hlo(BIAS_GRAD), speculation=SpeculationOptions("on"))
    reference = hlocc.compile(BIAS_GRAD, "interpreter")
    w = RNG.standard_normal(48).astype(np.float32)
    for b, s in ((1, 1), (2, 7), (3, 33)):
        g = RNG.standard_normal((b, s, 48)).astype(ml_dtypes.bfloat16)
        for got, want in zip(program.run([g, w]), reference(g, w)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert ran(program) == {"column_tiled": 3}


def test_stats_show_the_version_its_predicate_and_launches(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    exe = hlocc.compile(COLUMN_SUM, "cpu", dump_dir=str(tmp_path))
    for n in (16, 300, 15):
        exe(np.ones((3, n), np.float32))
    stats = exe.stats_text()
    assert "version column_tiled if n >= 16: kernel over (b, n), 2 launch(es)" in stats
    assert "version generic if true: kernel over (b, n), 1 launch(es)" in stats
    filecheck((tmp_path / "thunks.txt").read_text(),
              "CHECK: speculation {{.*}}: version column_tiled if n >= 16: kernel over (b, n)\n"
              "CHECK-NEXT: speculation {{.*}}: version generic if true: kernel over (b, n)\n", tmp_path)


@pytest.mark.parametrize("dtype", ["bf16", "s32"])
def test_the_tiled_version_folds_rows_in_the_generic_kernels_order(dtype):
    """Every column folds its rows in order in both versions: the same bits, bf16 sums included
    (whose rounding the evaluator's differs from by a few ulps), and integer sums."""
    import ml_dtypes

    text = COLUMN_SUM.replace("f32", dtype)
    np_type = {"bf16": ml_dtypes.bfloat16, "s32": np.int32}[dtype]
    arms = {mode: compile_dynamic_module(parse_hlo(text), speculation=SpeculationOptions(mode))
            for mode in ("force:generic", "force:column_tiled")}
    for b, n in ((1, 64), (7, 100), (33, 300)):
        x = (RNG.standard_normal((b, n)) * 8).astype(np_type)
        got = arms["force:column_tiled"].run([x])
        np.testing.assert_array_equal(got, arms["force:generic"].run([x]))
        assert ran(arms["force:column_tiled"]) == {"column_tiled": 1}


@pytest.mark.parametrize("shape, out, dims, predicate, sizes", [
    ("f32[?b,?s,4]", "f32[?s,4]", (0,), "4*s >= 16", [(3, 5, 4), (7, 33, 4)]),  # two kept dims, one static
    ("f32[?b,?s,?d]", "f32[?d]", (0, 1), "d >= 16", [(2, 3, 20), (5, 7, 300)]),  # two reduced dims
    ("f32[?b,?s,?d]", "f32[?s,?d]", (0,), "d*s >= 16", [(2, 3, 20), (5, 7, 300)]),
])
def test_several_kept_or_reduced_dims(shape, out, dims, predicate, sizes):
    text = (HEADER + f"ENTRY e {{\n  x = {shape} parameter(0)\n  z = f32[] constant(0)\n  ROOT s = {out} reduce(x, z), "
            f"dimensions={{{','.join(map(str, dims))}}}, to_apply=add_f\n}}\n")
    assert str(column_tile_version(parse_hlo(text).entry)) == f"column_tiled if {predicate}"
    program = compile_dynamic_module(parse_hlo(text), speculation=SpeculationOptions("on"))
    for size in sizes:
        x = RNG.standard_normal(size).astype(np.float32)
        np.testing.assert_allclose(program.run([x]), x.sum(axis=dims), rtol=1e-5, atol=1e-5)
    assert ran(program) == {"column_tiled": len(sizes)}
