import sys
from pathlib import Path

# Make the shared test helpers importable from every test directory: `tests/corpus.py` as `corpus`,
# the CPU backend's run-and-compare helpers (`_cpu_helpers`, also used by the emitter and maths
# tests) and the hero emitters' helpers (`_emitter_helpers`, used from each emitters/<kind>/ folder).
TESTS = Path(__file__).resolve().parent
HELPER_DIRS = (
    TESTS,
    TESTS / "codegen" / "emitters",
    TESTS / "backends" / "cpu",
    # Test modules whose checks tests in other folders reuse: test_partitioner's check_invariants
    # (tests/backends/cpu/test_cpu_gather.py), the DUS test's guarded run (the scatter emitter's test).
    TESTS / "codegen",
    TESTS / "codegen" / "emitters" / "dynamic_update_slice",
)
for _helpers in reversed(HELPER_DIRS):
    sys.path.insert(0, str(_helpers))


import subprocess  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def perf_dir(tmp_path_factory):
    """The JAX corpus's perf cases ship without data; recreate it once per session with the corpus's
    own generator (needs jax), or skip with the reason."""
    from corpus import JAX_DIR, jax_cases, require

    pytest.importorskip("jax", reason="the perf cases' inputs are recreated with jax (not installed)")
    require(JAX_DIR)
    out = tmp_path_factory.mktemp("perf_corpus")
    names = ",".join(c["name"] for c in jax_cases() if c["perf"] == "yes")
    proc = subprocess.run([sys.executable, str(JAX_DIR / "gen_public.py"), "--only", names, "--no-timing",
                           "--outdir", str(out)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.skip(f"could not recreate the perf cases: {proc.stderr[-500:]}")
    return out
