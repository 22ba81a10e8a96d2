"""The kernel lowering pipeline: the pass order, written once (XLA's emitter_base.cc /
pass_pipelines.cc; shared/reference/xla_facts.md §5.1), and the IR dumps after every pass.

    emitter output (xla.loop + pure_call, or xla.matmul)
      transform-interpreter       a matmul's transform script, if the module has one (codegen/schedule/)
      lower-matmul                xla.matmul → loops on tensors
      inline                      subgraph functions into their callers (seed 000 "Inliner")
      lower-xla-loops-to-scf      xla.loop → scf.for + scf.if bounds check
      flatten-tensors             every tensor 1-D, indices linearised through indexing maps
      cse
      vectorize-loads-stores      contiguous aligned accesses → vector.transfer_read/write
      cse
      unroll-loops                small constant-trip loops unrolled (XLA's optimize-loops)
      cse
      lower-narrow-floats         bf16/f16/f8 math in f32, conversions as bit manipulation
      [cpu] outline-math          a costly math function used at several places → one call target
      expand-float-ops            transcendental math ops → polynomial approximations
      lower-tensors               tensors → pointers: llvm.getelementptr + llvm.load/store
      lower-xla-to-arith          xla.apply_indexing → range-aware index arithmetic
      lower-symbol-values         symbolic sizes → loads from the kernel's table of dimension variables
      cse, dce
    codegen/llvm/: the structured IR → LLVM IR (llvmlite)

Between the structural passes runs CSE (XLA runs canonicalize + cse; xDSL's canonicalize costs
about 4× its DCE and its folds are LLVM's job at O3 anyway), and dead-code elimination once, at the
end: xDSL's CSE erases the trivially dead ops it meets, and over the JAX corpus's 90 kernels a DCE
after each CSE removed 41 ops in all (then 0, 0), for 4% of the kernel passes' time; what is left
dead until the end costs the passes between little.

`run_pipeline` verifies after every pass (MLIR's pass manager default) and can print the IR after
each one (`--print-ir-after-all`) or write it to a dump directory (`--dump-dir`), numbered in
order. The backends' compile path verifies only the pipeline's result (`verify_each=False`): in
Python, verifying after each of the (then 18) passes was 60% of a kernel's compile time. A failure then
names the last pass; `HLOCC_VERIFY_EACH_PASS=1` (or a dump) verifies after every pass again to find
the pass that broke the IR.

The CPU backend's compile path does not verify the result either (`verify_result=False`), unless
asked (`kernel_verification_requested`: `HLOCC_VERIFY_KERNELS=1`, which the test suite sets, a
dump, or a target that checks bounds): xDSL's verifier costs about 30 µs an op, as much as a
kernel pass (0.7 s of the 6800-op probe's 12 s compile; `verify_ir` checks an op once per signature,
about 3x faster), and what it would catch still fails the
compile, with the kernel named: the translation to LLVM refuses a value used before its
definition (which xDSL's verifier does not check) or an op it does not know, llvmlite's builder
refuses mismatched types, and LLVM verifies the module it parses before optimising it. Only the
message is less direct; running again with `HLOCC_VERIFY_KERNELS=1` (or `HLOCC_VERIFY_EACH_PASS=1`)
names the broken op and pass.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

from hlocc.codegen.context import KernelIRError, make_context, print_module
from hlocc.codegen.transforms import PASSES
from hlocc.codegen.verify import verify_ir


class UnknownPassError(KernelIRError):
    """A pipeline names a kernel pass that is not in `transforms.PASSES`."""


KERNEL_PIPELINE: tuple[str, ...] = (
    "transform-interpreter",
    "lower-matmul",
    "inline",
    "lower-xla-loops-to-scf",
    "flatten-tensors",
    "cse",
    "vectorize-loads-stores",
    "cse",
    "unroll-loops",
    "cse",
    "lower-narrow-floats",
    "expand-float-ops",
    "lower-tensors",
    "lower-xla-to-arith",
    "lower-symbol-values",
    "cse", "dce",
)
"""The GPU-form pipeline (XLA's), also what `hlocc opt --pipeline gpu` runs."""

CPU_PIPELINE: tuple[str, ...] = tuple(
    "vectorize-loads-stores-unaligned" if p == "vectorize-loads-stores" else p
    for p in KERNEL_PIPELINE[:KERNEL_PIPELINE.index("unroll-loops")]) + (
    "vectorize-elementwise",
) + tuple(p for q in KERNEL_PIPELINE[KERNEL_PIPELINE.index("unroll-loops"):]
          for p in (("outline-math", q) if q == "expand-float-ops" else (q,)))
"""On the CPU a thread's vector loop becomes whole-vector ops before unrolling what is left, its
loads and stores vectors at any offset (element-aligned vector accesses are legal on the CPU:
transforms/vectorize_loads_stores.py), and a costly math function used at several places is one
function the kernel calls (transforms/outline_math.py).
(bf16 conversions stay bit manipulation: leaving them to LLVM's `bfloat` crashed LLVM's x86
instruction selection on a bf16 transposing copy.)"""


def pipeline_for(kind: str, fma: bool = False, check_bounds: bool = False) -> tuple[str, ...]:
    """The pipeline of a target kind; `fma`: expand math functions as XLA:CPU does on FMA hosts;
    `check_bounds`: every load and store checked against its buffer (`check-bounds`, before
    `lower-tensors`)."""
    passes = CPU_PIPELINE if kind == "cpu" else KERNEL_PIPELINE
    if fma:
        passes = tuple("expand-float-ops-fma" if p == "expand-float-ops" else p for p in passes)
    if check_bounds:
        at = passes.index("lower-tensors")
        passes = passes[:at] + ("check-bounds",) + passes[at:]
    check_passes(passes)
    return passes


def check_passes(passes: Sequence[str]) -> None:
    """Raise `UnknownPassError` if any of `passes` is not a registered kernel pass."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise UnknownPassError(f"unknown kernel pass(es) {', '.join(unknown)}; known: {', '.join(sorted(PASSES))}")


@dataclass
class PipelineOptions:
    print_ir_after_all: bool = False
    dump_dir: str | None = None
    dump_prefix: str = "kernel"
    stream: Callable[[str], None] = print

    def for_kernel(self, name: str) -> PipelineOptions:
        """The same options, dumping under the kernel's name."""
        return replace(self, dump_prefix=name)


def add_stage_times(times: dict[str, float], stages: dict[str, float]) -> None:
    """Add a kernel's milliseconds per stage to a program's `times["kernel:<stage>"]`."""
    for stage, ms in stages.items():
        times[f"kernel:{stage}"] = times.get(f"kernel:{stage}", 0.0) + ms


def kernel_verification_requested() -> bool:
    """Whether `HLOCC_VERIFY_KERNELS` (or `HLOCC_VERIFY_EACH_PASS`) asks every compiled kernel's IR
    to be verified (module doc)."""
    return _flag("HLOCC_VERIFY_KERNELS") or _flag("HLOCC_VERIFY_EACH_PASS")


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def run_pipeline(module: ModuleOp, passes: Sequence[str] = KERNEL_PIPELINE, options: PipelineOptions | None = None,
                 ctx: Context | None = None, timings: dict[str, float] | None = None,
                 verify_each: bool = True, verify_result: bool = True) -> ModuleOp:
    """Run `passes` in order on `module` (in place), verifying after each (or, without
    `verify_each`, after the last; without `verify_result` either, not at all unless a dump or
    the environment asks: module doc); returns the module."""
    options = options or PipelineOptions()
    dumping = bool(options.print_ir_after_all or options.dump_dir)
    verify_each = verify_each or dumping or _flag("HLOCC_VERIFY_EACH_PASS")
    verify_result = verify_each or verify_result or kernel_verification_requested()
    ctx = ctx or make_context()
    _dump(options, 0, "emitted", module)
    for step, name in enumerate(passes, 1):
        cls = PASSES.get(name)
        if cls is None:
            raise UnknownPassError(f"unknown kernel pass '{name}'; known: {', '.join(sorted(PASSES))}")
        t0 = time.perf_counter()
        try:
            cls().apply(ctx, module)
            t1 = time.perf_counter()
            if verify_each or (verify_result and step == len(passes)):
                verify_ir(module)
        except DiagnosticException as e:
            hint = "" if verify_each else " (or an earlier pass: HLOCC_VERIFY_EACH_PASS=1 verifies after each)"
            raise KernelIRError(f"kernel pass '{name}'{hint} produced invalid IR: {e}") from e
        if timings is not None:
            timings[name] = timings.get(name, 0.0) + (t1 - t0) * 1e3
            timings["verify"] = timings.get("verify", 0.0) + (time.perf_counter() - t1) * 1e3
        _dump(options, step, name, module)
    return module


def _dump(options: PipelineOptions, step: int, name: str, module: ModuleOp) -> None:
    if not (options.print_ir_after_all or options.dump_dir):
        return
    text = print_module(module)
    if options.print_ir_after_all:
        options.stream(f"// -----// IR Dump After {name} //----- //\n{text}")
    dump_file(options, f"{step:02d}.{name}.mlir", text)


def dump_file(options: PipelineOptions, suffix: str, text: str) -> None:
    """Write `text` to `<dump_dir>/<dump_prefix>.<suffix>` when the options ask for a dump directory
    (the MLIR after each pass, and the backends' LLVM IR and PTX)."""
    if options.dump_dir:
        os.makedirs(options.dump_dir, exist_ok=True)
        with open(os.path.join(options.dump_dir, f"{options.dump_prefix}.{suffix}"), "w") as f:
            f.write(text)


__all__ = ["CPU_PIPELINE", "KERNEL_PIPELINE", "PipelineOptions", "UnknownPassError", "add_stage_times", "check_passes",
           "dump_file", "kernel_verification_requested", "pipeline_for", "run_pipeline"]
