"""One compiled plan for every size of a module with symbolic dimensions (issue 15; BladeDISC's
compile-once flow on the host):

    build_dynamic_program(module, compile_kernel)   # once: the plan
      the backend's HLO pipeline on the symbolic module (fusion heuristics at the size hint:
        passes/pipeline.py SIZE_HINTED_PASSES) → schedule (at the hint) → buffer assignment on
        symbolic sizes (temp_layout "slots") → the thunk sequence with symbolic BufferRefs
        → the host shape function (shape_function.py) of every size the thunks and buffers need
    program.run(args)                               # per call
      one dict lookup on the argument dimensions → that binding's calls (made at the first call of
      those dimensions) → allocate, run

A new binding costs the shape function, the kernels' versions and launches at its dims, and the
binding of the thunks that have no planned form (a library call, a host thunk): the per-call code
is generated and compiled once for every size (runtime/call_plan.py, `symbolic=True`). Where the
call launches every kernel itself and has no step to bind, a binding is numbers only: one generated
function of the argument dims (`_plan_bindings`' `calls_of`). `bind`
gives the whole plan bound (BoundProgram), for tests and for programs with per-size kernels, whose
thunks differ per binding and so get a call plan each.

Kernels (runtime/symbolic_kernel.py): each fusion with symbolic shapes is first compiled once,
symbolically, by the backend's kernel compiler: a kernel with `.symbols` (the dimension variables
it takes, sorted), run with `run_addresses(addresses, dims)`. Where that raises UnsupportedError, the fusion's kernel is
compiled per binding instead, at first use of a binding of the variables it uses, and cached
(`DeferredKernel`): the visible fallback, listed with its reason by `fallbacks` (`--stats`); a
binding whose specialized fusion no kernel computes runs that fusion through the evaluator.

Library calls (gemm, convolution, sort, top-k) take their sizes from the bound BufferRefs' shapes,
so M, N, K are the call's; copies and control flow are bound like every other thunk.
`compilations` counts compilations as the static path does, one per program compiled: 1 for the
plan (its `symbolic_kernels`, speculated versions included, compiled once for every size) plus one
per fallback kernel compiled per binding; `plan_builds` stays 1 — the passes and the buffer
assignment run once.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, fields, is_dataclass, replace
from functools import partial
from typing import Any

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.guards import window_fit_guards
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.specialize import specialize_computation, substitute_instructions, substitute_shape
from hlocc.hlo.symbolic import DimExpr, size_hint, substitute, symbol
from hlocc.hlo.types import Shape
from hlocc.passes.pipeline import CompilePipeline, PassManager
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAssignment, BufferSlice, assign_buffers
from hlocc.runtime.call_plan import PLAN_BUILD_LOCK, BoundCall, CallPlan, SharedCall
from hlocc.runtime.executable import (
    CHECKED_ALLOCATION_BYTES,
    KernelCompiler,
    RuntimeStats,
    ThunkEmitter,
    _constant_bytes,
    check_memory,
    output_leaf_shape,
    parameter_bytes,
)
from hlocc.runtime.guarded_call import guarded_call
from hlocc.runtime.library import GemmRecipe
from hlocc.runtime.schedule import schedule_module
from hlocc.runtime.shape_function import ShapeFunction, expr_source
from hlocc.runtime.speculation import SpeculationOptions
from hlocc.runtime.symbolic_kernel import (
    BoundKernel,
    DeferredKernel,
    SymbolicKernel,
    dynamic_kernel_compiler,
    speculated_kernels,
)
from hlocc.runtime.thunks import (
    BufferRef,
    CopyThunk,
    GemmThunk,
    HostThunk,
    KernelThunk,
    ScalarThunk,
    SequentialThunk,
    Thunk,
    ValueRefs,
)

MAX_BOUND_PROGRAMS = 1024
"""Bound plans a DynamicProgram keeps (one per distinct argument shapes; binding again costs a
shape function call and the thunks' sizes, no compile)."""


# -- binding the thunks --------------------------------------------------------------------------
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}
"""A thunk class's init field names (`_Binder._fields`)."""


class _Sizes:
    """The sizes the plan uses, collected once (`__call__` registers one); `at(values)` gives the
    value of each for one call, from the shape function's result (nothing shared is changed, so
    calls at new sizes may bind at once from several threads)."""

    def __init__(self):
        self.index: dict[DimExpr, int] = {}
        # id of each registered expression object -> its index: a binding looks sizes up by
        # identity (hashing a DimExpr walks its terms); `_kept` holds them so no id is reused
        self._by_id: dict[int, int] = {}
        self._kept: list[DimExpr] = []

    def __call__(self, size):
        if isinstance(size, DimExpr):
            i = self.index.setdefault(size, len(self.index))
            if id(size) not in self._by_id:
                self._by_id[id(size)] = i
                self._kept.append(size)
        return size

    def at(self, values: tuple[int, ...]) -> Callable[[Any], Any]:
        index, by_id = self.index, self._by_id

        def size(s):
            if not isinstance(s, DimExpr):
                return s
            i = by_id.get(id(s))
            return values[i if i is not None else index[s]]
        return size


@dataclass
class _Binder:
    """Fills the sizes of one binding into the plan's thunks (and compiles deferred kernels)."""

    size: Callable[[Any], Any]
    binding: dict[str, int]
    collecting: bool
    stats: list[str] = field(default_factory=list)  # fusions this binding runs on the evaluator
    # id of a ref or shape -> (it, bound): hashing a symbolic shape costs more than binding it; the
    # entry keeps the object alive, so its id is not reused while the memo lives
    _memo: dict = field(default_factory=dict)

    def shape(self, shape: Shape) -> Shape:
        if self.collecting:
            for leaf in shape.leaves():
                for d in getattr(leaf, "dims", ()):
                    self.size(d)
            return shape
        hit = self._memo.get(id(shape))
        if hit is None:
            hit = self._memo[id(shape)] = (shape, self._bound_shape(shape))
        return hit[1]

    def _bound_shape(self, shape: Shape) -> Shape:
        """`shape` at the binding: an array's dims are sizes the collecting pass registered, so
        their values are the shape function's (no symbolic substitution: a new size binds a
        gemm's or host thunk's shapes by lookups); a tuple or buffer shape is substituted."""
        if shape.is_tuple or shape.is_buffer:
            return substitute_shape(shape, self.binding)
        if not any([isinstance(d, DimExpr) for d in shape.dims]):
            return shape
        size = self.size
        try:
            dims = tuple([size(d) for d in shape.dims])
        except KeyError:  # a size the collecting pass did not see
            return substitute_shape(shape, self.binding)
        return Shape(shape.element_type, dims,
                     tuple([dyn and not isinstance(d, DimExpr) for d, dyn in zip(shape.dims, shape.dynamic)]),
                     shape.layout)

    def slice(self, where: BufferSlice) -> BufferSlice:
        return BufferSlice(where.allocation_index, self.size(where.offset), self.size(where.size))

    def ref(self, ref: BufferRef) -> BufferRef:
        hit = self._memo.get(id(ref))
        if hit is None:
            hit = self._memo[id(ref)] = (ref, BufferRef(self.slice(ref.slice), self.shape(ref.shape)))
        return hit[1]

    def refs(self, refs: ValueRefs) -> ValueRefs:
        return ValueRefs(self.shape(refs.shape), tuple(self.ref(r) for r in refs.leaves))

    def thunks(self, sequence: SequentialThunk) -> SequentialThunk:
        return SequentialThunk([bound for t in sequence.thunks for bound in self.thunk(t)])

    def thunk(self, thunk: Thunk) -> list[Thunk]:
        if isinstance(thunk, SequentialThunk):
            return [self.thunks(thunk)]
        if isinstance(thunk, KernelThunk):
            return self.kernel(thunk)
        if isinstance(thunk, ScalarThunk):
            if self.collecting:
                return [thunk]
            return [ScalarThunk(thunk.name, self.size(thunk.value), self.ref(thunk.output))]
        if isinstance(thunk, HostThunk):
            instr = thunk.instr if self.collecting else _specialize_instruction(thunk.instr, self.binding)
            return [HostThunk(instr, [self.refs(o) for o in thunk.operands], self.refs(thunk.output), thunk.reason)]
        return [self._fields(thunk)]

    def _fields(self, thunk: Any) -> Any:
        """A thunk with every BufferRef, BufferSlice, nested sequence or list of them bound (a new
        binding does this for each library call: its field names are looked up once per class,
        and a plain dataclass is copied by its `__dict__`, not rebuilt by `replace`)."""
        cls = type(thunk)
        names = _FIELD_NAMES.get(cls)
        if names is None:
            names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(thunk) if f.init)
        changes = {}
        for name in names:
            value = getattr(thunk, name)
            bound = self._value(value)
            if bound is not value:
                changes[name] = bound
        if not changes:
            return thunk
        if hasattr(cls, "__post_init__") or not hasattr(thunk, "__dict__") or cls.__dataclass_params__.frozen:
            return replace(thunk, **changes)
        copy = object.__new__(cls)
        copy.__dict__.update(thunk.__dict__)
        copy.__dict__.update(changes)
        return copy

    def _value(self, value: Any) -> Any:
        if isinstance(value, BufferRef):
            return self.ref(value)
        if isinstance(value, BufferSlice):
            return self.slice(value)
        if isinstance(value, ValueRefs):
            return self.refs(value)
        if isinstance(value, SequentialThunk):
            return self.thunks(value)
        if isinstance(value, list) and value and is_dataclass(value[0]):
            return [self._value(v) for v in value]
        if isinstance(value, tuple) and value and is_dataclass(value[0]):  # a convolution's window
            bound = tuple([self._sizes(v) for v in value])
            return value if all(b is v for b, v in zip(bound, value)) else bound
        return value

    def _sizes(self, value: Any) -> Any:
        """A dataclass of sizes (a WindowDim: a weight gradient's window is the output's size) at
        the binding."""
        changes = {f.name: substitute(getattr(value, f.name), self.binding) for f in fields(value)
                   if isinstance(getattr(value, f.name), DimExpr)}
        return replace(value, **changes) if changes else value

    def kernel(self, thunk: KernelThunk) -> list[Thunk]:
        arguments = [self.ref(r) for r in thunk.arguments]
        kernel = thunk.kernel
        if self.collecting or not isinstance(kernel, DeferredKernel):
            if isinstance(kernel, SymbolicKernel) and not self.collecting:
                kernel = kernel.bind(self.binding, f"fusion '{thunk.instr_name}'")
            return [replace(thunk, kernel=kernel, arguments=arguments)]
        instance = kernel.instance(self.binding)
        n_in = len(kernel.computation.parameters)
        if isinstance(instance, UnsupportedError):
            self.stats.append(f"{thunk.instr_name}: {instance}")
            fused = specialize_computation(kernel.computation, self.binding)
            return [FusionOnHost(thunk.instr_name, fused, arguments[:n_in], arguments[n_in:], str(instance))]
        copies = [CopyThunk(arguments[p].slice, arguments[n_in + o].slice, f"{thunk.instr_name}: output {o} starts "
                            f"as operand {p}") for o, p in instance.output_aliases
                  if arguments[p].slice != arguments[n_in + o].slice]
        return [*copies, KernelThunk(thunk.instr_name, instance.emitter, instance, arguments)]


def _specialize_instruction(instr: HloInstruction, binding: dict[str, int]) -> HloInstruction:
    """`instr` at `binding`, for the evaluator (a fusion's computation specialized too)."""
    clone = instr.clone([] if instr.opcode == "fusion" else None)
    substitute_instructions([clone], binding)
    if instr.opcode == "fusion":
        clone.attrs = {**clone.attrs, "calls": specialize_computation(instr.fused_computation, binding)}
    return clone


@dataclass
class FusionOnHost:
    """A fusion that no kernel computes at this binding, run by the evaluator (listed in stats)."""

    instr_name: str
    computation: HloComputation
    inputs: list[BufferRef]
    outputs: list[BufferRef]
    reason: str
    kind: str = "host"

    def execute(self, memory) -> None:
        result = memory.evaluator.call(self.computation, [memory.read(r) for r in self.inputs])
        for ref, value in zip(self.outputs, result if len(self.outputs) > 1 else [result]):
            memory.write(ref, value)

    def describe(self) -> list[str]:
        return [f"host {self.instr_name} (fusion, by the evaluator: {self.reason})"]


# -- the plan and its bindings --------------------------------------------------------------------
@dataclass
class BoundProgram:
    """The plan at one binding: allocation sizes, the thunks with their sizes, the outputs."""

    binding: dict[str, int]
    allocation_sizes: list[int]
    program: SequentialThunk
    outputs: list[BufferRef]
    peak_bytes: int
    host_fusions: list[str]



_SHAPE = operator.attrgetter("shape")


def _shapes_key(args: Sequence[Any]) -> tuple:
    return tuple(map(_SHAPE, args))


def _generic_key(args: Sequence[Any]) -> tuple:
    return tuple([getattr(a, "shape", None) if not isinstance(a, tuple) else None for a in args])


@dataclass(slots=True)
class _Calls:
    """What `DynamicProgram.run` keeps per binding: its calls and the bytes a call allocates (not
    changed once made; not frozen, whose `__init__` goes through `object.__setattr__`: ~2 µs of a
    first call at a new size, with cold caches)."""

    peak_bytes: int
    calls: CallPlan | BoundCall | SharedCall
    host_fusions: tuple[str, ...] = ()  # fusions on the evaluator at this binding (per-size kernels only)


@dataclass
class DynamicProgram:
    """The compiled plan of a module with symbolic dimensions (module doc)."""

    module: HloModule
    assignment: BufferAssignment
    template: SequentialThunk
    constants: dict[int, np.ndarray]
    copied_parameters: frozenset[int]
    stats: RuntimeStats
    shape_function: ShapeFunction
    sizes: _Sizes
    deferred: list[DeferredKernel]
    symbolic_kernels: int
    seed: int = 0
    plan_builds: int = 1
    last_peak_bytes: int = 0
    _bound: dict[tuple, _Calls] = field(default_factory=dict, repr=False)
    plan: CallPlan | None = field(default=None, repr=False)  # the calls of every size (None: per-size kernels)
    last_binding_us: float = 0.0  # host time the last new binding took (its calls and first arena), for benchmarks
    _binding_plan: tuple | None = field(default=None, repr=False)
    versions: Any = None  # plan versions (runtime/plan_speculation.py PlanVersions): which plan a binding runs
    _key_of: Callable[[Sequence[Any]], tuple] | None = field(default=None, repr=False)  # `_plan_key`
    # `calls_of` where every binding is numbers only and there are no plan versions: `run` calls it
    # directly at a new size (`_calls`' dispatch ran with cold caches there too)
    _numbers_only: Callable[[tuple], _Calls] | None = field(default=None, repr=False)

    @property
    def compilations(self) -> int:
        """Compilations, counted as the static path counts them (one per program compiled, however
        many kernels it has): the plan's kernels — every symbolic or static one and its speculated
        versions, compiled once for every size — count one; each fallback counts once per binding
        it was compiled for (`symbolic_kernels` counts the plan's kernels themselves)."""
        others = self.versions.others() if self.versions is not None else []
        return int(self.symbolic_kernels > 0) + sum(len(k.instances) for p in [self, *others] for k in p.deferred)

    def run(self, args: Sequence[Any], key: tuple | None = None) -> Any:
        """Run on checked arguments; `key`, where the caller has it, their shapes (else read here)."""
        if key is None:
            key = (self._key_of or self._plan_key())(args)
        bound = self._bound.get(key)
        if bound is None:
            if len(self._bound) >= MAX_BOUND_PROGRAMS:  # the oldest: a server sees sizes come and go
                with suppress(RuntimeError):  # (another thread's binding changed the dict meanwhile)
                    self._bound.pop(next(iter(self._bound)), None)
            t0 = time.perf_counter()
            numbers_only = self._numbers_only
            bound = self._bound[key] = numbers_only(key) if numbers_only is not None else self._calls(key)
            if type(bound.calls) is not SharedCall:  # a shared plan's arenas serve every size: made with it
                bound.calls.prepare()
            self.last_binding_us = (time.perf_counter() - t0) * 1e6
        self.last_peak_bytes = peak = bound.peak_bytes
        if peak >= CHECKED_ALLOCATION_BYTES:
            check_memory(self.module.name, peak)
        return bound.calls.run(args)

    def steady_call(self, dtypes: Sequence[np.dtype]) -> Callable[[Sequence[Any]], Any]:
        """A call of the plan at a size it has bound before, for arguments of `dtypes` (every
        parameter an array): `steady(args)` runs it where each argument is a C-contiguous numpy
        array of exactly its dtype and their shapes key a binding (whose key passed `run`'s checks),
        else None: the caller takes the checked path, `run` (a call's result is never None)."""
        shapes = "".join(f"a{k}.shape, " for k in range(len(dtypes)))
        return guarded_call("steady_call", dtypes, [
            f"bound = get(({shapes}))", "if bound is None or bound.peak_bytes >= limit:", "    return None",
            "program.last_peak_bytes = bound.peak_bytes", "return bound.calls.run(args)"],
            {"get": self._bound.get, "limit": CHECKED_ALLOCATION_BYTES, "program": self}, contiguous=True)

    def _plan_key(self) -> Callable[[Sequence[Any]], tuple]:
        """How `run` keys its bindings by the checked arguments: their shapes (None for a tuple or
        a token). Where every parameter is an array, one C-level map over the arguments (the
        generic form cost ~0.4 µs a call, a tenth of a one-kernel program's host time)."""
        every_array = all(p.shape.is_array for p in self.module.entry.parameters)
        self._key_of = _shapes_key if every_array else _generic_key
        return self._key_of

    def _calls(self, arg_dims: tuple, own: bool = False) -> _Calls:
        """The calls at the binding of `arg_dims` (module doc): the shared plan at its numbers, or
        with per-size kernels a plan of the whole bound program; with plan versions, those of the
        version the binding takes (`own`: this plan's)."""
        if self.versions is not None and not own:
            return self.versions.bound_calls(self, arg_dims)
        if self.deferred:
            bound = self.bind(arg_dims)
            return _Calls(bound.peak_bytes, self._call_plan(bound.allocation_sizes, bound.program, bound.outputs),
                          tuple(bound.host_fusions))
        if self._binding_plan is None:
            with PLAN_BUILD_LOCK:  # (threads at the first call wait for one plan)
                if self._binding_plan is None:
                    self._plan_bindings()
        binding_of, kernels, unplanned, calls_of = self._binding_plan
        if calls_of is not None:
            return calls_of(arg_dims)
        values = self.shape_function(arg_dims)
        binding, peak = binding_of(values)
        steps = {}
        if unplanned:
            binder = None
            for k, (thunk, recipe) in unplanned.items():
                if recipe is not None:  # a gemm: its numbers looked up (library.GemmRecipe)
                    steps[k] = recipe.at(values)
                    continue
                binder = binder or _Binder(self.sizes.at(values), binding, collecting=False)
                [steps[k]] = binder.thunk(thunk)
        if not kernels:  # every kernel launched by the shared call's own lines (CallPlan._inline)
            bound_kernels = {}
        elif self.plan.shared:  # each kernel's launch at the binding, over the arenas' tables
            bound_kernels = {k: kernel.launch_at(binding, where, n) for k, (kernel, where, n) in kernels.items()}
        else:
            bound_kernels = {k: kernel.bind(binding, where) for k, (kernel, where, _) in kernels.items()}
        return _Calls(peak, self.plan.at(binding, bound_kernels, steps))

    def _plan_bindings(self) -> None:
        """The shared plan and what a binding reads: the binding and peak bytes from the shape
        function's values, the kernels and the thunks to bind. Where a binding is numbers only (a
        shared plan whose kernels its call launches itself, with no step to bind), the whole
        binding is one generated function of the argument dims, `calls_of`: the first call at a
        new size then runs a few lines of code that no other call runs, which on a small program
        are most of what that call costs more than a steady one (issue 15)."""
        self.plan = self._call_plan([a.size for a in self.assignment.allocations], self.template,
                                    [BufferRef(s, output_leaf_shape(self.assignment, i))
                                     for i, s in zip(self.assignment.output_indices, self.assignment.output_slices)],
                                    symbolic=True)
        index = self.sizes.index
        names = [(name, index[symbol(name)]) for name in (*self.shape_function.variables, *self.assignment.size_maxima)]
        counted = [a.size for a in self.assignment.allocations
                   if a.kind in (AllocationKind.OUTPUT, AllocationKind.TEMP) or a.index in self.copied_parameters]
        thunks = self.plan.thunks()
        self.plan.prepare()  # its code and first arena (the first call's), which decide `shared`
        kernels = {k: (kernel, f"fusion '{thunks[k].instr_name}'", len(thunks[k].arguments))
                   for k, kernel in self.plan.bound_kernels().items()}
        unplanned = {k: (t, GemmRecipe.of(t.output, t.lhs, t.rhs, t.dims, index.__getitem__,
                                                self.constants)
                         if isinstance(t, GemmThunk) else None) for k, t in self.plan.unplanned().items()}
        peak = " + ".join([str(sum(s for s in counted if isinstance(s, int))),
                           *(f"x[{index[s]}]" for s in counted if isinstance(s, DimExpr))])
        binding = f"{{{''.join(f'{n!r}: x[{i}], ' for n, i in names)}}}"
        source = f"def binding_of(x):\n    return {binding}, {peak}\n"
        scope: dict[str, Any] = {"Calls": _Calls, "SharedCall": SharedCall, "plan": self.plan}
        if self.plan.shared and not kernels and not unplanned:  # numbers only: one function (doc)
            source += self._calls_source(counted)
            scope.update({**self.shape_function.scope, **self.plan.numbers_scope})
        exec(compile(source, f"<binding of {self.module.name}>", "exec"), scope)  # noqa: S102 (our own text)
        self._binding_plan = (scope["binding_of"], kernels, unplanned, scope.get("calls_of"))
        if self.versions is None:
            self._numbers_only = scope.get("calls_of")

    def _calls_source(self, counted: list) -> str:
        """`calls_of(dims)`, a numbers-only binding as one function: the shape function's checks and
        solving, then the peak bytes and the plan's numbers over its locals, inlined (a first call
        at a new size runs it with cold caches, where each function called and each dict built
        costs: three generated functions and the binding's dict took 9-11 µs there, 2 µs hot)."""
        names = self.shape_function.names
        reads = "".join(f"    {local} = {names[v]}\n" for v, local in self.plan.number_locals.items())
        peak = " + ".join([str(sum(s for s in counted if isinstance(s, int))),
                           *(expr_source(s, names) for s in counted if isinstance(s, DimExpr))])
        return ("def calls_of(dims):\n" + "".join(f"{line}\n" for line in self.shape_function.body) + reads
                + f"    return Calls({peak}, SharedCall(plan, {self.plan.numbers_source}, ()))\n")

    def _call_plan(self, sizes: list, program: SequentialThunk, outputs: list[BufferRef], symbolic: bool = False
                   ) -> CallPlan:
        return CallPlan(self.module, self.assignment.allocations, sizes, program, outputs, self.constants,
                        self.copied_parameters, partial(parameter_bytes, self.module), self.seed, symbolic=symbolic)

    def bind(self, arg_dims: tuple) -> BoundProgram:
        """The plan at the binding of `arg_dims` (one shape tuple per parameter, None for a tuple)."""
        size = self.sizes.at(self.shape_function(arg_dims))
        names = [*self.shape_function.variables, *self.assignment.size_maxima]
        binding = {name: size(symbol(name)) for name in names}
        binder = _Binder(size, binding, collecting=False)
        program = binder.thunks(self.template)
        outputs = [binder.ref(BufferRef(s, output_leaf_shape(self.assignment, i)))
                   for i, s in zip(self.assignment.output_indices, self.assignment.output_slices)]
        sizes = [size(a.size) for a in self.assignment.allocations]
        peak = sum(size for a, size in zip(self.assignment.allocations, sizes)
                   if a.kind in (AllocationKind.OUTPUT, AllocationKind.TEMP) or a.index in self.copied_parameters)
        return BoundProgram(binding, sizes, program, outputs, peak, binder.stats)

    def fallbacks(self) -> list[str]:
        """One line per fusion compiled per binding, with its reason and the bindings so far."""
        lines = []
        for k in self.deferred:
            sizes = "; ".join(", ".join(f"{v}={x}" for v, x in zip(k.variables, key)) for key in k.instances)
            lines.append(f"{k.name}: compiled per size ({len(k.instances)} so far: {sizes or 'none'}; "
                         f"{k.compile_ms:.1f} ms) because {k.reason}")
        return lines

    def speculated(self) -> list[tuple[str, SymbolicKernel]]:
        """(fusion, kernel) of each fusion compiled into several versions (runtime/speculation.py)."""
        return speculated_kernels(self.template)

    def speculation_lines(self) -> list[str]:
        """The versions and predicates of each speculated fusion, with the launches of each so far."""
        lines = [f"speculation {fusion}: {line}" for fusion, k in self.speculated() for line in k.describe_versions()]
        if self.versions is not None:
            lines = [f"speculation {line}" for line in self.versions.lines()] + lines + [
                line for p in self.versions.others() for line in p.speculation_lines()]
        return lines

    def to_string(self) -> str:
        versions = self.versions.describe() if self.versions is not None else []
        return "\n".join([*self.template.describe(), *self.speculation_lines(), *versions])


def check_symbolic_shapes(module: HloModule) -> None:
    """The plan takes symbolic dimensions, not XLA's bounded or unbounded `?` without a symbol."""
    for comp in module.computations:
        for instr in comp.instructions:
            for leaf in instr.shape.leaves():
                if leaf.is_array and leaf.has_bounded_dims:
                    raise UnsupportedError(f"dynamic shape {instr.shape} without a symbol (instruction "
                                           f"'{instr.name}') in a module with symbolic dimensions")


def build_dynamic_program(module: HloModule, compile_kernel: KernelCompiler, *, pipeline: CompilePipeline,
                          hint: dict[str, int] | None = None, hlo_passes: bool = True, seed: int = 0,
                          print_after_all: bool = False, stream=None, times: dict[str, float] | None = None,
                          speculation: SpeculationOptions | None = None) -> DynamicProgram:
    """The plan of `module` (changed in place by the passes); see the module docstring. `hint`: the
    dimension variables' likely values for the heuristics (default: each HINT_DEFAULT).
    `speculation`: the kernel versions (runtime/speculation.py; default from HLOCC_SPECULATION)."""
    times = times if times is not None else {}
    hint = dict(hint or {})
    PassManager(pipeline.prologue, hint=hint).run(module)
    check_symbolic_shapes(module)
    module.guards.extend(window_fit_guards(module))  # before fusion hides the windows in fusions
    if hlo_passes:
        t0 = time.perf_counter()
        result = PassManager(pipeline.optimization, print_after_all=print_after_all, stream=stream,
                             hint=hint).run(module)
        times["hlo-passes"] = (time.perf_counter() - t0) * 1e3
        times.update({f"hlo:{name}": ms for name, ms in result.timings_ms.items()})
    PassManager(pipeline.epilogue, hint=hint).run(module)
    t0 = time.perf_counter()
    with size_hint(hint):  # the schedule's and the slots' choices are heuristics
        schedule = schedule_module(module)
        assignment = assign_buffers(module, schedule, temp_layout="slots")
    times["buffer-assignment"] = (time.perf_counter() - t0) * 1e3
    stats = RuntimeStats()
    deferred: list[DeferredKernel] = []
    t0 = time.perf_counter()
    with size_hint(hint):  # emitter kinds and "do these slices overlap" questions of the emitter
        emitter = ThunkEmitter(assignment, dynamic_kernel_compiler(compile_kernel, deferred,
                                                                  speculation or SpeculationOptions.from_env()), stats)
        template = emitter.emit_entry()
    times["thunks"] = (time.perf_counter() - t0) * 1e3
    copied = frozenset(a.index for a in assignment.allocations
                       if a.kind is AllocationKind.PARAMETER and (a.index in emitter.written or a.is_live_out))
    sizes = _Sizes()
    for v in sorted(frozenset().union(*(p.shape.symbols for p in module.entry.parameters))):
        sizes(symbol(v))
    for name in assignment.size_maxima:
        sizes(symbol(name))
    collector = _Binder(sizes, {}, collecting=True)
    collector.thunks(template)
    for i, s in zip(assignment.output_indices, assignment.output_slices):
        collector.ref(BufferRef(s, output_leaf_shape(assignment, i)))
    for allocation in assignment.allocations:
        sizes(allocation.size)
    t0 = time.perf_counter()
    shape_function = ShapeFunction.build(module, list(sizes.index), assignment.size_maxima)
    times["shape-function"] = (time.perf_counter() - t0) * 1e3
    stats.compile_ms = times
    symbolic_kernels = stats.kernels - len(deferred)
    symbolic_kernels += sum(len(k.versions) - 1 for _, k in speculated_kernels(template))
    return DynamicProgram(module, assignment, template, _constant_bytes(assignment), copied, stats, shape_function,
                          sizes, deferred, symbolic_kernels, seed)


__all__ = ["BoundKernel", "BoundProgram", "DeferredKernel", "DynamicProgram", "SymbolicKernel", "build_dynamic_program",
           "check_symbolic_shapes", "dynamic_kernel_compiler"]
