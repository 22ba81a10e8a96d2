"""Command buffers: a run's device work recorded once and replayed with one launch per call
(XLA:GPU's command buffers, its CommandBufferThunk; on a CudaDevice a CUDA graph captured from the
device's stream, on the SimulatedDevice the recorded operations, replayed in order).

A program of small kernels pays for its launches on the host: on an H200 a transformer block's
ten kernels and eight cuBLAS gemms cost ~0.45 ms of host time a call for ~0.07 ms of GPU work.
A replay costs one launch. Every run site has a CommandBuffer: a DeviceExecutable, and each
binding of a DeviceDynamicProgram (one per argument shapes: the recording holds its sizes, grids
and addresses). Its life:

1. observe: the first call runs eagerly (memory.py), counting what its thunks did on the host. A
   run whose thunks read or write host memory (a while loop's predicate, a conditional's
   selector, a host fallback) is never recorded, nor one that launches nothing (`why_not`).
2. record: the second call allocates the site's own buffers, kept (a recording replays fixed
   addresses), uploads the arguments into them, and runs the thunks with the stream capturing:
   nothing executes, every launch, gemm and copy becomes a node.
3. replay, that call and every later one: the arguments uploaded into the kept buffers, one
   launch, the outputs downloaded.

A call that returns device arrays or takes an argument already on the device (the caller's
address, not the kept buffer's) runs eagerly, as does a call that finds the site busy in another
thread. A recording the driver refuses turns the site off, with the driver's message in
`why_not`, and the call runs eagerly. The kept buffers of a device's recorded sites add up to at
most `MEMORY_BUDGET` bytes: recording one more forgets the least recently replayed ones (they
record again when called). `HLOCC_CUDA_GRAPHS=0` turns command buffers off.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from hlocc.backends.cuda.device import ExternalBuffer
from hlocc.backends.cuda.dlpack import DLPackArray
from hlocc.backends.cuda.memory import DeviceMemory, RunStats
from hlocc.evaluator.core import TOKEN
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAllocation
from hlocc.runtime.thunks import Thunk, physical_bytes

MEMORY_BUDGET = 1 << 30
"""Bytes of kept buffers a device's recorded sites may hold together (module doc)."""

_RECORDED = ("launches", "device_gemms", "device_copied_bytes")
"""RunStats counters a replay repeats as recorded."""


def enabled() -> bool:
    return os.environ.get("HLOCC_CUDA_GRAPHS", "1").strip() != "0"


class CommandBuffer:
    """One run site's recording (module doc). `replays` counts the calls it served; `why_not`
    says why the site runs eagerly for good ("" while it may record)."""

    def __init__(self, host: Any, buffers: Sequence[tuple[BufferAllocation, int, Any]], program: Thunk):
        """`host`: the site's DeviceBuffers (executable.py: the device, the seed, constants and the
        arguments' leaves); `buffers`: per allocation, (allocation, bytes, a parameter's shape)."""
        self.host, self.device, self.entries, self.program = host, host.device, list(buffers), program
        self.lock = threading.Lock()
        self.observed = False
        self.why_not = "" if enabled() else "HLOCC_CUDA_GRAPHS=0"
        self.graph: Any = None
        self.buffers: list[Any] | None = None
        self.kept_bytes = 0
        self.recorded = RunStats()
        self.replays = 0

    def wants(self, args: Sequence[Any], return_device_arrays: bool) -> bool:
        """Whether this call may replay (or record, or be observed for a recording)."""
        return not self.why_not and not return_device_arrays and not any(map(_on_device, args))

    def observe(self, stats: RunStats) -> None:
        """The first eager call's thunk counters (taken before its outputs were read)."""
        self.observed = True
        if stats.host_reads or stats.host_writes or stats.host_library_calls:
            self.why_not = "its thunks use the host (a loop's predicate, a conditional, a host fallback)"
        elif not (stats.launches or stats.device_gemms or stats.device_copied_bytes):
            self.why_not = "nothing to replay"

    def run(self, args: Sequence[Any], stats: RunStats) -> DeviceMemory | None:
        """Replay (recording first where needed) with `args`, the lock held by the caller: the
        memory whose buffers hold the outputs, or None when the call must run eagerly (not yet
        observed, or the recording was refused: `why_not`)."""
        if not self.observed or self.why_not:
            return None
        if self.graph is None and not self._record():
            return None
        self._upload(args, stats)
        self.device.replay(self.graph)
        self.replays += 1
        _budget(self.device).touch(self)
        for name in _RECORDED:
            setattr(stats, name, getattr(self.recorded, name))
        stats.replays = 1
        return DeviceMemory(self.device, self.buffers, self.host.seed, stats)

    def _record(self) -> bool:
        budget = _budget(self.device)
        kept = sum(size for allocation, size, _ in self.entries if allocation.kind is not AllocationKind.CONSTANT)
        if kept > MEMORY_BUDGET:
            self.why_not = f"its buffers ({kept} bytes) exceed the command buffers' budget ({MEMORY_BUDGET} bytes)"
            return False
        budget.make_room(kept, self)
        stats = RunStats()
        self.buffers = [self.host._constant(allocation, stats) if allocation.kind is AllocationKind.CONSTANT
                        else self.device.allocate(size) if size else ExternalBuffer(0, 0)
                        for allocation, size, _ in self.entries]
        self.kept_bytes = kept
        memory = DeviceMemory(self.device, self.buffers, self.host.seed, stats)
        collecting = gc.isenabled()
        gc.disable()  # no buffer of another run is freed (a stream operation) while the stream records
        try:
            self.device.begin_capture()
            try:
                self.program.execute(memory)
            finally:
                graph = self.device.end_capture()
        except Exception as e:  # the driver refused an operation in capture: eager for good
            self.why_not = f"the recording failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            self.release()
            return False
        finally:
            if collecting:
                gc.enable()
        self.graph, self.recorded = graph, stats
        budget.add(self)
        return True

    def _upload(self, args: Sequence[Any], stats: RunStats) -> None:
        for (allocation, _, shape), buffer in zip(self.entries, self.buffers):
            if allocation.kind is not AllocationKind.PARAMETER or not buffer.size:
                continue
            value = self.host._parameter_value(args, allocation)
            if value is TOKEN:
                continue
            data = physical_bytes(np.asarray(value), shape)
            self.device.upload(buffer.ptr, data)
            stats.uploaded_bytes += data.size

    def release(self) -> None:
        """Forget the recording and the kept buffers (the next call records again)."""
        self.graph = None
        self.buffers = None
        self.kept_bytes = 0


def _on_device(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(map(_on_device, value))
    return isinstance(value, DLPackArray)


class _Budget:
    """A device's recorded sites, least recently replayed first, and the bytes they keep."""

    def __init__(self):
        self.sites: OrderedDict[int, weakref.ref] = OrderedDict()
        self.lock = threading.Lock()

    def bytes(self) -> int:
        return sum(site.kept_bytes for site in self._live())

    def _live(self) -> list[CommandBuffer]:
        return [s for s in (ref() for ref in self.sites.values()) if s is not None]

    def add(self, site: CommandBuffer) -> None:
        with self.lock:
            key = id(site)
            self.sites[key] = weakref.ref(site, lambda _: self.sites.pop(key, None))

    def touch(self, site: CommandBuffer) -> None:
        with self.lock:
            if id(site) in self.sites:
                self.sites.move_to_end(id(site))

    def make_room(self, size: int, keep: CommandBuffer) -> None:
        with self.lock:
            for key, ref in list(self.sites.items()):
                if self.bytes() + size <= MEMORY_BUDGET:
                    return
                site = ref()
                if site is None or site is keep or not site.lock.acquire(blocking=False):
                    continue
                try:
                    site.release()
                    self.sites.pop(key, None)
                finally:
                    site.lock.release()


_BUDGETS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_BUDGETS_LOCK = threading.Lock()


def _budget(device: Any) -> _Budget:
    with _BUDGETS_LOCK:
        budget = _BUDGETS.get(device)
        if budget is None:
            budget = _BUDGETS[device] = _Budget()
        return budget


__all__ = ["MEMORY_BUDGET", "CommandBuffer", "enabled"]
