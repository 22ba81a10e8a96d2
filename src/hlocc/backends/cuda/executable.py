"""The `cuda` backend's whole-program compiler and executable: the runtime's build
(runtime/executable.py: HLO passes, schedule, buffer assignment, the same thunks as the CPU's) with
kernels compiled by a Device (device.py: the SimulatedDevice, or driver.py's CudaDevice), run on
device memory (memory.py).

    compile_module(module, device)               # → DeviceExecutable
    exe.run(args)                                # numpy arrays (copied to the host)
    exe.run(args, return_device_arrays=True)     # DeviceArrays (dlpack.py): stay in device memory

A run allocates one device buffer per allocation (parameters, outputs, the temp arena; constants
are uploaded once, on the first run, and kept), uploads the arguments, runs the thunks in the
device's stream, synchronizes and returns the outputs. An argument already in the device's memory
(a DLPackArray on the same device, or on the SimulatedDevice a host array) whose elements lie in
the parameter's layout, densely and 16-byte aligned (the widest vector access of a kernel), is
used in place — unless the program writes into that allocation: then it is copied first, as on the
CPU, so a caller's array is never modified. Outputs returned as DeviceArrays own their buffers (a
constant's is copied first: nobody may write into a constant).

Library calls on a device: a dot that maps onto one strided batched gemm runs on the device
(cuBLAS; numpy over the same plan on the SimulatedDevice); others run on the host through memory
reads and writes, counted as "gemm (host)" in the stats' library calls. Convolutions become an
im2col kernel and a gemm (passes/convolution_to_gemm.py: no cuDNN; the cuda pipeline of
passes/pipeline.py runs it); the few that pass leaves alone (batch groups) run on the host as
"convolution (host)".
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TextIO

import numpy as np

from hlocc.backends.cpu.executable import prepare_as_written
from hlocc.backends.cuda.command_buffer import CommandBuffer
from hlocc.backends.cuda.device import Device, ExternalBuffer
from hlocc.backends.cuda.dlpack import KDLCPU, DeviceArray, DLPackArray
from hlocc.backends.cuda.library import plan_gemm
from hlocc.backends.cuda.memory import DeviceMemory, RunStats
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.errors import ArgumentError
from hlocc.evaluator.core import TOKEN
from hlocc.hlo.ir import HloModule
from hlocc.hlo.types import Shape, as_strided
from hlocc.passes.pipeline import BACKEND_PIPELINES, PassManager, cuda_pipeline
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAllocation
from hlocc.runtime.executable import RuntimeStats, ThunkExecutable, build_executable, output_leaf_shape
from hlocc.runtime.thunks import (
    BufferRef,
    ConvolutionThunk,
    GemmThunk,
    LibraryThunk,
    SequentialThunk,
    Thunk,
    nest,
    physical_bytes,
)

KERNEL_ALIGNMENT = 16
"""Bytes an argument used in place must be aligned to: a kernel's widest vector load or store."""


class DeviceBuffers:
    """How a run on a device gets its buffers (module doc): parameters (in place or uploaded),
    constants (uploaded once and kept), fresh allocations. Shared by the static executable and the
    dynamic program (dynamic.py), which gives each allocation its size and each parameter its
    shape at the call's binding. The host class provides `device`, `module`, `constants`,
    `assignment`, `copied_parameters` and a `_constants_on_device` dict."""

    def _buffer(self, allocation: BufferAllocation, args: Sequence[Any], stats: RunStats, size: int | None = None,
                shape: Shape | None = None) -> Any:
        if allocation.kind is AllocationKind.PARAMETER:
            return self._parameter(args, allocation, stats, shape, size)
        if allocation.kind is AllocationKind.CONSTANT:
            return self._constant(allocation, stats)
        return self._allocate(allocation.size if size is None else size, stats)

    def _allocate(self, size: int, stats: RunStats) -> Any:
        stats.allocations += 1
        stats.allocated_bytes += size
        return self.device.allocate(size)

    def _upload(self, data: np.ndarray, stats: RunStats) -> Any:
        buffer = self._allocate(data.size, stats)
        if data.size:
            self.device.upload(buffer.ptr, data)
            stats.uploaded_bytes += data.size
        return buffer

    def _constant(self, allocation: BufferAllocation, stats: RunStats) -> Any:
        buffer = self._constants_on_device.get(allocation.index)
        if buffer is None:
            buffer = self._upload(self.constants[allocation.index], stats)
            self._constants_on_device[allocation.index] = buffer
        return buffer

    def _parameter(self, args: Sequence[Any], allocation: BufferAllocation, stats: RunStats,
                   shape: Shape | None = None, size: int | None = None) -> Any:
        """The buffer of a parameter's allocation; `shape` and `size`: the leaf's shape and the
        allocation's bytes at the call's binding (default: the module's, static)."""
        value = self._parameter_value(args, allocation)
        shape = shape or self._leaf_shape(allocation)
        size = allocation.size if size is None else size
        if value is TOKEN or not shape.is_array or size == 0:
            return ExternalBuffer(0, 0)
        written = allocation.index in self.copied_parameters
        if isinstance(value, DLPackArray):
            return self._device_argument(value, shape, allocation.parameter_number, size, written, stats)
        array = np.asarray(value)
        data = physical_bytes(array, shape)
        if self.device.dlpack_device[0] == KDLCPU and not written and data.ctypes.data % KERNEL_ALIGNMENT == 0:
            # The device's memory is the host's: the bytes in the layout's order are used as they are.
            if np.may_share_memory(data, array):
                stats.arguments_in_place += 1
            else:
                stats.uploaded_bytes += data.size  # put into the layout's order: a copy all the same
            return ExternalBuffer(data.ctypes.data, data.size, data)
        return self._upload(data, stats)

    def _parameter_value(self, args: Sequence[Any], allocation: BufferAllocation) -> Any:
        """The argument leaf a parameter's allocation holds."""
        value = args[allocation.parameter_number]
        for i in allocation.parameter_index:
            value = value[i]
        return value

    def _leaf_shape(self, allocation: BufferAllocation) -> Shape:
        """The shape in the module of the parameter leaf an allocation holds."""
        shape = self.module.entry.parameter(allocation.parameter_number).shape
        for i in allocation.parameter_index:
            shape = shape.tuple_shapes[i]
        return shape

    def _run(self, site: CommandBuffer, program: Thunk, args: Sequence[Any],
             buffers_of: Callable[[RunStats], list[Any]], outputs: Sequence[BufferRef],
             return_device_arrays: bool) -> list[Any]:
        """Run `program` with `args` and return its output leaves: replayed from the site's command
        buffer where it may (command_buffer.py), else eagerly over the buffers of `buffers_of`."""
        device = self.device
        device.activate()
        stats = RunStats()
        locked = site.wants(args, return_device_arrays) and site.lock.acquire(blocking=False)
        try:
            memory = site.run(args, stats) if locked else None
            if memory is None:
                memory = DeviceMemory(device, buffers_of(stats), self.seed, stats)
                program.execute(memory)
                if locked and not site.observed:
                    site.observe(stats)
            leaves = [TOKEN if not ref.shape.is_array else self._device_array(memory, ref) if return_device_arrays
                      else memory.read(ref) for ref in outputs]
            device.synchronize()
        finally:
            if locked:
                site.lock.release()
        self.last_run = stats
        return leaves

    def _device_argument(self, value: DLPackArray, shape: Shape, number: int, size: int, written: bool,
                         stats: RunStats) -> Any:
        if value.device != tuple(self.device.dlpack_device):
            raise ArgumentError(f"argument {number}: the array is in {value.device_name} "
                                f"memory, but the program runs on {self.device.name}")
        if value.has_layout(shape) and value.ptr % KERNEL_ALIGNMENT == 0:
            if not written:
                stats.arguments_in_place += 1
                return ExternalBuffer(value.ptr, size, value)
            buffer = self._allocate(size, stats)
            self.device.copy(buffer.ptr, value.ptr, size)
            stats.device_copied_bytes += size
            return buffer
        # Other strides (or misaligned): through the host, into the layout's order.
        low, high = value.span()
        itemsize = value.dtype.itemsize
        host = np.empty((high - low) * itemsize, np.uint8)
        self.device.download(host, value.ptr + low * itemsize)
        stats.downloaded_bytes += host.size
        elements = host.view(value.dtype)[-low:]
        array = as_strided(elements, value.shape, [s * itemsize for s in value.strides])
        return self._upload(physical_bytes(array, shape), stats)

    def _device_array(self, memory: DeviceMemory, ref: BufferRef) -> DeviceArray:
        """An output left in device memory: a view of its run's buffer, which it keeps alive, or a
        copy where the buffer is not the run's own (a constant, an argument used in place)."""
        allocation = self.assignment.allocations[ref.slice.allocation_index]
        buffer = memory.buffers[allocation.index]
        if allocation.kind is AllocationKind.CONSTANT or isinstance(buffer, ExternalBuffer):
            copy = self._allocate(ref.slice.size, memory.stats)  # a result owns its memory
            if ref.slice.size:
                self.device.copy(copy.ptr, memory.address(ref.slice), ref.slice.size)
                memory.stats.device_copied_bytes += ref.slice.size
            return DeviceArray(self.device, copy, 0, ref.shape)
        return DeviceArray(self.device, buffer, ref.slice.offset, ref.shape)


@dataclass
class DeviceExecutable(DeviceBuffers, ThunkExecutable):
    """A program compiled for `device` (module doc). `last_run` is what the latest run moved."""

    device: Any = None
    last_run: RunStats | None = None
    _constants_on_device: dict[int, Any] = field(default_factory=dict, repr=False)
    _commands: CommandBuffer | None = field(default=None, repr=False)  # made at the first run
    _outputs: list[BufferRef] = field(default_factory=list, repr=False)

    def run(self, args: Sequence[Any], return_device_arrays: bool = False) -> Any:
        allocations = self.assignment.allocations
        if self._commands is None:
            self._commands = CommandBuffer(self, [(a, a.size, self._leaf_shape(a) if a.kind is AllocationKind.PARAMETER
                                                   else None) for a in allocations], self.program)
            self._outputs = [BufferRef(where, output_leaf_shape(self.assignment, index))
                             for index, where in zip(self.assignment.output_indices, self.assignment.output_slices)]
        leaves = self._run(self._commands, self.program, args,
                           lambda stats: [self._buffer(allocation, args, stats) for allocation in allocations],
                           self._outputs, return_device_arrays)
        return nest(self.module.entry.root.shape, iter(leaves))


def label_library_calls(program: SequentialThunk, stats: RuntimeStats, device: Device) -> None:
    """Count each library call where it runs: on the device, or "(host)" (module doc)."""
    calls: Counter = Counter()
    for thunk in program.walk():
        if isinstance(thunk, GemmThunk):
            on_device = not device.gemm_unavailable and plan_gemm(thunk.lhs.shape, thunk.rhs.shape,
                                                                  thunk.output.shape, thunk.dims) is not None
            calls["gemm" if on_device else "gemm (host)"] += 1
        elif isinstance(thunk, ConvolutionThunk):
            calls["convolution (host)"] += 1
        elif isinstance(thunk, LibraryThunk):
            calls[f"{thunk.call} (host)"] += 1
    stats.library_calls = calls


def prepare_for_device(module: HloModule, hlo_passes: bool) -> None:
    """The module as the cuda backend's build has it before the optimization, for a caller that
    builds with the runtime itself (`build_executable` with its default pipeline, whose prologue
    then changes nothing): the as-written rule of the CPU backend, then the cuda pipeline's
    prologue (passes/pipeline.py BACKEND_PIPELINES["cuda"]: fusions holding a convolution inlined,
    convolutions rewritten into im2col kernels and a gemm, the call graph flattened)."""
    prepare_as_written(module, hlo_passes)
    PassManager(BACKEND_PIPELINES["cuda"].prologue).run(module)


def compile_module(module: HloModule, device: Device | None = None, options: PipelineOptions | None = None, *,
                   hlo_passes: bool = False, seed: int = 0, print_after_all: bool = False,
                   stream: TextIO | None = None, times: dict[str, float] | None = None,
                   gemm: str = "library") -> DeviceExecutable:
    """Compile `module` (changed in place by the HLO passes) for `device` (default: the process's
    CudaDevice 0). `gemm`: dots as cuBLAS calls ("library") or generated kernels ("codegen",
    passes/pipeline.py `cuda_pipeline`)."""

    if device is None:
        from hlocc.backends.cuda.driver import cuda_device

        device = cuda_device()
    times = times if times is not None else {}
    t0 = time.perf_counter()
    prepare_as_written(module, hlo_passes)
    built = build_executable(module, device.kernel_compiler(options, times), pipeline=cuda_pipeline(gemm),
                             hlo_passes=hlo_passes, seed=seed, print_after_all=print_after_all, stream=stream,
                             times=times)
    label_library_calls(built.program, built.stats, device)
    built.stats.device = device.name
    times["total"] = (time.perf_counter() - t0) * 1e3
    return DeviceExecutable(**{f.name: getattr(built, f.name) for f in fields(ThunkExecutable)}, device=device)


__all__ = ["DeviceExecutable", "compile_module", "label_library_calls", "prepare_for_device"]
