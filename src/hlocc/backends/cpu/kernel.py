"""Compile one fused computation into a callable CPU kernel: emit (the hero's emitter), run the
kernel pass pipeline, translate to LLVM, add the block-loop wrapper, optimise at O3, emit object
code and load it (jit.py).

The wrapper `<symbol>(void **buffers, i64 first, i64 end)` loads the buffer pointers (the
fusion's parameters, then its outputs) and runs, for each block in [first, end), every thread of
the block as an inner loop around the inlined kernel body (DESIGN "One kernel model"); it is the
module's only external symbol, `k<key hash>_blocks` for a cached kernel.

Runtime dims (dynamic shapes): a fused computation with symbolic shapes (`f32[?b,128]`) compiles
once into a kernel whose `symbols` are its dimension variables (sorted). `run_addresses(addresses,
dims)` takes their values in that order; the table `buffers` then has one more entry after the
outputs, a pointer to those values as i64 (the kernel's `lower-symbol-values` loads them), and the
block count, the empty-output check and the thread-pool decision are evaluated at those values.
The buffers are sized for the binding (physical order, C-contiguous). A fusion whose emitter does
not compile symbolic shapes raises UnsupportedError ("symbolic <emitter> not built: ...").

Kernels are cached by their key (kernel_cache.py: the fused computation's canonical fingerprint,
target, options, host CPU, versions): in-process (identical fusions compile once per process,
XLA's KernelReuseCache; their code lives in the process-wide engine) and on disk (runtime/cache.py:
object code and plan; a hit skips emission, the passes and LLVM).
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import scf

from hlocc.analysis.hero import computation_emitter_kind
from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.block_loop import add_block_loop, internalize
from hlocc.backends.cpu.kernel_cache import (
    KernelPlan,
    kernel_key,
    kernel_symbol,
    load_cached_kernel_plan,
    store_kernel,
)
from hlocc.backends.cpu.launcher import BlocksFunction, address_table, is_serial, is_serial_source, launch_table
from hlocc.codegen.context import KernelIRError, print_module
from hlocc.codegen.elemental.storage import array_leaves
from hlocc.codegen.emitters.base import KernelModule, fusion_symbols
from hlocc.codegen.emitters.registry import emit_fusion
from hlocc.codegen.llvm import LlvmTranslator, TranslateOptions
from hlocc.codegen.pipeline import (
    PipelineOptions,
    add_stage_times,
    dump_file,
    kernel_verification_requested,
    pipeline_for,
    run_pipeline,
)
from hlocc.codegen.target import Target, cpu_target
from hlocc.codegen.transforms.check_bounds import GLOBAL as BOUNDS_GLOBAL
from hlocc.codegen.transforms.check_bounds import RECORD, BoundsCheckError, record_slots
from hlocc.errors import ArgumentError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.specialize import bind_shapes, substitute_shape
from hlocc.hlo.symbolic import DimExpr, evaluate
from hlocc.hlo.types import Shape
from hlocc.runtime.cache import warn_once
from hlocc.runtime.gc_pause import gc_paused
from hlocc.runtime.jit import (
    LoadedObject,
    ObjectCode,
    ObjectEngine,
    compile_object,
    compile_object_later,
    host_triple,
    shared_engine,
)
from hlocc.runtime.native_steps import NativeCall
from hlocc.runtime.shape_function import expr_source
from hlocc.runtime.thunks import LaunchSource, from_physical, to_physical


@dataclass
class CompiledKernel:
    """A JIT-compiled kernel. `run(buffers)` takes the parameter arrays then the output arrays, all
    in physical (layout) order and C-contiguous; `__call__` takes logical arrays and returns new
    logical outputs."""

    name: str
    launch_dims: LaunchDims
    param_shapes: list[Shape]
    output_shapes: list[Shape]
    jit: LoadedObject | None  # its code; None for an empty output (nothing to run)
    fn: BlocksFunction | None
    times_ms: dict[str, float] = field(default_factory=dict)
    kernel_ir: str = ""
    computation: HloComputation | None = None  # the fused computation it computes
    emitter: str = "loop"
    output_aliases: tuple[tuple[int, int], ...] = ()  # (output, parameter): see KernelModule
    serial: bool = False  # blocks one after another (see KernelModule)
    symbol: str = ""  # its block loop's symbol in the engine
    bounds_record: int = 0  # address of the check-bounds record (0: kernel compiled without checks)
    symbols: tuple[str, ...] = ()  # dimension variables whose values `run_addresses` takes (module doc)
    _launches: dict[tuple[int, ...], tuple] = field(default_factory=dict, repr=False)  # see _launch_facts
    _facts: Callable | None = field(default=None, repr=False)  # see _launch_facts

    def __post_init__(self):
        if self.symbols:  # at compile time: the first launch at a new size should not pay it
            self._facts = _facts_function(self)

    @property
    def num_elements(self) -> int:
        """Elements the launch touches: the largest parameter or output (a reduction reads more than
        it writes). Decides whether the blocks are worth spreading over the thread pool."""
        return max(s.num_elements for s in [*self.output_shapes, *self.param_shapes])

    @property
    def has_work(self) -> bool:
        """False when every output is empty: no thread has anything to write (and none may read).
        For a kernel with runtime dims: whether it has code (`has_work_at` decides per binding)."""
        if self.symbols:
            return self.fn is not None
        return self.fn is not None and any(s.num_elements for s in self.output_shapes)

    def binding(self, dims: Sequence[int]) -> dict[str, int]:
        """The dimension variables' values, from `dims` in the order of `symbols`."""
        if len(dims) != len(self.symbols):
            raise ArgumentError(f"kernel '{self.name}' takes the values of {len(self.symbols)} dimension variable(s) "
                                f"({', '.join(self.symbols) or 'none'}), got {len(dims)}")
        return {s: int(v) for s, v in zip(self.symbols, dims)}

    def has_work_at(self, binding: Mapping[str, int]) -> bool:
        return self.fn is not None and any(_count(s, binding) for s in self.output_shapes)

    def launch_for(self, dims: Sequence[int] = ()) -> LaunchDims:
        """The launch at the given values of `symbols` (the compiled one for a static kernel)."""
        return self.launch_dims.at(self.binding(dims)) if self.symbols else self.launch_dims

    def _elements(self, binding: Mapping[str, int] | None = None) -> int:
        if self.serial:
            return 0
        if not self.symbols:
            return self.num_elements
        return max(_count(s, binding) for s in [*self.output_shapes, *self.param_shapes])

    def run(self, buffers: list[np.ndarray], dims: Sequence[int] = ()) -> None:
        self.run_addresses([b.ctypes.data for b in buffers], dims)

    def run_addresses(self, addresses: list[int], dims: Sequence[int] = ()) -> None:
        """`run` over raw buffer addresses (the runtime's thunks; the caller keeps the memory alive);
        `dims`: the values of `symbols` (module doc)."""
        if not self.symbols:
            if self.has_work:
                self._launch(addresses, self.launch_dims.blocks, self._elements())
            return
        key = tuple(dims)
        facts = self._launches.get(key)
        if facts is None:
            facts = self._launch_facts(key)
        table, blocks, elements = facts
        if table is not None:
            self._launch([*addresses, ctypes.addressof(table)], blocks, elements)

    def _launch_facts(self, dims: tuple[int, ...]) -> tuple[ctypes.Array | None, int, int]:
        """(the i64 table of `dims`, or None when there is no work; blocks; elements), remembered:
        evaluating the size expressions in Python costs tens of µs, as much as a small launch. The
        table is read-only to the kernel, so concurrent launches at the same sizes share it."""
        if len(dims) != len(self.symbols):
            self.binding(dims)  # its error
        if self._facts is None:
            self._facts = _facts_function(self)
        work, blocks, elements = self._facts(dims)
        table = (ctypes.c_int64 * len(dims))(*dims) if work else None
        facts = (table, blocks, elements)
        if len(self._launches) >= 1024:  # a bound on what a sweep over many sizes keeps
            self._launches.clear()
        self._launches[dims] = facts
        return facts

    def launcher(self, count: int, dims: Sequence[int] = ()) -> KernelLaunch:
        """A launch over `count` buffers prepared once (runtime.thunks.KernelLauncher): the table
        of addresses, with the slot of the dimension values after the buffers filled in, the block
        count and the serial-or-pool decision made; `dims`: the values of `symbols`."""
        if self.symbols:
            dims_table, blocks, elements = self._launches.get(tuple(dims)) or self._launch_facts(tuple(dims))
        else:
            dims_table, blocks, elements = None, self.launch_dims.blocks, self._elements()
        table = (ctypes.c_void_p * (count + 1))()
        if dims_table is not None:
            table[count] = ctypes.addressof(dims_table)
        if not (self.has_work if not self.symbols else dims_table is not None):
            run = _nothing
        elif self.bounds_record:
            run = functools.partial(self._launch_table, table, blocks, elements)
        elif is_serial(blocks, elements):
            run = functools.partial(self.fn, ctypes.addressof(table), 0, blocks)
        else:
            run = functools.partial(launch_table, self.fn, table, blocks, elements)
        return KernelLaunch(table, run, dims_table)

    def native_calls(self, count: int) -> tuple[NativeCall, ...] | None:
        """The launch over `count` buffers as calls a native sequence makes (runtime/native_sequence.py):
        `fn(table, 0, blocks)`, none without work; None where it is not one call in the calling thread
        (runtime dims, a bounds record to check after, blocks the pool would share)."""
        if self.symbols or self.bounds_record:
            return None
        if not self.has_work:
            return ()
        blocks = self.launch_dims.blocks
        if not is_serial(blocks, self._elements()):
            return None
        function = ctypes.cast(self.fn, ctypes.c_void_p).value
        return (NativeCall(function, (("table", 0), ("value", 0), ("value", blocks)), keep=self),)

    def launch_at(self, count: int, dims: Sequence[int]) -> Callable[[ctypes.Array, int], None]:
        """`run(table, address)`: a launch at `dims` (the values of `symbols`) over any table of
        `count` buffers at `address`, whose slot of the dimension values it fills first. A dynamic
        program's arenas keep one table per kernel for every size (runtime/call_plan.py), so a new
        size makes only this closure, which keeps the values alive (`run.keep`)."""
        dims_table, blocks, elements = self._launches.get(tuple(dims)) or self._launch_facts(tuple(dims))
        if dims_table is None:
            return _no_launch
        values, fn = ctypes.addressof(dims_table), self.fn
        if self.bounds_record:
            def run(table: ctypes.Array, address: int) -> None:
                table[count] = values
                self._launch_table(table, blocks, elements)
        elif is_serial(blocks, elements):
            def run(table: ctypes.Array, address: int) -> None:
                table[count] = values
                fn(address, 0, blocks)
        else:
            def run(table: ctypes.Array, address: int) -> None:
                table[count] = values
                launch_table(fn, table, blocks, elements)
        run.keep = dims_table
        return run

    def launch_source(self, names: Mapping[str, str]) -> LaunchSource | None:
        """The launch as lines of a generated call (runtime.thunks.LaunchSource), `names[v]` the
        source reading dimension variable v; None for a kernel without runtime dims or compiled
        with bounds checks (whose launches check their record: `launch_at`)."""
        if not self.symbols or self.bounds_record:
            return None
        work, blocks, elements = _facts_source(self, names)
        mode = f"(0 if not ({work}) else 1 if {is_serial_source(blocks, elements)} else 2)"
        return LaunchSource(tuple(self.symbols), mode, blocks, elements, self.fn, launch_table, {})

    def _launch(self, addresses: list[int], blocks: int, elements: int) -> None:
        self._launch_table(address_table(addresses), blocks, elements)

    def _launch_table(self, table: ctypes.Array, blocks: int, elements: int) -> None:
        if not self.bounds_record:
            launch_table(self.fn, table, blocks, elements)
            return
        buffers = [*self.param_shapes, *self.output_shapes]
        with _BOUNDS_LOCK:  # one record per kernel: checked launches of a kernel do not overlap
            record = (ctypes.c_int64 * record_slots(len(buffers))).from_address(self.bounds_record)
            ctypes.memset(record, 0, ctypes.sizeof(record))
            launch_table(self.fn, table, blocks, elements)
            violations = [(k - 2, record[RECORD * k + 1], record[RECORD * k + 2])
                          for k in range(1, len(buffers) + 2) if record[RECORD * k]]
        if violations:
            k, index, size = violations[0]
            what = ("a constant" if k < 0 else f"parameter {k} ({buffers[k]})" if k < len(self.param_shapes)
                    else f"output {k - len(self.param_shapes)} ({buffers[k]})")
            raise BoundsCheckError(f"kernel '{self.name}' accessed {what} at element {index}, outside [0, {size})")

    def __call__(self, *args: np.ndarray, dims: Sequence[int] | None = None) -> list[np.ndarray]:
        """Logical arrays in, new logical outputs back. A kernel with runtime dims binds its
        variables from the arguments' sizes (where a dimension is a lone variable), or takes `dims`."""
        args = [np.asarray(a) for a in args]
        binding = {}
        if self.symbols and dims is not None:
            binding = self.binding(dims)
        elif self.symbols:
            binding = bind_shapes(self.param_shapes, [a.shape for a in args])
            missing = [s for s in self.symbols if s not in binding]
            if missing:
                raise ArgumentError(f"cannot find the value of {', '.join(missing)} from the argument sizes: "
                                    "pass dims=")
        params = [to_physical(a, substitute_shape(s, binding)) for a, s in zip(args, self.param_shapes)]
        outs = [np.empty(substitute_shape(s, binding).physical_dims, dtype=s.dtype) for s in self.output_shapes]
        for out, param in self.output_aliases:
            outs[out][...] = params[param].reshape(outs[out].shape)
        self.run(params + outs, [binding[s] for s in self.symbols])
        return [from_physical(o, substitute_shape(s, binding)) for o, s in zip(outs, self.output_shapes)]


@dataclass(frozen=True, eq=False)
class KernelLaunch:
    """A CompiledKernel's prepared launch (`CompiledKernel.launcher`): fill `table`, call `run`."""

    table: ctypes.Array
    run: Callable[[], None]
    keep: object = None  # what the table points at besides the buffers (the dimension values)


def _nothing() -> None:
    pass


def _no_launch(table: ctypes.Array, address: int) -> None:
    """`launch_at` where no output has an element."""


def _facts_source(kernel: CompiledKernel, names: Mapping[str, str]) -> tuple[str, str, str]:
    """Python source of (has work, blocks, elements) of a launch of a kernel with runtime dims,
    each dimension variable v read from `names[v]` (has_work_at, LaunchDims.at and _elements,
    which it computes: a few multiplications, not the symbolic evaluation of every shape)."""
    def count(shape: Shape) -> str:
        return "*".join(expr_source(d, names) for d in shape.dims) or "1"
    work = " or ".join(f"{count(s)} != 0" for s in kernel.output_shapes) or "False"
    blocks = kernel.launch_dims.blocks
    blocks = f"max(1, {expr_source(blocks, names)})" if isinstance(blocks, DimExpr) else str(blocks)
    counts = ", ".join(count(s) for s in [*kernel.output_shapes, *kernel.param_shapes])
    elements = "0" if kernel.serial else f"max({counts}, 0)"
    return f"{kernel.fn is not None} and ({work})", blocks, elements


def _facts_function(kernel: CompiledKernel) -> Callable[[Sequence[int]], tuple[bool, int, int]]:
    """`dims` → (has work, blocks, elements) of a kernel with runtime dims, generated once."""
    work, blocks, elements = _facts_source(kernel, {s: f"d[{i}]" for i, s in enumerate(kernel.symbols)})
    source = f"def facts(d):\n    return ({work}, {blocks}, {elements})\n"
    scope: dict = {}
    exec(compile(source, f"<launch facts of {kernel.name}>", "exec"), scope)  # noqa: S102 (our own text)
    return scope["facts"]


def _count(shape: Shape, binding: Mapping[str, int]) -> int:
    """The element count of `shape` at `binding`: the product of the evaluated dims (a launch at a
    new size pays this per shape; the symbolic product, `num_elements`, costs far more)."""
    n = 1
    for d in shape.dims:
        n *= evaluate(d, binding)
    return n


_BOUNDS_LOCK = threading.Lock()
_CACHE: dict[str, CompiledKernel] = {}
_CACHE_LOCK = threading.Lock()


def clear_kernel_cache() -> None:
    """Forget the kernels compiled in this process (their code stays loaded: callers may hold them)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def kernels_in_cache() -> list[str]:
    """The keys (kernel_cache.kernel_key) of the kernels the in-process cache holds."""
    with _CACHE_LOCK:
        return list(_CACHE)


def compile_fusion(fusion: HloComputation, target: Target | None = None, name: str = "main",
                   options: PipelineOptions | None = None, use_cache: bool = True,
                   translate_options: TranslateOptions | None = None,
                   stage_times: dict[str, float] | None = None, defer: bool = False) -> CompiledKernel:
    """Compile a fused computation into a kernel: from the in-process cache, else from the
    persistent cache (runtime/cache.py), else emitted and compiled (and stored in both). Dumps and
    IR printing (`options`) and `use_cache=False` compile afresh into a kernel of its own.
    `stage_times` gets the milliseconds of each stage this call ran, as `kernel:<stage>`. `defer`:
    a kernel compiled afresh may come back as a PendingKernel whose LLVM stage runs on the LLVM
    worker thread (its `result()` is the CompiledKernel)."""
    times: dict[str, float] = {}
    try:
        with gc_paused():
            kernel = _compile_fusion(fusion, target, name, options, use_cache, translate_options, times, defer)
            if isinstance(kernel, PendingKernel):
                kernel.stage_times = stage_times
            return kernel
    finally:
        if stage_times is not None:
            add_stage_times(stage_times, times)


class PendingKernel:
    """A kernel whose LLVM stage (parse, O3, object code) runs on the LLVM worker thread
    (runtime/jit.py `compile_object_later`) while the caller compiles the program's next kernels:
    what the thunk emitter reads of a kernel (its name, emitter, output aliases) comes from its
    plan now, the CompiledKernel from `result()`, which waits for the object code, loads it and
    puts it in the caches (runtime/executable.py `build_executable` resolves every pending kernel
    of a program before the program runs)."""

    def __init__(self, plan: KernelPlan, future: Any, finish: Callable[..., CompiledKernel], label: str = ""):
        self.plan, self._future, self._finish, self._label = plan, future, finish, label or plan.name
        self.name, self.emitter, self.output_aliases = plan.name, plan.emitter, plan.output_aliases
        self.stage_times: dict[str, float] | None = None
        self._lock = threading.Lock()
        self._compiled: CompiledKernel | None = None

    def result(self) -> CompiledKernel:
        with self._lock:
            if self._compiled is None:
                times: dict[str, float] = {}
                try:
                    code = self._future.result()
                except RuntimeError as e:  # LLVM's parser or verifier
                    raise unverified_kernel_error(self._label, "LLVM", e) from e
                self._compiled = self._finish(code, times)
                if self.stage_times is not None:
                    add_stage_times(self.stage_times, times)
            return self._compiled


def resolved(kernel: Any) -> Any:
    """`kernel`, or the CompiledKernel of a PendingKernel (waiting for its object code)."""
    return kernel.result() if isinstance(kernel, PendingKernel) else kernel


def _compile_fusion(fusion: HloComputation, target: Target | None, name: str, options: PipelineOptions | None,
                    use_cache: bool, translate_options: TranslateOptions | None,
                    times: dict[str, float], defer: bool = False) -> CompiledKernel | PendingKernel:
    target = target or cpu_target()
    translate_options = translate_options or TranslateOptions()
    cached = use_cache and options is None
    params = [p.shape for p in fusion.parameters]
    leaves = array_leaves(fusion.root.shape)
    key = kernel_key(fusion, target, translate_options, times)
    if cached:
        with _CACHE_LOCK:
            hit = _CACHE.get(key)
        if hit is not None:
            return hit if defer else resolved(hit)
        compiled = load_cached_kernel(key, params, leaves, times, target.check_bounds)
        if compiled is not None:
            compiled.computation = fusion
            return _remember(key, compiled)
    kernel = emit_fusion(fusion, target, name, times)
    if kernel is None:
        return CompiledKernel(name, LaunchDims(1, 0), params, leaves, None, None,
                              computation=fusion, emitter=computation_emitter_kind(fusion).value,
                              symbols=fusion_symbols(fusion))
    compiled = compile_kernel_module(kernel, target, params, leaves, options, translate_options, times,
                                     symbol=kernel_symbol(key), shared=cached, cache_key=key if cached else None,
                                     defer=defer, computation=fusion)
    return _remember(key, compiled) if cached else compiled


def load_cached_kernel(key: str, param_shapes: list[Shape], output_shapes: list[Shape],
                       times: dict[str, float], check_bounds: bool = False) -> CompiledKernel | None:
    """The kernel the persistent cache holds for `key`, loaded into the process-wide engine, or None."""
    found = load_cached_kernel_plan(key, times)
    if found is None:
        return None
    plan, data = found
    try:
        return load_kernel(plan, data, param_shapes, output_shapes, True, times, check_bounds=check_bounds)
    except (KeyError, RuntimeError) as e:  # object code without the plan's symbol, or that LLVM rejects
        warn_once(f"hlocc cache: the cached object code of kernel {plan.symbol} cannot be loaded ({e}); "
                  "compiling again")
        return None


def _remember(key: str, compiled: CompiledKernel | PendingKernel) -> CompiledKernel | PendingKernel:
    with _CACHE_LOCK:
        return _CACHE.setdefault(key, compiled)


def _settle(key: str, pending: PendingKernel | None, compiled: CompiledKernel) -> None:
    """The in-process cache's entry for `key` becomes the compiled kernel once `pending` resolves."""
    with _CACHE_LOCK:
        if pending is not None and _CACHE.get(key) is pending:
            _CACHE[key] = compiled


def compile_kernel_module(kernel: KernelModule, target: Target, param_shapes: list[Shape], output_shapes: list[Shape],
                          options: PipelineOptions | None = None, translate_options: TranslateOptions | None = None,
                          times: dict[str, float] | None = None, *, symbol: str | None = None, shared: bool = False,
                          cache_key: str | None = None, defer: bool = False,
                          computation: HloComputation | None = None) -> CompiledKernel | PendingKernel:
    """Lower an emitted kernel (`kernel.module`, changed in place) with `target`'s pipeline, translate
    it to LLVM with the block loop `symbol` (default `<entry>_blocks`), compile it to object code and
    load it: into the process-wide engine when `shared` (then `symbol` must be unique in the
    process), else into an engine of its own. With `cache_key` the object code and the kernel's
    plan are stored in the persistent cache. The shapes are those of its buffers, in order. `defer`
    (without dumps): a PendingKernel, its LLVM stage on the LLVM worker thread."""
    times = times if times is not None else {}
    name = kernel.entry
    symbol = symbol or f"{name}_blocks"
    # the kernel IR is verified in tests and debugging only: LLVM's checks stand in (codegen/pipeline.py)
    verified = options is not None or target.check_bounds or kernel_verification_requested()
    run_pipeline(kernel.module, pipeline_for(target.kind, target.has_fma, target.check_bounds), options,
                 timings=times, verify_each=False, verify_result=verified)
    t0 = time.perf_counter()
    loops = sum(isinstance(op, (scf.ForOp, scf.WhileOp)) for op in kernel.module.walk())
    kernel_ir = print_module(kernel.module) if options is not None else ""
    translator = LlvmTranslator(name, translate_options or TranslateOptions(), host_triple())
    label = computation.name if computation is not None else name
    try:
        llmod = translator.translate(kernel.module)
    except Exception as e:
        if verified:
            raise
        raise unverified_kernel_error(label, "its translation to LLVM", e) from e
    if kernel.llvm_entry is not None:  # an entry written in LLVM IR (the sort emitter)
        kernel.llvm_entry(llmod, translator.options.noalias, target.check_bounds)
    threads = 1 if name in translator.block_functions else kernel.launch.threads_per_block
    # a kernel with runtime dims takes its table of dimension variables after the buffers
    add_block_loop(llmod, llmod.get_global(name), kernel.num_params + kernel.num_outputs + bool(kernel.symbols),
                    threads, symbol)
    if target.check_bounds:  # the record gets a name of its own: many kernels share one engine
        llmod.get_global(BOUNDS_GLOBAL).name = bounds_symbol(symbol)
    internalize(llmod, {symbol, bounds_symbol(symbol)})
    times["to_llvm"] = (time.perf_counter() - t0) * 1e3
    if options is not None:
        options.stream(f"// -----// LLVM IR //----- //\n{llmod}") if options.print_ir_after_all else None
        dump_file(options, "llvm.ll", str(llmod))
    plan = KernelPlan(name, symbol, kernel.launch, kernel.emitter, tuple(kernel.output_aliases), kernel.serial,
                      tuple(kernel.symbols))
    pending = None

    def finish(code: ObjectCode, times: dict[str, float]) -> CompiledKernel:
        if options is not None:
            dump_file(options, "llvm-opt.ll", code.optimized_ir)
        times.update(code.times_ms)
        if cache_key is not None:
            store_kernel(cache_key, plan, code.data, times)
        compiled = load_kernel(plan, code.data, param_shapes, output_shapes, shared, times, kernel_ir,
                               check_bounds=target.check_bounds)
        compiled.computation = computation
        if cache_key is not None:
            _settle(cache_key, pending, compiled)
        return compiled

    if defer and options is None:
        pending = PendingKernel(plan, compile_object_later(llmod, loops), finish, label)
        return pending
    try:
        code = compile_object(llmod, keep_ir=options is not None, loops=loops)
    except RuntimeError as e:
        raise unverified_kernel_error(label, "LLVM", e) from e
    return finish(code, times)


def unverified_kernel_error(kernel: str, stage: str, error: Exception) -> KernelIRError:
    """The error of a kernel whose IR `stage` (its translation to LLVM, or LLVM's parser and
    verifier) rejected: the kernel passes' result is not verified outside tests (codegen/pipeline.py),
    so this is where a pass that broke the IR shows."""
    return KernelIRError(f"kernel {kernel}: {stage} failed ({type(error).__name__}: {error}); if a kernel pass "
                         "produced invalid IR, HLOCC_VERIFY_KERNELS=1 verifies it (HLOCC_VERIFY_EACH_PASS=1 after "
                         "each pass)")


def bounds_symbol(symbol: str) -> str:
    """The check-bounds record of the kernel whose block loop is `symbol`."""
    return f"{symbol}_bounds"


def load_kernel(plan: KernelPlan, data: bytes, param_shapes: list[Shape], output_shapes: list[Shape], shared: bool,
                times: dict[str, float], kernel_ir: str = "", *, check_bounds: bool = False) -> CompiledKernel:
    """A CompiledKernel running the object code `data` of `plan`'s kernel (with its check-bounds
    record when it was compiled with `check_bounds`)."""
    t0 = time.perf_counter()
    engine = shared_engine() if shared else ObjectEngine()
    record = [bounds_symbol(plan.symbol)] if check_bounds else []
    loaded = engine.load(data, [plan.symbol], data_symbols=record)
    times["load"] = times.get("load", 0.0) + (time.perf_counter() - t0) * 1e3
    fn = BlocksFunction(loaded.address(plan.symbol))
    return CompiledKernel(plan.name, plan.launch, list(param_shapes), list(output_shapes), loaded, fn, times, kernel_ir,
                          None, plan.emitter, plan.output_aliases, plan.serial, plan.symbol,
                          bounds_record=loaded.address(record[0]) if record else 0, symbols=plan.symbols)


__all__ = ["CompiledKernel", "clear_kernel_cache", "compile_fusion", "kernels_in_cache", "load_kernel",
           "from_physical", "to_physical"]
