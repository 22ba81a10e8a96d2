"""The per-call host path of a compiled program, planned once (issue 18 item 4: what BladeDISC's
compiled host flow, RAL, is for). A `CallPlan` is made from a program's allocations (their sizes
known: a static program's, or a dynamic program's at one binding), its thunks and its outputs; a
call then does only what depends on the arguments:

    take an arena from the pool (or make one)   temporaries and prepared kernel launches, reused
    the parameters' addresses                   the caller's arrays, in place (or copied, when written);
                                                or the addresses themselves (`takes_addresses`)
    one fresh buffer for all outputs            what the caller gets back is never reused
    patch the kernels' parameter and output slots, run the planned steps
    the outputs' views (their dtype, dims and transpose precomputed), the arena back to the pool

Planned once, in the arena: each temporary buffer and its address, and for every kernel a
`KernelLauncher` (runtime/thunks.py; backends/cpu/kernel.py CompiledKernel.launcher) whose table
of addresses holds the temporaries' and constants' slots already. Nested while and conditional
sequences are planned the same way (their loop and branch choice stay the thunks'). A thunk with no
planned form (a copy, a library call, a host fallback, a kernel without `launcher`) runs its own
`execute` on the call's HostMemory; the evaluator is made only if one of them asks for it.

The call is one straight-line Python function generated per plan (`CallPlan.source`, compiled
once, instantiated per arena over that arena's tables): one line per parameter, kernel-table slot,
copy (a memmove) and output leaf, each size and offset a literal; no loop over thunks or
allocations runs per call.

A program with symbolic sizes (runtime/dynamic_program.py) has one plan for all its sizes, made
from its thunks before binding (`symbolic=True`): each symbolic size or offset in the source is
`V[i]`, the i-th of `exprs` evaluated at the call's binding, and every temporary is allocated per
call (the pooling decision would depend on the size). A new binding is `at(binding, kernels,
steps)`: the numbers evaluated, the kernels' versions and launches at those dims, the steps of the
thunks that have no planned form bound by the caller — no code generated or compiled per size.
Where those per-size parts are flat (every symbolic kernel offers `launch_at`, no nested sequence
among the bound steps) the plan is `shared`: its arenas serve every size, each holding one table per
kernel, and the call takes the binding as arguments, `call(args, V, L)`, `L[j]` a launch at the
binding's dims over the arena's table or a bound step (`SharedCall`); a new size then makes no arena.
A symbolic kernel with one version whose kernel offers `launch_source` (runtime.thunks.LaunchSource)
is not even in `L`: the call launches it by its own lines, from launch facts (no work / serial /
over the pool, blocks, elements) that are entries of `exprs` like the sizes, after writing its dims
into the arena's dims table (only when the arena's last call had another binding), so a new size
makes no object for it (`_inline`).

Thread safety: an arena serves one call at a time (popped from the pool, pushed back after: both
atomic list operations), so concurrent calls each have their own temporaries and tables.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.evaluator.core import TOKEN
from hlocc.hlo.ir import HloModule
from hlocc.hlo.symbolic import DimExpr, symbol
from hlocc.runtime.buffer_assignment import AllocationKind, BufferAllocation
from hlocc.runtime.native_loop import NativeControl
from hlocc.runtime.plan_parts import (
    Arena,
    Binding,
    Fact,
    Parameter,
    Step,
    inline_copy,
    launch_source_of,
    leaf_of,
    nested_source,
    own_outputs,
    physical_axes,
    planned_kernel,
    predicate_reader,
    reads_bytes,
    round_up,
    sequence_step,
    shared_kernel,
    top_level,
)
from hlocc.runtime.shape_function import expr_source
from hlocc.runtime.thunks import (
    ALIGNMENT,
    BufferRef,
    ConditionalThunk,
    HostMemory,
    KernelThunk,
    LaunchSource,
    SequentialThunk,
    Thunk,
    WhileThunk,
    address_of,
    aligned_bytes,
)

PLAN_BUILD_LOCK = threading.RLock()

MAX_ARENAS = 8
"""Arenas a plan keeps for reuse (one per thread calling at once; more are made and dropped)."""
EMPTY = np.empty
"""What every call's fresh buffers (outputs, temporaries past POOLED_TEMP_BYTES) are allocated with
(the thunk tests poison them: tests/runtime/_thunk_helpers.py)."""
POOLED_TEMP_BYTES = 1 << 18
"""Temporaries an arena keeps at most; a plan with more allocates them per call (their kernels take
far longer than the allocation, and a dynamic program's plans, one per size, would keep them all)."""


class CallPlan:
    """The per-call path of one program at known allocation sizes (module doc).

    `allocations`: the buffer assignment's; `sizes`: their sizes; `program`: the thunks (sizes
    bound); `outputs`: the entry result's leaves; `parameter_bytes(args, allocation, copy)` the
    bytes of a parameter the fast path does not take in place."""

    def __init__(self, module: HloModule, allocations: Sequence[BufferAllocation], sizes: Sequence[int],
                 program: SequentialThunk, outputs: Sequence[BufferRef], constants: dict[int, np.ndarray],
                 copied: frozenset[int], parameter_bytes: Callable[..., np.ndarray], seed: int = 0,
                 symbolic: bool = False, takes_addresses: bool = False):
        self.module = module
        self.symbolic = symbolic
        self.exprs: list[DimExpr | Fact] = []  # a symbolic plan's sizes and launch facts, `V[i]` in its source
        # each dimension variable the numbers read -> its local in `numbers_source` (`_local`)
        self.number_locals: dict[str, str] = {}
        self.numbers_source = "()"  # `exprs` as one tuple expression over `number_locals`
        self._expr_index: dict[DimExpr, int] = {}
        self._fact_index: dict[str, int] = {}
        self._inline: dict[int, LaunchSource] = {}  # k: a kernel the shared call launches by its own lines
        self._numbers_scope: dict[str, Any] | None = None
        self.result_shape = module.entry.root.shape
        self.program = program
        self.seed = seed
        self.sizes = list(sizes)
        self.constants = constants
        self.parameter_bytes = parameter_bytes
        output_allocations = {r.slice.allocation_index for r in outputs}
        self.parameters: list[Parameter] = []
        self.fresh: list[tuple[int, int, int]] = []  # (allocation, offset in the outputs' buffer, size)
        self.temps: list[tuple[int, int]] = []  # (allocation, size)
        self.fresh_size = 0
        for a in allocations:
            size = self.sizes[a.index]
            if a.kind is AllocationKind.PARAMETER:
                shape = module.entry.parameter(a.parameter_number).shape
                in_place = (not a.parameter_index and shape.is_array and a.index not in copied
                            and physical_axes(shape) is None)
                self.parameters.append(Parameter(a.index, a.parameter_number, in_place, a.index in copied, a))
            elif a.kind is AllocationKind.CONSTANT:
                continue
            elif a.kind is AllocationKind.OUTPUT or a.index in output_allocations:
                self.fresh.append((a.index, self.fresh_size, size))
                self.fresh_size += round_up(size)
            else:
                self.temps.append((a.index, size))
        # Temporaries past POOLED_TEMP_BYTES are allocated per call (a buffer of their own, like the
        # outputs'), not kept in the arenas: a dynamic program keeps a plan per size seen.
        self.scratch: list[tuple[int, int, int]] = []
        self.scratch_size = 0
        if symbolic or sum(size for _, size in self.temps) > POOLED_TEMP_BYTES:
            for index, size in self.temps:
                self.scratch.append((index, self.scratch_size, size))
                self.scratch_size += round_up(size)
            self.temps = []
        self.variable = frozenset(p.allocation for p in self.parameters) | {f[0] for f in self.fresh + self.scratch}
        self.leaves = [leaf_of(r) for r in outputs]
        self.launchers_built = 0  # kernel launches prepared, over all arenas (a test counts them)
        self.code_builds = 0  # the per-call code generated and compiled: once, whatever the sizes (a test counts it)
        # the bytes of an in-place argument are needed only where a thunk reads the allocation itself
        self.bytes_needed = reads_bytes(program) or bool({leaf.allocation for leaf in self.leaves}
                                                 & {p.allocation for p in self.parameters})
        # The call takes each parameter as the address of its bytes, not an array (`takes_addresses`:
        # a caller that knows them, the PyTorch frontend's `data_ptr()`, skips an array and its
        # address per argument); only where every parameter is used in place and as an address alone.
        self.takes_addresses = takes_addresses
        if takes_addresses and not self.accepts_addresses:
            raise ValueError(f"{module.name}: a parameter is copied or read as bytes; its call takes arrays")
        self._arenas: list[Callable[..., Any]] = []  # one generated call per arena
        self._code = None
        self.shared = False  # (decided with the code: `_compile`)
        self._per_binding: list[tuple[int, int | None]] = []
        self.source = ""  # the generated per-call function (module doc), once an arena exists

    @property
    def accepts_addresses(self) -> bool:
        """Whether a plan of this program could take its parameters as addresses (`takes_addresses`):
        static sizes, every parameter in place, no thunk that reads a buffer's bytes."""
        return not self.symbolic and not self.bytes_needed and all(p.in_place for p in self.parameters)

    # -- per call --------------------------------------------------------------------------------
    def run(self, args: Sequence[Any]) -> Any:
        """Run on checked arguments (compiler.check_arguments' values); the entry's result."""
        try:
            call = self._arenas.pop()
        except IndexError:
            call = self._arena()
        try:
            return call(args)
        finally:
            if len(self._arenas) < MAX_ARENAS:
                self._arenas.append(call)

    def at(self, binding: dict[str, int], kernels: dict[int, Any], steps: dict[int, Thunk]) -> BoundCall | SharedCall:
        """A symbolic plan's calls at `binding` (module doc); `kernels` and `steps` as in Binding,
        except that a `shared` plan takes each kernel's launch at the binding (`launch_at`)."""
        if self._code is None:
            self._compile()
        if self.shared:
            return SharedCall(self, self.numbers(binding), tuple([
                kernels[k] if n_args is not None else self._step(steps[k], None) for k, n_args in self._per_binding])
                if self._per_binding else ())
        return BoundCall(self, Binding(self.numbers(binding), kernels, steps))

    def thunks(self) -> list[Thunk]:
        """The top-level thunks, nested sequences spliced in (what `k` counts)."""
        return top_level(self.program)

    def symbolic_kernels(self) -> dict[int, Any]:
        """k: the kernel of each top-level kernel thunk a binding must bind (`at`'s `kernels`)."""
        return {k: t.kernel for k, t in enumerate(top_level(self.program))
                if planned_kernel(t) and not hasattr(t.kernel, "launcher")}

    def bound_kernels(self) -> dict[int, Any]:
        """k: the kernel of each symbolic kernel thunk whose launch a binding gives (`at`'s
        `kernels`): all of them but those a shared call launches by its own lines (`_inline`)."""
        if self._code is None:
            self._compile()
        return {k: kernel for k, kernel in self.symbolic_kernels().items() if k not in self._inline}

    def unplanned(self) -> dict[int, Thunk]:
        """k: each top-level thunk with no planned form, which a binding binds (`at`'s `steps`)."""
        return {k: t for k, t in enumerate(top_level(self.program)) if not (planned_kernel(t) or inline_copy(t))}

    def prepare(self) -> None:
        """Make the code and an arena now (the first call would), so that their cost is counted
        where it is asked (a symbolic plan that is not `shared` has its arenas per binding)."""
        if self._code is None:
            self._compile()
        if not self._arenas and (self.shared or not self.symbolic):
            self._arenas.append(self._arena())

    # -- planned once per arena --------------------------------------------------------------------
    def _compile(self) -> None:
        with PLAN_BUILD_LOCK:  # threads at a first call wait for one build, whose `_code` is set last
            if self._code is None:
                self._build()

    def _build(self) -> None:
        self.code_builds += 1
        thunks = top_level(self.program)
        # A symbolic plan whose per-size parts are flat (each symbolic kernel launchable over any
        # table: `launch_at`; no nested sequence among the steps bound per size) shares its arenas
        # between sizes: a binding is its numbers and one launch or step per such thunk (`L[j]`).
        self.shared = self.symbolic and all(shared_kernel(thunks[k]) for k in self.symbolic_kernels()) and not any(
            isinstance(t, (SequentialThunk, WhileThunk, ConditionalThunk)) for t in self.unplanned().values())
        # Of those, a kernel with one version that offers `launch_source` is launched by lines of the
        # call itself, its launch facts among the binding's numbers: a new size makes no object for it.
        self._per_binding: list[tuple[int, int | None]] = []  # (k, buffers of a kernel | None for a step), L's order
        self._inline = {}
        if self.shared:
            kernels = self.symbolic_kernels()
            self._inline = {k: launch for k, kernel in kernels.items()
                            if (launch := launch_source_of(kernel, self._local))}
            self._per_binding = [(k, len(thunks[k].arguments) if k in kernels else None)
                                 for k in sorted({*kernels, *self.unplanned()} - self._inline.keys())]
        self.source = self._source()
        code = compile(self.source, f"<call plan of {self.module.name}>", "exec")
        # `exprs` at a binding (a dict of the variables' values), `numbers(binding)`: one generated
        # function (runtime/shape_function.py's arithmetic) over a local per variable, whose tuple
        # expression a dynamic program also inlines into its binding of a new size (`numbers_source`)
        if self.symbolic:
            for e in self.exprs:
                for v in sorted(e.variables) if isinstance(e, DimExpr) else ():
                    self._local(v)
            body = "".join(f"{e.source if isinstance(e, Fact) else expr_source(e, self.number_locals)}, "
                           for e in self.exprs)
            self.numbers_source = f"({body})"
            reads = "".join(f"    {local} = b[{v!r}]\n" for v, local in self.number_locals.items())
            source = f"def numbers(b):\n{reads}    return {self.numbers_source}\n"
            exec(compile(source, f"<sizes of {self.module.name}>", "exec"), self.numbers_scope)
            self.numbers = self.numbers_scope["numbers"]
        base = {"address_of": address_of, "asarray": np.asarray, "empty": EMPTY, "u8": np.uint8,
                "HostMemory": HostMemory, "TOKEN": TOKEN, "seed": self.seed, "memmove": ctypes.memmove,
                "parameter_bytes": self.parameter_bytes}
        base.update({f"src{p.allocation}": p.source for p in self.parameters})
        base.update({f"dt{j}": leaf.dtype for j, leaf in enumerate(self.leaves)})
        base.update({f"b{index}": data for index, data in self.constants.items()})
        self._namespace = base
        self._recipe = []  # (k, thunk, kernel?, its fixed slots) per top-level thunk but an inline copy
        for k, thunk in enumerate(top_level(self.program)):
            if inline_copy(thunk):
                continue
            if not planned_kernel(thunk):
                self._recipe.append((k, thunk, False, ()))
                continue
            fixed = [(slot, ref.slice.allocation_index, ref.slice.offset) for slot, ref in enumerate(thunk.arguments)
                     if ref.slice.allocation_index not in self.variable]  # the generated call patches the others
            self._recipe.append((k, thunk, True, fixed))
        self._code = code

    @property
    def numbers_scope(self) -> dict[str, Any]:
        """The globals `numbers_source` reads (the inline launches' own names)."""
        if self._numbers_scope is None:
            self._numbers_scope = {name: value for launch in self._inline.values()
                                   for name, value in launch.scope.items()}
        return self._numbers_scope

    def _local(self, variable: str) -> str:
        """The local of dimension variable `variable` in `numbers_source` (a new one at first use)."""
        local = self.number_locals.get(variable)
        if local is None:
            local = self.number_locals[variable] = f"_n{len(self.number_locals)}"
        return local

    def _arena(self, at: Binding | None = None) -> Callable[[Sequence[Any]], Any]:
        """A new arena: its temporaries and prepared launches, and the generated call over them
        (`at`: a symbolic plan's binding)."""
        if self._code is None:
            self._compile()
        n = len(self.sizes)
        arena = Arena([None] * n, [0] * n)
        namespace = self._namespace.copy()
        namespace["V"] = at.values if at is not None else ()
        namespace["seen"] = [None]  # the binding the arena's dims tables hold (`_source`)
        fixed = [*self.constants.items(), *((index, aligned_bytes(size)) for index, size in self.temps)]
        for index, data in fixed:
            arena.allocations[index], arena.addresses[index] = data, address_of(data)
            namespace[f"b{index}"], namespace[f"p{index}"] = data, arena.addresses[index]
        per_binding = dict(self._per_binding)
        for k, thunk, planned, slots in self._recipe:
            if k in self._inline:  # its table and dims table; the call's lines launch it (`_source`)
                count, launch = len(thunk.arguments), self._inline[k]
                table, dims = (ctypes.c_void_p * (count + 1))(), (ctypes.c_int64 * max(1, len(launch.symbols)))()
                table[count] = ctypes.addressof(dims)
                self.launchers_built += 1
                namespace.update({f"t{k}": table, f"a{k}": ctypes.addressof(table), f"d{k}": dims,
                                  f"f{k}": launch.fn, f"q{k}": launch.pool})
                for slot, index, offset in slots:
                    table[slot] = arena.addresses[index] + offset
                continue
            if k in per_binding:
                if planned:  # a symbolic kernel of a shared plan: its table, launched by L (`at`)
                    table = (ctypes.c_void_p * (len(thunk.arguments) + 1))()
                    self.launchers_built += 1
                    namespace[f"t{k}"], namespace[f"a{k}"] = table, ctypes.addressof(table)
                    for slot, index, offset in slots:
                        table[slot] = arena.addresses[index] + offset
                continue
            if planned:
                kernel = at.kernels.get(k, thunk.kernel) if at is not None else thunk.kernel
                launch = kernel.launcher(len(thunk.arguments))
                self.launchers_built += 1
                namespace[f"t{k}"], namespace[f"r{k}"] = launch.table, launch.run
                namespace[f"launch{k}"] = launch  # what its table points at lives as long as the call
                for slot, index, offset in slots:
                    launch.table[slot] = arena.addresses[index] + self._value(offset, at)
            else:
                namespace[f"g{k}"] = self._step(at.steps[k] if at is not None else thunk, arena)
        exec(self._code, namespace)
        return namespace.pop("call")  # not kept in its own globals: a cycle would hold the arena until a GC

    def _value(self, size: Any, at: Binding | None) -> int:
        return at.values[self._expr_index[size]] if isinstance(size, DimExpr) else size

    def _number(self, value: Any) -> str:
        """`value` (a size, or a tuple of them) in the source: a literal, or `V[i]` (module doc)."""
        if isinstance(value, tuple):
            return "(" + "".join(f"{self._number(v)}, " for v in value) + ")"
        if not isinstance(value, DimExpr):
            return str(value)
        if value not in self._expr_index:
            self._expr_index[value] = len(self.exprs)
            self.exprs.append(value)
        return f"V[{self._expr_index[value]}]"

    def _fact(self, source: str) -> str:
        """A launch fact (LaunchSource's source over the binding `b`) in the call's source: `V[i]`."""
        if source not in self._fact_index:
            self._fact_index[source] = len(self.exprs)
            self.exprs.append(Fact(source))
        return f"V[{self._fact_index[source]}]"

    def _source(self) -> str:
        """The per-call function (module doc), straight-line: one line per parameter, kernel slot,
        step and output leaf, every size and offset a literal (or `V[i]`: `_number`)."""
        per_binding = {k: j for j, (k, _) in enumerate(self._per_binding)}
        lines = ["def call(args, V, L):" if self.shared else "def call(args):"]
        num = self._number
        emit = lines.append
        thunks = top_level(self.program)
        memory = any(not (planned_kernel(t) or inline_copy(t)) for t in thunks)  # a step reads the memory
        for p in self.parameters:
            a = p.allocation
            if p.in_place and self.takes_addresses:
                emit(f"    p{a} = args[{p.number}]")
            elif p.in_place:
                emit(f"    v{a} = asarray(args[{p.number}])")  # a numpy scalar or 0-d value too
                emit(f"    p{a} = address_of(v{a})")
                if self.bytes_needed:
                    emit(f"    b{a} = v{a}.reshape(-1).view(u8)")
            else:
                emit(f"    b{a} = parameter_bytes(args, src{a}, {p.copy})")
                emit(f"    p{a} = address_of(b{a})")
        # An output alone in its allocation is an array of its own (`own`: leaf number by
        # allocation): `empty` at its dims, not a view of the outputs' shared buffer, whose slice,
        # view and reshape cost ~1 µs a call (the kernels need only their elements' alignment)
        own, shared, shared_size = own_outputs(self.fresh, self.leaves)
        for index, j in own.items():
            emit(f"    o{j} = empty({num(self.leaves[j].dims)}, dt{j})")
            emit(f"    p{index} = address_of(o{j})")
            if memory:
                emit(f"    b{index} = o{j}.reshape(-1).view(u8)")
        fresh = {index: offset for index, offset, _ in shared}
        for name, entries, total in (("raw", shared, shared_size), ("scratch", self.scratch, self.scratch_size)):
            if not entries:
                continue
            emit(f"    {name} = empty({num(total + ALIGNMENT)}, u8)")
            emit(f"    {name}_base = address_of({name})")
            emit(f"    {name}_start = -{name}_base % {ALIGNMENT}")
            emit(f"    {name}_base += {name}_start")
            for index, offset, size in entries:
                emit(f"    p{index} = {name}_base + {num(offset)}")
                if memory:
                    emit(f"    b{index} = {name}[{name}_start + {num(offset)}:{name}_start + {num(offset + size)}]")
        if memory:
            n = len(self.sizes)
            emit(f"    memory = HostMemory([{', '.join(f'b{i}' for i in range(n))}], None, "
                 f"[{', '.join(f'p{i}' for i in range(n))}], seed)")
        # the dims tables of the kernels launched by the call's own lines belong to the arena: written
        # only when its last call ran at another binding (`seen[0]`, which keeps that `V` alive, so
        # its identity is not reused): a steady call at one size writes none (~0.15 µs per ctypes write)
        writes = [f"d{k}[{i}] = {num(symbol(name))}" for k in sorted(self._inline)
                  for i, name in enumerate(self._inline[k].symbols)]
        if writes:
            emit("    if seen[0] is not V:")
            emit("        seen[0] = V")
            lines += [f"        {line}" for line in writes]
        for k, thunk in enumerate(thunks):
            if inline_copy(thunk):
                source, destination = thunk.source, thunk.destination
                emit(f"    memmove(p{destination.allocation_index} + {num(destination.offset)}, "
                     f"p{source.allocation_index} + {num(source.offset)}, {num(source.size)})")
                continue
            if not planned_kernel(thunk):
                emit(f"    L[{per_binding[k]}](memory)" if k in per_binding else f"    g{k}(memory)")
                continue
            for slot, ref in enumerate(thunk.arguments):
                index, offset = ref.slice.allocation_index, ref.slice.offset
                if index in self.variable:
                    shifted = isinstance(offset, DimExpr) or offset
                    emit(f"    t{k}[{slot}] = p{index}" + (f" + {num(offset)}" if shifted else ""))
            if k in self._inline:
                launch = self._inline[k]
                mode, blocks, elements = (self._fact(text) for text in (launch.mode, launch.blocks, launch.elements))
                emit(f"    if {mode} == 1:")
                emit(f"        f{k}(a{k}, 0, {blocks})")
                emit(f"    elif {mode}:")
                emit(f"        q{k}(f{k}, t{k}, {blocks}, {elements})")
                continue
            emit(f"    L[{per_binding[k]}](t{k}, a{k})" if k in per_binding else f"    r{k}()")
        leaves = []
        for j, leaf in enumerate(self.leaves):
            if leaf.dims is None:
                leaves.append("TOKEN")
                continue
            if own.get(leaf.allocation) == j:
                data = None
            elif leaf.allocation in fresh:
                first = fresh[leaf.allocation] + leaf.offset
                data = f"raw[raw_start + {num(first)}:raw_start + {num(first + leaf.size)}]"
            else:
                data = f"b{leaf.allocation}[{num(leaf.offset)}:{num(leaf.offset + leaf.size)}]"
            if data is None:
                expr = f"o{j}"
            else:
                expr = f"{data}.view(dt{j})"
                if not (len(leaf.dims) == 1 and leaf.size == leaf.dims[0] * np.dtype(leaf.dtype).itemsize):
                    expr += f".reshape({num(leaf.dims)})"
            if leaf.axes is not None:
                expr += f".transpose({leaf.axes})"
            leaves.append(expr)
        emit(f"    return {nested_source(self.result_shape, iter(leaves))}")
        return "\n".join(lines) + "\n"

    def _step(self, thunk: Thunk, arena: Arena) -> Step:
        if isinstance(thunk, SequentialThunk):
            return sequence_step([self._step(t, arena) for t in thunk.thunks])
        if isinstance(thunk, (WhileThunk, ConditionalThunk)):
            native = self._native_control(thunk, arena)
            if native is not None:
                return native
        if isinstance(thunk, WhileThunk):
            condition = sequence_step([self._step(t, arena) for t in thunk.condition.thunks])
            body = sequence_step([self._step(t, arena) for t in thunk.body.thunks])
            return lambda memory: thunk.loop(memory, condition, body, predicate_reader(thunk.predicate))
        if isinstance(thunk, ConditionalThunk):
            branches = [sequence_step([self._step(t, arena) for t in b.thunks]) for b in thunk.branches]
            return lambda memory: branches[thunk.branch(memory)](memory)
        if planned_kernel(thunk):
            return self._kernel_step(thunk, arena)
        if inline_copy(thunk):
            source, destination, size = thunk.source, thunk.destination, thunk.source.size
            return lambda m: ctypes.memmove(m.addresses[destination.allocation_index] + destination.offset,
                                            m.addresses[source.allocation_index] + source.offset, size)
        return thunk.execute

    def _native_control(self, thunk: WhileThunk | ConditionalThunk, arena: Arena | None) -> Step | None:
        """The loop or conditional as one native function (runtime/native_loop.py) where it has
        one: its table of addresses filled from the arena, the parameters' and outputs' per call."""
        if self.symbolic:
            return None
        if thunk.native is False:  # not built at compile time (build_executable builds it)
            thunk.native = NativeControl.of(thunk)
        loop = thunk.native
        if loop is None:
            return None
        fixed = [None if arena is None or index in self.variable else arena.addresses[index] for index in loop.used]
        return loop.step(fixed, [(k, index) for k, index in enumerate(loop.used) if fixed[k] is None])

    def _kernel_step(self, thunk: KernelThunk, arena: Arena) -> Step:
        launch = thunk.kernel.launcher(len(thunk.arguments))
        self.launchers_built += 1
        table, run = launch.table, launch.run
        patches = []
        for slot, ref in enumerate(thunk.arguments):
            index, offset = ref.slice.allocation_index, ref.slice.offset
            if index in self.variable:
                patches.append((slot, index, offset))
            else:
                table[slot] = arena.addresses[index] + offset
        patches = tuple(patches)

        def step(memory: HostMemory) -> None:
            addresses = memory.addresses
            for slot, index, offset in patches:
                table[slot] = addresses[index] + offset
            run()
        step.launch = launch  # keeps the table alive with the step
        return step


class BoundCall:
    """A symbolic plan's calls at one binding (`CallPlan.at`): its own pool of arenas."""

    def __init__(self, plan: CallPlan, at: Binding):
        self.plan, self.binding = plan, at
        self._arenas: list[Callable[[Sequence[Any]], Any]] = []

    def prepare(self) -> None:
        """Make an arena now (CallPlan.prepare)."""
        if not self._arenas:
            self._arenas.append(self.plan._arena(self.binding))

    def run(self, args: Sequence[Any]) -> Any:
        """Run on checked arguments, like CallPlan.run."""
        try:
            call = self._arenas.pop()
        except IndexError:
            call = self.plan._arena(self.binding)
        try:
            return call(args)
        finally:
            if len(self._arenas) < MAX_ARENAS:
                self._arenas.append(call)


class SharedCall:
    """A shared symbolic plan's calls at one binding (`CallPlan.at` where `plan.shared`): the
    values of its `exprs` and its launches and steps `L`; the arenas are the plan's, for every size."""

    def __init__(self, plan: CallPlan, values: tuple[int, ...], launches: tuple):
        self.plan, self.values, self.launches = plan, values, launches

    def prepare(self) -> None:
        """Make an arena now if the plan has none (CallPlan.prepare)."""
        self.plan.prepare()

    def run(self, args: Sequence[Any]) -> Any:
        """Run on checked arguments, like CallPlan.run."""
        plan = self.plan
        try:
            call = plan._arenas.pop()
        except IndexError:
            call = plan._arena()
        try:
            return call(args, self.values, self.launches)
        finally:
            if len(plan._arenas) < MAX_ARENAS:
                plan._arenas.append(call)


__all__ = ["Binding", "BoundCall", "CallPlan", "MAX_ARENAS", "POOLED_TEMP_BYTES", "SharedCall"]
