"""Compile one fused computation into a callable CPU kernel: emit (loop emitter), run the kernel
pass pipeline, translate to LLVM, add the block-loop wrapper, JIT at O3.

The wrapper `<name>_blocks(void **buffers, i64 first, i64 end)` loads the buffer pointers (the
fusion's parameters, then its outputs) and runs, for each block in [first, end), every thread of
the block as an inner loop around the inlined kernel body (DESIGN "One kernel model").

Kernels are cached in-process by the fused computation's structural fingerprint and the target:
identical fusions compile once (XLA's KernelReuseCache).
"""

from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass, field

import numpy as np
from llvmlite import ir

from hlocc.analysis.hero import computation_emitter_kind
from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.jit import JitModule, host_triple, jit_compile
from hlocc.backends.cpu.launcher import BlocksFunction, launch_addresses
from hlocc.codegen.context import print_module
from hlocc.codegen.elemental.storage import array_leaves
from hlocc.codegen.emitters.base import KernelModule
from hlocc.codegen.emitters.registry import emit_fusion
from hlocc.codegen.llvm import I64, LlvmTranslator, TranslateOptions
from hlocc.codegen.pipeline import PipelineOptions, dump_file, pipeline_for, run_pipeline
from hlocc.codegen.target import Target, cpu_target
from hlocc.codegen.transforms.check_bounds import GLOBAL as BOUNDS_GLOBAL
from hlocc.codegen.transforms.check_bounds import RECORD, BoundsCheckError, record_slots
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.printer import computation_fingerprint
from hlocc.hlo.types import Shape
from hlocc.runtime.thunks import from_physical, to_physical


@dataclass
class CompiledKernel:
    """A JIT-compiled kernel. `run(buffers)` takes the parameter arrays then the output arrays, all
    in physical (layout) order and C-contiguous; `__call__` takes logical arrays and returns new
    logical outputs."""

    name: str
    launch_dims: LaunchDims
    param_shapes: list[Shape]
    output_shapes: list[Shape]
    jit: JitModule | None  # None for an empty output (nothing to run)
    fn: BlocksFunction | None
    times_ms: dict[str, float] = field(default_factory=dict)
    kernel_ir: str = ""
    computation: HloComputation | None = None  # the fused computation it computes
    emitter: str = "loop"
    output_aliases: tuple[tuple[int, int], ...] = ()  # (output, parameter): see KernelModule
    serial: bool = False  # blocks one after another (see KernelModule)
    bounds_record: int = 0  # address of the check-bounds record (0: kernel compiled without checks)

    @property
    def num_elements(self) -> int:
        """Elements the launch touches: the largest parameter or output (a reduction reads more than
        it writes). Decides whether the blocks are worth spreading over the thread pool."""
        return max(s.num_elements for s in [*self.output_shapes, *self.param_shapes])

    @property
    def has_work(self) -> bool:
        """False when every output is empty: no thread has anything to write (and none may read)."""
        return self.fn is not None and any(s.num_elements for s in self.output_shapes)

    def _elements(self) -> int:
        return 0 if self.serial else self.num_elements

    def run(self, buffers: list[np.ndarray]) -> None:
        self.run_addresses([b.ctypes.data for b in buffers])

    def run_addresses(self, addresses: list[int]) -> None:
        """`run` over raw buffer addresses (the runtime's thunks; the caller keeps the memory alive)."""
        if not self.has_work:
            return
        if not self.bounds_record:
            launch_addresses(self.fn, addresses, self.launch_dims.blocks, self._elements())
            return
        buffers = [*self.param_shapes, *self.output_shapes]
        with _BOUNDS_LOCK:  # one record per kernel: checked launches of a kernel do not overlap
            record = (ctypes.c_int64 * record_slots(len(buffers))).from_address(self.bounds_record)
            ctypes.memset(record, 0, ctypes.sizeof(record))
            launch_addresses(self.fn, addresses, self.launch_dims.blocks, self._elements())
            violations = [(k - 2, record[RECORD * k + 1], record[RECORD * k + 2])
                          for k in range(1, len(buffers) + 2) if record[RECORD * k]]
        if violations:
            k, index, size = violations[0]
            what = ("a constant" if k < 0 else f"parameter {k} ({buffers[k]})" if k < len(self.param_shapes)
                    else f"output {k - len(self.param_shapes)} ({buffers[k]})")
            raise BoundsCheckError(f"kernel '{self.name}' accessed {what} at element {index}, outside [0, {size})")

    def __call__(self, *args: np.ndarray) -> list[np.ndarray]:
        params = [to_physical(np.asarray(a), s) for a, s in zip(args, self.param_shapes)]
        outs = [np.empty(s.physical_dims, dtype=s.dtype) for s in self.output_shapes]
        for out, param in self.output_aliases:
            outs[out][...] = params[param].reshape(outs[out].shape)
        self.run(params + outs)
        return [from_physical(o, s) for o, s in zip(outs, self.output_shapes)]


_BOUNDS_LOCK = threading.Lock()
_CACHE: dict[tuple, CompiledKernel] = {}
_CACHE_LOCK = threading.Lock()


def compile_fusion(fusion: HloComputation, target: Target | None = None, name: str = "main",
                   options: PipelineOptions | None = None, use_cache: bool = True,
                   translate_options: TranslateOptions | None = None) -> CompiledKernel:
    target = target or cpu_target()
    translate_options = translate_options or TranslateOptions()
    key = (computation_fingerprint(fusion), target, translate_options)
    if use_cache and options is None:
        with _CACHE_LOCK:
            cached = _CACHE.get(key)
        if cached is not None:
            return cached
    leaves = array_leaves(fusion.root.shape)
    times: dict[str, float] = {}
    kernel = emit_fusion(fusion, target, name, times)
    if kernel is None:
        return CompiledKernel(name, LaunchDims(1, 0), [p.shape for p in fusion.parameters], leaves, None, None,
                              computation=fusion, emitter=computation_emitter_kind(fusion).value)
    compiled = compile_kernel_module(kernel, target, [p.shape for p in fusion.parameters], leaves, options,
                                     translate_options, times)
    compiled.computation = fusion
    if use_cache and options is None:
        with _CACHE_LOCK:
            _CACHE[key] = compiled
    return compiled


def compile_kernel_module(kernel: KernelModule, target: Target, param_shapes: list[Shape], output_shapes: list[Shape],
                          options: PipelineOptions | None = None, translate_options: TranslateOptions | None = None,
                          times: dict[str, float] | None = None) -> CompiledKernel:
    """Lower an emitted kernel (`kernel.module`, changed in place) with `target`'s pipeline, translate
    it to LLVM with the block loop, and JIT it. The shapes are those of its buffers, in order."""
    times = times if times is not None else {}
    name = kernel.entry
    run_pipeline(kernel.module, pipeline_for(target.kind, target.has_fma, target.check_bounds), options,
                 timings=times)
    t0 = time.perf_counter()
    kernel_ir = print_module(kernel.module) if options is not None else ""
    translator = LlvmTranslator(name, translate_options or TranslateOptions(), host_triple())
    llmod = translator.translate(kernel.module)
    threads = 1 if name in translator.block_functions else kernel.launch.threads_per_block
    _add_block_loop(llmod, llmod.get_global(name), kernel.num_params + kernel.num_outputs, threads,
                    f"{name}_blocks")
    times["to_llvm"] = (time.perf_counter() - t0) * 1e3
    if options is not None:
        options.stream(f"// -----// LLVM IR //----- //\n{llmod}") if options.print_ir_after_all else None
        dump_file(options, "llvm.ll", str(llmod))
    jit = jit_compile(llmod)
    if options is not None:
        dump_file(options, "llvm-opt.ll", jit.optimized_ir)
    times.update(jit.times_ms)
    fn = BlocksFunction(jit.address(f"{name}_blocks"))
    record = jit.engine.get_global_value_address(BOUNDS_GLOBAL) if target.check_bounds else 0
    return CompiledKernel(name, kernel.launch, list(param_shapes), list(output_shapes), jit, fn, times, kernel_ir,
                          None, kernel.emitter, kernel.output_aliases, kernel.serial, record)


def _add_block_loop(module: ir.Module, kernel: ir.Function, num_buffers: int, threads: int, name: str) -> None:
    """void name(ptr buffers, i64 first, i64 end): for block in [first, end): for thread in
    [0, threads): kernel(buffers[0..n), thread, block)."""
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, I64, I64]), name=name)
    table, first, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    buffers = [b.load(b.gep(table, [ir.Constant(I64, i)], inbounds=True, source_etype=ptr), typ=ptr)
               for i in range(num_buffers)]
    entry = b.block
    block_header = fn.append_basic_block("blocks")
    thread_header = fn.append_basic_block("threads")
    thread_body = fn.append_basic_block("thread")
    block_latch = fn.append_basic_block("next_block")
    done = fn.append_basic_block("done")
    b.branch(block_header)
    b.position_at_end(block_header)
    block = b.phi(I64, "block")
    block.add_incoming(first, entry)
    b.cbranch(b.icmp_signed("<", block, end), thread_header, done)
    b.position_at_end(thread_header)
    thread = b.phi(I64, "thread")
    thread.add_incoming(ir.Constant(I64, 0), block_header)
    b.cbranch(b.icmp_signed("<", thread, ir.Constant(I64, threads)), thread_body, block_latch)
    b.position_at_end(thread_body)
    b.call(kernel, [*buffers, thread, block])
    next_thread = b.add(thread, ir.Constant(I64, 1), flags=["nuw", "nsw"])
    thread.add_incoming(next_thread, thread_body)
    b.branch(thread_header)
    b.position_at_end(block_latch)
    next_block = b.add(block, ir.Constant(I64, 1))
    block.add_incoming(next_block, block_latch)
    b.branch(block_header)
    b.position_at_end(done)
    b.ret_void()


__all__ = ["CompiledKernel", "compile_fusion", "from_physical", "to_physical"]
