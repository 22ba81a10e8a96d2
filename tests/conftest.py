import sys
from pathlib import Path

# Make `tests/corpus.py` importable as `corpus` from every test directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))


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
