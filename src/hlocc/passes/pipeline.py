"""The HLO pass pipelines, written once, and the pass manager that runs them.

A pipeline is a tuple of stages; a stage is a registered pass name or a `FixedPoint` group, whose
passes run in order, again and again, until a whole round changes nothing (at most
`max_iterations` rounds, like XLA's HloPassFix).

- `SIMPLIFICATION` follows the order of XLA's GpuCompiler "simplification" pipeline
  (xla/service/gpu/gpu_compiler.cc); `FUSION` is XLA's fusion stage. `PIPELINES` names the
  pipelines `hlo-opt --pipeline` and `run_passes` accept: "simplify", "fusion" and "default"
  (both, in that order).
- `BACKEND_PIPELINES` holds each backend's whole HLO pipeline, a `CompilePipeline`: a prologue and
  an epilogue that always run (the module as written needs them to compile: flattened call graph,
  library fusions inlined, and on cuda convolutions rewritten into gemms) around the optimization
  ("default") that runs only with HLO passes on. The runtime runs the pipeline a backend gives it
  (runtime/executable.py `build_executable`) and nothing else.

The `PassManager` runs a pipeline and records per-pass wall time (summed over fixed-point
rounds) and which passes changed the module. A pass whose last run changed nothing is not run again
until some pass changes the module (a pass is a function of the module: it would find nothing again):
in a fixed-point group's last round only the passes after the last change run, and a `cse`/`dce`
after a pass that changed nothing is skipped. After a pass that changed the module it puts every
computation's instructions back in a stable def-before-use order (new instructions next to their
first user), so printed modules read like their source (unless the pass sets `sort_after` False).
Options: `print_after_all` writes the module after every pass that changed it, headed by a comment
naming the pass (XLA's --xla_dump_hlo_pass_re=.*); `debug` verifies the module after every pass and
checks that a pass reporting "no change" left the module text unchanged (the fixed-point loop relies
on that report).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TextIO

from hlocc.errors import HloError, HloVerifyError
from hlocc.hlo.ir import HloModule
from hlocc.hlo.printer import print_module
from hlocc.hlo.symbolic import size_hint

# Importing the pass modules registers their passes by name.
from hlocc.passes import (  # noqa: F401
    algsimp,
    call_inliner,
    constant_folding,
    convolution_to_gemm,
    cse,
    dce,
    dot_canonicalize,
    flatten_call_graph,
    fusion_wrapper,
    gather_simplifier,
    gemm_fusion,
    inline_library_fusions,
    layout_copies,
    multi_output_fusion,
    narrow_float_reductions,
    priority_fusion,
    reduce_window_rewriter,
    rename_fusions,
    shape_constraints,
    stitch_fusion,
    tuple_simplifier,
    while_loop_simplifier,
)
from hlocc.passes.base import HLO_PASSES, HloPass


class PassPipelineError(HloError):
    """An unknown pass or pipeline name, or a pass that broke the module (in debug mode)."""


@dataclass(frozen=True)
class FixedPoint:
    """Run `passes` in order until one whole round changes nothing (at most `max_iterations`)."""

    name: str
    passes: tuple[Stage, ...]
    max_iterations: int = 25


Stage = str | FixedPoint

SIMPLIFICATION: tuple[Stage, ...] = (
    "call-inliner",
    FixedPoint("simplification", (
        "gather-simplifier",
        "algsimp",
        "dot-canonicalize",
        "tuple-simplifier",
        "while-loop-simplifier",
        "constant-folding",
        "cse",
        "dce",
    )),
)
"""XLA's order: inline calls, then canonicalize gathers, simplify algebra, canonicalize dots, clean
tuples and loops, fold constants, merge and remove what became redundant — to a fixed point."""

FUSION: tuple[Stage, ...] = (
    "priority-fusion", "cse", "dce",
    "multi-output-fusion", "cse", "dce",
    "rename-fusions",
    "fusion-wrapper",
)
"""XLA's fusion stage: priority fusion of producers into consumers, then sibling and producer-
consumer multi-output fusion (each followed by cse and dce of what it left redundant), XLA's
names for the fusions, and every remaining op that needs a kernel wrapped in a fusion of its own."""

CPU_FUSION: tuple[Stage, ...] = (*FUSION[:6], "stitch-fusion", *FUSION[6:])
"""The cpu backend's fusion stage: XLA's, with BladeDISC's stitch fusion after multi-output fusion
(passes/stitch_fusion.py: a row reduction and the fusions that read it along its rows, one kernel)."""

CUDA_FUSION: tuple[Stage, ...] = (*FUSION[:6], "stitch-fusion-gpu", *FUSION[6:])
"""The cuda backend's: the same with the GPU's budget (rows within a block's shared memory)."""

PIPELINES: dict[str, tuple[Stage, ...]] = {
    "simplify": SIMPLIFICATION,  # to see what simplification alone does to a module
    "fusion": FUSION,  # to fuse a module that is already simplified
    "default": SIMPLIFICATION + FUSION,  # what the backends optimize with (BACKEND_PIPELINES)
}


SIZE_HINTED_PASSES = frozenset({"priority-fusion", "multi-output-fusion", "gemm-fusion", "gemm-fusion-auto",
                                "fusion-wrapper", "inline-library-fusions", "stitch-fusion", "stitch-fusion-gpu"})
"""Passes whose size questions are heuristics (is fusing profitable, is this reduction big, which
emitter suits a fusion: analysis/hero.py, which inline-library-fusions asks too): on a
module with symbolic dimensions they run under the PassManager's `size_hint` (hlo/symbolic.py), so a
question the symbols leave open is answered at the hint's sizes. Every other pass decides only what
holds for every size (an open question is left alone or is an error, never guessed)."""


@dataclass(frozen=True)
class CompilePipeline:
    """A backend's HLO pipeline: `prologue` and `epilogue` always run (a module compiled as written,
    without HLO passes, needs them too); `optimization` runs between them only with HLO passes on."""

    prologue: tuple[Stage, ...]
    optimization: tuple[Stage, ...]
    epilogue: tuple[Stage, ...]


_RUNTIME_EPILOGUE: tuple[Stage, ...] = (
    "flatten-call-graph",  # again: the optimization may have made new sharing
    "inline-library-fusions",  # gemm/convolution fusions from XLA: their dots become library calls
    "layout-copies",  # again: a copy the optimization's rewrites made necessary (none expected)
)

BACKEND_PIPELINES: dict[str, CompilePipeline] = {
    "cpu": CompilePipeline(
        prologue=(
            "flatten-call-graph",  # one call site per while/conditional computation (buffer assignment)
            "layout-copies",  # forwarded values get the layout their readers declare (fusible copies)
            "reduce-window-rewriter",  # long float cumsums as XLA:CPU's two-level scan (its numbers)
            "widen-narrow-reductions",  # bf16/f16 sums accumulate in f32, as XLA's and the evaluator's
        ),
        # simplify, then fuse: convolutions as implicit-gemm fusions first, then priority fusion (and stitch)
        optimization=SIMPLIFICATION + ("convolution-gemm-fusion",) + CPU_FUSION,
        epilogue=_RUNTIME_EPILOGUE,
    ),
    "cuda": CompilePipeline(
        prologue=(
            "inline-library-fusions",  # first, so convolution-to-gemm sees the convolutions they hold
            "convolution-to-gemm",  # no convolution library on the device: im2col kernels and a gemm
            "flatten-call-graph",  # one call site per while/conditional computation (buffer assignment)
            "layout-copies",  # forwarded values get the layout their readers declare (fusible copies)
            "reduce-window-rewriter",  # long float cumsums as blocks of 16 (the cpu's numbers; O(16 n))
            "widen-narrow-reductions",  # bf16/f16 sums accumulate in f32, as XLA's and the evaluator's
        ),
        optimization=SIMPLIFICATION + CUDA_FUSION,  # simplify, fuse, stitch (after convolution-to-gemm)
        epilogue=_RUNTIME_EPILOGUE,
    ),
}


GEMM_MODES = ("library", "codegen", "auto")
"""How the cpu backend computes dots: "library" (numpy's BLAS, the default until generated gemms
are faster), "codegen" (dot fusions compiled by the matmul emitter, issue 17) or "auto" (codegen
for the dots where it measured faster, passes/gemm_fusion.py `AUTO_MAX_WORK`, library otherwise)."""


def cpu_pipeline(gemm: str = "library") -> CompilePipeline:
    """The cpu backend's pipeline for a `GEMM_MODES` choice: with "codegen", `gemm-fusion` makes
    each dot and its epilogue one fusion before priority fusion (with HLO passes on; a module
    compiled as written keeps its dots as library calls)."""
    base = BACKEND_PIPELINES["cpu"]
    if gemm == "library":
        return base
    if gemm not in GEMM_MODES:
        raise PassPipelineError(f"unknown gemm mode '{gemm}' (choose from {', '.join(GEMM_MODES)})")
    fusion = "gemm-fusion" if gemm == "codegen" else "gemm-fusion-auto"
    return CompilePipeline(base.prologue, SIMPLIFICATION + ("convolution-gemm-fusion", fusion) + CPU_FUSION,
                           base.epilogue)


def cuda_pipeline(gemm: str = "library") -> CompilePipeline:
    """The cuda backend's pipeline for a `GEMM_MODES` choice: with "codegen", dot fusions become
    generated kernels (bf16/f16: mma.sync, codegen/transforms/matmul/gpu_mma.py) instead of cuBLAS
    calls, as `cpu_pipeline` does for the cpu backend."""
    base = BACKEND_PIPELINES["cuda"]
    if gemm == "library":
        return base
    if gemm != "codegen":
        raise PassPipelineError(f"unknown gemm mode '{gemm}' (choose from {', '.join(GEMM_MODES)})")
    return CompilePipeline(base.prologue, SIMPLIFICATION + ("gemm-fusion",) + CUDA_FUSION, base.epilogue)


@dataclass
class PipelineResult:
    """What a pipeline run did: whether anything changed, milliseconds per pass name (summed over
    fixed-point rounds), every pass run in order as (pass, changed, ms), and rounds per group."""

    changed: bool = False
    timings_ms: dict[str, float] = field(default_factory=dict)
    runs: list[tuple[str, bool, float]] = field(default_factory=list)
    iterations: dict[str, int] = field(default_factory=dict)
    unconverged: list[str] = field(default_factory=list)

    @property
    def total_ms(self) -> float:
        return sum(self.timings_ms.values())


class PassManager:
    """Runs a pipeline (a sequence of stages) on modules; see the module docstring."""

    def __init__(self, stages: Sequence[Stage], *, print_after_all: bool = False, stream: TextIO | None = None,
                 debug: bool = False, hint: Mapping[str, int] | None = None):
        self.stages = tuple(stages)
        self.hint = hint  # dimension variable values for SIZE_HINTED_PASSES on symbolic modules
        self.print_after_all = print_after_all
        self.stream = stream
        self.debug = debug
        check_pass_names(self.stages)
        self._passes: dict[str, HloPass] = {}
        self.disabled = disabled_passes()

    def run(self, module: HloModule) -> PipelineResult:
        result = PipelineResult()
        self._generation = 0  # how many pass runs changed the module so far
        self._clean: dict[str, int] = {}  # pass → the generation its last run changed nothing in
        self._run_stages(self.stages, module, result, "")
        return result

    def _run_stages(self, stages: Iterable[Stage], module: HloModule, result: PipelineResult, where: str) -> bool:
        changed = False
        for stage in stages:
            if isinstance(stage, FixedPoint):
                changed |= self._run_fixed_point(stage, module, result, where)
            else:
                changed |= self._run_pass(stage, module, result, where)
        return changed

    def _run_fixed_point(self, group: FixedPoint, module: HloModule, result: PipelineResult, where: str) -> bool:
        changed = False
        for iteration in range(1, group.max_iterations + 1):
            result.iterations[group.name] = result.iterations.get(group.name, 0) + 1
            if not self._run_stages(group.passes, module, result, f"{where}{group.name} iteration {iteration}, "):
                return changed
            changed = True
        result.unconverged.append(group.name)
        return changed

    def _run_pass(self, name: str, module: HloModule, result: PipelineResult, where: str) -> bool:
        if name in self.disabled:
            return False
        if self._clean.get(name) == self._generation:
            return False  # its last run changed nothing, and nothing changed since: it would not now
        hlo_pass = self._passes.get(name)
        if hlo_pass is None:
            hlo_pass = self._passes[name] = HLO_PASSES[name]()
        before = print_module(module) if self.debug else None
        start = time.perf_counter()
        with size_hint(self.hint) if self.hint is not None and name in SIZE_HINTED_PASSES else nullcontext():
            changed = bool(hlo_pass.run(module))
        ms = (time.perf_counter() - start) * 1e3
        result.timings_ms[name] = result.timings_ms.get(name, 0.0) + ms
        result.runs.append((name, changed, ms))
        result.changed |= changed
        if changed:
            self._generation += 1
            self._clean.pop(name, None)
        else:
            self._clean[name] = self._generation
        if changed and hlo_pass.sort_after:
            for comp in module.computations:
                comp.sort_instructions()
        if self.debug:
            self._check(name, module, changed, before)
        if changed and self.print_after_all:
            stream = self.stream if self.stream is not None else sys.stdout
            context = f" ({where.rstrip(', ')})" if where else ""
            stream.write(f"// -----// HLO after pass '{name}'{context} //----- //\n")
            stream.write(print_module(module))
            stream.write("\n")
        return changed

    @staticmethod
    def _check(name: str, module: HloModule, changed: bool, before: str) -> None:
        from hlocc.hlo.verifier import verify_module

        try:
            verify_module(module)
        except HloVerifyError as e:
            raise PassPipelineError(f"after pass '{name}': the module is invalid: {e}") from None
        if not changed and print_module(module) != before:
            raise PassPipelineError(f"pass '{name}' reported no change but changed the module")


DISABLE_ENV = "HLOCC_DISABLE_HLO_PASSES"


def disabled_passes() -> frozenset[str]:
    """The passes `$HLOCC_DISABLE_HLO_PASSES` (comma-separated names, XLA's --xla_disable_hlo_passes)
    turns off, e.g. `stitch-fusion` to compare a stitched plan with the unstitched one (the program
    caches' keys include it, compiler.py)."""
    names = frozenset(n.strip() for n in os.environ.get(DISABLE_ENV, "").split(",") if n.strip())
    unknown = sorted(names - HLO_PASSES.keys())
    if unknown:
        raise PassPipelineError(f"${DISABLE_ENV}: unknown pass '{unknown[0]}'")
    return names


def check_pass_names(stages: Iterable[Stage]) -> None:
    """Raise PassPipelineError naming the first stage that is not a registered pass."""
    for stage in stages:
        if isinstance(stage, FixedPoint):
            check_pass_names(stage.passes)
        elif stage not in HLO_PASSES:
            raise PassPipelineError(f"unknown pass '{stage}'; known passes: {', '.join(sorted(HLO_PASSES))}; "
                                    f"pipelines: {', '.join(sorted(PIPELINES))}")


def expand(names: Iterable[str]) -> tuple[Stage, ...]:
    """Pass names in order, a pipeline name standing for its stages."""
    stages: list[Stage] = []
    for name in names:
        stages.extend(PIPELINES.get(name, (name,)))
    return tuple(stages)


def simplification_pipeline(*, print_after_all: bool = False, stream: TextIO | None = None,
                            debug: bool = False) -> PassManager:
    """The simplification passes in XLA's order (`SIMPLIFICATION`)."""
    return PassManager(SIMPLIFICATION, print_after_all=print_after_all, stream=stream, debug=debug)


def run_passes(module: HloModule, names: Iterable[str], print_after_all: bool = False, stream: TextIO | None = None,
               *, debug: bool = False) -> PipelineResult:
    """Run the named passes (or pipelines, e.g. "simplify") on `module`, in order, in place."""
    return PassManager(expand(names), print_after_all=print_after_all, stream=stream, debug=debug).run(module)
