"""One run's memory on a device: the runtime's `Memory` (runtime/thunks.py) over device buffers.

Thunks see the same methods as on the host; here each is a device operation: a slice's address is
a device pointer (kernel arguments), `copy` is a device-to-device copy, `launch` the device's
launch. `read` and `write` move values between the device and the host: a while loop's predicate
or a conditional's selector is one small device-to-host copy per test, and a host fallback
(HostThunk, a convolution, a gemm no strided batched gemm computes) copies its operands to the
host, computes there and copies its result back. `RunStats` counts all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from hlocc.backends.cuda.device import Device
from hlocc.backends.cuda.library import plan_gemm
from hlocc.evaluator.core import TOKEN, Evaluator
from hlocc.runtime import library
from hlocc.runtime.buffer_assignment import BufferSlice
from hlocc.runtime.thunks import BufferRef, ConvolutionThunk, EvaluatorOnDemand, Kernel, aligned_bytes, physical_bytes


@dataclass
class RunStats:
    """What one run did on the device (`executable.last_run`)."""

    allocations: int = 0  # device buffers allocated for the run
    allocated_bytes: int = 0
    arguments_in_place: int = 0  # device-resident arguments used without a copy
    uploaded_bytes: int = 0  # host → device
    downloaded_bytes: int = 0  # device → host
    device_copied_bytes: int = 0  # device → device
    launches: int = 0
    device_gemms: int = 0
    host_library_calls: int = 0  # gemms and convolutions computed on the host
    host_reads: int = 0  # values copied to the host: predicates, host fallbacks' operands, outputs
    host_writes: int = 0  # values copied from the host: host fallbacks' results
    replays: int = 0  # 1: the run replayed its command buffer (command_buffer.py), one launch for all

    def to_string(self) -> str:
        return ", ".join(f"{f.name.replace('_', ' ')} {getattr(self, f.name)}" for f in fields(self))


class DeviceMemory(EvaluatorOnDemand):
    """The buffers of one run on `device` (module doc); `buffers[i]` is allocation i's."""

    def __init__(self, device: Device, buffers: list[Any], seed: int, stats: RunStats):
        self.device = device
        self.buffers = buffers
        self.addresses = [b.ptr for b in buffers]
        self.seed = seed
        self._evaluator: Evaluator | None = None  # made on first use (EvaluatorOnDemand)
        self.stats = stats

    def address(self, where: BufferSlice) -> int:
        return self.addresses[where.allocation_index] + where.offset

    def copy(self, source: BufferSlice, destination: BufferSlice) -> None:
        if source.size:
            self.device.copy(self.address(destination), self.address(source), source.size)
            self.stats.device_copied_bytes += source.size

    def read(self, ref: BufferRef) -> Any:
        if not ref.shape.is_array:
            return TOKEN
        host = aligned_bytes(ref.slice.size)
        if host.size:
            self.device.download(host, self.address(ref.slice))
        self.stats.host_reads += 1
        self.stats.downloaded_bytes += host.size
        return ref.logical_view(host)

    def write(self, ref: BufferRef, value: Any) -> None:
        if not ref.shape.is_array:
            return
        with np.errstate(all="ignore"):
            array = np.asarray(value).astype(ref.shape.dtype, copy=False)
        data = physical_bytes(np.broadcast_to(array, ref.shape.dims), ref.shape)
        if data.size:
            self.device.upload(self.address(ref.slice), data)
        self.stats.host_writes += 1
        self.stats.uploaded_bytes += data.size

    def launch(self, kernel: Kernel, addresses: list[int]) -> None:
        self.device.launch(kernel, addresses)
        self.stats.launches += 1

    def gemm(self, output: BufferRef, lhs: BufferRef, rhs: BufferRef, dims: tuple[tuple[int, ...], ...]) -> None:
        plan = None if self.device.gemm_unavailable else plan_gemm(lhs.shape, rhs.shape, output.shape, dims)
        if plan is not None:
            self.device.gemm(plan, self.address(output.slice), self.address(lhs.slice), self.address(rhs.slice))
            self.stats.device_gemms += 1
            return
        result = np.empty(output.shape.dims, output.shape.dtype)
        library.gemm(result, self.read(lhs), self.read(rhs), *dims)
        self.write(output, result)
        self.stats.host_library_calls += 1

    def convolution(self, thunk: ConvolutionThunk) -> None:
        result = np.empty(thunk.output.shape.dims, thunk.output.shape.dtype)
        library.convolution(result, self.read(thunk.lhs), self.read(thunk.rhs), thunk.window, thunk.dnums,
                            thunk.feature_groups, thunk.batch_groups)
        self.write(thunk.output, result)
        self.stats.host_library_calls += 1


__all__ = ["DeviceMemory", "RunStats"]
