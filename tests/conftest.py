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
    TESTS / "runtime",  # _programs.py: the dynamic-program tests' HLO (cuda's tests run them too)
)
for _helpers in reversed(HELPER_DIRS):
    sys.path.insert(0, str(_helpers))


import fcntl  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

# One persistent compilation cache per test run (runtime/cache.py), never the user's: the first
# process (pytest, or xdist's controller, whose environment the workers inherit) makes it and
# removes it at the end. Repeated compilations of a kernel in any worker cost a lookup.
if "PYTEST_XDIST_WORKER" not in os.environ:
    os.environ["HLOCC_CACHE_DIR"] = tempfile.mkdtemp(prefix="hlocc-test-cache-")
    os.environ["HLOCC_TEST_CACHE_OWNER"] = str(os.getpid())

# Tests verify every compiled kernel's IR after its passes, which the CPU compile path skips otherwise
# (codegen/pipeline.py): a pass that breaks the IR is named at once.
os.environ.setdefault("HLOCC_VERIFY_KERNELS", "1")

# On a GPU machine every xdist worker that imports jax would take 75% of the GPU's memory for
# XLA's allocator at its first GPU array, and the next worker's CUDA context then fails with
# CUDA_ERROR_OUT_OF_MEMORY (seen on an H100 with 12 workers): jax allocates as it needs instead.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_unconfigure(config):
    if os.environ.get("HLOCC_TEST_CACHE_OWNER") == str(os.getpid()):
        shutil.rmtree(os.environ["HLOCC_CACHE_DIR"], ignore_errors=True)


@pytest.fixture(scope="session")
def perf_dir(tmp_path_factory):
    """The JAX corpus's perf cases ship without data; recreate it once per run with the corpus's own
    generator (needs jax; ~20 s), or skip with the reason. Under pytest-xdist the workers share one
    folder under the run's temporary root: the first to take the lock generates, the others wait
    and reuse its files (or its failure)."""
    from corpus import JAX_DIR, jax_cases, recreate_jax_cases, require

    pytest.importorskip("jax", reason="the perf cases' inputs are recreated with jax (not installed)")
    require(JAX_DIR)
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # basetemp is <run root>/popen-gwN: share the run root
        root = root.parent
    out = root / "perf_corpus"
    out.mkdir(exist_ok=True)
    failed = out / "FAILED"
    with open(root / "perf_corpus.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this worker dies
        if not (out / "DONE").exists() and not failed.exists():
            proc = recreate_jax_cases([c["name"] for c in jax_cases() if c["perf"] == "yes"], out, timeout=1800)
            (failed if proc.returncode != 0 else out / "DONE").write_text(proc.stderr[-500:])
    if failed.exists():
        pytest.skip(f"could not recreate the perf cases: {failed.read_text()}")
    return out


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist with `--dist loadgroup` (.ci/run), every test parametrized by one corpus
    module (a path, or a file name) runs on one worker, so that worker parses the module and
    computes its reference outputs once for all the sweeps (tests/corpus.py caches them per process).
    The other tests of a module whose own module-scoped fixture they use run on one worker too, which
    builds the fixture (a compiled program, as a rule) once, not once per worker."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    from corpus import CORPUS

    for item in items:
        spec = getattr(item, "callspec", None)
        for value in spec.params.values() if spec else ():
            name = value.name if isinstance(value, Path) and CORPUS in value.parents else value
            if isinstance(name, str) and name.endswith(".hlo"):
                item.add_marker(pytest.mark.xdist_group(name))
                break
        else:
            if _uses_own_module_fixture(item):
                item.add_marker(pytest.mark.xdist_group(item.module.__name__))


def _uses_own_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    for name in info.names_closure if info else ():
        defs = info.name2fixturedefs.get(name) or ()
        if defs and defs[-1].scope == "module" and defs[-1].func.__module__ == item.module.__name__:
            return True
    return False
