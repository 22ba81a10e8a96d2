"""The fusion passes preserve meaning: on every JAX corpus case (with its own inputs) and every XLA
corpus module the evaluator runs in reasonable time (seeded random inputs), the module computes
bit-identical results after priority-fusion, multi-output-fusion, rename-fusions and
fusion-wrapper (NaNs equal where they are NaN), still verifies, and holds no illegal fusion
(`fusion_violations`: a library or host op inside a fusion, nested tuples, incompatible reduction
heroes). Every op that needs a generated kernel ends up in a fusion."""

from __future__ import annotations

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
    evaluation_work,
    jax_cases,
    load_npz,
    reference,
    require,
    shared_module,
)
from hlocc.cli import flatten
from hlocc.compiler import check_arguments
from hlocc.errors import UnsupportedError
from hlocc.evaluator import EvaluationError, Evaluator
from hlocc.hlo.verifier import verify_module
from hlocc.passes.fusible import fusion_violations
from hlocc.passes.fusion_wrapper import FusionWrapper, must_wrap
from hlocc.passes.multi_output_fusion import MultiOutputFusion
from hlocc.passes.priority_fusion import PriorityFusion
from hlocc.passes.rename_fusions import RenameFusions

PASSES = (PriorityFusion, MultiOutputFusion, RenameFusions, FusionWrapper)
MAX_DEFAULT_WORK = 3e7  # elements all instructions produce; above it a module runs only with -m slow
MAX_INPUT_ELEMENTS = 1 << 22


def bitwise_equal(a, b) -> bool:
    """Same shape, dtype and bits; NaNs compare equal to NaNs whatever their payload."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "iub" or a.dtype == object:
        return a.tobytes() == b.tobytes()
    wide = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    other = b.astype(wide.dtype)
    nan_a, nan_b = np.isnan(wide), np.isnan(other)
    if not np.array_equal(nan_a, nan_b):
        return False
    return a[~nan_a].tobytes() == b[~nan_b].tobytes()


def fuse_and_compare(module: hlocc.HloModule, args, before: list | None = None) -> None:
    """`before`: the module's outputs on `args` where they are known already (corpus.reference)."""
    if before is None:
        before = flatten(Evaluator(seed=1, max_while_iterations=100_000).run(module, args))
    for cls in PASSES:
        cls().run(module)
        verify_module(module)
    assert fusion_violations(module) == []
    unwrapped = [i.name for c in module.computations for i in c.instructions
                 if c is module.entry and must_wrap(i)]
    assert unwrapped == [], f"ops left outside fusions: {unwrapped}"
    after = flatten(Evaluator(seed=1, max_while_iterations=100_000).run(module, args))
    assert len(before) == len(after)
    for i, (a, b) in enumerate(zip(before, after)):
        assert bitwise_equal(a, b), f"output {i} differs after fusion"


CASES = [c for c in jax_cases() if c["perf"] != "yes"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["name"])
def test_jax_case_keeps_its_values_after_fusion(case):
    require(JAX_DIR)
    name = case["name"]
    module = hlocc.parse_hlo_file(JAX_DIR / f"{name}.hlo")
    inputs = load_npz(JAX_DIR / f"{name}.in.npz")
    args = check_arguments(module, [inputs[f"arg{i}"] for i in range(len(inputs))], cast=True)
    fuse_and_compare(module, args)


XLA_PARAMS = [pytest.param(p, marks=[pytest.mark.slow] if evaluation_work(p) > MAX_DEFAULT_WORK else [])
              for p in corpus_files(XLA_DIR)]


@pytest.mark.parametrize("path", XLA_PARAMS, ids=lambda p: p.name)
def test_xla_module_keeps_its_values_after_fusion(path, request):
    if request.node.get_closest_marker("slow") and "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("evaluating it takes minutes: run with -m slow")
    if path.name in INVALID_ALONE or path.name in KNOWN_INVALID or path.name in NON_TERMINATING:
        pytest.skip("not a valid or terminating module (see tests/corpus.py)")
    module = shared_module(path)
    if not all(p.shape.is_static for p in module.entry.parameters) or not module.entry.root.shape.is_static:
        pytest.skip("dynamic shapes in the entry signature: random inputs need concrete sizes")
    sizes = [leaf.num_elements for p in module.entry.parameters for leaf in p.shape.leaves() if leaf.is_array]
    if sum(sizes) > MAX_INPUT_ELEMENTS:
        pytest.skip(f"inputs of {sum(sizes)} elements: too large for a unit test")
    try:
        args, before = reference(path)  # random_inputs(seed=1) and the evaluator's outputs, once per session
        fuse_and_compare(hlocc.parse_hlo_file(path), args, before)  # the passes change the module: its own copy
    except UnsupportedError as e:
        pytest.skip(f"the evaluator does not run this module: {e}")
    except EvaluationError as e:
        if "memory limit" not in str(e):
            raise
        pytest.skip(str(e))
