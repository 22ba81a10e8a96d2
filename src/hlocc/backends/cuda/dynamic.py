"""The `cuda` backend's dynamic program: one compile of a module with symbolic dimensions that runs
every size on a device (issue 15; the CPU's is backends/cpu/executable.py `compile_dynamic_module`).

    compile_dynamic_module(module, device)       # → DeviceDynamicProgram: passes, buffers, kernels once
    program.run(args)                            # per call: numpy arrays in, numpy arrays out

The plan is the runtime's (runtime/dynamic_program.py `build_dynamic_program`, with the cuda HLO
pipeline): HLO passes, schedule and buffer assignment once on the symbolic module, every fusion
compiled once by the device's kernel compiler as a kernel with runtime dims (the GPU form of the
emitters: PTX whose entry takes the dimension values after the buffers, ptx.py; on the
SimulatedDevice the same GPU form in SIMT simulation), the host shape function and the guards.
What differs from the CPU is the binding's call: the CPU's per-call path is a generated host
function over numpy arenas (runtime/call_plan.py), while a device's memory is the device's, so a
new binding here is the runtime's bound plan (`DynamicProgram.bind`: every thunk's sizes, each
symbolic kernel's version and dims) run through the device memory of a static run (memory.py):

    per new binding (memoized per argument shapes, as on the CPU)
      the shape function and the guards (on the host) → the bound thunks, allocation sizes, outputs
    per call
      one device allocation per allocation at the binding's size (the device's allocator: a
      CudaDevice's stream-ordered pool), arguments used in place or uploaded (host arrays, or
      DLPack arrays of the device: torch, JAX, CuPy), constants uploaded once, the thunks in the
      device's stream, the outputs copied back (or, `return_device_arrays`, left on the device as
      DeviceArrays, as the static executable's)

A kernel launch at a binding evaluates its grid from the launch dims (`launch_dims.blocks`, a size
expression) at the binding's values, as the CPU binder does, once per distinct dims (ptx.py
`PtxKernel.launch_at`, driver.py `CudaKernel.launch_at`; the simulation's CompiledKernel the same).

Speculation: the GPU's versions (runtime/speculation.py, `target="gpu"`): its launch
configuration, `warp_rows` — a stitch kernel whose rows are a warp's runs eight rows per block of
256 threads where the runtime row count is a multiple of eight (`b := 8*b_8`), a row per block of
32 threads elsewhere (a block of one warp fills at most half an SM's threads: 32 resident blocks
per SM on sm_80/sm_90) —, its row-reduction schedule, `block_row` — a stitch kernel over a
runtime row length runs a block of 512 threads per row where `n >= 1025`, a warp per row
elsewhere —, and `vectorized` at the GPU's width for loop kernels (`n mod 4 == 0` for f32:
aligned rows, `ld.global.v4`). The host's column tiles are not built for a device, nor the plan
versions: the cuda pipeline stitches a static row over a runtime row count (softmax over
[b, 4096]: one kernel, a block per row; over [b, 127]: a warp per row) and a runtime row length
at every size (softmax over [b, n]: one kernel whose threads stride the row with a runtime trip
count; the GPU form keeps no row on chip, so no budget decides it per size), so there is one
plan, built by `build_dynamic_program` itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, TextIO

from hlocc.backends.cpu.executable import prepare_as_written
from hlocc.backends.cuda.command_buffer import CommandBuffer
from hlocc.backends.cuda.device import Device
from hlocc.backends.cuda.executable import DeviceBuffers
from hlocc.backends.cuda.memory import RunStats
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.hlo.ir import HloModule
from hlocc.hlo.specialize import substitute_shape
from hlocc.passes.pipeline import cuda_pipeline
from hlocc.runtime.buffer_assignment import AllocationKind
from hlocc.runtime.dynamic_program import BoundProgram, DynamicProgram, build_dynamic_program
from hlocc.runtime.speculation import SpeculationOptions
from hlocc.runtime.thunks import nest


@dataclass(slots=True)
class DeviceBinding:
    """What `DynamicProgram.run` keeps per binding (the fields it and `stats_text` read, as the
    CPU's): the bytes a call allocates, the calls, the fusions on the evaluator at this binding."""

    peak_bytes: int
    calls: DeviceCall
    host_fusions: tuple[str, ...] = ()


class DeviceCall:
    """The calls of one binding on a device: the bound plan, the parameters' shapes at it."""

    def __init__(self, program: DeviceDynamicProgram, bound: BoundProgram):
        self.program = program
        self.bound = bound
        entry = program.module.entry
        self.root_shape = entry.root.shape
        # each allocation's size and, for a parameter's, the leaf's shape at the binding
        self.buffers = []
        for allocation, size in zip(program.assignment.allocations, bound.allocation_sizes):
            shape = None
            if allocation.kind is AllocationKind.PARAMETER:
                shape = entry.parameter(allocation.parameter_number).shape
                for i in allocation.parameter_index:
                    shape = shape.tuple_shapes[i]
                shape = substitute_shape(shape, bound.binding)
            self.buffers.append((allocation, size, shape))

        self.commands = CommandBuffer(program, self.buffers, bound.program)

    def prepare(self) -> None:
        """(Nothing to prepare: an eager call allocates its device buffers per call.)"""

    def run(self, args: Sequence[Any]) -> Any:
        program = self.program
        leaves = program._run(
            self.commands, self.bound.program, args,
            lambda stats: [program._buffer(allocation, args, stats, size, shape)
                           for allocation, size, shape in self.buffers],
            self.bound.outputs, getattr(program._returning, "device_arrays", False))
        return nest(self.root_shape, iter(leaves))


@dataclass
class DeviceDynamicProgram(DeviceBuffers, DynamicProgram):
    """The runtime's dynamic program whose bindings run on `device` (module doc). `last_run`: what
    the latest call moved (RunStats)."""

    device: Any = None
    last_run: RunStats | None = None
    _constants_on_device: dict[int, Any] = field(default_factory=dict, repr=False)
    # per thread: whether the call in progress returns DeviceArrays (`run`'s flag, which the
    # runtime's DynamicProgram.run does not pass on to a binding's calls)
    _returning: threading.local = field(default_factory=threading.local, repr=False)

    def run(self, args: Sequence[Any], key: tuple | None = None, return_device_arrays: bool = False) -> Any:
        """DynamicProgram.run; with `return_device_arrays` the outputs stay on the device."""
        if not return_device_arrays:
            return DynamicProgram.run(self, args, key)
        self._returning.device_arrays = True
        try:
            return DynamicProgram.run(self, args, key)
        finally:
            self._returning.device_arrays = False

    def _calls(self, arg_dims: tuple, own: bool = False) -> DeviceBinding:
        """The calls at the binding of `arg_dims`: this plan bound (module doc: a device program has
        no plan versions)."""
        bound = self.bind(arg_dims)
        return DeviceBinding(bound.peak_bytes, DeviceCall(self, bound), tuple(bound.host_fusions))


def on_device(program: DynamicProgram, device: Device) -> DeviceDynamicProgram:
    """`program` (one plan: `build_dynamic_program` makes no plan versions) as a
    DeviceDynamicProgram on `device`."""
    assert program.versions is None, "a device program has one plan (module doc)"
    return DeviceDynamicProgram(**{f.name: getattr(program, f.name) for f in fields(DynamicProgram)}, device=device)


def compile_dynamic_module(module: HloModule, device: Device, options: PipelineOptions | None = None, *,
                           hlo_passes: bool = True, seed: int = 0, print_after_all: bool = False,
                           stream: TextIO | None = None, times: dict[str, float] | None = None,
                           gemm: str = "library", hint: dict[str, int] | None = None,
                           speculation: SpeculationOptions | None = None) -> DeviceDynamicProgram:
    """Compile a module with symbolic dimensions (changed in place by the HLO passes) into one plan
    for every size on `device` (module doc); `gemm` as in passes/pipeline.py `cuda_pipeline`;
    `speculation`: its mode (default HLOCC_SPECULATION's), for the GPU's versions."""
    times = times if times is not None else {}
    t0 = time.perf_counter()
    prepare_as_written(module, hlo_passes)
    speculation = replace(speculation or SpeculationOptions.from_env(), target="gpu")
    program = build_dynamic_program(module, device.kernel_compiler(options, times), pipeline=cuda_pipeline(gemm),
                                    hint=hint, hlo_passes=hlo_passes, seed=seed, print_after_all=print_after_all,
                                    stream=stream, times=times, speculation=speculation)
    program.stats.device = device.name
    times["total"] = (time.perf_counter() - t0) * 1e3
    return on_device(program, device)


__all__ = ["DeviceBinding", "DeviceCall", "DeviceDynamicProgram", "compile_dynamic_module", "on_device"]
