"""The reference evaluator over the corpora: every JAX case matches XLA:CPU's outputs within the
tolerances of index.tsv, and every XLA module either evaluates or fails with a clear
"unsupported" error."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import (
    INVALID_ALONE,
    JAX_DIR,
    KNOWN_INVALID,
    MAX_DEFAULT_WORK,
    MAX_INPUT_ELEMENTS,
    NON_TERMINATING,
    XLA_DIR,
    corpus_files,
    evaluation_work,
    jax_cases,
    reference,
    require,
    run_jax_case,
    shared_module,
)
from hlocc.cli import random_inputs
from hlocc.compiler import check_arguments
from hlocc.errors import UnsupportedError
from hlocc.evaluator import EvaluationError, Evaluator

CASES = jax_cases()
SMALL = [c for c in CASES if c["perf"] != "yes"]
PERF = [c for c in CASES if c["perf"] == "yes"]


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c["name"])
def test_jax_case_matches_xla_cpu(case):
    require(JAX_DIR)
    run_jax_case(case, JAX_DIR, "interpreter")


# The perf cases are the small cases' programs (GELU, RMSNorm, row sums, a matmul) at benchmark sizes,
# and their data must first be generated with jax (~20-35 s): slow, as on the other backends.
@pytest.mark.slow
@pytest.mark.parametrize("case", PERF, ids=lambda c: c["name"])
def test_jax_perf_case_matches_xla_cpu(case, perf_dir):
    run_jax_case(case, perf_dir, "interpreter")


XLA_PARAMS = [pytest.param(p, marks=[pytest.mark.slow] if evaluation_work(p) > MAX_DEFAULT_WORK else [])
              for p in corpus_files(XLA_DIR)]


@pytest.mark.parametrize("path", XLA_PARAMS, ids=lambda p: p.name)
def test_xla_module_evaluates_or_is_unsupported(path):
    if path.name in INVALID_ALONE or path.name in KNOWN_INVALID:
        pytest.skip("not a valid module (see tests/corpus.py)")
    module = shared_module(path)
    sizes = [leaf.num_elements for p in module.entry.parameters for leaf in p.shape.leaves() if leaf.is_array]
    if not all(p.shape.is_static for p in module.entry.parameters) or not module.entry.root.shape.is_static:
        pytest.skip("dynamic shapes in the entry signature: random inputs need concrete sizes")
    if sum(sizes) > MAX_INPUT_ELEMENTS:
        pytest.skip(f"inputs of {sum(sizes)} elements: too large to allocate in a unit test")
    hlocc.compile(module, backend="interpreter")  # verifies
    if path.name in NON_TERMINATING:
        args = check_arguments(module, random_inputs(module, seed=1), cast=True)
        # (a limit of 1000 reaches the same check as the default 100,000, in 1% of the time)
        with pytest.raises(EvaluationError, match="did not finish within 1000 iterations"):
            Evaluator(seed=1, max_while_iterations=1000).run(module, args)
        return
    try:
        _, result = reference(path)  # the evaluator on random_inputs(seed=1), shared with the other sweeps
    except EvaluationError as e:
        if "over the evaluator's memory limit" not in str(e):
            raise
        pytest.skip(str(e))
    except UnsupportedError as e:
        names = {f"'{i.name}'" for i in module.all_instructions()}
        assert str(e).startswith("unsupported") and any(n in str(e) for n in names), str(e)
        return
    for leaf, shape in zip(result, module.entry.root.shape.leaves()):
        if shape.is_array:
            assert np.asarray(leaf).shape == shape.dims
            assert np.asarray(leaf).dtype == shape.dtype
