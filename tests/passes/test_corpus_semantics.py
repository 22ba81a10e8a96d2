"""The simplification pipeline preserves the meaning of every corpus module.

For each module of shared/corpus/xla and shared/corpus/jax that the reference evaluator can run,
the pipeline runs in debug mode (the verifier after every pass, and a check that passes reporting
"no change" changed nothing), then the original and the simplified module are evaluated on the same
seeded inputs — random ones, and ones full of special values (±0.0, ±inf, NaN, integer extremes) —
and must agree: bitwise for integers and pred, equal or both NaN for floating point. No rule
reassociates, so no tolerance is needed; a dot rewritten by dot-canonicalize is evaluated by the
same canonical matmul either way.

Modules whose evaluation is large run only with `-m slow` (without debug mode, which prints the
module twice per pass); above MAX_EVALUATED_WORK only the pipeline runs and the result must verify.
"""

from __future__ import annotations

import pytest
from passes_helpers import assert_same_results, evaluate, special_inputs

import hlocc
from corpus import (
    INVALID_ALONE,
    JAX_DIR,
    KNOWN_INVALID,
    NON_TERMINATING,
    XLA_DIR,
    corpus_files,
    evaluation_work,
    reference,
    shared_module,
)
from hlocc.compiler import check_arguments
from hlocc.errors import UnsupportedError
from hlocc.evaluator import EvaluationError
from hlocc.hlo.verifier import verify_module
from hlocc.passes.pipeline import simplification_pipeline

MAX_DEFAULT_WORK = 2e7
"""Elements produced by all instructions of a module; above it the evaluation runs only with -m slow."""
MAX_EVALUATED_WORK = 1e9
"""Above it even -m slow only runs the pipeline (evaluating such a module twice takes minutes)."""
MAX_INPUT_ELEMENTS = 1 << 22
SKIPPED = INVALID_ALONE | set(KNOWN_INVALID) | NON_TERMINATING


def _params():
    for path in corpus_files(XLA_DIR) + corpus_files(JAX_DIR):
        if path.name in SKIPPED:
            continue
        big = evaluation_work(path) > MAX_DEFAULT_WORK
        yield pytest.param(path, big, id=f"{path.parent.name}/{path.name}",
                           marks=[pytest.mark.slow] if big else [])


PARAMS = list(_params())


def _evaluable(module, path) -> str | None:
    """Why the module cannot be evaluated on random inputs, or None."""
    entry = module.entry
    if evaluation_work(path) > MAX_EVALUATED_WORK:
        return f"over {MAX_EVALUATED_WORK:.0e} elements to evaluate"
    if not all(p.shape.is_static for p in entry.parameters) or not entry.root.shape.is_static:
        return "dynamic shapes in the entry signature"
    sizes = sum(leaf.num_elements for p in entry.parameters for leaf in p.shape.leaves() if leaf.is_array)
    if sizes > MAX_INPUT_ELEMENTS:
        return f"inputs of {sizes} elements"
    if any(i.opcode in ("rng", "rng-get-and-update-state") for i in module.all_instructions()):
        return "stateful rng: its values depend on the evaluation order, which simplification changes"
    return None


@pytest.mark.parametrize("path, big", PARAMS)
def test_simplification_keeps_meaning(path, big):
    before = shared_module(path)  # read only; the pipeline runs on its own copy
    verify_module(before)
    after = hlocc.parse_hlo_file(path)
    simplification_pipeline(debug=not big).run(after)
    verify_module(after)
    why = _evaluable(before, path)
    if why:
        pytest.skip(f"pipeline ran and verified; not evaluated: {why}")
    compared = 0
    problems = []
    for inputs in ("random", "special"):
        try:
            if inputs == "random":  # random_inputs(seed=1): the run shared with other sweeps (corpus.reference)
                args, expected = reference(path)
            else:
                args = check_arguments(before, special_inputs(before, seed=1), cast=True)
                expected = evaluate(before, args)
        except (UnsupportedError, EvaluationError) as e:  # e.g. a loop bound read from an extreme input
            problems.append(str(e))
            continue
        assert_same_results(before, after, args, seed=1, expected=expected)
        compared += 1
    if not compared:
        pytest.skip(f"pipeline ran and verified; the evaluator cannot run the module: {problems[0]}")
