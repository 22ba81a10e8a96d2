"""The reference evaluator over the corpora: every JAX case matches XLA:CPU's outputs within the
tolerances of index.tsv, and every XLA module either evaluates or fails with a clear
"unsupported" error."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import hlocc
from corpus import (
    INVALID_ALONE,
    JAX_DIR,
    KNOWN_INVALID,
    NON_TERMINATING,
    XLA_DIR,
    corpus_files,
    jax_cases,
    load_npz,
    require,
)
from hlocc.cli import flatten, random_inputs
from hlocc.comparison import compare_arrays
from hlocc.compiler import check_arguments
from hlocc.errors import UnsupportedError
from hlocc.evaluator import EvaluationError, Evaluator

CASES = jax_cases()
SMALL = [c for c in CASES if c["perf"] != "yes"]
PERF = [c for c in CASES if c["perf"] == "yes"]


def run_case(case: dict, directory) -> None:
    name = case["name"]
    module = hlocc.parse_hlo_file(directory / f"{name}.hlo")
    exe = hlocc.compile(module, backend="interpreter")
    inputs = load_npz(directory / f"{name}.in.npz")
    args = check_arguments(module, [inputs[f"arg{i}"] for i in range(len(inputs))], cast=True)
    outputs = flatten(exe(*args))
    expected = load_npz(directory / f"{name}.out.npz")
    assert len(outputs) == len(expected), f"{name}: {len(outputs)} outputs, reference has {len(expected)}"
    for i, got in enumerate(outputs):
        why = compare_arrays(expected[f"out{i}"], got, float(case["rtol"]), float(case["atol"]))
        assert why is None, f"{name} out{i}: {why}"


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c["name"])
def test_jax_case_matches_xla_cpu(case):
    require(JAX_DIR)
    run_case(case, JAX_DIR)


@pytest.fixture(scope="session")
def perf_dir(tmp_path_factory):
    """The perf cases ship without data; recreate it with the corpus's own generator (needs jax)."""
    pytest.importorskip("jax", reason="the perf cases' inputs are recreated with jax (not installed)")
    require(JAX_DIR)
    out = tmp_path_factory.mktemp("perf_corpus")
    names = ",".join(c["name"] for c in PERF)
    proc = subprocess.run([sys.executable, str(JAX_DIR / "gen_public.py"), "--only", names, "--no-timing",
                           "--outdir", str(out)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        pytest.skip(f"could not recreate the perf cases: {proc.stderr[-500:]}")
    return out


@pytest.mark.parametrize("case", PERF, ids=lambda c: c["name"])
def test_jax_perf_case_matches_xla_cpu(case, perf_dir):
    run_case(case, perf_dir)


MAX_INPUT_ELEMENTS = 1 << 23
MAX_DEFAULT_WORK = 3e8  # elements produced by all instructions; above it a module runs only with -m slow


def evaluation_work(path) -> float:
    """Elements all instructions of a module produce: the evaluator's time is about proportional."""
    try:
        module = hlocc.parse_hlo_file(path)
    except hlocc.HloError:
        return 0.0
    return float(sum(leaf.num_elements for i in module.all_instructions() for leaf in i.shape.leaves()
                     if leaf.is_array))


XLA_PARAMS = [pytest.param(p, marks=[pytest.mark.slow] if evaluation_work(p) > MAX_DEFAULT_WORK else [])
              for p in corpus_files(XLA_DIR)]


@pytest.mark.parametrize("path", XLA_PARAMS, ids=lambda p: p.name)
def test_xla_module_evaluates_or_is_unsupported(path):
    if path.name in INVALID_ALONE or path.name in KNOWN_INVALID:
        pytest.skip("not a valid module (see tests/corpus.py)")
    module = hlocc.parse_hlo_file(path)
    sizes = [leaf.num_elements for p in module.entry.parameters for leaf in p.shape.leaves() if leaf.is_array]
    if not all(p.shape.is_static for p in module.entry.parameters) or not module.entry.root.shape.is_static:
        pytest.skip("dynamic shapes in the entry signature: random inputs need concrete sizes")
    if sum(sizes) > MAX_INPUT_ELEMENTS:
        pytest.skip(f"inputs of {sum(sizes)} elements: too large to allocate in a unit test")
    hlocc.compile(module, backend="interpreter")  # verifies
    args = check_arguments(module, random_inputs(module, seed=1), cast=True)
    evaluator = Evaluator(seed=1, max_while_iterations=100_000)
    if path.name in NON_TERMINATING:
        with pytest.raises(EvaluationError, match="did not finish within 100000 iterations"):
            evaluator.run(module, args)
        return
    try:
        result = evaluator.run(module, args)
    except EvaluationError as e:
        if "over the evaluator's memory limit" not in str(e):
            raise
        pytest.skip(str(e))
    except UnsupportedError as e:
        names = {f"'{i.name}'" for i in module.all_instructions()}
        assert str(e).startswith("unsupported") and any(n in str(e) for n in names), str(e)
        return
    for leaf, shape in zip(flatten(result), module.entry.root.shape.leaves()):
        if shape.is_array:
            assert np.asarray(leaf).shape == shape.dims
            assert np.asarray(leaf).dtype == shape.dtype
