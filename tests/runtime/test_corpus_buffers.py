"""Buffer assignment over the shared corpora: every module is assigned in about linear time with no
two live values sharing a byte, and every module the evaluator can run gives the same bits when
run on its assigned memory (memory_runtime.py). Modules over 5000 instructions are marked slow."""

from __future__ import annotations

import numpy as np
import pytest
from memory_runtime import MemoryRuntime, assert_no_live_overlap

from corpus import (
    INVALID_ALONE,
    JAX_DIR,
    KNOWN_INVALID,
    NON_TERMINATING,
    XLA_DIR,
    corpus_files,
    evaluation_work,
    instruction_count,
    reference,
    require,
    shared_module,
)
from hlocc.errors import UnsupportedError
from hlocc.evaluator import EvaluationError
from hlocc.runtime.buffer_assignment import assign_buffers

LARGE = 5000  # instructions
# Ops whose results depend on evaluation order or on other devices, or that the evaluator lacks.
NOT_REPLAYABLE = {"rng", "rng-bit-generator", "rng-get-and-update-state", "infeed", "outfeed", "send", "recv",
                  "custom-call", "async-start", "all-reduce", "all-gather", "reduce-scatter", "all-to-all",
                  "collective-permute", "collective-broadcast", "ragged-all-to-all"}
MAX_INPUT_BYTES = 1 << 24
MAX_RESULT_ELEMENTS = 3e7  # elements all instructions produce: the replay's time is about proportional
MAX_SLOW_RESULT_ELEMENTS = 1e9  # past this even the slow run does not replay


def load(path):
    """The session's shared parse of the module (buffer assignment only reads it)."""
    if path.name in INVALID_ALONE or path.name in KNOWN_INVALID:
        pytest.skip("not a valid module (see tests/corpus.py)")
    return shared_module(path)


def size_of(path) -> tuple[int, float]:
    return instruction_count(path), evaluation_work(path)


FILES = corpus_files(XLA_DIR) + corpus_files(JAX_DIR)
SIZES = {p: size_of(p) for p in FILES}
SOUND = [pytest.param(p, marks=[pytest.mark.slow] if SIZES[p][0] > LARGE else [], id=f"{p.parent.name}/{p.name}")
         for p in FILES]
REPLAY = [pytest.param(p, marks=[pytest.mark.slow] if SIZES[p][0] > LARGE or SIZES[p][1] > MAX_RESULT_ELEMENTS
                       else [], id=f"{p.parent.name}/{p.name}") for p in FILES]


def test_corpus_present():
    require(XLA_DIR)
    require(JAX_DIR)


@pytest.mark.parametrize("path", SOUND)
def test_assignment_is_sound(path):
    module = load(path)
    try:
        assignment = assign_buffers(module)
    except UnsupportedError as e:
        pytest.skip(str(e))
    assignment.verify()
    assert_no_live_overlap(assignment)
    assert assignment.temp_bytes >= assignment.temp_lower_bound_bytes
    assert "peak memory:" in assignment.to_string()


@pytest.mark.parametrize("path", REPLAY)
def test_module_runs_on_its_assigned_memory(path):
    module = load(path)
    if SIZES[path][1] > MAX_SLOW_RESULT_ELEMENTS:
        pytest.skip(f"{SIZES[path][1]:.0e} result elements: too much work to replay in a test")
    if path.name in NON_TERMINATING:
        pytest.skip("does not terminate")
    ops = {i.opcode for i in module.all_instructions()}
    if ops & NOT_REPLAYABLE:
        pytest.skip(f"uses {', '.join(sorted(ops & NOT_REPLAYABLE))}")
    params = [p.shape for p in module.entry.parameters]
    if not all(s.is_static for s in params) or not module.entry.root.shape.is_static:
        pytest.skip("dynamic shapes in the entry signature")
    if sum(leaf.byte_size() for s in params for leaf in s.leaves() if leaf.is_array) > MAX_INPUT_BYTES:
        pytest.skip("inputs too large for a unit test")
    try:
        args, expected = reference(path)  # random_inputs(seed=1) and the evaluator's outputs, once per session
    except (UnsupportedError, EvaluationError) as e:
        pytest.skip(f"the evaluator cannot run it: {e}")
    for options in ({}, {"temp_layout": "allocations", "reuse_operand_buffers": False}):
        got = MemoryRuntime(assign_buffers(module, **options)).run(list(args))
        assert len(got) == len(expected)
        for i, (x, y) in enumerate(zip(expected, got)):
            assert np.asarray(x).tobytes() == np.asarray(y).tobytes(), f"output {i} differs with {options}"
