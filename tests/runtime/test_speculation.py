"""Speculation (runtime/speculation.py): the versions a symbolic fusion gets, the one each binding
runs, and every version forced against the evaluator at sizes that hit and miss its predicate."""

import numpy as np
import pytest
from _programs import filecheck, softmax_text

import hlocc
from hlocc.backends.cpu.executable import compile_dynamic_module
from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.speculation import Divisible, KernelVersion, SpeculationOptions, plan_versions

RNG = np.random.default_rng(7)

# Softmax over a symbolic row length n: in the generic (multi-kernel) plan two reduce fusions (no
# version: one element per thread) and two loop fusions over [b, n] (a `vectorized` version each,
# for n mod 16 == 0); under "on" the stitched plan (one stitch kernel) runs where 2 <= n <= 131072
# (tests/runtime/test_plan_speculation.py) and the generic plan elsewhere.
SOFTMAX = softmax_text("?n")
STITCHED = range(2, 131073)

# n = 0 (legal: an empty row), 1, the vector width 16 ± 1, 32, and 512 ± 1 columns.
ROW_LENGTHS = [0, 1, 15, 16, 17, 32, 511, 512, 513]
MODES = ["on", "force:generic", "force:vectorized"]


@pytest.fixture(scope="module")
def programs():
    """The softmax plan compiled once per speculation mode."""
    return {mode: compile_dynamic_module(parse_hlo(SOFTMAX), speculation=SpeculationOptions(mode)) for mode in MODES}


def expected(x: np.ndarray) -> np.ndarray:
    return hlocc.compile(SOFTMAX, "interpreter")(x)


def ran(program) -> dict[str, int]:
    """Launches per version over the speculated fusions (of every plan version), then reset."""
    counts: dict[str, int] = {}
    plans = [program, *(program.versions.others() if program.versions is not None else [])]
    for _, kernel in [k for p in plans for k in p.speculated()]:
        for version, calls in kernel.calls.items():
            if calls:
                counts[version] = counts.get(version, 0) + calls
            kernel.calls[version] = 0
    return counts


def test_the_loop_fusions_get_a_vectorized_version(programs):
    program = programs["force:generic"]
    speculated = program.speculated()
    assert len(speculated) == 2 and all("fusion" in name for name, _ in speculated)
    for _, kernel in speculated:
        assert [(v.name, v.predicate) for v, _ in kernel.versions] == [("vectorized", "n mod 16 == 0"),
                                                                       ("generic", "true")]
        assert kernel.versions[0][1].symbols == ("b", "n_16") and kernel.versions[1][1].symbols == ("b", "n")
    # 4 fusions + 2 versions: compile time grows by the versions, bounded per fusion; all of them
    # one compilation of the plan, for every size
    assert program.symbolic_kernels == 6 and programs["force:vectorized"].symbolic_kernels == 6
    assert program.compilations == 1
    # "on": the stitched plan's kernel and its vectorized version besides
    assert programs["on"].symbolic_kernels == 8 and programs["on"].compilations == 1


@pytest.mark.parametrize("n", ROW_LENGTHS)
@pytest.mark.parametrize("mode", MODES)
def test_every_version_forced_matches_the_evaluator(programs, mode, n):
    program = programs[mode]
    for b in (1, 3):
        x = RNG.standard_normal((b, n)).astype(np.float32)
        hits = n % 16 == 0
        if mode == "force:vectorized" and not hits:
            with pytest.raises(ArgumentError, match=f"forces version 'vectorized' but its predicate n mod 16 == 0 "
                                                    f"fails at n={n}"):
                program.run([x])
            continue
        np.testing.assert_allclose(program.run([x]), expected(x), rtol=1e-6, atol=1e-7)
        version = {"on": "vectorized" if hits else "generic", "force:generic": "generic",
                   "force:vectorized": "vectorized"}[mode]
        counts = ran(program)
        if mode == "on" and n in STITCHED:  # the stitched plan: its one stitch kernel ran
            assert counts == {version: 1}
        elif n:  # both loop fusions ran that version (an empty output launches nothing)
            assert counts == {version: 2}


def test_sizes_just_below_and_above_the_vector_width_pick_their_version(programs):
    program = programs["on"]  # (the stitched plan: its one kernel's versions)
    for n, version in ((15, "generic"), (16, "vectorized"), (17, "generic")):
        program.run([np.ones((2, n), np.float32)])
        assert ran(program) == {version: 1}, n
    program = programs["force:generic"]
    for n in (511, 512, 513):
        program.run([np.ones((2, n), np.float32)])
        assert ran(program) == {"generic": 2}, n


def test_the_version_is_chosen_once_per_binding_not_per_call(programs):
    program = programs["force:vectorized"]
    x = np.ones((2, 48), np.float32)
    bound = program.bind(((2, 48),))
    kernels = [t.kernel for t in bound.program.walk() if getattr(t, "kernel", None) is not None
               and getattr(t.kernel, "version", None) == "vectorized"]
    assert len(kernels) == 2 and all(k.dims == (2, 3) for k in kernels)  # b = 2, n_16 = 48 / 16
    ran(program)
    for _ in range(3):
        program.run([x])
    assert ran(program) == {"vectorized": 6}


def test_speculation_off_and_a_bound_of_one_keep_the_generic_kernel_only():
    module = parse_hlo(SOFTMAX)
    loop = module.entry  # its root is a [b, n] divide: the loop's output
    assert plan_versions(loop, 16, SpeculationOptions("off")) == [KernelVersion("generic")]
    assert plan_versions(loop, 16, SpeculationOptions(max_versions=1)) == [KernelVersion("generic")]
    assert plan_versions(loop, 1, SpeculationOptions()) == [KernelVersion("generic")]
    assert plan_versions(loop, 16, SpeculationOptions()) == [
        KernelVersion("vectorized", (Divisible("n", 16),)), KernelVersion("generic")]


def test_bad_options_are_named(monkeypatch):
    with pytest.raises(UnsupportedError, match="speculation 'force:tiled': choose on, off or force:<version> with "
                                               "a version of generic, vectorized, column_tiled, stitched"):
        SpeculationOptions("force:tiled")
    with pytest.raises(UnsupportedError, match="max_versions=0: at least 1"):
        SpeculationOptions(max_versions=0)
    monkeypatch.setenv("HLOCC_SPECULATION", "off,max=2")
    assert SpeculationOptions.from_env() == SpeculationOptions("off", 2)
    monkeypatch.setenv("HLOCC_SPECULATION", "on,maximum")
    with pytest.raises(UnsupportedError, match="expected <mode>\\[,max=<k>\\]"):
        SpeculationOptions.from_env()


def test_stats_and_dump_show_versions_predicates_and_launches(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOCC_CACHE_DIR", "")
    exe = hlocc.compile(SOFTMAX, "cpu", dump_dir=str(tmp_path))
    # the stitched plan's kernel versions, then (n = 1, below the stitched plan's 2) the generic plan's
    for n in (16, 16, 17, 1):
        exe(np.ones((3, n), np.float32))
    stats = exe.stats_text()
    assert "speculation stitch_divide_fusion: version vectorized if n mod 16 == 0: kernel over (b, n_16), " \
           "2 launch(es)" in stats
    # (and the generic plan's two loop fusions' versions: vectorized at no size here, generic at n = 1)
    assert stats.count("version vectorized if n mod 16 == 0") == 3 and stats.count("2 launch(es)") == 1
    assert stats.count("version generic if true: kernel over (b, n), 1 launch(es)") == 3
    filecheck((tmp_path / "thunks.txt").read_text(),
              "CHECK: speculation {{.*}}: version vectorized if n mod 16 == 0: kernel over (b, n_16)\n"
              "CHECK-NEXT: speculation {{.*}}: version generic if true: kernel over (b, n)\n"
              "CHECK: speculation {{.*}}: version vectorized if n mod 16 == 0: kernel over (b, n_16)\n"
              "CHECK-NEXT: speculation {{.*}}: version generic if true: kernel over (b, n)\n", tmp_path)


def test_the_vectorized_version_stays_inside_its_buffers():
    from dataclasses import replace

    from hlocc.codegen.target import cpu_target

    # (the generic plan's loop fusions; the stitched plan's kernel under check-bounds: test_plan_speculation.py)
    program = compile_dynamic_module(parse_hlo(SOFTMAX), replace(cpu_target(), check_bounds=True),
                                     speculation=SpeculationOptions("force:vectorized"))
    for b, n in ((1, 16), (3, 32), (5, 512), (1, 0)):
        x = RNG.standard_normal((b, n)).astype(np.float32)
        np.testing.assert_allclose(program.run([x]), expected(x), rtol=1e-6, atol=1e-7)
    # n = 0 is a multiple of 16 too: both loop fusions' vectorized versions at every size
    assert ran(program) == {"vectorized": 8}


@pytest.mark.parametrize("shape, versions", [
    ("f32[?b]", ["generic if true"]),  # one row: aligned already, no version
    ("f32[1,?b]", ["generic if true"]),
    ("f32[?a,?b]", ["vectorized if b mod 16 == 0", "generic if true"]),
    ("f32[4,?b]", ["vectorized if b mod 16 == 0", "generic if true"]),
    ("f32[?b,128]", ["generic if true"]),  # a static row: the static path's alignment
])
def test_only_rows_of_a_symbolic_length_get_a_vectorized_version(shape, versions):
    module = parse_hlo(f"HloModule m\nENTRY e {{\n  p = {shape} parameter(0)\n  ROOT n = {shape} negate(p)\n}}\n")
    assert [str(v) for v in plan_versions(module.entry, 16, SpeculationOptions())] == versions
