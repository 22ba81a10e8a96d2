"""Shared by the hero-emitter tests (test_emitter_*.py): run a corpus emitter module or an HLO text
on the CPU backend (CPU launch parameters) and in the SIMT simulation (the GPU target's warp size
and launch dims, executed on the CPU), against the evaluator; assert which emitter generated each
kernel; and check that a thread mapping is a bijection (XLA's gpu_test_correctness
--bijection_inputs / --bijection_outputs).
"""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_helpers import assert_exact, assert_ulps, flatten

from corpus import KNOWN_INVALID, XLA_DIR, require
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.backends.cpu.executable import compile_module, kernels
from hlocc.cli import random_inputs
from hlocc.codegen.target import Target, cpu_target, gpu_target
from hlocc.comparison import compare_arrays
from hlocc.evaluator.core import evaluate
from hlocc.hlo.parser import parse_hlo, parse_hlo_file
from hlocc.hlo.types import Shape

TARGETS = {"cpu": cpu_target, "simt": gpu_target}
"""The two ways every emitter is checked: CPU launch parameters, and the GPU's run in simulation."""

APPROXIMATED = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "cbrt", "sine",
                "cosine", "tan", "tanh", "erf", "atan2", "power", "sqrt"}


def corpus_module(name: str):
    require(XLA_DIR)
    if name in KNOWN_INVALID:
        pytest.skip(f"not valid HLO on its own (corpus.KNOWN_INVALID): {KNOWN_INVALID[name]}")
    return parse_hlo_file(XLA_DIR / name)


def run_and_compare(module_or_text, target: str, *, seed: int = 0, inputs=None, rtol: float = 1e-5,
                    atol: float = 1e-6):
    """Compile as written (no HLO passes) for `target` ("cpu" or "simt"), run on seeded random
    inputs, compare with the evaluator; returns the executable's kernels. Integers and preds must
    match exactly; floats exactly unless a reduction (summation order) or an approximated function
    is involved."""
    module = parse_hlo(module_or_text) if isinstance(module_or_text, str) else module_or_text
    inputs = identity_inits(module, random_inputs(module, seed)) if inputs is None else inputs
    ref = flatten(evaluate(module, inputs))  # before compiling, which changes the module
    opcodes = {i.opcode for c in module.computations for i in c.instructions}
    exe = compile_module(module, TARGETS[target]())
    got = flatten(exe.run(inputs))
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        what = f"output {k} ({target})"
        if r.dtype.kind not in "fcV" and "float" not in r.dtype.name:
            assert_exact(g, r, [], what)
        elif opcodes & {"reduce", "reduce-window", "scatter"}:
            problem = compare_arrays(r, g, rtol=rtol, atol=atol)
            assert problem is None, f"{what}: {problem}"
        elif opcodes & APPROXIMATED:
            assert_ulps(g, r, 4, [], what)
        else:
            assert_exact(g, r, [], what)
    return kernels(exe)


_IDENTITY = {"add": 0, "or": 0, "xor": 0, "multiply": 1, "and": -1, "maximum": "lowest", "minimum": "highest"}


def identity_inits(module, inputs: list) -> list:
    """`inputs` with every entry parameter that is the init value of a reduce set to the identity of
    its reducer, as XLA's test harness does (MakeFakeArguments): reduction emitters start every
    thread's accumulator from the init value, which is only right for an identity (jax.lax.reduce's
    contract). The CPU target applies it once and is exact either way."""
    inputs = list(inputs)
    entry_params = {id(p): p.parameter_number for p in module.entry.parameters}
    fused_params = {}
    for i in module.entry.instructions:
        if i.opcode == "fusion":
            for p in i.fused_computation.parameters:
                operand = i.operand(p.parameter_number)
                if id(operand) in entry_params:
                    fused_params[id(p)] = entry_params[id(operand)]
    for comp in module.computations:
        for r in comp.instructions:
            if r.opcode != "reduce" or len(r.operands) != 2:
                continue
            init = r.operand(1)
            number = entry_params.get(id(init), fused_params.get(id(init)))
            kind = _IDENTITY.get(r.to_apply.root.opcode)
            if number is None or kind is None:
                continue
            dtype = np.asarray(inputs[number]).dtype
            if kind in ("lowest", "highest"):
                info = np.iinfo(dtype) if dtype.kind in "iu" else None
                value = (info.min if kind == "lowest" else info.max) if info is not None else \
                    (-np.inf if kind == "lowest" else np.inf) if dtype.kind == "f" or "float" in dtype.name else \
                    (kind == "highest")
            else:
                value = (kind != 0) if dtype == np.bool_ else kind
            inputs[number] = np.asarray(value).astype(dtype)
    return inputs


def emitters_of(kernel_list) -> list[str]:
    return [k.emitter for k in kernel_list]


def assert_bijection(m: IndexingMap, shape: Shape | tuple[int, ...], what: str = "") -> None:
    """Every element of `shape` is hit exactly once by the points of `m`'s domain (dims are the
    thread and block ids, symbols the per-thread loops; constraints select the points that run)."""
    dims = tuple(shape.dims) if isinstance(shape, Shape) else tuple(shape)
    points = m.points(limit=1 << 24)
    indices = m.apply(points)
    assert indices.shape[1] == len(dims), f"{what}: map has {indices.shape[1]} results for rank {len(dims)}"
    for k, n in enumerate(dims):
        bad = (indices[:, k] < 0) | (indices[:, k] >= n)
        assert not bad.any(), f"{what}: index {indices[bad][0].tolist()} out of bounds of {list(dims)}"
    n = int(np.prod(dims, dtype=np.int64))
    linear = np.ravel_multi_index(tuple(indices.T), dims) if dims else np.zeros(len(indices), np.int64)
    counts = np.bincount(linear, minlength=n)
    missed = np.flatnonzero(counts == 0)
    twice = np.flatnonzero(counts > 1)
    assert missed.size == 0, f"{what}: {missed.size} elements never visited, first {np.unravel_index(missed[0], dims)}"
    assert twice.size == 0, f"{what}: {twice.size} elements visited more than once, first " \
                            f"{np.unravel_index(twice[0], dims)}"


__all__ = ["TARGETS", "Target", "assert_bijection", "corpus_module", "emitters_of", "run_and_compare"]
