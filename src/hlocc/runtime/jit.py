"""LLVM for the host: one target machine (host CPU name and features, O3), the new pass manager's
O3 pipeline with loop and SLP vectorization, object code, and the engines that load it.

A kernel is compiled to object code (`compile_object`: parse, verify, optimise, emit with the
shared host target machine) and then loaded into an `ObjectEngine` (an MCJIT engine that takes
object files: relocation against the process's symbols, finalisation). Object code is what the
persistent cache stores, so a kernel compiled now and one read back from disk take the same path.
The kernels the in-process cache keeps (kept for the process's life anyway) all go into one
process-wide engine (`shared_engine`): one engine for every program's kernels, where creating an
engine per kernel cost about 5 ms each. A kernel compiled outside that cache gets its own engine,
freed with it.

An engine owns the machine code of its objects; a `LoadedObject` keeps its engine alive for as
long as any function address taken from it can be called (a freed engine under a live function
pointer is a segfault, DESIGN's "known hazards").
"""

from __future__ import annotations

import functools
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite import ir

_LOCK = threading.RLock()


@functools.cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def host_target_machine() -> llvm.TargetMachine:
    """The shared machine for optimisation passes, object emission and queries. Never hand it to an
    engine (an engine frees its machine with itself)."""
    return new_host_target_machine()


def new_host_target_machine() -> llvm.TargetMachine:
    _init()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=host_cpu_features(), opt=3, jit=True,
                                        codemodel="jitdefault")


@functools.cache
def host_cpu_features() -> str:
    _init()
    return llvm.get_host_cpu_features().flatten()


def host_triple() -> str:
    _init()
    return llvm.get_process_triple()


UNROLL_MAX_LOOPS = 32
"""A kernel with more loops than this is optimised without LLVM's loop unrolling. Such kernels are
the multi-version kernels of symbolic sizes: a version per speculation, each with its vector body and
tails, already unrolled where it pays by the kernel pipeline's unroll-loops. LLVM's unroller tripled
their code and their LLVM time: the bias gradient of a conv net over symbolic images (160 loops) took
5.8 s of LLVM with it, 1.8 s without. The JAX and XLA corpus kernels have at most 23 loops, and some
run faster unrolled (sort_topk_argsort 18%), so they keep it."""


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3, unroll: bool = True) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = unroll
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


@dataclass
class ObjectCode:
    """A module compiled for the host: its object file and, when asked for, its optimised IR."""

    data: bytes
    optimized_ir: str
    times_ms: dict[str, float]


def compile_object(module: ir.Module | str, keep_ir: bool = False, loops: int = 0) -> ObjectCode:
    """Verify, optimise at O3 for the host and emit an LLVM module's object code; `keep_ir` keeps
    the optimised IR's text (for dumps: printing it costs as much as parsing). `loops`: how many
    loops the kernel has (`UNROLL_MAX_LOOPS`)."""
    tm = host_target_machine()
    times = {}
    t0 = time.perf_counter()
    text = str(module)
    with _LOCK:
        mod = llvm.parse_assembly(text)
        mod.triple = tm.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
        times["llvm_parse"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        optimize(mod, tm, unroll=loops <= UNROLL_MAX_LOOPS)
        times["llvm_opt"] = (time.perf_counter() - t0) * 1e3
        optimized = str(mod) if keep_ir else ""
        t0 = time.perf_counter()
        data = tm.emit_object(mod)
        times["llvm_codegen"] = (time.perf_counter() - t0) * 1e3
    return ObjectCode(data, optimized, times)


_WORKER: ThreadPoolExecutor | None = None
_WORKER_LOCK = threading.Lock()


def _forget_worker_in_child() -> None:
    """A forked child has no worker thread (fork copies only the calling thread), but a copy of the
    executor that believes it has one: its submissions would never run. It makes its own, and
    `_LOCK`, which the worker may have held at the fork, starts free (reset in place: other
    modules hold it by name)."""
    global _WORKER, _WORKER_LOCK
    _WORKER, _WORKER_LOCK = None, threading.Lock()
    _LOCK._at_fork_reinit()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_worker_in_child)


def compile_object_later(module: ir.Module | str, loops: int = 0) -> Future[ObjectCode]:
    """`compile_object` on the LLVM worker thread: the module's text is made here, parsing,
    optimization and object emission run there while the caller goes on with the next kernel.
    LLVM's work runs in C without the GIL (llvmlite calls it through ctypes), so on a machine with
    a second core a program's LLVM stage overlaps the Python stages (emission, kernel passes) of
    its other kernels. One worker: LLVM's global context takes one module at a time (`_LOCK`)."""
    global _WORKER
    text = str(module)
    with _WORKER_LOCK:  # not _LOCK, which the worker holds while it compiles
        if _WORKER is None:
            _WORKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hlocc-llvm")
    return _WORKER.submit(compile_object, text, False, loops)


class ObjectEngine:
    """An MCJIT engine that object files are added to; addresses of their functions stay valid for
    as long as the engine lives."""

    def __init__(self) -> None:
        tm = new_host_target_machine()
        with _LOCK:
            empty = llvm.parse_assembly("")
            empty.triple = tm.triple
            # The engine takes ownership of its target machine and frees it with itself: a shared
            # machine would be freed under every other engine.
            self.engine = llvm.create_mcjit_compiler(empty, tm)
        self.symbols: dict[str, LoadedObject] = {}

    def load(self, data: bytes, symbols: list[str], data_symbols: list[str] = ()) -> LoadedObject:
        """Add an object file and return the addresses of `symbols` (functions) and `data_symbols`
        (globals) in it (a KeyError names a missing one). Its external symbols must be unique within
        the engine."""
        with _LOCK:
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(data))
            self.engine.finalize_object()
            addresses = {s: self.engine.get_function_address(s) for s in symbols}
            addresses.update({s: self.engine.get_global_value_address(s) for s in data_symbols})
        missing = [s for s, a in addresses.items() if not a]
        if missing:
            raise KeyError(f"no function {', '.join(missing)} in the object code")
        loaded = LoadedObject(self, addresses)
        with _LOCK:
            self.symbols.update(dict.fromkeys(symbols, loaded))
        return loaded


@dataclass
class LoadedObject:
    """Function addresses in an engine; keep this object alive while they may be called."""

    engine: ObjectEngine
    addresses: dict[str, int]

    def address(self, name: str) -> int:
        return self.addresses[name]


@functools.cache
def shared_engine() -> ObjectEngine:
    """The process-wide engine of the kernels the in-process cache keeps."""
    return ObjectEngine()
