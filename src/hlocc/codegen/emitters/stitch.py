"""The stitch emitter (BladeDISC's kStitch fusion, issue 18): ONE kernel for a row reduction, the
reductions that read it and the values computed from them along the same rows (softmax, layernorm,
RMSnorm), from a fusion passes/stitch_fusion.py made (analysis/stitch_info.py says what it may
hold). This is the CPU form and the shared structure; the GPU form's stages and row writes (a block
per row) are in stitch_gpu.py. Either way, a per-row value that the computation broadcasts back
along the row (rsqrt(var + eps)) is computed once per row, as soon as the stages it reads are done.

On the CPU each thread takes one row (the reduction emitter's CPU row tiling, `reduction_tiling`: a block
holds a few thousand input elements' worth of rows) and

1. computes the row's reductions stage by stage (softmax: the max, then the sum of exp(x - max)):
   the reduces of a stage share one pass over the row, with the vector of partial accumulators of
   `reduce_partials.emit_row_partials` (a serial loop where it does not apply: integer values, or a
   row shorter than `reduce_partials.SHORT_ROW_MIN`; a stage of maximum/minimum reduces, whose value does not depend
   on the order, folds its chunks into up to four vectors of partials and combines the lanes by a
   tree, so that its compare-select chains run side by side). Each reduce's value then stands for
   the reduce (the element emitter's `overrides`), so later stages and the outputs read it
   wherever the fused computation broadcasts it back along the row;
2. writes the values with one element per row (a reduce root, or an epilogue of one);
3. walks the row once more and writes every row-shaped output, in chunks of one vector
   (`scf.for lane` loops that vectorize-loads-stores and vectorize-elementwise turn into vector
   loads, ops and stores), and a tail. A runtime row count ([?b, 4096]) takes its block count at
   run time and guards the last block's spare threads.

A runtime row length (a speculated stitch, runtime/plan_speculation.py: the length is symbolic,
the plan runs this kernel only where the row fits the budget, but the kernel is right at every
length) makes each block one row, the chunk counts size expressions (n floordiv lanes; under the
`vectorized` version's n := 16*n_16 simply n_16, with no tail) and each pass's tail the row's last
whole vector where n >= lanes (decided at run time, its repeated lanes masked by a runtime mask:
reduce_partials `runtime_tail`), a lane loop of n mod lanes elsewhere; the last pass prefetches.

The intermediate row values are not kept in a buffer: every pass re-reads the input row, which
one core's L1/L2 still holds (the pass stitches only rows that fit half of L2,
cost_model.stitch_fits), and recomputes the elementwise ops between the input and each use. For
softmax that computes exp twice per element (once for the sum, once for the output) instead of
writing and re-reading a stored exp: the recomputation runs at the speed of vector arithmetic,
while the unstitched plan moves the whole array through memory three more times.

Reduction order: float sums, max and min take up to four vectors of partials (a static row's
chunks or a runtime row's rounds of four chunks) and a tree over the lanes (`reassociated_sums`,
`reduce_partials.order_free`): max and min have the same value in any order; a sum is
reassociated, as XLA's reductions may be (jax.lax.reduce's monoid rule), so a stitched sum rounds
differently from the unstitched reduction's lane-order sum (within the tests' 2e-5). Other
reducers keep one vector and lane order. A divide by a per-row value is a multiply by its
reciprocal, as XLA:CPU computes it (`_reciprocals`).
"""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects import arith, func, scf, vector
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp, VectorType
from xdsl.ir import Block, Region, SSAValue

import hlocc.codegen.emitters.elemental_reduce  # noqa: F401  (registers reduce for the element emitter)
from hlocc.analysis.affine_expr import dim, size_expr, sym
from hlocc.analysis.cost_model import flops_per_element
from hlocc.analysis.hero import EmitterKind
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, Variable, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.reduction_info import ReductionDimensions, ReductionEmitterKind
from hlocc.analysis.simplifier import simplify_expr
from hlocc.analysis.stitch_info import NotStitchable, stitch_plan
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.storage import array_leaves, load_element, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.emitters.loop import SYMBOLIC_LOOP_OPS
from hlocc.codegen.emitters.reduce_partials import (
    ORDER_FREE_ACCUMULATORS,
    RUNTIME_TAIL,
    chunked_map,
    emit_row_partials,
    fold_elements,
    order_free,
    overlapped_tail,
    plan_partials,
    tail_map,
)
from hlocc.codegen.emitters.reduction_tiling import CPU_BLOCK_ELEMENTS, Tiling, reduction_tiling
from hlocc.codegen.emitters.stitch_gpu import (
    first_thread,
    gpu_tiling,
    is_block_row_marked,
    reduce_stage_gpu,
    write_rows_gpu,
)
from hlocc.codegen.ir import ApplyIndexingOp, PrefetchOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.partitioner import partition_fusion
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.symbolic import floordiv as sym_floordiv
from hlocc.hlo.symbolic import mod as sym_mod


class StitchEmitter(FusionEmitterBase):
    # a runtime row count, and a runtime row length (a speculated stitch), whose size the fusion
    # may read (passes/stitch_fusion.py takes a get-dimension-size in: `_sizes`)
    symbolic_ops = SYMBOLIC_LOOP_OPS | {"get-dimension-size"}

    def __init__(self, fusion, target, name: str = "main"):
        super().__init__(fusion, target, name)
        try:
            self.plan = stitch_plan(fusion)
        except NotStitchable as e:
            raise UnsupportedError(f"unsupported: stitch fusion '{fusion.name}': {e}") from None
        self.gpu = target.warp_size > 1
        self.combiners: list[func.FuncOp] = []  # the GPU form's shuffle combiners
        rows = self.plan.rows
        if self.gpu:  # (a runtime row count too: the most rows per block that divide it; a runtime
            # row length: a warp's, or under the `block_row` version a block's)
            self.tiling = gpu_tiling(rows, self.plan.row_length, target.warp_size, is_block_row_marked(fusion))
        elif isinstance(self.plan.row_length, DimExpr):
            # A runtime row length (a speculated stitch: runtime/speculation.py) is unknown here, so
            # a block is one row: a thread's share of the thread pool is then a multiple of a row.
            self.tiling = Tiling(True, 1, rows, rows_per_block=1)
        elif isinstance(rows, int):
            self.tiling = reduction_tiling(ReductionDimensions(True, (1, rows, self.plan.row_length)),
                                           ReductionEmitterKind.ROW, self.plan.row_shape, self.plan.reduces, 1)
        else:  # a runtime row count: the static tiling's rows per block, the block count per call
            per_block = max(1, CPU_BLOCK_ELEMENTS // self.plan.row_length)
            self.tiling = Tiling(True, per_block, sym_floordiv(rows + (per_block - 1), per_block),
                                 rows_per_block=per_block)
        self.roots = list(fusion.root.operands) if fusion.root.opcode == "tuple" else [fusion.root]

    def vector_elements(self) -> int:
        """The row elements a vector of this kernel covers (the widest of the reduced values' and
        the row-shaped outputs' vectors): a row length that is a multiple of it has no tail and
        aligned rows (runtime/speculation.py's `vectorized` version of a runtime row length)."""
        roots = [r for r in self.roots if _same(r.shape, self.plan.row_shape)]
        bits = [self.plan.row_shape.element_type.bits, *(r.shape.element_type.bits for r in roots)]
        return max(1, self.target.vector_bytes * 8 // max(min(bits), 8))

    # -- indexing -------------------------------------------------------------------------------------
    def _dims(self) -> tuple[Variable, Variable]:
        t = self.tiling
        return (Variable(Interval(0, t.threads_per_block - 1), "th_x"),
                Variable(Interval(0, size_bound(t.blocks) - 1), "bl_x"))

    def _row(self):
        t = self.tiling
        if self.gpu:  # a block per row, or a warp per row (stitch_gpu.gpu_tiling)
            return dim(1) if t.rows_per_block == 1 else dim(1) * t.rows_per_block + dim(0) // t.threads_per_row
        return dim(1) * t.rows_per_block + dim(0)

    def row_map(self, chunk: int = 0) -> IndexingMap:
        """(th_x, bl_x)[j] -> the logical index of the row shape of the thread's row element j
        (with `chunk`, (th_x, bl_x)[c, lane] for element c * chunk + lane). The kept dimensions
        are the row's number delinearized over them (the row dimension taken as one element), the
        row dimension is j: the same index as delinearizing `row * n + j`, which a symbolic n
        cannot simplify back (j's bound is then SIZE_BOUND, not n - 1)."""
        shape, n = self.plan.row_shape, self.plan.row_length
        kept_dims = [1 if d == self.plan.row_dim else x for d, x in enumerate(shape.dims)]
        results = list(delinearize(self._row(), kept_dims, shape.minor_to_major))
        results[self.plan.row_dim] = sym(0)
        symbols = (Variable(Interval(0, size_bound(n) - 1), "j"),)
        m = IndexingMap(self._dims(), tuple(results), symbols)
        m = IndexingMap(m.dims, tuple(simplify_expr(r, m.var_bounds) for r in m.results), symbols)
        return chunked_map(m, 0, chunk) if chunk else m

    def _row_index(self, e: ElementEmitter, ids, shape) -> list[SSAValue]:
        """The logical index of `shape` (one element per row, row-major) of the thread's row."""
        m = IndexingMap(self._dims(), tuple(delinearize(self._row(), shape.dims, shape.minor_to_major)))
        return e.apply(m.simplify(replace_point_dims=False), ids)

    # -- emission -------------------------------------------------------------------------------------
    def emit(self) -> KernelModule:
        leaves = array_leaves(self.fusion.root.shape)
        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, leaves)
        b = KernelBuilder(block)
        t = self.tiling
        launch = LaunchDims(t.threads_per_block, t.blocks)
        ids = list(thread_and_block_ids(b, launch))
        e = ElementEmitter(b, partition_fusion(self.fusion).fusion, None, list(block.args[:len(params)]))
        outputs = list(block.args[len(params):])
        self._sizes(e)
        rows = self.plan.rows
        # The last block's spare threads do nothing (rows - row >= 1 holds for the others). The GPU
        # form has none: its rows per block divide the rows (stitch_gpu.gpu_tiling).
        spare = t.rows_per_block > 1 and not self.gpu and (not isinstance(rows, int)
                                                          or t.rows_per_block * t.blocks > rows)
        room = IndexingMap(self._dims(), (size_expr(rows) - self._row(),))
        cond = b.in_intervals(list(b.insert(ApplyIndexingOp(room, ids)).results),
                              [Interval(1, NO_UPPER_BOUND)]) if spare else None
        outputs = e.if_else_many(cond, lambda: self._emit_row(e, ids, outputs), lambda: list(outputs),
                                 [o.type for o in outputs])
        b.insert(func.ReturnOp(*outputs))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        return KernelModule(ModuleOp([entry, *self.combiners]), self.name, launch, len(params), len(leaves),
                            emitter=EmitterKind.STITCH.value, symbols=self.symbols)

    def _sizes(self, e: ElementEmitter) -> None:
        """Each get-dimension-size's value, from the kernel's dims (`xla.symbol_value`), as an
        override: JAX's mean over [b, n] divides by it, which the host wrote into a buffer of
        its own per call before the stitch pass took it in."""
        for g in self.fusion.instructions:
            if g.opcode == "get-dimension-size":
                size = size_value(e.b, g.operand(0).shape.dims[g.attrs["dimensions"][0]])
                e.overrides[id(g)] = [e.b.add(arith.IndexCastOp(size, element_type(g.shape.element_type)))]

    def _emit_row(self, e: ElementEmitter, ids: list[SSAValue], outputs: list[SSAValue]) -> list[SSAValue]:
        outputs = list(outputs)
        row_roots = [k for k, root in enumerate(self.roots) if _same(root.shape, self.plan.row_shape)]
        buffered: dict[int, int] = {}  # id(row value) -> the output whose row holds it until the last pass
        per_row = self._per_row_values()
        hoisted: list[HloInstruction] = []
        for stage in self.plan.stages:
            if self.gpu:
                values = reduce_stage_gpu(self, e, ids, list(stage))
            else:
                values, outputs = self._reduce_stage(e, ids, list(stage), outputs, row_roots, buffered)
            for r, v in zip(stage, values):
                e.overrides[id(r)] = v
            # The per-row values the stages computed so far can read are computed once, here,
            # rather than at every element the row loops broadcast them to.
            for x, deps in per_row:
                if id(x) not in e.overrides and all(id(r) in e.overrides for r in deps):
                    e.overrides[id(x)] = e.value(x, self._row_index(e, ids, x.shape))
                    hoisted.append(x)
        per_row_roots = [k for k in range(len(self.roots)) if k not in row_roots]

        def write_per_row() -> list[SSAValue]:
            outs = list(outputs)
            for k in per_row_roots:
                root = self.roots[k]
                index = self._row_index(e, ids, root.shape)
                outs[k] = store_element(e.b, e.scalar(root, index), outs[k], root.shape, index)
            return outs

        if per_row_roots:  # (on a GPU by thread 0 of the row's block)
            outputs = e.if_else_many(first_thread(self, e, ids) if self.gpu else None, write_per_row,
                                     lambda: list(outputs), [o.type for o in outputs])
        if row_roots and self.gpu:
            outputs = write_rows_gpu(self, e, ids, outputs, row_roots)
        elif row_roots:
            outputs = self._write_rows(e, ids, outputs, row_roots, buffered)
        for x in [*self.plan.reduces, *hoisted]:
            del e.overrides[id(x)]
        return outputs

    def _per_row_values(self) -> list[tuple[HloInstruction, list[HloInstruction]]]:
        """(value, the reduces it depends on) for each per-row value a broadcast sends along the
        rows (stitch_info's rule: one element per row, row-major), operands before users."""
        deps: dict[int, list[HloInstruction]] = {}
        for x in self.fusion.post_order():
            own = [x] if x.opcode == "reduce" else []
            deps[id(x)] = list({id(r): r for op in x.operands for r in deps[id(op)]}.values()) + own
        return [(x.operand(0), deps[id(x.operand(0))]) for x in self.fusion.post_order()
                if x.opcode == "broadcast" and deps[id(x.operand(0))] and x.operand(0).opcode != "reduce"]

    def _outputs_private(self) -> bool:
        """Whether no output can share a buffer with an input the last pass reads: buffer sharing
        (runtime/buffer_sharing.py) lets an output overwrite a dying row-sized parameter only when
        every use of it is elementwise; one that reaches a reduce never shares."""
        n = self.plan.row_shape.num_elements
        for param in self.fusion.parameters:
            if param.shape.num_elements != n:
                continue
            seen, pending = set(), [param]
            while pending:
                x = pending.pop()
                if id(x) not in seen:
                    seen.add(id(x))
                    pending.extend(x.users)
            if not any(x.opcode == "reduce" for x in self.fusion.instructions if id(x) in seen):
                return False
        return True

    def _buffers(self, reduces: list[HloInstruction], row_roots: list[int], buffered: dict[int, int]):
        """(row value, output) pairs: a reduced operand that is expensive to compute again (an exp,
        a division: `flops_per_element` of 8 or more somewhere in it) is stored into the row of an
        output of its element type while the stage computes it, and read back from there by the
        last pass, which then overwrites the row with the output's own values."""
        if not self._outputs_private():
            return []
        free = [k for k in row_roots if k not in buffered.values()]
        read_later = _computed_from(self.roots[k] for k in row_roots)  # (a value no output reads: no buffer)
        pairs = []
        for r in reduces:
            for i in range(len(r.operands) // 2):
                v = r.operand(i)
                if id(v) in buffered or v.opcode == "parameter" or not _expensive(v) or id(v) not in read_later:
                    continue
                k = next((k for k in free if self.roots[k].shape.element_type == v.shape.element_type), None)
                if k is not None:
                    free.remove(k)
                    pairs.append((v, k))
        return pairs

    def _reduce_stage(self, e: ElementEmitter, ids, reduces: list[HloInstruction], outputs: list[SSAValue],
                      row_roots: list[int], buffered: dict[int, int]):
        """(each reduce's values (one per reduced operand) over the thread's row, init folded in;
        the outputs, with the rows of the values this stage buffers written)."""
        m = self.row_map()
        inits = [e.scalar(r.operand(len(r.operands) // 2 + k), []) for r in reduces
                 for k in range(len(r.operands) // 2)]
        maps = [m] * len(inits)
        plans = {plan_partials(r, m) for r in reduces}
        plan = plans.pop() if len(plans) == 1 else None
        if plan is not None:
            pairs = self._buffers(reduces, row_roots, buffered)
            free = order_free(reduces) or reassociated_sums(reduces)

            # (The overlapped tail stores some elements twice, the same values: the outputs are
            # private, `_outputs_private`.)
            def store(syms: list[SSAValue], outs: list[SSAValue], shift: int | str) -> list[SSAValue]:
                at = tail_map(m, plan.symbol, plan.lanes, self.plan.row_length) if shift == RUNTIME_TAIL else \
                    chunked_map(m, plan.symbol, plan.lanes, shift)
                index = e.apply(at, ids, syms)
                outs = list(outs)
                for v, k in pairs:
                    outs[k] = store_element(e.b, e.scalar(v, index), outs[k], self.roots[k].shape, index)
                return outs

            chains = chains_for(reduces)
            if pairs:
                partials, outputs = emit_row_partials(e, reduces, maps, ids, [None], plan, inits, outputs, store,
                                                      overlap_tail=True, order_free=free, runtime_tail=True,
                                                      chains=chains)
            else:
                partials, _ = emit_row_partials(e, reduces, maps, ids, [None], plan, inits, overlap_tail=True,
                                                order_free=free, runtime_tail=True, chains=chains)
            buffered.update((id(v), k) for v, k in pairs)
        else:
            partials = self._serial(e, ids, reduces, m, inits)
        values, k = [], 0
        for r in reduces:
            n = len(r.operands) // 2
            if plan is not None:  # the partials leave the init out; the serial loop starts from it
                values.append(emit_scalar_computation(e.b, r.to_apply, [*inits[k:k + n], *partials[k:k + n]]))
            else:
                values.append(partials[k:k + n])
            k += n
        return values, list(outputs)

    def _serial(self, e: ElementEmitter, ids, reduces, m: IndexingMap, inits: list[SSAValue]) -> list[SSAValue]:
        """scf.for j over the row carrying one accumulator per reduced value."""
        return emit_for(e, e.b.index(0), size_value(e.b, self.plan.row_length), inits,
                    lambda j, accs: fold_elements(e, reduces, accs, e.apply(m, ids, [j])))

    def _write_rows(self, e: ElementEmitter, ids, outputs: list[SSAValue], roots: list[int],
                    buffered: dict[int, int]) -> list[SSAValue]:
        """Every row-shaped root along the thread's row: whole vectors, then the tail; a buffered
        value is read back from its output's row (before the output's element is written)."""
        bits = max(max(array_leaves(self.roots[k].shape)[0].element_type.bits, 8) for k in roots)
        lanes = max(1, self.target.vector_bytes * 8 // bits)
        m = self.row_map(lanes)
        n = self.plan.row_length
        if isinstance(n, DimExpr):  # a runtime row: n / lanes chunks and a lane loop of n mod lanes
            # (as size expressions: a speculated n = 16*n_16 has n_16 chunks and no tail)
            chunks = size_value(e.b, sym_floordiv(n, lanes))
            tail = sym_mod(n, lanes)
            tail = size_value(e.b, tail) if tail else 0
        else:
            chunks, tail = divmod(n, lanes)
        # Buffered values are read from the outputs as the stages left them (the tensors defined
        # outside the loops, which vectorize-loads-stores turns into vector loads); the element
        # read is the one this iteration overwrites next, so no read sees a new value.
        stored = list(outputs)
        reciprocals = self._reciprocals(e)

        def values(index: list[SSAValue]) -> list[SSAValue]:
            for v, k in buffered.items():
                e.overrides[v] = [load_element(e.b, stored[k], self.roots[k].shape, index)]
            for d, r in reciprocals:
                e.overrides[id(d)] = [e.b.add(arith.MulfOp(e.scalar(d.operand(0), index), r))]
            out = [e.scalar(self.roots[k], index) for k in roots]
            for v in [*buffered, *(id(d) for d, _ in reciprocals)]:
                del e.overrides[v]
            return out

        def lane_loop(chunk: SSAValue, count: int | SSAValue, outs: list[SSAValue]) -> list[SSAValue]:
            def body(lane: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
                index = e.apply(m, ids, [chunk, lane])
                carried = list(carried)
                for k, x in zip(roots, values(index)):
                    carried[k] = store_element(e.b, x, carried[k], self.roots[k].shape, index)
                return carried

            return emit_for(e, e.b.index(0), count if isinstance(count, SSAValue) else e.b.index(count), outs, body)

        # The tail as one whole vector ending at the row's end: computed before the chunks
        # overwrite the buffered values its first lanes read, stored after them. A runtime row
        # takes it where the row holds a whole vector (`whole`), else a lane loop.
        shift = (RUNTIME_TAIL if isinstance(tail, SSAValue) else None) if isinstance(n, DimExpr) \
            else overlapped_tail(n, lanes)
        chunk_index = chunks if isinstance(chunks, SSAValue) else e.b.index(chunks)
        whole = e.b.add(arith.CmpiOp(size_value(e.b, n), e.b.index(lanes), "uge")) if shift == RUNTIME_TAIL else None
        if shift is not None:
            types = [VectorType(element_type(self.roots[k].shape.element_type), [lanes]) for k in roots]
            last = e.if_else_many(
                whole, lambda: self._overlapped_tail(e, ids, roots, lanes, shift, chunk_index, values),
                lambda: [_zeros(e, t) for t in types], types)
        prefetch = self._next_row_prefetch(e, ids, lanes)

        def chunk(c: SSAValue, outs: list[SSAValue]) -> list[SSAValue]:
            if prefetch is not None:
                prefetch(c)
            return lane_loop(c, lanes, outs)

        if isinstance(chunks, SSAValue) or chunks:
            outputs = emit_for(e, e.b.index(0), chunk_index, outputs, chunk)
        if shift is not None:
            last_map = self._tail_map(lanes, shift)

            def store_tail(lane: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
                index = e.apply(last_map, ids, [chunk_index, lane])
                carried = list(carried)
                for k, v in zip(roots, last):
                    x = e.b.add(vector.ExtractOp(v, [lane], v.type.element_type))
                    carried[k] = store_element(e.b, x, carried[k], self.roots[k].shape, index)
                return carried

            return e.if_else_many(whole, lambda: emit_for(e, e.b.index(0), e.b.index(lanes), outputs, store_tail),
                                  lambda: lane_loop(chunk_index, tail, outputs), [o.type for o in outputs])
        if isinstance(tail, SSAValue) or tail:
            outputs = lane_loop(chunk_index, tail, outputs)
        return outputs

    def _tail_map(self, lanes: int, shift: int | str) -> IndexingMap:
        """The row map of the overlapped tail (c, lane): a static `shift`, or RUNTIME_TAIL."""
        if shift == RUNTIME_TAIL:
            return tail_map(self.row_map(), 0, lanes, self.plan.row_length)
        return chunked_map(self.row_map(), 0, lanes, shift)

    def _reciprocals(self, e: ElementEmitter) -> list[tuple[HloInstruction, SSAValue]]:
        """(divide, 1 / its divisor) for each row-shaped f32/f64 divide by a broadcast per-row
        value the stages computed (softmax's exp / sum): the last pass multiplies by the
        reciprocal, computed once per row, as XLA:CPU's algebraic simplifier rewrites A /
        broadcast(B) into A * broadcast(1 / B) (the quotient within an ulp of the divide's; inf, 0
        and NaN divisors give the same results). A vector divide costs several multiplies."""
        out = []
        for d in self.fusion.post_order():
            bcast = d.operand(1) if d.opcode == "divide" else None
            if bcast is None or bcast.opcode != "broadcast" or id(bcast.operand(0)) not in e.overrides or \
                    d.shape.element_type.name not in ("f32", "f64") or not _same(d.shape, self.plan.row_shape):
                continue
            (divisor,) = e.overrides[id(bcast.operand(0))]
            out.append((d, e.b.add(arith.DivfOp(e.b.constant(1.0, divisor.type), divisor))))
        return out

    def _next_row_prefetch(self, e: ElementEmitter, ids, lanes: int) -> Callable[[SSAValue], None] | None:
        """Where a row is long (PREFETCH_ROW_BYTES or more): `(chunk) -> None` emitting a prefetch of
        that chunk of the NEXT row of every row-shaped parameter, for the last pass. The first
        stage walks a row that comes from memory while the stages after it compute on a row in
        cache; with the next row on its way during the last pass (the thread's next row is row + 1:
        the CPU launcher runs a block's threads in order) the memory and the arithmetic overlap.
        Past the last row the address lies outside the buffer, which a prefetch tolerates."""
        shape, n = self.plan.row_shape, self.plan.row_length
        params = [p for p in self.fusion.parameters if _same(p.shape, shape)]
        if not params or (isinstance(n, int) and n * shape.element_type.bits // 8 < PREFETCH_ROW_BYTES):
            return None  # (a runtime row length prefetches: one instruction a chunk if it is short)
        chunk = Variable(Interval(0, -(-size_bound(n) // lanes) - 1), "c")
        m = IndexingMap(self._dims(), ((self._row() + 1) * n + sym(0) * lanes,), (chunk,))
        block_args = {id(p): e.params[p.parameter_number] for p in params}

        def prefetch(c: SSAValue) -> None:
            (index,) = e.apply(m, ids, [c])
            for p in params:
                e.b.insert(PrefetchOp(block_args[id(p)], index))

        return prefetch

    def _overlapped_tail(self, e: ElementEmitter, ids, roots: list[int], lanes: int, shift: int | str,
                         chunk: SSAValue, values: Callable[[list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
        """One vector per row-shaped root: its values at the row's last `lanes` elements (a lane
        loop inserting into carried vectors, the form vectorize-elementwise takes)."""
        last_map = self._tail_map(lanes, shift)
        types = [VectorType(element_type(self.roots[k].shape.element_type), [lanes]) for k in roots]

        def body(lane: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            index = e.apply(last_map, ids, [chunk, lane])
            return [e.b.add(vector.InsertOp(x, v, [lane])) for x, v in zip(values(index), carried)]

        return emit_for(e, e.b.index(0), e.b.index(lanes), [_zeros(e, t) for t in types], body)


PREFETCH_ROW_BYTES = 4096
"""A row at least this long gets `_next_row_prefetch` (a page: shorter rows are a few cache lines,
which the hardware prefetchers follow from row to row on their own)."""


def reassociated_sums(reduces) -> bool:
    """Whether every reducer is a float add of its two parameters: the stitch kernel then sums a row
    as it takes a max (several vectors of partials, lanes combined by a tree), which reassociates
    the sum as XLA's reductions may (the module doc's "Reduction order"). In lane order with one
    vector, a row's sum was one chain of dependent vector adds (4 cycles each) and a 15-add lane
    chain per stage, which a 127- or 128-element layernorm row spent most of its time in."""
    for r in reduces:
        root = r.to_apply.root
        if len(r.operands) != 2 or root.opcode != "add" or not root.shape.element_type.is_float or \
                {x.opcode for x in root.operands} != {"parameter"} or root.operand(0) is root.operand(1):
            return False
    return True


def _zeros(e: ElementEmitter, t: VectorType) -> SSAValue:
    return e.b.add(vector.BroadcastOp(e.b.constant(0, t.element_type), t))


def _same(a, b) -> bool:
    return a.dims == b.dims and tuple(a.minor_to_major) == tuple(b.minor_to_major)


EXPENSIVE_STAGE_CHAINS = 1
"""The vectors of partials (`emit_row_partials`' chains) of a stage that reduces a value expensive
to compute (`_expensive`: softmax's sum of exp(x - max)): the per-element work (exp's fast form
~20 vector ops on AVX2) hides the latency of one chain of adds, and each further chain's vectors
are live across the loop, where they spill on a host of 16 vector registers. Softmax on the AVX2
host, same process, interleaved, 4 chains against 1: runtime rows (256, 128) 34.8 -> 31.9 us,
(512, 4096) 2.00 -> 1.85 ms; static rows, since exp's fast form, (256, 128) 26 -> 25 us,
(256, 1024) 160 -> 153 us, (512, 4096) 1.75 -> 1.65 ms, (16384, 127) 1.61 -> 1.52 ms. A stage of
cheap elements (a max over x, layernorm's sums) keeps ORDER_FREE_ACCUMULATORS: layernorm
(512, 4096) 0.61 ms with 4 chains, 0.91 with 1."""


def chains_for(reduces: list[HloInstruction]) -> int:
    """`emit_row_partials`' chains for a stage reducing `reduces`' operands along rows."""
    values = [r.operand(k) for r in reduces for k in range(len(r.operands) // 2)]
    return EXPENSIVE_STAGE_CHAINS if any(_expensive(v) for v in values) else ORDER_FREE_ACCUMULATORS


def _expensive(v: HloInstruction) -> bool:
    """Whether computing `v` again per element costs more than reading it back: an op of 8 flops
    or more per element (cost_model: divisions, roots, transcendentals) up to the parameters or
    reduces it is computed from. What a broadcast reads is computed once per row (a per-row value:
    `_per_row_values`), or once, not per element: a mean's division by the runtime row length
    (JAX's layernorm over [b, n]) made the symbolic kernel buffer (x - mean)^2, read by no output."""
    seen: set[int] = set()
    pending = [v]
    while pending:
        x = pending.pop()
        if id(x) in seen or x.opcode in ("parameter", "reduce", "broadcast"):
            continue
        seen.add(id(x))
        if flops_per_element(x) >= 8:
            return True
        pending.extend(x.operands)
    return False


def _computed_from(roots) -> set[int]:
    """Ids of the values the row loop computes `roots` from (up to the reduces, whose values it has)."""
    seen: set[int] = set()
    pending = list(roots)
    while pending:
        x = pending.pop()
        if id(x) not in seen:
            seen.add(id(x))
            if x.opcode != "reduce":
                pending.extend(x.operands)
    return seen


def emit_for(e: ElementEmitter, lo: SSAValue, hi: SSAValue, carried: list[SSAValue],
         body: Callable[[SSAValue, list[SSAValue]], list[SSAValue]]) -> list[SSAValue]:
    """scf.for iv in [lo, hi) carrying `carried`; values computed inside are not reused outside."""
    block = Block(arg_types=[IndexType(), *[v.type for v in carried]])
    with e.nested(block) as b:
        b.insert(scf.YieldOp(*body(block.args[0], list(block.args[1:]))))
    return list(e.b.insert(scf.ForOp(lo, hi, e.b.index(1), carried, block)).results)


__all__ = ["StitchEmitter", "emit_for"]
