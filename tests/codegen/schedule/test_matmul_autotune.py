"""Matmul autotuning (backends/cpu/gemm_tuning.py): `full` times candidates and stores the winner
in the persistent cache; `cached` uses a stored winner without timing, else the analytic
schedule; `off` ignores the cache. The key holds the shape bucket, dtypes, layouts, epilogue and
CPU; the entry is plain data."""

import io

import numpy as np
import pytest

import hlocc
from hlocc.backends.cpu import gemm_tuning
from hlocc.codegen.schedule import MatmulSchedule, choice
from hlocc.codegen.schedule.choice import MatmulProblem, analytic_schedule, autotune_mode, set_tuner
from hlocc.errors import ArgumentError

DOT = """HloModule m
ENTRY e {
  a = f32[40,36] parameter(0)
  b = f32[36,48] parameter(1)
  ROOT d = f32[40,48] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path / "cache"))
    from hlocc.backends.cpu import kernel

    monkeypatch.setattr(kernel, "_CACHE", {})  # the in-process kernel cache would skip the emitter
    return tmp_path


def test_full_stores_the_winner_and_cached_reuses_it_without_timing(cache_dir, monkeypatch):
    sizes = [1, 40, 48, 36]
    analytic = analytic_schedule(sizes)
    other = MatmulSchedule(mc=8, nc=16, kc=12, mr=4, nr=16, pack=(1,), parallel=True)
    timed = []

    def fake_time(computation, schedule, runs=3):  # the second candidate wins
        timed.append(schedule)
        return 1.0 if schedule == other else 2.0
    monkeypatch.setattr(gemm_tuning, "candidates", lambda problem, a: [a, other])
    monkeypatch.setattr(gemm_tuning, "time_schedule", fake_time)
    exe = hlocc.compile(DOT, "cpu", gemm="codegen", autotune="full")
    assert timed == [analytic, other]
    (entry,) = [f.read_bytes() for f in (cache_dir / "cache").glob("*.hlk") if b"gemm-autotune v2" in f.read_bytes()]
    assert b'"schedule":{' in entry and b'"mc":8' in entry and b"timings_ms" in entry  # the schedule as JSON, beside the kernels' entries
    rng = np.random.default_rng(0)
    args = [rng.integers(-3, 4, s).astype(np.float32) for s in ((40, 36), (36, 48))]
    np.testing.assert_array_equal(exe(*args), args[0] @ args[1])

    def no_timing(*a, **k):
        raise AssertionError("cached must not time")
    monkeypatch.setattr(gemm_tuning, "time_schedule", no_timing)
    out = io.StringIO()  # printing the IR also bypasses the kernel caches: the emitter runs
    hlocc.compile(DOT, "cpu", gemm="codegen", autotune="cached", print_ir_after_all=True, stream=out)
    assert "sizes [1, 8, 16, 36]" in out.getvalue()  # the stored winner's block
    with autotune_mode("off"):  # off never asks the tuner: the analytic schedule
        set_tuner(no_timing)
        try:
            assert choice.schedule_for(sizes, ("f32",) * 3) == analytic
        finally:
            set_tuner(gemm_tuning.tune)


def test_the_key_names_what_changes_the_choice():
    problem = MatmulProblem((1, 40, 48, 36), ("f32", "f32", "f32"), "(m, k) ; (k, n) ; (m, n)", "epilogue")
    key = gemm_tuning.tuning_key(problem)
    assert "bucket: 1x64x64x64" in key and "types: f32,f32,f32" in key and "layouts: (m, k)" in key
    assert "cpu: " in key and "epilogue: " in key
    assert gemm_tuning.tuning_key(MatmulProblem((1, 33, 64, 60), problem.element_types, problem.layouts,
                                                "epilogue")) == key
    for other in (MatmulProblem((1, 40, 48, 36), ("bf16", "bf16", "bf16"), problem.layouts, "epilogue"),
                  MatmulProblem((1, 40, 48, 36), problem.element_types, "(k, m) ; (k, n) ; (m, n)", "epilogue"),
                  MatmulProblem((1, 40, 48, 36), problem.element_types, problem.layouts, "gelu")):
        assert gemm_tuning.tuning_key(other) != key


@pytest.mark.parametrize("isa, blocks", [("AVX512", {(6, 64), (9, 48), (14, 32)}), ("AVX2", {(4, 24), (6, 16), (2, 32)})])
def test_candidates_are_legal_neighbours_of_the_analytic_schedule(isa, blocks):
    """The register blocks tried are the target's: the model's, and its best of two other widths."""
    from hlocc.codegen import target
    from hlocc.codegen.schedule.microkernel import registers_needed

    isa = getattr(target, isa)
    with target.use_vector_isa(isa):
        problem = MatmulProblem((1, 512, 512, 512), ("f32", "f32", "f32"))
        analytic = analytic_schedule(problem.sizes)
        found = gemm_tuning.candidates(problem, analytic)
    assert found[0] == analytic and len(found) == len(set(found)) >= 5
    assert {(s.mr, s.nr) for s in found} == blocks
    assert all(s.mc % s.mr == 0 and s.nc % s.nr == 0 for s in found)
    assert all(registers_needed(s.mr, s.nr, isa.lanes) <= isa.registers for s in found)


def test_an_unknown_mode_is_an_error():
    with pytest.raises(hlocc.errors.UnsupportedError, match="autotune='fast': choose one of off, cached, full"):
        hlocc.compile(DOT, "cpu", gemm="codegen", autotune="fast")
    hlocc.compile(DOT, "cpu")  # in the program caches now: the options are still checked before them
    with pytest.raises(hlocc.errors.UnsupportedError, match="autotune='fast'"):
        hlocc.compile(DOT, "cpu", autotune="fast")
    with pytest.raises(ArgumentError, match="autotune='fast'"):
        with autotune_mode("fast"):
            pass


TUNING_CASES = {
    "f32_transposed_batched": ("""HloModule m
ENTRY e {
  a = f32[2,37,20]{1,2,0} parameter(0)
  b = f32[2,37,53] parameter(1)
  ROOT d = f32[2,20,53] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={1}
}""", (2, 20, 53, 37)),
    "bf16": ("""HloModule m
ENTRY e {
  a = bf16[24,45] parameter(0)
  b = bf16[45,70] parameter(1)
  ROOT d = bf16[24,70] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""", (1, 24, 70, 45)),
}


@pytest.mark.slow  # compiles every candidate of two problems (about 15 kernels, a minute on a loaded machine)
@pytest.mark.parametrize("case", list(TUNING_CASES))
def test_every_candidate_of_the_tuning_space_is_exact(case):
    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.codegen.schedule import use_schedule
    from hlocc.evaluator import Evaluator
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.types import PRIMITIVE_TYPES

    text, sizes = TUNING_CASES[case]
    text = text.replace("rhs_contracting_dims={1}\n", "rhs_contracting_dims={1}, backend_config={\"__hlocc_gemm\":{}}\n")
    text = text.replace("rhs_contracting_dims={0}\n", "rhs_contracting_dims={0}, backend_config={\"__hlocc_gemm\":{}}\n")
    assert "__hlocc_gemm" in text  # the matmul emitter compiles it (the schedule applies)
    module = parse_hlo(text)
    dtype = module.entry.parameters[0].shape.element_type.name
    problem = MatmulProblem(sizes, (dtype,) * 3)
    rng = np.random.default_rng(5)
    args = [rng.integers(-3, 4, p.shape.dims).astype(PRIMITIVE_TYPES[dtype].dtype) for p in module.entry.parameters]
    expected = np.asarray(Evaluator().run(module, args), np.float64)
    found = gemm_tuning.candidates(problem, analytic_schedule(list(sizes), (dtype,) * 3))
    assert len(found) >= 4
    for schedule in found:
        with use_schedule(schedule):
            kernel = compile_fusion(module.entry, use_cache=False)
        np.testing.assert_array_equal(np.asarray(kernel(*args)[0], np.float64), expected, err_msg=str(schedule))
