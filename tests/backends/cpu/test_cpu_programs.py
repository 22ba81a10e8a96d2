"""Whole programs on the CPU backend (HLO passes, fusion, buffer assignment, thunks):

- every JAX corpus case matches XLA:CPU's outputs within its tolerances (the perf cases too, under
  -m slow, with their data recreated by the corpus's generator);
- the dot, convolution and control-flow modules of the XLA corpus match the evaluator;
- and what each program compiled into (kernels, library calls, host fallbacks) is what we expect,
  so a regression that silently moves work to the host shows up.
"""

from __future__ import annotations

import csv

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
    evaluation_work,
    jax_cases,
    reference,
    require,
    run_jax_case,
    shared_module,
)
from hlocc.cli import flatten
from hlocc.comparison import compare_arrays

CASES = jax_cases()
SMALL = [c for c in CASES if c["perf"] != "yes"]
PERF = [c for c in CASES if c["perf"] == "yes"]

# Ops of the JAX corpus no kernel computes yet: each must be listed.
EXPECTED_HOST_OPS: dict[str, list[str]] = {}  # none
EXPECTED_KERNELS = {"sort_topk_argsort": {"sort": 3}}  # sort and top-k: sort kernels, no library call


@pytest.mark.parametrize("case", SMALL, ids=lambda c: c["name"])
def test_jax_case_on_cpu_matches_xla_cpu(case):
    require(JAX_DIR)
    exe = run_jax_case(case, JAX_DIR, "cpu")
    stats = exe.runner.stats
    assert sorted(op for _, op, _ in stats.host_ops) == EXPECTED_HOST_OPS.get(case["name"], []), stats.to_string()
    for emitter, count in EXPECTED_KERNELS.get(case["name"], {}).items():
        assert stats.kernels_by_emitter[emitter] == count and not stats.library_calls, stats.to_string()
    assert stats.kernels + sum(stats.library_calls.values()) + len(stats.host_ops) > 0


# The small cases' programs at benchmark sizes, whose data must first be generated with jax (~20-35 s
# of the default run): slow, as on cuda-sim. The CPU kernels' large-size forms (several vectors and
# several threads) stay in the default run (test_cpu_column_lanes in tests/codegen/emitters/reduction/).
@pytest.mark.slow
@pytest.mark.parametrize("case", PERF, ids=lambda c: c["name"])
def test_jax_perf_case_on_cpu_matches_xla_cpu(case, perf_dir):
    exe = run_jax_case(case, perf_dir, "cpu")
    assert not exe.runner.stats.host_ops


def _xla_modules(kinds: set[str]) -> list:
    index = XLA_DIR / "index.tsv"
    if not index.is_file():
        return []
    with index.open() as f:
        names = [row["file"] for row in csv.DictReader(f, delimiter="\t") if row["kind"] in kinds]
    return [pytest.param(n, marks=[pytest.mark.slow] if evaluation_work(XLA_DIR / n) > MAX_DEFAULT_WORK else [],
                         id=n.removesuffix(".hlo")) for n in names]


# An ulp of the narrowest float output is the tolerance: the gemm's summation order differs from
# the evaluator's, and a result rounded to f8 can land on the neighbouring value.
NARROW_FLOAT_RTOL = {"float8_e4m3fn": 0.125, "float8_e5m2": 0.25, "bfloat16": 1 / 128, "float16": 1e-3}


@pytest.mark.parametrize("name", _xla_modules({"dot", "conv", "control"}))
def test_xla_module_on_cpu_matches_the_evaluator(name):
    require(XLA_DIR)
    if name in INVALID_ALONE or name in KNOWN_INVALID or name in NON_TERMINATING:
        pytest.skip("not a valid or terminating module (see tests/corpus.py)")
    module = shared_module(XLA_DIR / name)  # hlocc.compile copies it
    sizes = [leaf.num_elements for p in module.entry.parameters for leaf in p.shape.leaves() if leaf.is_array]
    if sum(sizes) > MAX_INPUT_ELEMENTS:
        pytest.skip(f"inputs of {sum(sizes)} elements: too large to allocate in a unit test")
    args, ref = reference(XLA_DIR / name)  # random_inputs(seed=1), the evaluator's outputs: once per session
    exe = hlocc.compile(module, backend="cpu")
    got = flatten(exe(*args))
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        if not isinstance(r, np.ndarray):
            continue
        rtol = NARROW_FLOAT_RTOL.get(r.dtype.name, 1e-4)
        problem = compare_arrays(r, g, rtol=rtol, atol=1e-4 if r.dtype.kind == "f" or rtol != 1e-4 else 0)
        assert problem is None, f"{name} output {k}: {problem}"
    # Dots and convolutions are library calls, also inside the gemm fusions of XLA-optimized modules
    # (convolutions, with HLO passes, implicit-gemm fusions: passes/convolution_to_gemm.py).
    ops = {i.opcode for c in module.computations for i in c.instructions}
    host = {op for _, op, _ in exe.runner.stats.host_ops}
    assert not host & {"dot", "convolution", "fusion", "while", "conditional"}, exe.runner.stats.to_string()
    if ops & {"dot", "convolution"}:
        stats = exe.runner.stats
        assert sum(stats.library_calls.values()) + stats.fusions_by_emitter["gemm"] > 0


def test_a_run_frees_its_memory_without_the_garbage_collector():
    """A run's allocations die with its last result: no reference cycle keeps them (they once waited
    for the cyclic collector, so big programs piled up memory and page faults)."""
    import gc
    import weakref

    exe = hlocc.compile("""HloModule m
ENTRY e {
  x = f32[64,64] parameter(0)
  ROOT y = (f32[64,64], f32[64,64]) tuple(x, x)
}""", backend="cpu")
    x = np.ones((64, 64), np.float32)
    gc.disable()
    try:
        a, b = exe(x)
        roots = []
        for view in (a, b):
            while view.base is not None:
                view = view.base
            roots.append(weakref.ref(view))
        del a, b, view
        assert all(r() is None for r in roots)
    finally:
        gc.enable()
