"""LLVM for the host: one target machine (host CPU name and features, O3), the new pass manager's
O3 pipeline with loop and SLP vectorization, and MCJIT engines.

An engine owns the machine code of its module and its target machine (llvmlite hands the machine
over: each engine gets its own); a `JitModule` keeps it alive for as long as any function address
taken from it can be called (a freed engine under a live function pointer is a segfault, DESIGN's
"known hazards").
"""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir

_LOCK = threading.Lock()


@functools.cache
def _init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()


@functools.cache
def host_target_machine() -> llvm.TargetMachine:
    """The shared machine for optimisation passes and queries. Never hand it to an engine."""
    return new_host_target_machine()


def new_host_target_machine() -> llvm.TargetMachine:
    _init()
    target = llvm.Target.from_default_triple()
    features = llvm.get_host_cpu_features().flatten()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=features, opt=3, jit=True,
                                        codemodel="jitdefault")


def host_triple() -> str:
    _init()
    return llvm.get_process_triple()


@dataclass
class JitModule:
    """A compiled module: keep this object alive while its functions may be called."""

    engine: llvm.ExecutionEngine
    module: llvm.ModuleRef
    optimized_ir: str
    times_ms: dict[str, float] = field(default_factory=dict)

    def address(self, name: str) -> int:
        addr = self.engine.get_function_address(name)
        if not addr:
            raise KeyError(f"no function '{name}' in the JIT module")
        return addr


def optimize(mod: llvm.ModuleRef, tm: llvm.TargetMachine, level: int = 3) -> None:
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pto.loop_vectorization = True
    pto.slp_vectorization = True
    pto.loop_unrolling = True
    pb = llvm.create_pass_builder(tm, pto)
    pm = pb.getModulePassManager()
    pm.run(mod, pb)


def jit_compile(module: ir.Module | str) -> JitModule:
    """Verify, optimise at O3 for the host and JIT-compile an LLVM module."""
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
        optimize(mod, tm)
        times["llvm_opt"] = (time.perf_counter() - t0) * 1e3
        optimized = str(mod)
        t0 = time.perf_counter()
        # The engine takes ownership of its target machine and frees it with itself: a shared machine
        # would be freed under every other engine (a segfault at the next compile).
        engine = llvm.create_mcjit_compiler(mod, new_host_target_machine())
        engine.finalize_object()
        times["llvm_codegen"] = (time.perf_counter() - t0) * 1e3
    return JitModule(engine, mod, optimized, times)
