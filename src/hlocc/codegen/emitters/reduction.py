"""The reduction emitter (XLA's ReductionFusion family, xla/backends/gpu/codegen/emitters/reduction.cc;
seed 000 "Reduction emitter"): row, multi-row and column reductions, variadic reduces, several
compatible reduction heroes, epilogues and side outputs, in one kernel.

Hero analysis normalises the reduce input to three dimensions (`reduction_info`): a row reduction
[B, K, R] keeps K and reduces the major B and the minor R; a column reduction [M, R, N] keeps M
and N and reduces the middle R. The physical (layout) order of the input is exactly that grouping,
so the input element at normalised (x, y, z) is the one at linear physical position
(x·Y + y)·Z + z; every index below is built that way and delinearised through the layout.

Work is split as on a GPU:

1. each thread accumulates a strided part of the reduced elements of its output element(s) into
   its own accumulators (one per reduced value; a variadic reduce has several), reading every
   input element exactly once, and writes the side outputs (roots with the input's shape) at
   the elements it reads;
2. row reductions: the threads of a row combine their accumulators with `xla.shuffle_reduce`
   within a warp and, when a row spans several warps, through shared memory (lane 0 of each warp
   writes its warp's value, `xla.sync_threads`, the first warp reduces those);
   column reductions: each block reduces a 32×32 tile of [rows × columns]; the partial column
   values go through a padded shared tile (32×33) and are read transposed, so a warp holds the
   32 partials of one column and reduces them with a shuffle;
3. the thread holding the result computes the epilogue (roots computed from the reduce, with the
   hero's value injected into element emission) and writes the output.

Launch parameters (the `Target`): the GPU target follows XLA (a warp of 32; row reductions with
up to 512 threads per row, vectorized by 2 where XLA does; multi-row reductions put
32 / threads-per-row rows in a warp; column tiles 32×32). The CPU target (warp size 1) has one
thread per output element (rows) or per chunk of adjacent output columns (columns), so nothing
crosses threads: a row is reduced with a vector of partial accumulators along its contiguous
dimension (`reduce_partials.py`; several reduce heroes share the one pass over the row), a column
chunk with one accumulator per column (up to 1024 bytes of adjacent columns, in vectors of up to 64
lanes), read row by row so the loads are contiguous; blocks hold a few thousand input elements.

Reduction order: partial results are combined in a fixed order, different from the evaluator's
sequential order, as XLA's are (jax.lax.reduce requires an associative and commutative reducer).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, func, scf, tensor, vector
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp, TensorType, VectorType
from xdsl.ir import Block, Region, SSAValue

from hlocc.analysis.affine_expr import VarKind, as_expr, dim, sym, variables
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import EmitterKind, analyze_fusion
from hlocc.analysis.indexing_map import IndexingMap, Variable
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.reduction_info import ReductionDimensions, reduction_dimensions
from hlocc.analysis.simplifier import simplify_expr
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.storage import array_leaves, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.emitters.reduce_partials import (
    PartialsPlan,
    chunked_map,
    combiner_function,
    emit_row_partials,
    plan_partials,
)
from hlocc.codegen.emitters.reduction_tiling import Tiling, column_lanes, column_offset, reduction_tiling
from hlocc.codegen.ir import (
    AllocateSharedOp,
    PredicatedExtractOp,
    PredicatedInsertOp,
    ShuffleReduceOp,
    SyncThreadsOp,
)
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.partitioner import partition_fusion
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import Shape


class ReductionEmitter(FusionEmitterBase):
    def __init__(self, fusion, target, name: str = "main"):
        super().__init__(fusion, target, name)
        self.analysis = analyze_fusion(FusionAdaptor.for_computation(fusion))
        if self.analysis.reduction_hero is None:
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' has no reduction hero")
        heroes = [h for h in self.analysis.heroes if h.opcode == "reduce"]
        self.reduces = list(dict.fromkeys(heroes))  # distinct reduce heroes, in root order
        self.dims: ReductionDimensions = reduction_dimensions(self.reduces[0])
        if any(reduction_dimensions(r) != self.dims for r in self.reduces):
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' has reductions that do not normalise alike")
        self.input_shape: Shape = self.reduces[0].operand(0).shape
        self.kind = self.analysis.reduction_emitter(warp_size=32)
        self.tiling = reduction_tiling(self.dims, self.kind, self.input_shape, self.reduces, self.target.warp_size)
        self.input_map = self._normalized_input_map()
        """(th_x, bl_x)[symbols] -> the normalised input index each thread reads in phase 1."""

    # -- indexing -------------------------------------------------------------------------------------
    def _dims(self) -> tuple[Variable, Variable]:
        t = self.tiling
        return Variable(Interval(0, t.threads_per_block - 1), "th_x"), Variable(Interval(0, t.blocks - 1), "bl_x")

    def _normalized_input_map(self) -> IndexingMap:
        """(th_x, bl_x)[symbols] -> the normalised input index (x, y, z) a thread reads in phase 1."""
        t, (n0, n1, n2) = self.tiling, self.dims.dimensions
        th, bl = dim(0), dim(1)
        if t.row:
            lane = th % t.threads_per_row if t.threads_per_row > 1 else 0
            row = th // t.threads_per_row if t.threads_per_row > 1 else th
            steps = -(-n2 // (t.threads_per_row * t.vector))
            # Range variables of size 1 are left out (a plain `j` is what reduce_partials looks for).
            symbols, values = [], {}
            for name, size in (("b", n0), ("j", steps), ("v", t.vector)):
                if size > 1:
                    values[name] = sym(len(symbols))
                    symbols.append(Variable(Interval(0, size - 1), name))
                else:
                    values[name] = 0
            k = bl * t.rows_per_block + row
            # An int when a row is one element per thread (n2 == 1: no range variable, lane 0).
            r = as_expr((values["j"] * t.threads_per_row + lane) * t.vector + values["v"])
            results = (values["b"] + 0 * th, k, r + 0 * th)
            constraints = [(k, Interval(0, n1 - 1)), (r, Interval(0, n2 - 1))]
        else:
            column_blocks = -(-n2 // t.tile_columns)
            m, column_block = bl // column_blocks, bl % column_blocks
            if self.target.warp_size == 1:
                symbols = [Variable(Interval(0, n1 - 1), "r"), *column_lanes(t)]
                n = column_block * t.tile_columns + th * t.lanes + column_offset(t, 1)
                results = (m, sym(0), n)
            else:
                warp = t.threads_per_row
                symbols = [Variable(Interval(0, -(-n1 // warp) - 1), "j")]
                r = sym(0) * warp + th // warp
                n = column_block * t.tile_columns + th % warp
                results = (m, r, n)
            constraints = [(results[1], Interval(0, n1 - 1)), (results[2], Interval(0, n2 - 1))]
        m = IndexingMap(self._dims(), results, tuple(symbols))
        for e, iv in constraints:
            if isinstance(e, int):  # a size-1 extent folds the index to a constant (0): in range
                continue
            if m.expr_range(e).lo < iv.lo or m.expr_range(e).hi > iv.hi:
                m = m.with_constraint(e, iv)
        return m

    def _to_logical(self, m: IndexingMap, shape: Shape) -> IndexingMap:
        """`m` (normalised (x, y, z) results) composed with the layout: logical indices of `shape`."""
        _, n1, n2 = self.dims.dimensions
        x, y, z = m.results
        linear = (x * n1 + y) * n2 + z
        # Only the results are simplified (by variable ranges): simplifying the map could fold a
        # constraint into a variable's bounds or drop a point variable, and the emitter checks
        # the constraints and passes every variable.
        results = tuple(simplify_expr(r, m.var_bounds)
                        for r in delinearize(linear, shape.dims, shape.minor_to_major))
        return IndexingMap(m.dims, results, m.symbols, m.runtime, m.constraints)

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int = 0) -> IndexingMap:
        """The reduce input elements a thread reads (phase 1), logical indices."""
        return self._to_logical(self.input_map, self.input_shape)

    def thread_id_to_output_indexing(self, root_index: int) -> IndexingMap:
        """The output element(s) a thread writes: for a reduce root, only the threads that hold
        a final value (lane 0 of its row, or of its column's warp); side outputs as the input."""
        root = self.analysis.roots[root_index]
        if self.analysis.heroes[root_index].opcode != "reduce":
            m = self.thread_id_to_input_indexing(root_index)
            return _compose_bitcast(m, self.input_shape, array_leaves(root.shape)[0])
        out = self._normalized_output_map()
        return _compose_bitcast(self._to_logical(out, self.input_shape), self.input_shape,
                                array_leaves(root.shape)[0], kept=self._kept())

    def _kept(self, reduce: HloInstruction | None = None) -> list[int]:
        reduce = reduce or self.reduces[0]
        reduced = set(reduce.attrs["dimensions"])
        return [d for d in range(reduce.operand(0).shape.rank) if d not in reduced]

    def _normalized_output_map(self) -> IndexingMap:
        """(th_x, bl_x)[symbols] -> normalised (x, y, z) of an element of the kept dimensions
        (the reduced coordinates 0) for the threads that write results."""
        t, (_, n1, n2) = self.tiling, self.dims.dimensions
        th, bl = dim(0), dim(1)
        if t.row:
            k = bl * t.rows_per_block + th // t.threads_per_row
            m = IndexingMap(self._dims(), (0, k, 0))
            m = m.with_constraint(th % t.threads_per_row, Interval(0, 0)) if t.threads_per_row > 1 else m
            return m.with_constraint(k, Interval(0, n1 - 1)) if m.expr_range(k).hi > n1 - 1 else m
        column_blocks = -(-n2 // t.tile_columns)
        mm, column_block = bl // column_blocks, bl % column_blocks
        if self.target.warp_size == 1:
            n = column_block * t.tile_columns + th * t.lanes + column_offset(t, 0)
            m = IndexingMap(self._dims(), (mm, 0, n), column_lanes(t))
        else:
            warp = t.threads_per_row
            n = column_block * t.tile_columns + th // warp
            m = IndexingMap(self._dims(), (mm, 0, n)).with_constraint(th % warp, Interval(0, 0))
        return m.with_constraint(n, Interval(0, n2 - 1)) if m.expr_range(n).hi > n2 - 1 else m

    # -- emission -------------------------------------------------------------------------------------
    def emit(self) -> KernelModule:
        leaves = array_leaves(self.fusion.root.shape)
        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, leaves)
        b = KernelBuilder(block)
        t = self.tiling
        thread, block_id = thread_and_block_ids(b, LaunchDims(t.threads_per_block, t.blocks))
        partitioned = partition_fusion(self.fusion).fusion
        e = ElementEmitter(b, partitioned, None, list(block.args[:len(params)]))
        self.combiners: list[func.FuncOp] = []
        outputs = list(block.args[len(params):])
        if t.row or self.target.warp_size > 1 or t.lanes == 1:
            outputs = self._emit_threads(e, [thread, block_id], outputs)
        else:
            outputs = self._emit_cpu_columns(e, [thread, block_id], outputs)
        b.insert(func.ReturnOp(*outputs))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        module = ModuleOp([entry, *self.combiners])
        return KernelModule(module, self.name, LaunchDims(t.threads_per_block, t.blocks), len(params), len(leaves),
                            emitter=EmitterKind.REDUCTION.value)

    # Output leaves: one list of (leaf index, root, hero) per root.
    def _root_leaves(self) -> list[tuple[list[int], HloInstruction, HloInstruction]]:
        result, k = [], 0
        for root, hero in zip(self.analysis.roots, self.analysis.heroes):
            n = len(array_leaves(root.shape))
            result.append((list(range(k, k + n)), root, hero))
            k += n
        return result

    def _init_values(self, e: ElementEmitter) -> list[SSAValue]:
        values = []
        for r in self.reduces:
            n = len(r.operands) // 2
            values += [e.scalar(r.operand(n + k), []) for k in range(n)]
        return values

    def _accumulate(self, e: ElementEmitter, ids: list[SSAValue], outputs: list[SSAValue],
                    inputs: IndexingMap, inits: list[SSAValue]) -> tuple[list[SSAValue], list[SSAValue]]:
        """Phase 1: (accumulators, outputs with side outputs written) of this thread."""
        side = [(leaves, root) for leaves, root, hero in self._root_leaves() if hero.opcode != "reduce"]
        logical = self._to_logical(inputs, self.input_shape)
        plan = self._partials_plan(logical)
        if plan is not None:
            # All reduces and the side outputs in one pass over the row: each element is computed
            # and read once, and each chunk of a side output is stored as one vector.
            chunked = chunked_map(logical, plan.symbol, plan.lanes)

            def write_side(syms: list[SSAValue], outs: list[SSAValue]) -> list[SSAValue]:
                return self._write_side(e, e.apply(chunked, ids, syms), outs, side)

            maps = [self._to_logical(inputs, r.operand(0).shape) for r in self.reduces
                    for _ in range(len(r.operands) // 2)]

            def row() -> list[SSAValue]:
                # (Side outputs keep the lane-loop tail: the overlapped one would write some
                # elements twice, and a side output may share a buffer with an input it reads.)
                accs, written = emit_row_partials(e, self.reduces, maps, ids,
                                                  [e.b.index(0) if j != plan.symbol else None
                                                   for j in range(len(logical.symbols))],
                                                  plan, inits, outputs if side else (), write_side if side else None,
                                                  overlap_tail=not side)
                return [*accs, *(written if side else ())]

            # The partials walk the reduced dimension of one row; a thread past the last row (the
            # last block's spare threads when the rows are no multiple of the block) reads and
            # writes nothing. Its accumulators stay the inits; the result write is guarded too.
            n_side = len(outputs) if side else 0
            result = e.if_else_many(_constraint_check(e, logical, ids, [], dims_only=True), row,
                                    lambda: [*inits, *(outputs if side else ())],
                                    [v.type for v in inits] + [v.type for v in outputs[:n_side]])
            accs = result[:len(inits)]
            outputs = result[len(inits):] if side else outputs
            return self._fold_inits(e, inits, accs), outputs
        result = _symbol_loop(e, logical, ids, [*inits, *outputs],
                              lambda syms, carried: self._step(e, logical, ids, syms, carried, len(inits), side))
        return result[:len(inits)], result[len(inits):]

    def _partials_plan(self, logical: IndexingMap) -> PartialsPlan | None:
        """A vector of partial accumulators along the contiguous reduced dimension: CPU rows only,
        when every other range variable is a single point (no batch dimension)."""
        if self.target.warp_size != 1 or not self.tiling.row or self.dims.dimensions[0] != 1:
            return None
        plans = {plan_partials(r, self._to_logical(self.input_map, r.operand(0).shape))
                 for r in self.reduces}
        plan = plans.pop() if len(plans) == 1 else None
        if plan is None or any(v.bounds.size != 1 for k, v in enumerate(logical.symbols) if k != plan.symbol):
            return None
        return plan

    def _fold_inits(self, e: ElementEmitter, inits: list[SSAValue], partials: list[SSAValue]) -> list[SSAValue]:
        out, k = [], 0
        for r in self.reduces:
            n = len(r.operands) // 2
            out += emit_scalar_computation(e.b, r.to_apply, [*inits[k:k + n], *partials[k:k + n]])
            k += n
        return out

    def _step(self, e: ElementEmitter, logical: IndexingMap, ids, syms, carried, n_accs: int, side) -> list[SSAValue]:
        at = e.apply(logical, ids, syms)
        accs, outs = list(carried[:n_accs]), list(carried[n_accs:])
        new, k = [], 0
        for r in self.reduces:
            n = len(r.operands) // 2
            shape = r.operand(0).shape
            own = at if shape == self.input_shape and shape.same_layout(self.input_shape) else \
                e.apply(self._to_logical(self.input_map, shape), ids, syms)
            values = [e.scalar(r.operand(j), own) for j in range(n)]
            new += emit_scalar_computation(e.b, r.to_apply, [*accs[k:k + n], *values])
            k += n
        return [*new, *self._write_side(e, at, outs, side)]

    def _write_side(self, e: ElementEmitter, at: list[SSAValue], outs: list[SSAValue], side) -> list[SSAValue]:
        """`outs` with every side output written at input index `at` (logical, of the input shape)."""
        outs = list(outs)
        for leaves, root in side:
            leaf_shapes = array_leaves(root.shape)
            values = e.value(root, e.apply(bitcast_map(self.input_shape, leaf_shapes[0]), at))
            for leaf, value, shape in zip(leaves, values, leaf_shapes):
                outs[leaf] = store_element(e.b, value, outs[leaf], shape,
                                           e.apply(bitcast_map(self.input_shape, shape), at))
        return outs

    def _emit_threads(self, e: ElementEmitter, ids: list[SSAValue], outputs: list[SSAValue]) -> list[SSAValue]:
        t, b = self.tiling, e.b
        inits = self._init_values(e)
        accs, outputs = self._accumulate(e, ids, outputs, self.input_map, inits)
        types = [a.type for a in accs]
        warp = self.target.warp_size
        if t.row and t.threads_per_row > 1:
            accs = self._shuffle(b, accs, min(t.threads_per_row, warp))
            if t.threads_per_row > warp:
                accs = self._across_warps(e, ids, accs, inits, types)
        elif not t.row and warp > 1:
            accs = self._transpose_tile(e, ids, accs, inits, types)
        out_map = self._normalized_output_map()
        return self._write_results(e, ids, outputs, accs, out_map, [b.index(0)] * len(out_map.symbols))

    def _shuffle(self, b: KernelBuilder, accs: list[SSAValue], lanes: int) -> list[SSAValue]:
        """xla.shuffle_reduce over `lanes` lanes with the combined reducers as combiner."""
        if lanes <= 1:
            return accs
        name = f"{self.name}_combiner"
        if not self.combiners:
            self.combiners.append(combiner_function(name, self.reduces, [a.type for a in accs]))
        return list(b.insert(ShuffleReduceOp(name, accs, lanes // 2)).results)

    def _across_warps(self, e: ElementEmitter, ids, accs, inits, types) -> list[SSAValue]:
        """Rows spanning several warps: lane 0 of each warp writes its value to shared memory
        [rows][warps]; after the barrier, every warp reads them (lanes past the count read the
        init value) and reduces them with a shuffle."""
        t, b, warp = self.tiling, e.b, self.target.warp_size
        warps = t.threads_per_row // warp
        th = ids[0]
        lane, warp_in_row, row = e.apply(IndexingMap(self._dims()[:1], (dim(0) % warp,
                                                                          (dim(0) % t.threads_per_row) // warp,
                                                                          dim(0) // t.threads_per_row)), [th])
        zero = b.index(0)
        is_lane0 = b.add(arith.CmpiOp(lane, zero, "eq"))
        tiles = [b.add(AllocateSharedOp(TensorType(ty, [t.rows_per_block, warps]))) for ty in types]
        tiles = [b.add(PredicatedInsertOp(is_lane0, a, tile, [row, warp_in_row])) for a, tile in zip(accs, tiles)]
        tiles = list(b.insert(SyncThreadsOp(tiles)).results)
        inside = b.add(arith.CmpiOp(lane, b.index(warps), "ult"))
        clamped = b.add(arith.MinUIOp(lane, b.index(warps - 1)))
        values = [b.add(PredicatedExtractOp(inside, init, tile, [row, clamped])) for init, tile in zip(inits, tiles)]
        return self._shuffle(b, values, warp)

    def _transpose_tile(self, e: ElementEmitter, ids, accs, inits, types) -> list[SSAValue]:
        """Columns: thread (row r = th / 32, column c = th % 32) writes its partial to tile[r][c];
        after the barrier it reads tile[c][r] — column r's partial from row group c — so warp r
        holds the 32 partials of column r and shuffles them together."""
        b, warp = e.b, self.target.warp_size
        th = ids[0]
        r, c = e.apply(IndexingMap(self._dims()[:1], (dim(0) // warp, dim(0) % warp)), [th])
        tiles = [b.add(AllocateSharedOp(TensorType(ty, [warp, warp + 1]))) for ty in types]
        tiles = [b.add(tensor.InsertOp(a, tile, [r, c])) for a, tile in zip(accs, tiles)]
        tiles = list(b.insert(SyncThreadsOp(tiles)).results)
        values = [b.add(tensor.ExtractOp(tile, [c, r], ty)) for tile, ty in zip(tiles, types)]
        return self._shuffle(b, values, warp)

    def _write_results(self, e: ElementEmitter, ids, outputs, accs, out_map: IndexingMap,
                       symbols: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """The writing thread (out_map's constraints) computes every reduce root (its epilogue from
        the hero's value) at its output index and inserts it."""
        b = e.b
        logical = self._to_logical(out_map, self.input_shape)
        cond = _constraint_check(e, logical, ids, symbols)
        reduce_roots = [(leaves, root, hero) for leaves, root, hero in self._root_leaves() if hero.opcode == "reduce"]

        def write() -> list[SSAValue]:
            new = list(outputs)
            offsets, k = {}, 0
            for r in self.reduces:
                offsets[id(r)] = k
                k += len(r.operands) // 2
            for leaves, root, hero in reduce_roots:
                own = self._to_logical(out_map, hero.operand(0).shape)
                index = e.apply(IndexingMap(own.dims, own.results, own.symbols), ids, symbols)
                kept_index = [index[d] for d in self._kept(hero)]
                n = len(hero.operands) // 2
                start = offsets[id(hero)]
                e.overrides[id(hero)] = list(accs[start:start + n])
                values = e.value(root, _root_index(e, hero, root, kept_index))
                del e.overrides[id(hero)]
                for leaf, value, shape in zip(leaves, values, array_leaves(root.shape)):
                    new[leaf] = store_element(b, value, new[leaf], shape,
                                              e.apply(bitcast_map(hero.shape if not hero.shape.is_tuple
                                                                   else array_leaves(hero.shape)[0], shape),
                                                      kept_index))
            return new

        return e.if_else_many(cond, write, lambda: list(outputs), [o.type for o in outputs])

    def _emit_cpu_columns(self, e: ElementEmitter, ids: list[SSAValue], outputs: list[SSAValue]) -> list[SSAValue]:
        """CPU columns: the thread's `lanes` adjacent columns each keep an accumulator (in `groups`
        vectors of adjacent columns); rows are read in order, each row's lanes contiguous, one lane
        loop per group (vectorize-elementwise makes each one vector load and one vector op)."""
        inits = self._init_values(e)
        t = self.tiling
        width = t.lanes // t.groups
        n = len(inits)
        types = [a.type for a in inits]
        side = [(leaves, root) for leaves, root, hero in self._root_leaves() if hero.opcode != "reduce"]
        logical = self._to_logical(self.input_map, self.input_shape)
        b = e.b
        vtypes = [VectorType(ty, [width]) for ty in types]
        out_types = [o.type for o in outputs]

        def group_symbols(group: SSAValue, lane: SSAValue) -> list[SSAValue]:
            # `group` is defined outside the lane loop, or vectorize-loads-stores leaves its reads.
            return [group, lane] if t.groups > 1 else [lane]

        # Accumulators: `groups` vectors per reduced value, group-major.
        seeds = [b.add(vector.BroadcastOp(init, vt)) for _ in range(t.groups) for init, vt in zip(inits, vtypes)]
        row_block = Block(arg_types=[IndexType(), *[s.type for s in seeds], *out_types])
        with e.nested(row_block) as rb:
            row = row_block.args[0]
            vecs = list(row_block.args[1:1 + len(seeds)])
            outs = list(row_block.args[1 + len(seeds):])
            for g in range(t.groups):
                carried = vecs[g * n:(g + 1) * n]
                group = rb.index(g)
                lane_block = Block(arg_types=[IndexType(), *vtypes, *out_types])
                with e.nested(lane_block) as lb:
                    lane = lane_block.args[0]
                    # Lane `lane` of the row's accumulators, read from the vectors defined outside
                    # the lane loop (each lane touches only its own): vectorize-elementwise's form.
                    accs = [lb.add(vector.ExtractOp(a, [lane], ty)) for a, ty in zip(carried, types)]
                    stepped = self._step(e, logical, ids, [row, *group_symbols(group, lane)],
                                         [*accs, *lane_block.args[1 + n:]], n, side)
                    new = [lb.add(vector.InsertOp(v, a, [lane])) for v, a in zip(stepped[:n], lane_block.args[1:1 + n])]
                    lb.insert(scf.YieldOp(*new, *stepped[n:]))
                inner = rb.insert(scf.ForOp(rb.index(0), rb.index(width), rb.index(1), [*carried, *outs], lane_block))
                vecs[g * n:(g + 1) * n] = inner.results[:n]
                outs = list(inner.results[n:])
            rb.insert(scf.YieldOp(*vecs, *outs))
        # A thread past the last column (the last block's spare threads when the column chunks are
        # no multiple of the block) reads and writes nothing: unchecked, it read the rows after the
        # input's last and wrote a side output past its end, into the next buffer. `lanes` divides
        # the columns (reduction_tiling), so a thread's columns are all inside or all outside, and
        # the check at its first column (every range variable 0) decides.
        inside = _constraint_check(e, logical, ids, [b.index(0)] * len(logical.symbols))
        result = e.if_else_many(
            inside,
            lambda: list(b.insert(scf.ForOp(b.index(0), b.index(self.dims.dimensions[1]), b.index(1),
                                            [*seeds, *outputs], row_block)).results),
            lambda: [*seeds, *outputs], [*[s.type for s in seeds], *out_types])
        accs_v = list(result[:len(seeds)])
        outputs = list(result[len(seeds):])
        out_map = self._normalized_output_map()
        for g in range(t.groups):
            group = b.index(g)
            write_block = Block(arg_types=[IndexType(), *out_types])
            with e.nested(write_block) as wb:
                lane = write_block.args[0]
                accs = [wb.add(vector.ExtractOp(a, [lane], ty)) for a, ty in zip(accs_v[g * n:(g + 1) * n], types)]
                new = self._write_results(e, ids, list(write_block.args[1:]), accs, out_map, group_symbols(group, lane))
                wb.insert(scf.YieldOp(*new))
            outputs = list(b.insert(scf.ForOp(b.index(0), b.index(width), b.index(1), outputs, write_block)).results)
        return outputs


def _root_index(e: ElementEmitter, hero: HloInstruction, root: HloInstruction,
                kept_index: list[SSAValue]) -> list[SSAValue]:
    """The root's index of the hero's output element `kept_index` (an epilogue is elementwise or
    a bitcast of the hero, so the index maps through their shapes)."""
    hero_shape = hero.shape if not hero.shape.is_tuple else array_leaves(hero.shape)[0]
    root_shape = array_leaves(root.shape)[0]
    return e.apply(bitcast_map(hero_shape, root_shape), kept_index)


def _compose_bitcast(m: IndexingMap, src: Shape, dst: Shape, kept: list[int] | None = None) -> IndexingMap:
    """Results of `m` (logical indices of `src`, or of its `kept` dims) as logical indices of `dst`."""
    from hlocc.analysis.indexing_map import compose

    if kept is not None:
        m = IndexingMap(m.dims, tuple(m.results[d] for d in kept), m.symbols, m.runtime, m.constraints)
        src = Shape(src.element_type, tuple(src.dims[d] for d in kept), layout=_kept_layout(src, kept))
    return compose(m, bitcast_map(src, dst)).simplify(replace_point_dims=False)


def _kept_layout(shape: Shape, kept: list[int]):
    from hlocc.hlo.types import Layout

    order = [kept.index(d) for d in shape.minor_to_major if d in kept]
    return Layout(tuple(order))


def _constraint_check(e: ElementEmitter, m: IndexingMap, dims, symbols, dims_only: bool = False) -> SSAValue | None:
    """i1: the constraints of `m` hold at (dims, symbols); with `dims_only`, just those on the
    dimensions (thread and block ids), checked without range variables. None if there are none."""
    kept = [(c, iv) for c, iv in m.constraints
            if not dims_only or all(v.kind is VarKind.DIM for v in variables(c))]
    if not kept:
        return None
    values = e.apply(IndexingMap(m.dims, tuple(c for c, _ in kept), () if dims_only else m.symbols), dims, symbols)
    return e.b.in_intervals(values, [iv for _, iv in kept])


def _symbol_loop(e: ElementEmitter, m: IndexingMap, dims, carried, step) -> list[SSAValue]:
    """scf.for nests over `m`'s range variables carrying `carried`; `step(symbols, carried)` runs
    where the constraints hold; returns the carried values after the nest."""
    sizes = [v.bounds for v in m.symbols]

    def level(k: int, syms: list[SSAValue], values: list[SSAValue]) -> list[SSAValue]:
        if k == len(sizes):
            cond = _constraint_check(e, m, dims, syms)
            return e.if_else_many(cond, lambda: step(syms, values), lambda: list(values), [v.type for v in values])
        if sizes[k].size == 1:
            return level(k + 1, [*syms, e.b.index(sizes[k].lo)], values)
        block = Block(arg_types=[IndexType(), *[v.type for v in values]])
        with e.nested(block) as b:
            b.insert(scf.YieldOp(*level(k + 1, [*syms, block.args[0]], list(block.args[1:]))))
        loop = scf.ForOp(e.b.index(sizes[k].lo), e.b.index(sizes[k].hi + 1), e.b.index(1), values, block)
        return list(e.b.insert(loop).results)

    return level(0, [], list(carried))


symbol_loop = _symbol_loop  # (shared with the stitch emitter's GPU form)

__all__ = ["ReductionEmitter", "Tiling", "symbol_loop"]
