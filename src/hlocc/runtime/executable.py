"""Whole-program compilation and execution (seed 002's GpuCompiler path, on any backend that can
compile a fusion into a kernel):

    the backend's HLO pipeline (passes/pipeline.py BACKEND_PIPELINES: flatten the call graph;
      with HLO passes on, simplify and fuse; inline library fusions)
      → schedule (schedule.py) → buffer assignment (buffer_assignment.py)
      → thunk emission (this module) → ThunkExecutable: allocate, run the thunks, return the outputs

Thunk emission walks each sequential computation in schedule order (XLA's thunk emitter):
parameters, constants, tuples, get-tuple-elements and bitcasts emit nothing (their buffers are
aliased); a fusion or an op that needs a kernel becomes a KernelThunk (a lone op as a one-op
fusion); sort, topk and custom-call "TopK" become sort kernels (codegen/emitters/sort.py) where
the backend compiles them (the CPU) and host library calls otherwise (`--stats` says why); dot
and convolution become library thunks, JAX's LAPACK custom calls (evaluator/lapack.py) host
library calls (LibraryThunk, runtime/library.py); a layout-preserving copy a CopyThunk; while,
conditional and call nest the thunk sequences of their computations; every boundary copy the
buffer assignment planned becomes a CopyThunk at its place. What has no kernel yet runs as a
HostThunk through the evaluator and is counted in `stats`:

- a multi-output fusion whose outputs have different element counts, which the loop emitter
  rejects, is first split into one kernel per group of equally sized outputs (each recomputes the
  shared producers; XLA's hero emitters do this in one kernel);
- a fusion no kernel can compute (e.g. a scatter before the scatter emitter exists) runs whole on
  the host.

Arguments and results are logical numpy arrays; inside, every array is in its layout's physical
order. A parameter allocation the program writes (input_output_alias) is copied first: the caller's
array is never modified.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from hlocc.analysis.hero import EmitterKind, emitter_kind
from hlocc.errors import HloError, ResourceError, UnsupportedError
from hlocc.evaluator import lapack
from hlocc.evaluator.convolution import conv_dimension_numbers
from hlocc.evaluator.core import TOKEN
from hlocc.evaluator.dot import dot_dimension_numbers
from hlocc.evaluator.sorting import topk_custom_call_k
from hlocc.hlo.call_graph import sequential_callees
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule, operands_post_order
from hlocc.hlo.types import Shape
from hlocc.passes.pipeline import BACKEND_PIPELINES, CompilePipeline, PassManager
from hlocc.runtime import library
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAssignment, BufferCopy, assign_buffers
from hlocc.runtime.call_plan import CallPlan
from hlocc.runtime.dataflow import is_pure_forwarding, leaf_indices, subshape
from hlocc.runtime.gc_pause import gc_paused
from hlocc.runtime.native_loop import NativeControl
from hlocc.runtime.schedule import schedule_module
from hlocc.runtime.thunks import (
    BufferRef,
    ConditionalThunk,
    ConvolutionThunk,
    CopyThunk,
    GemmThunk,
    HostThunk,
    Kernel,
    KernelThunk,
    LibraryThunk,
    ScalarThunk,
    SequentialThunk,
    Thunk,
    ValueRefs,
    WhileThunk,
    aligned_bytes,
    physical_bytes,
)

KernelCompiler = Callable[[HloComputation, str, bool], Kernel]
"""(fused computation, kernel name, noalias) → a compiled kernel; raises UnsupportedError when no
emitter can compute the computation yet. `noalias` is False when an output shares an input's bytes."""

_NO_THUNK = frozenset({EmitterKind.NO_KERNEL})


@dataclass
class RuntimeStats:
    """What a compiled program is made of (`hlocc run --stats`)."""

    fusions_by_emitter: Counter = field(default_factory=Counter)  # the hero analysis's emitter kind
    kernels: int = 0
    kernels_by_emitter: Counter = field(default_factory=Counter)  # the emitter that generated them
    library_calls: Counter = field(default_factory=Counter)
    library_reasons: list[tuple[str, str, str]] = field(default_factory=list)  # (name, call, why no kernel)
    host_ops: list[tuple[str, str, str]] = field(default_factory=list)  # (name, opcode, why)
    copies: int = 0
    peak_bytes: int = 0
    compile_ms: dict[str, float] = field(default_factory=dict)
    device: str = ""  # where the program runs, for a device backend

    def to_string(self) -> str:
        def counts(c: Counter) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if v) or "none"
        lines = [f"device: {self.device}"] if self.device else []
        lines += [f"fusions by emitter kind: {counts(self.fusions_by_emitter)}",
                 f"kernels: {self.kernels} ({counts(self.kernels_by_emitter)})",
                 f"library calls: {counts(self.library_calls)}",
                 *(f"  {name} ({call}): {why}" for name, call, why in self.library_reasons),
                 f"copies: {self.copies}",
                 f"host fallbacks: {len(self.host_ops)}"]
        lines += [f"  {name} ({opcode}): {why}" for name, opcode, why in self.host_ops]
        lines.append(f"peak memory: {self.peak_bytes} bytes")
        for prefix, title in (("hlo:", "HLO passes"), ("kernel:", "kernel stages, all kernels")):
            parts = {k.removeprefix(prefix): v for k, v in self.compile_ms.items() if k.startswith(prefix)}
            if parts:
                lines.append(f"{title} (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in parts.items()))
        lines.append("compile time (ms): " + ", ".join(f"{k} {v:.1f}" for k, v in self.compile_ms.items()
                                                       if ":" not in k))
        return "\n".join(lines)


def _lapack(values: list, evaluator, instr: HloInstruction) -> list[np.ndarray]:
    """A LAPACK custom call (evaluator/lapack.py) as a library call: LibraryThunk's `compute`."""
    return lapack.evaluate(instr, values)


def value_refs(assignment: BufferAssignment, instr: HloInstruction) -> ValueRefs:
    leaves = tuple(BufferRef(assignment.slice_for(instr, index), subshape(instr.shape, index))
                   for index in leaf_indices(instr.shape))
    return ValueRefs(instr.shape, leaves)


def one_op_fusion(instr: HloInstruction) -> HloComputation:
    """A fused computation holding a copy of `instr` with one parameter per operand."""
    comp = HloComputation(f"{instr.name}.fused")
    params = [comp.add_instruction(HloInstruction(f"param_{k}", "parameter", op.shape, parameter_number=k))
              for k, op in enumerate(instr.operands)]
    comp.root = comp.add_instruction(instr.clone(params))
    return comp


def split_by_output_size(comp: HloComputation) -> list[tuple[list[int], HloComputation]]:
    """A multi-output fused computation as one computation per group of outputs with equal element
    counts: [(output positions in the root tuple, computation)]. Every part keeps all parameters
    (same numbering) and clones only what its outputs need."""
    root = comp.root
    groups: dict[int, list[int]] = {}
    for k, out in enumerate(root.operands):
        groups.setdefault(out.shape.num_elements, []).append(k)
    parts = []
    for n, positions in enumerate(groups.values()):
        part = HloComputation(f"{comp.name}.part{n}")
        clones: dict[int, HloInstruction] = {}
        for p in comp.parameters:
            clones[id(p)] = part.add_instruction(p.clone([]))
        outputs = [root.operands[k] for k in positions]
        order = operands_post_order(outputs)
        for instr in order:
            if id(instr) not in clones:
                clones[id(instr)] = part.add_instruction(instr.clone([clones[id(o)] for o in instr.operands]))
        if len(outputs) == 1:
            part.root = clones[id(outputs[0])]
        else:
            part.root = part.add_instruction(root.clone([clones[id(o)] for o in outputs],
                                                        shape=Shape.tuple([o.shape for o in outputs])))
        parts.append((positions, part))
    return parts



class ThunkEmitter:
    """Builds the thunk sequence of every sequential computation (module doc)."""

    def __init__(self, assignment: BufferAssignment, compile_kernel: KernelCompiler, stats: RuntimeStats):
        self.assignment = assignment
        self.compile_kernel = compile_kernel
        self.stats = stats
        self.written: set[int] = set()  # allocations some thunk writes

    def emit_entry(self) -> SequentialThunk:
        entry = self.assignment.module.entry
        program = self.sequence(entry)
        program.thunks += self._copies(self.assignment.exit_copies, "output")
        return program

    def sequence(self, comp: HloComputation) -> SequentialThunk:
        thunks: list[Thunk] = []
        for instr in self.assignment.schedule.sequence(comp):
            thunks += self._copies(self.assignment.copies_before(instr), f"before {instr.name}")
            thunks += self._emit(instr)
        return SequentialThunk(thunks)

    def _copies(self, copies: list[BufferCopy], why: str) -> list[Thunk]:
        self.stats.copies += len(copies)
        self.written.update(c.destination.allocation_index for c in copies)
        return [CopyThunk(c.source, c.destination, why) for c in copies]

    def _refs(self, instr: HloInstruction) -> ValueRefs:
        return value_refs(self.assignment, instr)

    def _outputs(self, instr: HloInstruction) -> ValueRefs:
        refs = self._refs(instr)
        self.written.update(r.slice.allocation_index for r in refs.leaves)
        return refs

    def _emit(self, instr: HloInstruction) -> list[Thunk]:
        op = instr.opcode
        kind = emitter_kind(instr)
        if kind in _NO_THUNK or is_pure_forwarding(instr):  # aliased buffers: nothing to run
            return []
        if op == "while":
            return [self._while(instr)]
        if op == "conditional":
            return [self._conditional(instr)]
        if op == "call":
            body = self.sequence(instr.attrs["to_apply"])
            return [*body.thunks, *self._copies(self.assignment.copies_after(instr, 0), f"after {instr.name}")]
        if kind is EmitterKind.GEMM and op == "dot":
            return [self._gemm(instr)]
        if kind is EmitterKind.CONVOLUTION:
            return [self._convolution(instr)]
        if kind is EmitterKind.COPY and op == "copy":
            src, dst = self._refs(instr.operands[0]).leaves, self._outputs(instr).leaves
            self.stats.copies += 1
            return [CopyThunk(s.slice, d.slice, f"copy {instr.name}") for s, d in zip(src, dst) if s.slice != d.slice]
        if op == "fusion":
            self.stats.fusions_by_emitter[kind.value] += 1
            return self._kernel(instr, instr.fused_computation)
        if op == "sort" or op == "topk" or (op == "custom-call" and instr.attrs.get("custom_call_target") == "TopK"):
            return self._sort(instr)
        if op == "custom-call" and lapack.is_lapack_call(instr):  # jnp.linalg on XLA:CPU: LAPACK
            self.stats.library_calls[f"lapack {lapack.routine_name(instr)}"] += 1
            operands = [ref for o in instr.operands for ref in self._refs(o).leaves]
            return [LibraryThunk(instr.name, f"lapack {lapack.routine_name(instr)}",
                                 partial(_lapack, instr=instr), operands, list(self._outputs(instr).leaves))]
        if op == "get-dimension-size":  # a size: known here, or once a dynamic program binds its symbols
            [output] = self._outputs(instr).leaves
            return [ScalarThunk(instr.name, instr.operands[0].shape.dims[instr.attrs["dimensions"][0]], output)]
        if kind in (EmitterKind.LIBRARY, EmitterKind.HOST, EmitterKind.CUSTOM_CALL, EmitterKind.GEMM):
            return [self._host(instr, f"no {kind.value} implementation on this backend yet")]
        return self._kernel(instr, one_op_fusion(instr))

    # -- kernels -----------------------------------------------------------------------------
    def _kernel(self, instr: HloInstruction, computation: HloComputation) -> list[Thunk]:
        operands = [self._refs(o) for o in instr.operands]
        outputs = self._outputs(instr)
        if any(o.shape.is_tuple for o in operands):
            return [self._host(instr, "a kernel cannot take a tuple-shaped operand", operands, outputs)]
        inputs = [o.leaves[0] for o in operands]
        try:
            return self._kernel_thunk(instr.name, computation, inputs, list(outputs.leaves))
        except UnsupportedError as e:
            reason = str(e)
        root = computation.root
        if root.opcode == "tuple" and len({o.shape.num_elements for o in root.operands}) > 1:
            try:
                return [thunk for n, (positions, part) in enumerate(split_by_output_size(computation))
                        for thunk in self._kernel_thunk(f"{instr.name}.part{n}", part, inputs,
                                                        [outputs.leaves[k] for k in positions])]
            except UnsupportedError as e:
                reason = str(e)
        return [self._host(instr, reason, operands, outputs)]

    def _kernel_thunk(self, name: str, computation: HloComputation, inputs: list[BufferRef],
                      outputs: list[BufferRef]) -> list[Thunk]:
        noalias = not any(o.slice.overlaps(i.slice) for o in outputs for i in inputs)
        kernel = self.compile_kernel(computation, name, noalias)
        self.stats.kernels += 1
        self.stats.kernels_by_emitter[kernel.emitter] += 1
        # An output the kernel updates only in part starts as its operand: shared when buffer
        # assignment gave both one slice, copied in first otherwise.
        copies = [CopyThunk(inputs[p].slice, outputs[o].slice, f"{name}: output {o} starts as operand {p}")
                  for o, p in kernel.output_aliases if inputs[p].slice != outputs[o].slice]
        self.stats.copies += len(copies)
        return [*copies, KernelThunk(name, kernel.emitter, kernel, inputs + outputs)]

    # -- library and host --------------------------------------------------------------------
    def _gemm(self, instr: HloInstruction) -> Thunk:
        lhs, rhs = (self._refs(o).leaves[0] for o in instr.operands)
        self.stats.library_calls["gemm"] += 1
        return GemmThunk(instr.name, lhs, rhs, self._outputs(instr).leaves[0], dot_dimension_numbers(instr))

    def _convolution(self, instr: HloInstruction) -> Thunk:
        lhs, rhs = (self._refs(o).leaves[0] for o in instr.operands)
        self.stats.library_calls["convolution"] += 1
        return ConvolutionThunk(instr.name, lhs, rhs, self._outputs(instr).leaves[0],
                                tuple(instr.attrs.get("window", ())), conv_dimension_numbers(instr),
                                int(instr.attrs.get("feature_group_count", 1)),
                                int(instr.attrs.get("batch_group_count", 1)))

    def _sort(self, instr: HloInstruction) -> list[Thunk]:
        """sort, topk and custom-call "TopK": a sort kernel (codegen/emitters/sort.py) where the
        backend compiles one, else a host library call, whose reason `stats` keeps."""
        operands = [self._refs(o) for o in instr.operands]
        if any(o.shape.is_tuple for o in operands):
            why = "a tuple-shaped operand"
        else:
            try:
                return self._kernel_thunk(instr.name, one_op_fusion(instr), [o.leaves[0] for o in operands],
                                          list(self._outputs(instr).leaves))
            except UnsupportedError as e:
                why = str(e)
        thunk = self._library(instr)
        if thunk.kind == "library":
            self.stats.library_reasons.append((instr.name, thunk.call, why))
        return [thunk]

    def _library(self, instr: HloInstruction) -> Thunk:
        """sort, topk and custom-call "TopK" as host library calls (runtime/library.py)."""
        if instr.opcode == "sort":
            call, compute = "sort", partial(library.sort, dimension=instr.attrs["dimensions"][0],
                                            comparator=instr.to_apply)
        else:
            k = int(instr.attrs["k"]) if instr.opcode == "topk" else topk_custom_call_k(instr)
            if not instr.attrs.get("largest", True):
                return self._host(instr, "top-k of the smallest elements has no library call")
            call, compute = "top-k", partial(library.top_k, k=k)
        self.stats.library_calls[call] += 1
        operands = [ref for o in instr.operands for ref in self._refs(o).leaves]
        return LibraryThunk(instr.name, call, compute, operands, list(self._outputs(instr).leaves))

    def _host(self, instr: HloInstruction, why: str, operands: list[ValueRefs] | None = None,
              output: ValueRefs | None = None) -> Thunk:
        operands = operands if operands is not None else [self._refs(o) for o in instr.operands]
        output = output if output is not None else self._outputs(instr)
        self.stats.host_ops.append((instr.name, instr.opcode, why))
        return HostThunk(instr, operands, output, why)

    # -- control flow ------------------------------------------------------------------------
    def _while(self, instr: HloInstruction) -> Thunk:
        condition = instr.attrs["condition"]
        body = self.sequence(instr.attrs["body"])
        body.thunks += self._copies(self.assignment.copies_after(instr, 0), f"after {instr.name}'s body")
        predicate = self._refs(condition.root).leaves[0]
        return WhileThunk(instr.name, self.sequence(condition), predicate, body)

    def _conditional(self, instr: HloInstruction) -> Thunk:
        branches = []
        for k, branch in enumerate(sequential_callees(instr)):
            seq = self.sequence(branch)
            seq.thunks += self._copies(self.assignment.copies_after(instr, k), f"after branch {k} of {instr.name}")
            branches.append(seq)
        self._outputs(instr)
        return ConditionalThunk(instr.name, self._refs(instr.operands[0]).leaves[0], branches)


@dataclass
class ThunkExecutable:
    """A compiled program: call `run(args)` with one logical array (or tuple) per entry parameter."""

    module: HloModule
    assignment: BufferAssignment
    program: SequentialThunk
    constants: dict[int, np.ndarray]
    copied_parameters: frozenset[int]  # allocations the program writes: copied from the caller's
    stats: RuntimeStats
    seed: int = 0

    _call_plan: CallPlan | None = field(default=None, repr=False, compare=False)
    _fresh_bytes: int = field(default=0, repr=False, compare=False)  # fresh_bytes(), with the plan
    _address_plan: CallPlan | None = field(default=None, repr=False, compare=False)
    # runtime/native_call.py: None before the first call, True after it (the native call is built at
    # the second), then the native call or False
    _native: Any = field(default=None, repr=False, compare=False)

    def run(self, args: Sequence[Any]) -> Any:
        native = self._native
        if native is None or native is True:
            from hlocc.runtime import native_call

            native = self._native = (native_call.prepare(self) if native is None
                                     else native_call.native_call(self, CHECKED_ALLOCATION_BYTES) or False)
        if native and native is not True:
            result = native(args)
            if result is not None:
                return result
        plan = self._call_plan or self.call_plan()
        if self._fresh_bytes >= CHECKED_ALLOCATION_BYTES:
            check_memory(self.module.name, self._fresh_bytes)
        return plan.run(args)

    def steady_call(self) -> Callable[[Sequence[Any]], Any] | None | bool:
        """`Executable.__call__`'s fast path (runtime/native_call.py `steady_call`)."""
        from hlocc.runtime import native_call

        return native_call.steady_call(self, CHECKED_ALLOCATION_BYTES)

    def call_plan(self) -> CallPlan:
        """The per-call path (runtime/call_plan.py), planned at the first call."""
        if self._call_plan is None:
            self._fresh_bytes = self.fresh_bytes()
            self._call_plan = self._plan(takes_addresses=False)
        return self._call_plan

    def address_plan(self) -> CallPlan | None:
        """A plan whose call takes each parameter as the address of its bytes (call_plan.py,
        `takes_addresses`), or None where the program's call needs arrays."""
        if self._address_plan is None and self.call_plan().accepts_addresses:
            self._address_plan = self._plan(takes_addresses=True)
        return self._address_plan

    def _plan(self, takes_addresses: bool) -> CallPlan:
        outputs = [BufferRef(s, output_leaf_shape(self.assignment, i))
                   for i, s in zip(self.assignment.output_indices, self.assignment.output_slices)]
        return CallPlan(self.module, self.assignment.allocations, [a.size for a in self.assignment.allocations],
                        self.program, outputs, self.constants, self.copied_parameters,
                        partial(parameter_bytes, self.module), self.seed, takes_addresses=takes_addresses)

    def run_addresses(self, addresses: Sequence[int]) -> Any:
        """`run` with each parameter given as the address of its bytes (C-contiguous, of its
        shape's dtype and dims: the caller has checked them, and keeps them alive over the call),
        through `address_plan()` (which must exist)."""
        if self._fresh_bytes >= CHECKED_ALLOCATION_BYTES:
            check_memory(self.module.name, self._fresh_bytes)
        return self._address_plan.run(addresses)

    def fresh_bytes(self) -> int:
        """Bytes a run allocates: outputs, temporaries and the parameters it copies."""
        return sum(a.size for a in self.assignment.allocations
                   if a.kind is not AllocationKind.CONSTANT
                   and (a.kind is not AllocationKind.PARAMETER or a.index in self.copied_parameters))

    def to_string(self) -> str:
        return "\n".join(self.program.describe())


def parameter_bytes(module: HloModule, args: Sequence[Any], allocation, copy: bool) -> np.ndarray:
    """The bytes of the argument leaf a parameter allocation holds, in its layout's order: a view
    of the caller's array, or a fresh copy when the program writes it (`copy`). Only the layout of
    the parameter's shape is read, so a symbolic shape serves every size."""
    value = args[allocation.parameter_number]
    shape = module.entry.parameter(allocation.parameter_number).shape
    for i in allocation.parameter_index:
        value, shape = value[i], shape.tuple_shapes[i]
    if value is TOKEN or not shape.is_array:
        return np.empty(0, np.uint8)
    data = physical_bytes(np.asarray(value), shape)
    if copy:
        fresh = aligned_bytes(data.size)
        fresh[:] = data
        return fresh
    return data


def output_leaf_shape(assignment: BufferAssignment, index) -> Shape:
    """The shape, with the layout its bytes are in, of the entry result's leaf at `index`: that of
    the value the leaf forwards (a tuple element may declare another layout than its operand's, and
    without a layout assignment pass nothing copies between them; the bytes keep the operand's)."""
    root = assignment.module.entry.root
    declared = subshape(root.shape, index)
    value = assignment.dataflow.value_at(root, index)
    if not declared.is_array or not value.shape.is_array or value.shape.dims != declared.dims:
        return declared
    return value.shape


CHECKED_ALLOCATION_BYTES = 1 << 28
"""Runs allocating less than this skip the memory check (reading /proc/meminfo costs more than them)."""


def available_memory() -> int | None:
    """Bytes of memory the system can give without swapping (Linux MemAvailable), or None."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_memory(name: str, needed: int, available: int | None = None) -> None:
    """Raise a ResourceError, before anything is allocated, when a run of `name` needs more bytes
    than the memory available (else numpy's lazily committed pages would fail later, in a kernel)."""
    if needed < CHECKED_ALLOCATION_BYTES:
        return
    available = available if available is not None else available_memory()
    if available is not None and needed > available:
        raise ResourceError(f"running '{name}' needs {needed / 2**30:.2f} GiB for its outputs and temporary buffers, "
                            f"more than the {available / 2**30:.2f} GiB of memory available")


def _constant_bytes(assignment: BufferAssignment) -> dict[int, np.ndarray]:
    constants = {}
    for allocation in assignment.allocations:
        if allocation.kind is not AllocationKind.CONSTANT:
            continue
        value = next(v for buffer, _ in allocation.buffers for v in buffer.values if v.is_constant)
        literal = value.instruction.literal
        for i in value.index:
            literal = literal[i]
        data = aligned_bytes(allocation.size)
        if allocation.size:
            data[:] = physical_bytes(np.asarray(literal, dtype=value.shape.dtype), value.shape)
        data.flags.writeable = False
        constants[allocation.index] = data
    return constants


def check_static_shapes(module: HloModule) -> None:
    for comp in module.computations:
        for instr in comp.instructions:
            if any(any(leaf.dynamic) for leaf in instr.shape.leaves() if leaf.is_array):
                raise UnsupportedError(f"unsupported on this backend: dynamic shape {instr.shape} (instruction "
                                       f"'{instr.name}'); run it with --backend interpreter")


def plan_module(module: HloModule, *, pipeline: CompilePipeline = BACKEND_PIPELINES["cpu"], hlo_passes: bool = True,
                print_after_all: bool = False, stream=None, times: dict[str, float] | None = None) -> BufferAssignment:
    """The HLO side of a compile: the backend's HLO `pipeline` on `module` (in place; its
    optimization only with `hlo_passes`), the schedule and the buffer assignment. `times` gets
    milliseconds per HLO pass (`hlo:<pass>`, the prologue and epilogue included), `schedule` and
    `buffer-assignment`."""
    times = times if times is not None else {}

    def run(stages, **kwargs) -> None:
        result = PassManager(stages, **kwargs).run(module)
        for name, ms in result.timings_ms.items():
            times[f"hlo:{name}"] = times.get(f"hlo:{name}", 0.0) + ms

    run(pipeline.prologue)
    check_static_shapes(module)  # after the prologue, which the cuda backend ran before this check
    if hlo_passes:
        t0 = time.perf_counter()
        run(pipeline.optimization, print_after_all=print_after_all, stream=stream)
        times["hlo-passes"] = (time.perf_counter() - t0) * 1e3
    run(pipeline.epilogue)
    t0 = time.perf_counter()
    schedule = schedule_module(module)
    times["schedule"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    assignment = assign_buffers(module, schedule)
    times["buffer-assignment"] = (time.perf_counter() - t0) * 1e3
    return assignment


def resolve_pending_kernels(program: SequentialThunk) -> None:
    """Every kernel whose LLVM stage a kernel compiler left running on the LLVM worker thread (a
    PendingKernel: backends/cpu/kernel.py, `result()`) replaced by its compiled kernel: the thunks
    are emitted while the worker optimizes the kernels before them, and run compiled."""
    for thunk in program.walk():
        if isinstance(thunk, KernelThunk) and callable(getattr(thunk.kernel, "result", None)):
            thunk.kernel = thunk.kernel.result()


def build_native_control(sequence: SequentialThunk) -> None:
    """Each outermost loop's and conditional's native form (runtime/native_loop.py), built at compile
    time rather than by the first call; the thunks inside one that has none get theirs."""
    for thunk in sequence.thunks:
        if isinstance(thunk, (WhileThunk, ConditionalThunk)):
            thunk.native = NativeControl.of(thunk)
            if thunk.native is not None:
                continue
        for child in getattr(thunk, "children", lambda: ())():
            build_native_control(child)


def build_executable(module: HloModule, compile_kernel: KernelCompiler, *,
                     pipeline: CompilePipeline = BACKEND_PIPELINES["cpu"], hlo_passes: bool = True,
                     seed: int = 0, print_after_all: bool = False, stream=None,
                     times: dict[str, float] | None = None) -> ThunkExecutable:
    """Run the backend's HLO `pipeline` on `module` (in place; its optimization only with
    `hlo_passes`), schedule, assign buffers and emit the thunks."""
    times = times if times is not None else {}
    with gc_paused():  # the HLO side allocates cyclic IR only (runtime/gc_pause.py)
        assignment = plan_module(module, pipeline=pipeline, hlo_passes=hlo_passes, print_after_all=print_after_all,
                                 stream=stream, times=times)
    stats = RuntimeStats(peak_bytes=assignment.peak_bytes)
    t0 = time.perf_counter()
    emitter = ThunkEmitter(assignment, compile_kernel, stats)
    program = emitter.emit_entry()
    resolve_pending_kernels(program)
    times["thunks"] = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    build_native_control(program)
    times["native-control"] = (time.perf_counter() - t0) * 1e3
    params = frozenset(a.index for a in assignment.allocations
                       if a.kind is AllocationKind.PARAMETER and (a.index in emitter.written or a.is_live_out))
    constants = _constant_bytes(assignment)
    if any(a.kind is AllocationKind.CONSTANT and a.index in emitter.written for a in assignment.allocations):
        raise HloError("internal error: the program writes into a constant's buffer")
    stats.peak_bytes += sum(a.size for a in assignment.allocations if a.index in params)  # their per-run copies
    stats.compile_ms = times
    return ThunkExecutable(module, assignment, program, constants, params, stats, seed)


__all__ = ["KernelCompiler", "RuntimeStats", "ThunkEmitter", "ThunkExecutable", "build_executable", "one_op_fusion",
           "physical_bytes", "split_by_output_size"]
