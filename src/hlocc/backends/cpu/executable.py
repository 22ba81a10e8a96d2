"""Running a module on the CPU backend with the kernels the loop emitter builds.

This is the kernel-level runner: the entry computation is walked in order, and
- a `fusion` instruction runs its fused computation as one kernel;
- a lone elementwise or index op runs as a one-op fusion;
- parameters, constants, tuples and get-tuple-element move arrays around;
- an entry without any fusion whose every op a kernel can compute (emitter-test modules, which
  hold a single `fusion { ... }` computation) is itself compiled as one kLoop fusion, the way XLA's
  test loader wraps such modules.
Anything else stops compilation with an UnsupportedError naming the op: whole-program compilation
(HLO passes, fusion, library calls, control flow) is the runtime's job, not this runner's.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hlocc.backends.cpu.kernel import CompiledKernel, compile_fusion
from hlocc.codegen.elemental import ELEMENTAL
from hlocc.codegen.emitters.base import INDEX_OPS
from hlocc.codegen.emitters.loop import LoopEmitter  # noqa: F401  (registers every op it can emit)
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.target import Target, cpu_target
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule

KERNEL_OPCODES = frozenset(ELEMENTAL) | frozenset(INDEX_OPS) - {"parameter", "tuple"}
"""Ops the loop emitter computes elementwise (plus parameters and a root tuple)."""

_MOVES = frozenset({"parameter", "constant", "tuple", "get-tuple-element"})


def is_loop_emittable(computation: HloComputation) -> bool:
    return all(i.opcode in KERNEL_OPCODES or i.opcode == "parameter" or (i.opcode == "tuple" and i is computation.root)
               for i in computation.instructions)


def _unsupported(instr: HloInstruction, why: str) -> UnsupportedError:
    return UnsupportedError(f"unsupported on the cpu backend: {instr.opcode} (instruction '{instr.name}'): {why}")


def one_op_fusion(instr: HloInstruction) -> HloComputation:
    """A fused computation holding a copy of `instr` with one parameter per operand."""
    comp = HloComputation(f"{instr.name}.fused")
    params = []
    for k, op in enumerate(instr.operands):
        p = HloInstruction(f"param_{k}", "parameter", op.shape, parameter_number=k)
        comp.add_instruction(p)
        params.append(p)
    clone = comp.add_instruction(instr.clone(params))
    comp.root = clone
    return comp


@dataclass
class _Step:
    instr: HloInstruction
    kernel: CompiledKernel | None = None


@dataclass
class CpuModuleRunner:
    module: HloModule
    steps: list[_Step]
    whole_entry: CompiledKernel | None
    compile_times_ms: dict[str, float] = field(default_factory=dict)

    @property
    def kernels(self) -> list[CompiledKernel]:
        if self.whole_entry is not None:
            return [self.whole_entry]
        return [s.kernel for s in self.steps if s.kernel is not None]

    def run(self, args: Sequence[np.ndarray]):
        entry = self.module.entry
        if self.whole_entry is not None:
            outs = self.whole_entry(*args)
            return tuple(outs) if entry.root.shape.is_tuple else outs[0]
        values: dict[int, object] = {}
        for step in self.steps:
            instr = step.instr
            if instr.opcode == "parameter":
                values[id(instr)] = args[instr.parameter_number]
            elif instr.opcode == "constant":
                values[id(instr)] = instr.literal
            elif instr.opcode == "tuple":
                values[id(instr)] = tuple(values[id(o)] for o in instr.operands)
            elif instr.opcode == "get-tuple-element":
                values[id(instr)] = values[id(instr.operand(0))][int(instr.attrs["index"])]
            else:
                outs = step.kernel(*[values[id(o)] for o in instr.operands])
                values[id(instr)] = _nest(outs, instr.shape) if instr.shape.is_tuple else outs[0]
        return values[id(entry.root)]


def _nest(flat: list, shape):
    it = iter(flat)

    def build(s):
        return tuple(build(t) for t in s.tuple_shapes) if s.is_tuple else next(it)
    return build(shape)


def compile_module(module: HloModule, target: Target | None = None,
                   options: PipelineOptions | None = None) -> CpuModuleRunner:
    target = target or cpu_target()
    entry = module.entry
    t0 = time.perf_counter()
    times: dict[str, float] = {}
    has_fusion = any(i.opcode == "fusion" for i in entry.instructions)
    if not has_fusion and is_loop_emittable(entry) and entry.root.opcode != "parameter":
        kernel = compile_fusion(entry, target, options=options)
        _add_times(times, kernel)
        times["total"] = (time.perf_counter() - t0) * 1e3
        return CpuModuleRunner(module, [], kernel, times)
    steps = []
    for instr in entry.post_order():
        if instr.opcode in _MOVES:
            steps.append(_Step(instr))
            continue
        if instr.opcode == "fusion":
            fused = instr.fused_computation
            if not is_loop_emittable(fused):
                bad = next(i for i in fused.post_order() if i.opcode not in KERNEL_OPCODES and i.opcode != "parameter"
                           and not (i.opcode == "tuple" and i is fused.root))
                raise _unsupported(bad, f"inside fusion '{instr.name}' it needs an emitter that is not built yet "
                                        "(only loop fusions run on this backend so far)")
            computation = fused
        elif instr.opcode in KERNEL_OPCODES:
            computation = one_op_fusion(instr)
        else:
            raise _unsupported(instr, "only fusions and elementwise or index ops run on this backend so far")
        opts = None
        if options is not None:
            opts = PipelineOptions(options.print_ir_after_all, options.dump_dir, f"{instr.name}", options.stream)
        kernel = compile_fusion(computation, target, name="main", options=opts)
        _add_times(times, kernel)
        steps.append(_Step(instr, kernel))
    times["total"] = (time.perf_counter() - t0) * 1e3
    return CpuModuleRunner(module, steps, None, times)


def _add_times(times: dict[str, float], kernel: CompiledKernel) -> None:
    for k, v in kernel.times_ms.items():
        times[k] = times.get(k, 0.0) + v
