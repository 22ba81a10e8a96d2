"""The CPU backend's whole-program compiler: the runtime (runtime/executable.py: the cpu HLO
pipeline of passes/pipeline.py, schedule, buffer assignment, thunks) with kernels compiled for the
host (kernel.py).

    compile_module(module)                      # HLO passes on: what `hlocc.compile(..., "cpu")` runs
    compile_module(module, hlo_passes=False)    # the module as written: each fusion or lone op a kernel

Without HLO passes, a module with no fusion whose every op a kernel can compute — an emitter
test's body, which XLA's test loader (LoadTestModule) wraps — is compiled as one kLoop fusion.
"""

from __future__ import annotations

import time
from typing import TextIO

from hlocc.backends.cpu.kernel import CompiledKernel, compile_fusion
from hlocc.codegen.elemental import ELEMENTAL
from hlocc.codegen.elemental.registry import INDEX_OPS
from hlocc.codegen.emitters.loop import LoopEmitter  # noqa: F401  (registers every op it can emit)
from hlocc.codegen.llvm import TranslateOptions
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.target import Target, cpu_target
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.pipeline import cpu_pipeline
from hlocc.runtime.dynamic_program import DynamicProgram
from hlocc.runtime.executable import KernelCompiler, ThunkExecutable, build_executable
from hlocc.runtime.plan_speculation import build_speculated_program
from hlocc.runtime.speculation import SpeculationOptions
from hlocc.runtime.thunks import KernelThunk

KERNEL_OPCODES = frozenset(ELEMENTAL) | frozenset(INDEX_OPS) - {"parameter", "tuple"} | {"scatter"}
"""Ops a generated kernel computes: what the loop emitter computes elementwise, and the scatter
emitter's hero (plus parameters and a root tuple)."""


def is_loop_emittable(computation: HloComputation) -> bool:
    return all(i.opcode in KERNEL_OPCODES or i.opcode == "parameter" or (i.opcode == "tuple" and i is computation.root)
               for i in computation.instructions)


def wrap_entry_in_fusion(module: HloModule) -> None:
    """Make the entry a kLoop fusion called from a new entry (LoadTestModule's rule)."""
    body = module.entry
    entry = HloComputation(f"{body.name}.wrapped", is_entry=True)
    params = [entry.add_instruction(p.clone([])) for p in body.parameters]
    entry.root = entry.add_instruction(HloInstruction("fusion", "fusion", body.root.shape, params,
                                                      {"kind": "kLoop", "calls": body}))
    body.is_entry = False
    module.add_computation(entry)


def prepare_as_written(module: HloModule, hlo_passes: bool) -> None:
    """Without HLO passes, an entry with no fusion whose every op a kernel computes becomes one
    kLoop fusion (the module doc's rule, shared by every backend that compiles kernels)."""
    entry = module.entry
    if (not hlo_passes and not any(i.opcode == "fusion" for i in entry.instructions) and is_loop_emittable(entry)
            and entry.root.opcode != "parameter"):
        wrap_entry_in_fusion(module)


def kernel_compiler(target: Target, options: PipelineOptions | None, times: dict[str, float],
                    defer: bool = False) -> KernelCompiler:
    """Compiles each fusion for `target`, adding every stage's milliseconds to `times["kernel:<stage>"]`.
    `defer`: kernels may come back pending, their LLVM stage on the LLVM worker thread
    (backends/cpu/kernel.py PendingKernel; `build_executable` resolves them)."""
    def compile_kernel(computation: HloComputation, name: str, noalias: bool) -> CompiledKernel:
        return compile_fusion(computation, target, name="main",
                              options=options.for_kernel(name) if options is not None else None,
                              translate_options=TranslateOptions(noalias=noalias), stage_times=times, defer=defer)
    return compile_kernel


def compile_module(module: HloModule, target: Target | None = None, options: PipelineOptions | None = None, *,
                   hlo_passes: bool = False, seed: int = 0, print_after_all: bool = False,
                   stream: TextIO | None = None, times: dict[str, float] | None = None,
                   gemm: str = "library", planned: bool = False) -> ThunkExecutable:
    """Compile `module` (changed in place by the HLO passes) into a ThunkExecutable for the host;
    `gemm` as in passes/pipeline.py `cpu_pipeline`. `planned`: the module is one the HLO pipeline
    already optimized (a program plan from the disk cache, program_cache.py), compiled as it is."""
    times = times if times is not None else {}
    t0 = time.perf_counter()
    if planned:
        hlo_passes = False
    else:
        prepare_as_written(module, hlo_passes)
    executable = build_executable(module, kernel_compiler(target or cpu_target(), options, times, defer=True),
                                  pipeline=cpu_pipeline(gemm), hlo_passes=hlo_passes, seed=seed,
                                  print_after_all=print_after_all, stream=stream, times=times)
    times["total"] = (time.perf_counter() - t0) * 1e3
    return executable


def compile_dynamic_module(module: HloModule, target: Target | None = None, options: PipelineOptions | None = None, *,
                           hlo_passes: bool = True, seed: int = 0, print_after_all: bool = False,
                           stream: TextIO | None = None, times: dict[str, float] | None = None,
                           gemm: str = "library", hint: dict[str, int] | None = None,
                           speculation: SpeculationOptions | None = None) -> DynamicProgram:
    """Compile a module with symbolic dimensions into one plan for every size
    (runtime/dynamic_program.py), its kernels compiled for the host (`speculation`: the kernel
    versions, runtime/speculation.py)."""
    times = times if times is not None else {}
    t0 = time.perf_counter()
    prepare_as_written(module, hlo_passes)
    program = build_speculated_program(module, kernel_compiler(target or cpu_target(), options, times),
                                    pipeline=cpu_pipeline(gemm), hint=hint, hlo_passes=hlo_passes, seed=seed,
                                    print_after_all=print_after_all, stream=stream, times=times,
                                    speculation=speculation)
    times["total"] = (time.perf_counter() - t0) * 1e3
    return program


def kernels(executable: ThunkExecutable) -> list[CompiledKernel]:
    """The kernels of an executable's thunks, in program order."""
    return [t.kernel for t in executable.program.walk() if isinstance(t, KernelThunk)]
