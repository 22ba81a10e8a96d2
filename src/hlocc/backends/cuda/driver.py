"""The CUDA driver for the `cuda` backend: a thin layer over NVIDIA's cuda-bindings
(`from cuda.bindings import driver`, imported only when a CudaDevice is made, so hlocc imports
without it) and `CudaDevice`, the real device of device.py's protocol.

    cuda_available()   → (True, "1 CUDA device") or (False, the reason: no driver, no package, no device)
    CudaDevice(0)      → device 0's primary context and one stream; everything runs in that stream

Every driver call goes through `check`, which raises CudaError naming the call and the driver's
error name and string. Kernels are the PTX of backends/cuda/ptx.py, loaded once per kernel with
cuModuleLoadData (the driver JIT-compiles it for the device) and launched with grid
(blocks, 1, 1), block (threads per block, 1, 1) and one 64-bit device pointer per buffer; a kernel
with runtime dims (ptx.py) also takes its dimension values, one 64-bit integer each, and its grid
is evaluated at them (once per distinct dims, remembered: `CudaKernel.launch_at`).
Gemms go to cuBLAS (library.py, through nvmath-python) when it is installed, else to the host.
Buffers come from a stream-ordered memory pool of the device's own (cuMemAllocFromPoolAsync), which
keeps freed memory for the next run: cuMemAlloc and cuMemFree per run would cost each call tens of
microseconds and a device-wide synchronization (cuMemFree waits for the whole device).
The stream is a blocking one (flags 0), so it is ordered after the legacy default stream that
DLPack producers are asked to synchronize with.
"""

from __future__ import annotations

import ctypes
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cuda.device import ExternalBuffer, kernel_symbol
from hlocc.backends.cuda.dlpack import KDLCUDA
from hlocc.backends.cuda.library import GemmPlan
from hlocc.codegen.pipeline import PipelineOptions, add_stage_times
from hlocc.codegen.target import gpu_target
from hlocc.errors import HloError
from hlocc.hlo.ir import HloComputation
from hlocc.runtime.executable import KernelCompiler

DRIVER_LIBRARY = "libcuda.so.1"


class CudaError(HloError):
    """A CUDA driver call failed; the message names the call and the driver's error."""


def _driver():
    from cuda.bindings import driver

    return driver


def check(result: tuple, call: str) -> Any:
    """The value(s) of a cuda-bindings call's `(CUresult, *values)`, or CudaError."""
    driver = _driver()
    error, *values = result
    if error != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(error)
        _, text = driver.cuGetErrorString(error)
        decode = lambda b: b.decode() if isinstance(b, bytes) else str(b)  # noqa: E731
        raise CudaError(f"{call} failed: {decode(name)}: {decode(text)}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def cuda_available() -> tuple[bool, str]:
    """Whether a CudaDevice can be made here, and if not, why (one line a user can act on)."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
    except OSError:
        return False, f"no CUDA driver ({DRIVER_LIBRARY} not found)"
    try:
        driver = _driver()
    except ImportError:
        return False, "the package cuda-bindings is not installed (pip install cuda-bindings)"
    try:
        check(driver.cuInit(0), "cuInit")
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    except Exception as e:  # the bindings raise their own errors too (a driver they cannot load)
        return False, f"the CUDA driver does not start: {e}"
    if count == 0:
        return False, "no CUDA device"
    return True, f"{count} CUDA device{'s' if count != 1 else ''}"


@dataclass(frozen=True)
class DeviceInfo:
    ordinal: int
    name: str
    compute_capability: tuple[int, int]
    sm_count: int
    total_bytes: int
    memory_clock_khz: int = 0
    bus_width_bits: int = 0

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def peak_bandwidth(self) -> float:
        """Bytes per second of the device memory at its peak: double data rate × bus width."""
        return 2.0 * self.memory_clock_khz * 1e3 * self.bus_width_bits / 8


def query_device(ordinal: int = 0) -> DeviceInfo:
    """Name, compute capability (→ the sm_XX arch), SM count and memory of CUDA device `ordinal`."""
    driver = _driver()
    check(driver.cuInit(0), "cuInit")
    device = check(driver.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
    attr = driver.CUdevice_attribute

    def attribute(which) -> int:
        return int(check(driver.cuDeviceGetAttribute(which, device), f"cuDeviceGetAttribute({which.name})"))
    name = check(driver.cuDeviceGetName(256, device), "cuDeviceGetName")
    name = name.split(b"\0", 1)[0].decode() if isinstance(name, bytes) else str(name)
    return DeviceInfo(ordinal, name,
                      (attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
                       attribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)),
                      attribute(attr.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
                      int(check(driver.cuDeviceTotalMem(device), "cuDeviceTotalMem")),
                      attribute(attr.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
                      attribute(attr.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH))


def _free(ptr: int) -> None:
    try:
        _driver().cuMemFree(ptr)
    except Exception:  # the driver may be gone at interpreter exit
        pass


def _free_async(ptr: int) -> None:
    # On the legacy default stream: the free is ordered after the work of every blocking stream
    # (hlocc's, and a DLPack consumer's default stream) that may still read the buffer.
    try:
        driver = _driver()
        driver.cuMemFreeAsync(ptr, driver.CUstream(CU_STREAM_LEGACY))
    except Exception:
        pass


CU_STREAM_LEGACY = 1
"""The legacy default stream's handle (cuda.h): a free queued there waits for every blocking stream."""
CU_STREAM_NON_BLOCKING = 1
"""cuStreamCreate's flag (cuda.h) for a stream with no implicit ordering against the legacy stream."""


class CudaBuffer:
    """`size` bytes of device memory, freed when the object dies: from the device's stream-ordered
    pool where it has one (cuMemAllocFromPoolAsync on its stream, cuMemFreeAsync), else cuMemAlloc
    and cuMemFree, which synchronizes the whole device."""

    def __init__(self, size: int, pool: Any = None, stream: Any = None):
        self.size = size
        driver = _driver()
        if pool is None:
            self.ptr = int(check(driver.cuMemAlloc(size), f"cuMemAlloc({size})"))
            weakref.finalize(self, _free, self.ptr)
        else:
            self.ptr = int(check(driver.cuMemAllocFromPoolAsync(size, pool, stream),
                                 f"cuMemAllocFromPoolAsync({size})"))
            weakref.finalize(self, _free_async, self.ptr)


def stream_ordered_pool(device: Any, ordinal: int, stream: Any) -> tuple[Any, str]:
    """A memory pool of the device's own (not the default pool other libraries share) that keeps
    what is freed for the next allocation (release threshold: unlimited, as a caching allocator),
    and a one-line description; or (None, why not) where the device or the bindings have none."""
    driver = _driver()
    try:
        attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED
        if not check(driver.cuDeviceGetAttribute(attr, device), "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)"):
            return None, "cuMemAlloc (the device has no memory pools)"
        props = driver.CUmemPoolProps()
        props.allocType = driver.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.location.type = driver.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = ordinal
        pool = check(driver.cuMemPoolCreate(props), "cuMemPoolCreate")
        check(driver.cuMemPoolSetAttribute(pool, driver.CUmemPool_attribute.CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                           driver.cuuint64_t(2**64 - 1)), "cuMemPoolSetAttribute")
        probe = CudaBuffer(256, pool, stream)  # the whole path once, before a run relies on it
        del probe
        return pool, "stream-ordered pool (cuMemAllocFromPoolAsync)"
    except Exception as e:  # older bindings or driver: the synchronous allocator still works
        return None, f"cuMemAlloc (no stream-ordered pool: {str(e).splitlines()[0] if str(e) else type(e).__name__})"


@dataclass
class CudaKernel:
    """A kernel loaded on a CudaDevice: the PTX module and its entry function."""

    name: str
    emitter: str
    output_aliases: tuple[tuple[int, int], ...]
    launch_dims: LaunchDims
    has_work: bool
    device: CudaDevice
    function: Any = None
    module: Any = None
    ptx: Any = field(default=None, repr=False)  # the PtxKernel
    symbols: tuple[str, ...] = ()  # dimension variables whose values a launch takes (ptx.py)
    dynamic_shared_bytes: int = 0  # shared memory each launch passes (ptx.py `dynamic_shared_bytes`)
    _launches: dict[tuple[int, ...], LaunchDims | None] = field(default_factory=dict, repr=False)
    _tensor_maps: dict[tuple[int, ...], tuple] = field(default_factory=dict, repr=False)

    def run_addresses(self, addresses: list[int], dims: tuple[int, ...] = ()) -> None:
        """Launch on device memory at `addresses` (device pointers); `dims`: the values of `symbols`."""
        self.device.launch(self, addresses, dims)

    def tensor_maps_at(self, addresses: list[int]) -> tuple:
        """The CUtensorMaps of a TMA kernel's parameters over the buffers at `addresses`, encoded
        once per distinct buffer addresses (backends/cuda/tensor_map.py)."""
        key = tuple(addresses[buffer] for buffer, _ in self.ptx.tensor_maps)
        maps = self._tensor_maps.get(key)
        if maps is None:
            if len(self._tensor_maps) >= 64:
                self._tensor_maps.clear()
            maps = self._tensor_maps[key] = tuple(encode_tensor_map(spec, address) for (_, spec), address
                                                  in zip(self.ptx.tensor_maps, key))
        return maps

    def launch_at(self, dims: tuple[int, ...]) -> LaunchDims | None:
        """The grid at `dims` (None: no output element, nothing to launch), remembered per dims:
        evaluating the size expressions costs more than a small launch."""
        launch = self._launches.get(dims, False)
        if launch is False:
            if len(self._launches) >= 1024:  # a bound on what a sweep over many sizes keeps
                self._launches.clear()
            launch = self._launches[dims] = self.ptx.launch_at(dims)
        return launch


def encode_tensor_map(spec: Any, address: int) -> Any:
    """The driver's CUtensorMap (128 bytes; `.getPtr()` its address, what a launch passes) for `spec`
    (a TensorMapSpec; backends/cuda/tensor_map.py builds the arguments)
    over device memory at `address`. Needs cuda-python and a driver (not run without a GPU)."""
    from hlocc.backends.cuda.tensor_map import tensor_map_arguments

    d = _driver()
    a = tensor_map_arguments(spec, address)
    return check(d.cuTensorMapEncodeTiled(
        getattr(d.CUtensorMapDataType, a.data_type), a.rank, a.address, list(a.dims), list(a.strides), list(a.box),
        list(a.element_strides), getattr(d.CUtensorMapInterleave, a.interleave),
        getattr(d.CUtensorMapSwizzle, a.swizzle), getattr(d.CUtensorMapL2promotion, a.l2_promotion),
        getattr(d.CUtensorMapFloatOOBfill, a.oob_fill)),
        "cuTensorMapEncodeTiled")


class CudaDevice:
    """CUDA device `ordinal` (module doc). Make one with `cuda_device()` to share it per process."""

    def __init__(self, ordinal: int = 0):
        ok, why = cuda_available()
        if not ok:
            raise CudaError(why)
        driver = _driver()
        self.info = query_device(ordinal)
        self.arch = self.info.arch
        self.target = gpu_target(self.info.sm_count, self.arch)
        self.name = f"cuda:{ordinal} {self.info.name} ({self.arch}, {self.info.sm_count} SMs)"
        self.dlpack_device = (KDLCUDA, ordinal)
        self._device = check(driver.cuDeviceGet(ordinal), "cuDeviceGet")
        self.context = check(driver.cuDevicePrimaryCtxRetain(self._device), "cuDevicePrimaryCtxRetain")
        self.activate()
        self.stream = check(driver.cuStreamCreate(0), "cuStreamCreate")
        self.pool, self.allocator = stream_ordered_pool(self._device, ordinal, self.stream)
        self._gemm = None
        self.gemm_unavailable = ""
        try:
            from hlocc.backends.cuda.library import CublasGemm

            self._gemm = CublasGemm(int(self.stream))
        except ImportError:
            self.gemm_unavailable = ("nvmath-python is not installed (pip install 'hlocc[cuda]', "
                                     "or 'hlocc[cuda13]' on CUDA 13)")
        except Exception as e:  # cuBLAS itself missing or failing to start
            self.gemm_unavailable = f"cuBLAS does not start: {e}"
        # command buffers (command_buffer.py): recorded on a stream of their own, one recording
        # at a time, so that other threads' work on `stream` never lands in a recording
        self._capture = threading.local()  # .stream, .gemm: the recording thread's
        self._capture_lock = threading.Lock()
        self._capture_stream: Any = None
        self._capture_gemm: Any = None

    def activate(self) -> None:
        """Make the device's context current in this thread (a run may come from any thread)."""
        check(_driver().cuCtxSetCurrent(self.context), "cuCtxSetCurrent")

    # -- memory --------------------------------------------------------------------------------
    def allocate(self, size: int) -> CudaBuffer | ExternalBuffer:
        return CudaBuffer(size, self.pool, self.stream) if size else ExternalBuffer(0, 0)

    def _stream(self) -> Any:
        """The stream this thread's work goes to: the recording's while it records."""
        return getattr(self._capture, "stream", None) or self.stream

    def begin_capture(self) -> None:
        """Record this thread's launches, gemms and copies into a CUDA graph (end_capture)."""
        driver = _driver()
        self._capture_lock.acquire()
        try:
            if self._capture_stream is None:
                # non-blocking: no implicit ordering with the legacy stream (a buffer's free)
                self._capture_stream = check(driver.cuStreamCreate(CU_STREAM_NON_BLOCKING), "cuStreamCreate")
            if self._gemm is not None and self._capture_gemm is None:
                from hlocc.backends.cuda.library import CublasGemm

                # its own handle and workspace: the recording's gemms must not allocate
                # (cuMemAlloc, not the pool's stream-ordered memory: another stream uses it)
                self._capture_gemm = CublasGemm(int(self._capture_stream), workspace=CudaBuffer(CAPTURE_WORKSPACE))
            mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
            check(driver.cuStreamBeginCapture(self._capture_stream, mode), "cuStreamBeginCapture")
        except BaseException:
            self._capture_lock.release()
            raise
        self._capture.stream, self._capture.gemm = self._capture_stream, self._capture_gemm

    def end_capture(self) -> CudaGraph:
        driver = _driver()
        self._capture.stream = self._capture.gemm = None
        try:
            graph = check(driver.cuStreamEndCapture(self._capture_stream), "cuStreamEndCapture")
            try:
                return CudaGraph(check(driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate"))
            finally:
                driver.cuGraphDestroy(graph)  # the instantiated graph is independent of it
        finally:
            self._capture_lock.release()

    def replay(self, graph: CudaGraph) -> None:
        check(_driver().cuGraphLaunch(graph.exec, self.stream), "cuGraphLaunch")

    def upload(self, address: int, data: np.ndarray) -> None:
        # From pageable memory the call returns once `data` is staged: the caller may drop it.
        check(_driver().cuMemcpyHtoDAsync(address, data.ctypes.data, data.nbytes, self.stream),
              f"cuMemcpyHtoDAsync({data.nbytes} bytes)")

    def download(self, data: np.ndarray, address: int) -> None:
        driver = _driver()
        check(driver.cuMemcpyDtoHAsync(data.ctypes.data, address, data.nbytes, self.stream),
              f"cuMemcpyDtoHAsync({data.nbytes} bytes)")
        self.synchronize()

    def copy(self, destination: int, source: int, size: int) -> None:
        check(_driver().cuMemcpyDtoDAsync(destination, source, size, self._stream()),
              f"cuMemcpyDtoDAsync({size} bytes)")

    def synchronize(self) -> None:
        check(_driver().cuStreamSynchronize(self.stream), "cuStreamSynchronize")

    # -- kernels -------------------------------------------------------------------------------
    def kernel_compiler(self, options: PipelineOptions | None, times: dict[str, float]) -> KernelCompiler:
        from hlocc.backends.cuda.ptx import compile_ptx

        def compile_kernel(computation: HloComputation, name: str, noalias: bool) -> CudaKernel:
            ptx = compile_ptx(computation, self.arch, kernel_symbol(name),
                              options.for_kernel(name) if options is not None else None, noalias=noalias)
            add_stage_times(times, ptx.times_ms)
            return self.load(ptx)
        return compile_kernel

    def load(self, ptx: Any) -> CudaKernel:
        """Load a PtxKernel (the driver JIT-compiles its PTX for this device) and find its entry."""
        kernel = CudaKernel(ptx.name, ptx.emitter, tuple(ptx.output_aliases), ptx.launch_dims, ptx.has_work, self,
                            ptx=ptx, symbols=tuple(ptx.symbols))
        if not ptx.has_work:
            return kernel
        driver = _driver()
        self.activate()
        kernel.module = check(driver.cuModuleLoadData(ptx.ptx.encode() + b"\0"), f"cuModuleLoadData({ptx.name})")
        kernel.function = check(driver.cuModuleGetFunction(kernel.module, ptx.name.encode()),
                                f"cuModuleGetFunction({ptx.name})")
        from hlocc.backends.cuda.ptx import dynamic_shared_bytes

        kernel.dynamic_shared_bytes = dynamic_shared_bytes(ptx.shared_bytes)
        if kernel.dynamic_shared_bytes:  # past the static 48 KiB: the function opts in to its size
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check(driver.cuFuncSetAttribute(kernel.function, attribute, kernel.dynamic_shared_bytes),
                  f"cuFuncSetAttribute({ptx.name}, {kernel.dynamic_shared_bytes} bytes of dynamic shared memory)")
        return kernel

    def launch(self, kernel: Any, addresses: list[int], values_of_dims: tuple[int, ...] = ()) -> None:
        """Launch `kernel` over `addresses`: a CudaKernel, or a symbolic kernel bound to its dims
        (runtime/symbolic_kernel.py BoundKernel, which launches its CudaKernel with them)."""
        if not isinstance(kernel, CudaKernel):
            kernel.run_addresses(addresses)
            return
        if not kernel.has_work:
            return
        dims = kernel.launch_at(tuple(values_of_dims)) if kernel.symbols else kernel.launch_dims
        if dims is None:  # no output element at these sizes
            return
        words = [*addresses, *values_of_dims]  # the pointers, then the dimension values (ptx.py's ABI)
        n = len(words)
        values = (ctypes.c_uint64 * max(1, n))(*words)
        pointers = [ctypes.addressof(values) + 8 * i for i in range(n)]
        maps = kernel.tensor_maps_at(addresses) if kernel.ptx.tensor_maps else ()
        pointers += [int(m.getPtr()) for m in maps]  # TMA: each CUtensorMap by value, after the dims
        params = (ctypes.c_void_p * max(1, len(pointers)))(*pointers)
        check(_driver().cuLaunchKernel(kernel.function, dims.blocks, 1, 1, dims.threads_per_block, 1, 1,
                                       kernel.dynamic_shared_bytes, self._stream(), ctypes.addressof(params), 0),
              f"cuLaunchKernel({kernel.name}, grid {dims.blocks}, block {dims.threads_per_block})")

    def gemm(self, plan: GemmPlan, output: int, lhs: int, rhs: int) -> None:
        if self._gemm is None:
            raise CudaError(f"no device gemm: {self.gemm_unavailable}")
        (getattr(self._capture, "gemm", None) or self._gemm)(plan, output, lhs, rhs)


CAPTURE_WORKSPACE = 32 << 20
"""Bytes of the recording cuBLAS handle's workspace (NVIDIA's recommendation for Hopper)."""


class CudaGraph:
    """An instantiated CUDA graph (a command buffer's recording), destroyed with the object."""

    def __init__(self, exec_: Any):
        self.exec = exec_
        weakref.finalize(self, _destroy_graph, exec_)


def _destroy_graph(exec_: Any) -> None:
    try:
        _driver().cuGraphExecDestroy(exec_)
    except Exception:  # the driver may be gone at interpreter exit
        pass


_DEVICES: dict[int, CudaDevice] = {}
_DEVICES_LOCK = threading.Lock()


def cuda_device(ordinal: int = 0) -> CudaDevice:
    """The process's CudaDevice for `ordinal` (made once: a context and a stream per device)."""
    with _DEVICES_LOCK:
        if ordinal not in _DEVICES:
            _DEVICES[ordinal] = CudaDevice(ordinal)
        return _DEVICES[ordinal]


__all__ = ["CudaBuffer", "CudaDevice", "CudaGraph", "CudaError", "CudaKernel", "DeviceInfo", "check", "cuda_available",
           "cuda_device", "query_device"]
