"""Where the shared corpora live (../shared/corpus beside the checkout) and how to read them.
Tests that need them skip with a reason where they are absent; the corpora are never copied here.

Each corpus module is parsed once per session (`shared_module`, also behind `evaluation_work` and
`instruction_count`, which several test files read at collection time), and its reference outputs,
the evaluator's results on the standard seeded inputs, are computed once per session (`reference`)
for every sweep that compares against them. Under pytest-xdist "session" is one worker process."""

from __future__ import annotations

import copy
import csv
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
XLA_DIR = CORPUS / "xla"
JAX_DIR = CORPUS / "jax"

# Modules of the XLA corpus that are not valid on their own: split from a multi-module lit file,
# they call a computation defined in another part (XLA's parser rejects them too).
INVALID_ALONE = {"hlo_to_mhlo__while__3.hlo"}

# Corpus files from XLA tests that never run the verifier and are invalid HLO; each must fail with
# the given message (so a fix in them, or a regression in the rule, shows up).
KNOWN_INVALID = {
    # The fusion's operand 1 is s32[1024] but the fused computation's parameter 1 is s32[].
    "tools__print_indexing_test.hlo": r"parameter 1 of fused computation 'fused_computation' has shape s32\[\]",
    # Window size 3x3 against a 2x2 kernel (an HLO->MHLO import test, which does not verify).
    "hlo_to_mhlo__import.hlo": r"window size 3 of spatial dimension 0 does not match the kernel's \(size 2\)",
    # broadcast f32[1] -> f32[3] along dimension 0: HLO broadcast does not stretch size-1 dimensions
    # (HloVerifier::HandleBroadcast requires equal sizes).
    "hlo_to_mhlo__while__2.hlo": r"operand dimension 0 \(size 1\) does not match output dimension 0 \(size 3\)",
}

# A while loop whose body never advances its counter (an import test; it never runs in XLA either).
NON_TERMINATING = {"hlo_to_mhlo__while__1.hlo"}


MAX_INPUT_ELEMENTS = 1 << 23
MAX_DEFAULT_WORK = 3e8  # elements produced by all instructions; above it a module runs only with -m slow


@functools.cache
def _parse_once(path: Path):
    import hlocc

    try:
        return hlocc.parse_hlo_file(path)
    except hlocc.HloError as e:
        return e


def shared_module(path: Path):
    """The module at `path`, parsed once per session and shared by every caller (an HloError is
    raised again to each). Read it, verify it, evaluate it or give it to `hlocc.compile` (which copies
    it), but never change it: a test that runs passes on a module parses its own copy."""
    parsed = _parse_once(Path(path))
    if isinstance(parsed, Exception):
        raise parsed
    return parsed


@functools.cache
def evaluation_work(path: Path) -> float:
    """Elements all instructions of a module produce: the evaluator's time is about proportional
    (0 for a module that does not parse)."""
    import hlocc

    try:
        module = shared_module(path)
    except hlocc.HloError:
        return 0.0
    return float(sum(leaf.num_elements for i in module.all_instructions() for leaf in i.shape.leaves()
                     if leaf.is_array))


@functools.cache
def instruction_count(path: Path) -> int:
    """Instructions of all computations of a module (0 for a module that does not parse)."""
    import hlocc

    try:
        return sum(1 for _ in shared_module(path).all_instructions())
    except hlocc.HloError:
        return 0


REFERENCE_SEED = 1
"""The seed of the standard inputs (`hlocc.cli.random_inputs`) and of the evaluator's rng ops."""
MAX_WHILE_ITERATIONS = 100_000


@dataclass(frozen=True)
class _Reference:
    args: list
    outputs: list | None
    error: Exception | None


@functools.cache
def _reference_once(path: Path) -> _Reference:
    from hlocc.cli import flatten, random_inputs
    from hlocc.compiler import check_arguments
    from hlocc.errors import UnsupportedError
    from hlocc.evaluator import EvaluationError, Evaluator

    module = shared_module(path)
    args = check_arguments(module, random_inputs(module, seed=REFERENCE_SEED), cast=True)
    try:
        outputs = flatten(Evaluator(seed=REFERENCE_SEED, max_while_iterations=MAX_WHILE_ITERATIONS).run(module, args))
    except (UnsupportedError, EvaluationError) as e:
        return _Reference(args, None, e)
    return _Reference(args, outputs, None)


def reference(path: Path) -> tuple[list, list]:
    """(arguments, flattened outputs) of the module at `path`: its standard inputs
    (`random_inputs(module, seed=1)`, cast to the parameter types) and the evaluator's results on them
    (`Evaluator(seed=1, max_while_iterations=100_000)`), computed once per session. The evaluator's
    UnsupportedError or EvaluationError is raised again to each caller. The arguments are a fresh copy
    for each caller (a run may write into them); the outputs are shared: compare, never change them."""
    ref = _reference_once(Path(path))
    if ref.error is not None:
        raise ref.error
    return copy.deepcopy(ref.args), ref.outputs


def corpus_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.hlo")) if directory.is_dir() else []


def require(directory: Path) -> None:
    if not directory.is_dir():
        pytest.skip(f"corpus not found at {directory} (shared/ is not beside this checkout)")


def jax_cases() -> list[dict]:
    """Rows of shared/corpus/jax/index.tsv (name, inputs, outputs, rtol, atol, perf, ...)."""
    index = JAX_DIR / "index.tsv"
    if not index.is_file():
        return []
    with index.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


# The GPU form of tanh (gpu_target: XLA:GPU's approximation without the host's FMA variant) is a few
# ulps from XLA:CPU's on 2 of the case's 4M elements near zero, 1.2e-8 past its atol of 1e-6 (in the
# simulation and on an H200 alike).
GPU_NUMERICS_TOLERANCE = {"perf_gelu_tanh_f32": {"atol": "2e-6"}}


def recreate_jax_cases(names: list[str], outdir: Path, timeout: float | None = None):
    """Recreate JAX corpus cases (the perf cases ship without data) into `outdir` with the corpus's
    own generator. Its reference outputs are XLA:CPU's, so jax runs on the CPU also where its default
    device is a GPU (XLA:GPU computes f32 dots in TF32 there)."""
    import os
    import subprocess
    import sys

    return subprocess.run([sys.executable, str(JAX_DIR / "gen_public.py"), "--only", ",".join(names), "--no-timing",
                           "--outdir", str(outdir)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return dict(data)


def run_jax_case(case: dict, directory: Path, backend: str, **compile_options):
    """Compile and run a JAX corpus case on `backend`; assert every output matches XLA:CPU's within
    the case's tolerances. Returns the Executable."""
    import hlocc
    from hlocc.cli import flatten
    from hlocc.comparison import compare_arrays
    from hlocc.compiler import check_arguments

    name = case["name"]
    module = hlocc.parse_hlo_file(directory / f"{name}.hlo")
    exe = hlocc.compile(module, backend=backend, **compile_options)
    inputs = load_npz(directory / f"{name}.in.npz")
    args = check_arguments(module, [inputs[f"arg{i}"] for i in range(len(inputs))], cast=True)
    outputs = flatten(exe(*args))
    expected = load_npz(directory / f"{name}.out.npz")
    assert len(outputs) == len(expected), f"{name}: {len(outputs)} outputs, reference has {len(expected)}"
    for i, got in enumerate(outputs):
        why = compare_arrays(expected[f"out{i}"], got, float(case["rtol"]), float(case["atol"]))
        assert why is None, f"{name} out{i}: {why}"
    return exe
