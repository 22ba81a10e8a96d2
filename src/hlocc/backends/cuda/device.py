"""The devices the `cuda` backend runs on: the `Device` protocol the runtime's device memory
(memory.py) and executable (executable.py) use, and `SimulatedDevice`, which runs the whole cuda
path without a GPU. `CudaDevice` (driver.py) is the real one.

A device owns memory (`allocate` → a buffer with a raw `ptr`), moves bytes (`upload`, `download`,
`copy`, in stream order; `download` returns once the bytes are on the host), compiles fusions into
kernels for itself (`kernel_compiler`, the runtime's KernelCompiler), launches them with their
launch dimensions and runs gemms (a `GemmPlan` of library.py: one strided batched gemm).

The SimulatedDevice is a GPU whose memory is host memory: kernels are the GPU form of the emitters
(`gpu_target`: 128 threads per block, warp 32, shared memory) run as an exact SIMT simulation
(backends/cpu/kernel.py), with the launch dimensions the GPU would get; gemms run the same plan a
CudaDevice hands to cuBLAS, evaluated by numpy (library.py `gemm_numpy`), so the mapping of dot
dimensions and layouts onto cuBLAS's column-major call is tested without a GPU. Its DLPack device
is the CPU (kDLCPU): arrays it returns are host memory that numpy, JAX or PyTorch take without a copy.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np

from hlocc.backends.cuda.dlpack import KDLCPU
from hlocc.backends.cuda.library import GemmPlan, gemm_numpy
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.target import Target, gpu_target
from hlocc.hlo.ir import HloComputation
from hlocc.runtime.executable import KernelCompiler
from hlocc.runtime.thunks import Kernel, aligned_bytes


class DeviceBuffer(Protocol):
    """`size` bytes of device memory at address `ptr`, freed when the buffer object dies."""

    ptr: int
    size: int


class Device(Protocol):
    name: str  # for --stats: "cuda:0 NVIDIA H100 (sm_90, 132 SMs)", "simulated sm_90 ..."
    arch: str  # "sm_90"
    target: Target  # what the emitters generate kernels for
    dlpack_device: tuple[int, int]  # (DLPack device type, device id)
    gemm_unavailable: str  # why no device gemm runs ("" when gemms run on the device)

    def activate(self) -> None: ...

    def allocate(self, size: int) -> DeviceBuffer: ...

    def upload(self, address: int, data: np.ndarray) -> None: ...

    def download(self, data: np.ndarray, address: int) -> None: ...

    def copy(self, destination: int, source: int, size: int) -> None: ...

    def synchronize(self) -> None: ...

    def kernel_compiler(self, options: PipelineOptions | None, times: dict[str, float]) -> KernelCompiler: ...

    def launch(self, kernel: Kernel, addresses: list[int]) -> None: ...

    def gemm(self, plan: GemmPlan, output: int, lhs: int, rhs: int) -> None: ...

    # Command buffers (command_buffer.py): between the two calls, this thread's launches, gemms and
    # copies are recorded, not run; `replay` runs a recording in stream order.
    def begin_capture(self) -> None: ...

    def end_capture(self) -> Any: ...

    def replay(self, graph: Any) -> None: ...


class CaptureError(RuntimeError):
    """An operation a recording cannot hold (a transfer to or from the host) while recording."""


@dataclass
class ExternalBuffer:
    """Memory the runtime does not own (an argument used in place); `owner` keeps it alive."""

    ptr: int
    size: int
    owner: Any = None


@dataclass
class HostBuffer:
    """A SimulatedDevice allocation: aligned host bytes."""

    data: np.ndarray

    @property
    def ptr(self) -> int:
        return self.data.ctypes.data

    @property
    def size(self) -> int:
        return self.data.size


class SimulatedDevice:
    """A GPU of `sm_count` SMs and architecture `arch` simulated on the host (module doc).

    validate_ptx: also compile every kernel to PTX for `arch` (backends/cuda/ptx.py) and check it
      with ptxas where one is installed, so a run in simulation proves the same kernels build for
      the real device.
    fill: a byte every fresh allocation starts with (tests: memory no thunk writes shows up).
    check_bounds: every simulated kernel checks each load and store against its buffer (the cpu
      backend's `check-bounds` mode: a violation raises a BoundsCheckError naming the kernel, the
      buffer and the index). A real GPU has no such mode here (compute-sanitizer plays that role)."""

    def __init__(self, sm_count: int = 132, arch: str = "sm_90", *, validate_ptx: bool = False,
                 fill: int | None = None, check_bounds: bool = False):
        self.arch = arch
        self.target = replace(gpu_target(sm_count, arch), check_bounds=check_bounds)
        self.name = f"simulated {arch} ({sm_count} SMs): GPU kernels in SIMT simulation on the host"
        self.dlpack_device = (KDLCPU, 0)
        self.gemm_unavailable = ""
        self.validate_ptx = validate_ptx
        self.fill = fill
        self._recording = threading.local()  # .ops: the recording in progress in this thread

    def activate(self) -> None:
        pass

    def allocate(self, size: int) -> HostBuffer:
        data = aligned_bytes(size)
        if self.fill is not None:
            data.fill(self.fill)
        return HostBuffer(data)

    def upload(self, address: int, data: np.ndarray) -> None:
        self._host_transfer("upload")
        ctypes.memmove(address, data.ctypes.data, data.nbytes)

    def download(self, data: np.ndarray, address: int) -> None:
        self._host_transfer("download")
        ctypes.memmove(data.ctypes.data, address, data.nbytes)

    def copy(self, destination: int, source: int, size: int) -> None:
        if not self._record(ctypes.memmove, destination, source, size):
            ctypes.memmove(destination, source, size)

    def synchronize(self) -> None:
        self._host_transfer("synchronize")

    def begin_capture(self) -> None:
        self._recording.ops = []

    def end_capture(self) -> list:
        ops, self._recording.ops = self._recording.ops, None
        return ops

    def replay(self, graph: list) -> None:
        for op, args in graph:
            op(*args)

    def _record(self, op, *args) -> bool:
        ops = getattr(self._recording, "ops", None)
        if ops is None:
            return False
        ops.append((op, args))
        return True

    def _host_transfer(self, what: str) -> None:
        # As a CUDA stream in capture refuses them: a recording replays device work only.
        if getattr(self._recording, "ops", None) is not None:
            raise CaptureError(f"{what} while recording a command buffer")

    def kernel_compiler(self, options: PipelineOptions | None, times: dict[str, float]) -> KernelCompiler:
        from hlocc.backends.cpu.executable import kernel_compiler

        simulate = kernel_compiler(self.target, options, times)
        if not self.validate_ptx:
            return simulate

        def compile_and_validate(computation: HloComputation, name: str, noalias: bool) -> Kernel:
            from hlocc.backends.cuda.ptx import compile_ptx, find_ptxas, validate_ptx

            kernel = simulate(computation, name, noalias)
            ptx = compile_ptx(computation, self.arch, kernel_symbol(name), noalias=noalias)
            if ptx.has_work and find_ptxas() is not None:
                validate_ptx(ptx.ptx, self.arch)
            return kernel
        return compile_and_validate

    def launch(self, kernel: Kernel, addresses: list[int]) -> None:
        if not self._record(kernel.run_addresses, list(addresses)):
            kernel.run_addresses(addresses)

    def gemm(self, plan: GemmPlan, output: int, lhs: int, rhs: int) -> None:
        if not self._record(gemm_numpy, plan, output, lhs, rhs):
            gemm_numpy(plan, output, lhs, rhs)


def kernel_symbol(name: str) -> str:
    """A PTX identifier for a kernel named after its instruction (`fusion.3` → `fusion_3`)."""
    symbol = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return symbol if symbol[:1].isalpha() or symbol[:1] == "_" else f"k_{symbol}"


__all__ = ["CaptureError", "Device", "DeviceBuffer", "ExternalBuffer", "HostBuffer", "SimulatedDevice", "kernel_symbol"]
