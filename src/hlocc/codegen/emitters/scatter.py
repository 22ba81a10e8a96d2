"""The scatter emitter (XLA's ScatterFusion, xla/backends/gpu/codegen/emitters/scatter.cc, its
ScatterWithDistributedUpdates strategy).

A fusion whose root is a scatter updates the scatter's operands in place: output k starts as the
fusion parameter that is scatter operand k (`KernelModule.output_aliases`; the runtime shares the
buffer or copies the parameter in first), and the kernel touches only the elements the updates
name. The launch is the loop emitter's over the *updates* shape, with `vector_size` elements per
thread chosen so that a thread's elements belong to one update window (XLA: gcd of the slice size
and the loop unroll factor): then the thread reads its index vector once, computes the start of
the window in the operand, and skips the whole window when it does not lie inside the operand —
the evaluator's semantics (`evaluator/gather_scatter.py`), XLA's implementation-defined choice.
Inside the window each element is combined with the `to_apply` computation:

- unique indices (`unique_indices=true`): a plain read of the output, the combiner, an insert
  (XLA reads the operand instead: the same values, since the output starts as the operand and no
  element is combined twice; where the promise is broken, threads run in order still match the
  evaluator);
- otherwise an `xla.atomic_rmw` whose body is the combiner. On the CPU `lower-tensors` lowers it to
  a plain read-modify-write, so the kernel is `serial`: blocks one after another, the threads of a
  block in order, which also applies repeated indices in row-major update order as the evaluator
  does (for updates in the default layout).

Dimension numbers are general (update_window_dims, inserted_window_dims,
scatter_dims_to_operand_dims, index_vector_dim, input_batching_dims and
scatter_indices_batching_dims), not only the canonical form XLA's ScatterSimplifier produces.
A variadic scatter (several operands and updates, one combiner over all of them) writes every
output in the same loop; with repeated indices no single atomic covers several outputs, so it is
a serial plain read-modify-write. (XLA:GPU's GpuScatterExpander turns such scatters, and those of
elements wider than 64 bits, into loops before emission; on the CPU neither needs it.)

Runtime dims (dynamic shapes, CPU): the operand, the indices and the updates may have symbolic
dims; the kernel compiles once. The window-in-bounds test `start <= n - window` then reads the
runtime sizes (a window larger than the operand at some binding is never in bounds), and symbolic
updates are covered by the loop emitter's symbolic grid with one element per thread (as the
in-place dynamic-update-slice's: `ceildiv(N, threads)` blocks per call, the constraint `N - linear
>= 1`), each element reading its own index vector. Static updates keep the static launch whatever
the operand's size.

Not implemented: XLA's ScatterWithDistributedIndices (sorted, non-unique indices: a warp
accumulates the updates of a run of equal indices before writing), a performance strategy with
the same results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FunctionType, ModuleOp, i1, i64
from xdsl.ir import Region, SSAValue

from hlocc.analysis.affine_expr import Const, Expr, VarKind, dim, rt, sym
from hlocc.analysis.hero import EmitterKind
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, Variable, size_bound, variables_from_sizes
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims, loop_launch_map, symbolic_loop_grid
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.storage import (
    array_leaves,
    from_storage,
    load_element,
    physical_indices,
    store_element,
    to_storage,
)
from hlocc.codegen.emitters.base import (
    FusionEmitterBase,
    KernelModule,
    call_subgraph,
    entry_block,
    thread_and_block_ids,
)
from hlocc.codegen.emitters.dynamic_update_slice import (
    elements_per_thread,
    loop_launch,
    strip_bitcasts,
    subgraph_functions_outside,
)
from hlocc.codegen.emitters.loop import SYMBOLIC_LOOP_OPS
from hlocc.codegen.ir import AtomicRMWOp, LoopOp, YieldOp
from hlocc.codegen.ir.builder import INDEX, KernelBuilder
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.partitioner import PartitionedComputation, partition_fusion, subgraph_roots_for_heroes
from hlocc.codegen.target import Target
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError


class ScatterEmitter(FusionEmitterBase):
    """Scatters the updates into the operands' buffers (module doc)."""

    symbolic_ops = SYMBOLIC_LOOP_OPS | {"scatter"}

    def __init__(self, fusion: HloComputation, target: Target, name: str = "main"):
        super().__init__(fusion, target, name)
        scatter = fusion.root
        if scatter.opcode != "scatter":
            raise UnsupportedError(f"unsupported: the root '{scatter.name}' of fusion '{fusion.name}' is not a "
                                   "scatter (scatter emitter)")
        self.scatter = scatter
        n = (len(scatter.operands) - 1) // 2
        self.operands = list(scatter.operands[:n])
        self.indices = scatter.operand(n)
        self.updates = list(scatter.operands[n + 1:])
        self.outputs = array_leaves(scatter.shape)
        a = scatter.attrs
        self.update_window_dims = tuple(a["update_window_dims"])
        self.inserted_window_dims = tuple(a.get("inserted_window_dims", ()))
        self.scatter_dims_to_operand_dims = tuple(a["scatter_dims_to_operand_dims"])
        self.index_vector_dim = int(a["index_vector_dim"])
        self.input_batching_dims = tuple(a.get("input_batching_dims", ()))
        self.scatter_indices_batching_dims = tuple(a.get("scatter_indices_batching_dims", ()))
        self.unique_indices = bool(a.get("unique_indices", False))
        self.combiner: HloComputation = a["to_apply"]
        self.update_shape = self.updates[0].shape
        self.operand_shape = self.operands[0].shape
        rank = self.operand_shape.rank
        skipped = set(self.inserted_window_dims) | set(self.input_batching_dims)
        self.window_dims = [d for d in range(rank) if d not in skipped]  # operand dim of each window dim
        self.window_sizes = [1] * rank
        for w, d in enumerate(self.window_dims):
            self.window_sizes[d] = self.update_shape.dims[self.update_window_dims[w]]
        self.update_scatter_dims = [d for d in range(self.update_shape.rank) if d not in self.update_window_dims]
        indices_rank = self.indices.shape.rank
        self.indices_batch_dims = [d for d in range(indices_rank) if d != self.index_vector_dim]
        self.index_vector_length = (self.indices.shape.dims[self.index_vector_dim]
                                    if self.index_vector_dim < indices_rank else 1)

    # -- launch and indexing ---------------------------------------------------------------------------
    def window_elements(self) -> int:
        """Elements of the updates that are consecutive in memory and share one index vector: the
        update dims minor to every scatter dim in the updates' layout (XLA: the slice size)."""
        count = 1
        for d in self.update_shape.minor_to_major:
            if d in self.update_scatter_dims:
                break
            count *= self.update_shape.dims[d]
        return count

    def launch(self) -> tuple[LaunchDims, int]:
        """(launch dims, vector size): the loop emitter's launch over the updates, each thread's
        elements inside one window (XLA: gcd(slice elements, loop unroll factor)); over symbolic
        updates, the symbolic grid with one element per thread."""
        n = self.update_shape.num_elements
        if isinstance(n, DimExpr):
            return self._symbolic_grid().launch, 1
        shapes = [*self.outputs, *(u.shape for u in self.updates)]
        vector_size = math.gcd(self.window_elements(), elements_per_thread(self.target, n, shapes)) or 1
        return loop_launch(self.target, n, vector_size), vector_size

    def update_indexing(self) -> IndexingMap:
        """(th_x, bl_x)[vector_index] -> the update element each thread combines."""
        if isinstance(self.update_shape.num_elements, DimExpr):
            grid = self._symbolic_grid()
            return grid.map.with_constraint(grid.inside[0], Interval(1, NO_UPPER_BOUND))
        launch, vector_size = self.launch()
        return loop_launch_map(self.update_shape.dims, launch, vector_size=vector_size,
                               minor_to_major=self.update_shape.minor_to_major)

    def _symbolic_grid(self):
        return symbolic_loop_grid(self.update_shape.dims, self.target.threads_per_block, 1,
                                  self.update_shape.minor_to_major)

    def _thread_first_update(self) -> IndexingMap:
        """(th_x, bl_x) -> the thread's first update element (vector index 0), constrained to the
        threads that have work. Its scatter coordinates are those of all the thread's elements."""
        m = self.update_indexing()
        return m.substitute(lambda v: Const(0) if v.kind is VarKind.SYMBOL else v, symbols=()).simplify()

    def _indices_coordinates(self, batch: Sequence, k):
        """The index of component k of the index vector of the scatter position `batch` (the
        update's scatter coordinates, in order): k goes in at index_vector_dim."""
        coords = list(batch)
        if self.index_vector_dim < self.indices.shape.rank:
            coords.insert(self.index_vector_dim, k)
        return coords

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int) -> IndexingMap | None:
        """The updates (operands n+1..2n): the update element each thread reads, a bijection onto
        the updates (XLA's --bijection_inputs=scatter:2). The indices (operand n): the index vector
        each thread reads, `vector_index` running over its components. The scatter operands: None,
        as XLA's undefined map (where a thread writes depends on the indices' values)."""
        n = len(self.operands)
        if hero_operand_index > n:
            return self.update_indexing()
        if hero_operand_index < n:
            return None
        first = self._thread_first_update()
        batch = [first.results[d] for d in self.update_scatter_dims]
        has_vector = self.index_vector_dim < self.indices.shape.rank
        symbols = variables_from_sizes([self.index_vector_length], ["index_id"]) if has_vector else ()
        results = tuple(self._indices_coordinates(batch, sym(0)))
        return IndexingMap(first.dims, results, symbols, first.runtime, first.constraints).simplify()

    def thread_id_to_output_indexing(self, root_index: int) -> IndexingMap | None:
        """None: where a thread writes depends on the indices' values (XLA returns nullopt)."""
        return None

    # -- emission --------------------------------------------------------------------------------------
    def output_aliases(self) -> tuple[tuple[int, int], ...]:
        """Output k starts as the parameter that is scatter operand k. XLA never fuses a producer
        into the scatter operand (`passes/fusible.py`), and the kernel could not compute it: the
        output would have to hold the whole operand before any update."""
        aliases = []
        for k, (operand, out) in enumerate(zip(self.operands, self.outputs)):
            target, passed = strip_bitcasts(operand)
            if target.opcode != "parameter":
                raise UnsupportedError(f"unsupported: scatter '{self.scatter.name}' updates '{target.name}', which "
                                       "is computed in the fusion; the scatter emitter updates a fusion parameter "
                                       "in place")
            if operand.shape.minor_to_major != out.minor_to_major:
                raise UnsupportedError(f"unsupported: scatter '{self.scatter.name}' changes the layout of operand "
                                       f"{k}, so it cannot update it in place")
            readers = [u for u in target.users if u is not self.scatter and not any(u is p for p in passed)]
            if readers:
                raise UnsupportedError(f"unsupported: fusion '{self.fusion.name}' reads '{target.name}', which its "
                                       f"scatter updates in place, in '{readers[0].name}'")
            aliases.append((k, target.parameter_number))
        return tuple(aliases)

    @property
    def serial(self) -> bool:
        """Repeated indices need the atomic (or, variadic, plain) read-modify-write of one thread
        at a time on the CPU."""
        return not self.unique_indices

    def emit(self) -> KernelModule:
        aliases = self.output_aliases()
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes([self.scatter]))
        pc = partitioned.fusion
        functions = subgraph_functions_outside(pc, [self.scatter])
        block, param_types, out_types = entry_block(self.fusion, self.outputs)
        b = KernelBuilder(block)
        params = list(block.args[:len(param_types)])
        outs = list(block.args[len(param_types):])
        launch, _ = self.launch()
        if isinstance(self.update_shape.num_elements, int) and self.update_shape.num_elements == 0:
            b.insert(func.ReturnOp(*outs))  # no update: the outputs are the operands
            launch = LaunchDims(1, 1)
        else:
            b.insert(func.ReturnOp(*self._emit_threads(b, pc, params, outs, out_types, launch)))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        return KernelModule(ModuleOp([entry, *functions]), self.name, launch, len(params), len(outs),
                            emitter=EmitterKind.SCATTER.value, output_aliases=aliases, serial=self.serial,
                            symbols=self.symbols)

    def _emit_threads(self, b: KernelBuilder, pc: PartitionedComputation, params: list[SSAValue],
                      outs: list[SSAValue], out_types: list, launch: LaunchDims) -> list[SSAValue]:
        """if (the thread has work) { read the index vector; if (the window is in bounds) { loop } }."""
        thread_id, block_id = thread_and_block_ids(b, launch)
        e = ElementEmitter(b, pc, None, [])
        first_map = self._thread_first_update()
        has_work = _constraints_hold(e, first_map, [thread_id, block_id])

        def thread_work() -> list[SSAValue]:
            first = e.apply(first_map, [thread_id, block_id])
            batch = [first[d] for d in self.update_scatter_dims]
            starts = self._starts(e.b, pc, params, batch)
            in_bounds = self._window_in_bounds(e.b, starts)
            return e.if_else_many(in_bounds, lambda: self._emit_update_loop(e.b, pc, params, outs, thread_id,
                                                                             block_id, starts),
                                  lambda: outs, out_types)

        return e.if_else_many(has_work, thread_work, lambda: outs, out_types)

    def _starts(self, b: KernelBuilder, pc: PartitionedComputation, params: list[SSAValue],
                batch: list[SSAValue]) -> dict[int, SSAValue]:
        """The window start of each operand dim that has one (the others start at 0), as index
        values: index vector components (unsigned ones zero-extended first, so that a huge
        unsigned index stays out of bounds) and batch coordinates."""
        starts: dict[int, SSAValue] = {}
        unsigned = self.indices.shape.element_type.is_unsigned
        for k, d in enumerate(self.scatter_dims_to_operand_dims):
            (value,) = call_subgraph(b, pc, self.indices, params, self._indices_coordinates(batch, b.index(k)))
            if unsigned and value.type.width.data < 64:
                value = b.add(arith.ExtUIOp(value, i64))
            starts[d] = b.add(arith.IndexCastOp(value, INDEX))
        for operand_dim, indices_dim in zip(self.input_batching_dims, self.scatter_indices_batching_dims):
            starts[operand_dim] = batch[self.indices_batch_dims.index(indices_dim)]
        return starts

    def _window_in_bounds(self, b: KernelBuilder, starts: dict[int, SSAValue]) -> SSAValue | None:
        """start ≤ operand_dim - window_size for every operand dim with a start, compared unsigned:
        a negative start is a huge unsigned one (XLA's EmitBoundsCheck). A symbolic bound is
        computed in the kernel and must be >= 0 as well (else the window is never in bounds)."""
        checks = []
        for d, start in sorted(starts.items()):
            ub = self.operand_shape.dims[d] - self.window_sizes[d]
            if d in self.input_batching_dims:
                indices_dim = self.scatter_indices_batching_dims[self.input_batching_dims.index(d)]
                try:
                    if self.indices.shape.dims[indices_dim] - 1 <= ub:
                        continue  # a batch coordinate is always in bounds
                except InconclusiveDimensionError:
                    pass  # it depends on the sizes: checked
            if isinstance(ub, DimExpr):
                bound = size_value(b, ub)
                checks += [b.cmpi("sge", bound, b.index(0)), b.cmpi("ule", start, bound)]
                continue
            if ub < 0:  # the window is larger than the operand (an empty operand): never in bounds
                return b.constant(False, i1)
            checks.append(b.cmpi("ule", start, b.index(ub)))
        return b.and_(checks)

    def _write_map(self, dynamic: Sequence[int]) -> IndexingMap:
        """(update index){starts of the `dynamic` operand dims} -> the operand element it combines
        into: the window start plus the update's window coordinate. The runtime variables' bounds
        are the in-bounds starts (the loop runs only for windows inside the operand)."""
        results: list[Expr] = []
        window = {d: w for w, d in enumerate(self.window_dims)}
        batching = dict(zip(self.input_batching_dims, self.scatter_indices_batching_dims))
        for d in range(self.operand_shape.rank):
            if d in dynamic:
                base: Expr = rt(list(dynamic).index(d))
            elif d in batching:
                base = dim(self.update_scatter_dims[self.indices_batch_dims.index(batching[d])])
            else:
                base = Const(0)
            if d in window:
                base = base + dim(self.update_window_dims[window[d]])
            results.append(base)
        runtime = tuple(Variable(Interval(0, max(0, size_bound(self.operand_shape.dims[d]) - (
            0 if isinstance(self.window_sizes[d], DimExpr) else self.window_sizes[d]))), "",
            (self.scatter, len(self.operands))) for d in dynamic)
        return IndexingMap(variables_from_sizes(self.update_shape.dims), tuple(results), runtime=runtime).simplify()

    def _emit_update_loop(self, b: KernelBuilder, pc: PartitionedComputation, params: list[SSAValue],
                          outs: list[SSAValue], thread_id: SSAValue, block_id: SSAValue,
                          starts: dict[int, SSAValue]) -> list[SSAValue]:
        loop = LoopOp(self.update_indexing(), [thread_id, block_id], outs)
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        update_index = list(loop.map_results)
        updates = [call_subgraph(body, pc, u, params, update_index)[0] for u in self.updates]
        dynamic = [d for d in sorted(starts) if d not in self.input_batching_dims]
        indexer = ElementEmitter(body, pc, None, [])
        index = indexer.apply(self._write_map(dynamic), update_index, (), [starts[d] for d in dynamic])
        body.insert(YieldOp(*self._combine(body, list(loop.region_iter_args), index, updates)))
        return list(loop.results)

    def _combine(self, b: KernelBuilder, outs: list[SSAValue], index: list[SSAValue],
                 updates: list[SSAValue]) -> list[SSAValue]:
        """outputs[index] = to_apply(outputs[index]..., updates...)."""
        if len(outs) == 1 and not self.unique_indices:
            shape = self.outputs[0]
            rmw = AtomicRMWOp(outs[0], physical_indices(shape, index))
            b.insert(rmw)
            inner = KernelBuilder(rmw.body.block)
            current = from_storage(inner, rmw.body.block.args[0], shape.element_type)
            (new,) = emit_scalar_computation(inner, self.combiner, [current, updates[0]])
            inner.insert(YieldOp(to_storage(inner, new, shape.element_type)))
            return [rmw.result]
        current = [load_element(b, out, shape, index) for out, shape in zip(outs, self.outputs)]
        combined = emit_scalar_computation(b, self.combiner, [*current, *updates])
        return [store_element(b, v, out, shape, index) for v, out, shape in zip(combined, outs, self.outputs)]


def _constraints_hold(e: ElementEmitter, m: IndexingMap, dims: list[SSAValue]) -> SSAValue | None:
    """An i1 that holds where the map's constraints do, checking only the bounds that the
    constrained expression can cross (a thread index is never negative); None if none can."""
    exprs, intervals = [], []
    for expr, interval in m.constraints:
        reach = m.expr_range(expr)
        if reach.lo < interval.lo or reach.hi > interval.hi:
            exprs.append(expr)
            intervals.append(interval)
    if not exprs:
        return None
    values = e.apply(IndexingMap(m.dims, tuple(exprs), m.symbols, m.runtime), dims)
    checks = []
    for value, expr, interval in zip(values, exprs, intervals):
        reach = m.expr_range(expr)
        if reach.lo < interval.lo:
            checks.append(e.b.cmpi("sge", value, e.b.index(interval.lo)))
        if reach.hi > interval.hi:
            checks.append(e.b.cmpi("sle", value, e.b.index(interval.hi)))
    return e.b.and_(checks)


__all__ = ["ScatterEmitter"]
