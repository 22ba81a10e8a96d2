"""The loop emitter (XLA's LoopFusion, seed 000 "Loop emitter"): one thread per group of
consecutive output elements, writes in the output's physical order so they coalesce.

The entry function is `@main(param tensors..., output tensors...) -> output tensors`: thread and
block ids (with their `xla.range`), one `xla.loop` over the launch map's range variable
(`vector_index`), a `xla.pure_call` of the root subgraph at the map's output index, and one
`tensor.insert` per output. A multi-output fusion (tuple root) writes every output at the same
physical position (all roots of a loop fusion have the same number of elements), through the
bitcast map from the first root's index.

The row grid (CPU, *not in XLA*, whose CPU loop is a nest over the shape with the minor dim inner):
the grid numbers vectors of consecutive elements, so where the physical minor dim n is not a
multiple of the vector a vector straddles two rows, and an operand read per row (`m[i]` of
`exp(x[i, j] - m[i])`, softmax's normalise) or along the row (a bias `c[j]`) is a different element
per lane, through a division by n: a gather, and the lanes stay scalar (exp over [2048, 31] took
3.5x the time per element of [2048, 32]). Where that pays (`_row_grid_pays`, a cost model measured
on the development VM) a thread takes a vector of one row instead (`symbolic_loop_grid(rows=True)`:
rows in `ceildiv(n, vector)` chunks): `m[i]` is one scalar per thread, `c[j]` one vector read. A
row's last chunk is partial: the static grid has it as the constraint `n - column >= 1` of one loop,
which `vectorize-loads-stores-unaligned` makes a masked vector loop (`vectorize_masked_lanes`),
as it does the static grid's partial last block. A row shorter than the vector gets a vector of
the power of two at or above its length (4 lanes for rows of 3), not 16 lanes of which 13 are
masked off: convert_image_preproc (u8[2, 32, 32, 3] normalised per channel) ran at 0.53x XLA:CPU
on an AVX2 host, whose 16-lane f32 vector is two ymm registers and whose byte masks are
emulated, and at 2-3x after this.

Runtime dims (dynamic shapes, CPU): a fusion of elementwise, broadcast, iota, transpose, reshape,
slice, reverse, constant ops (and reduces computed elementally) on symbolic shapes compiles once;
the launch is `ceildiv(N, threads * vector)` blocks, evaluated per call, and the launch map divides
by `$size` atoms where a symbolic dimension is not the most major. Instead of the static map's
bound constraint, a thread checks once whether its whole vector lies below N: then it runs the
unconstrained loop (which vectorizes as the static one does), else a copy of the loop with the
per-element constraint `N - linear >= 1` (a masked tail, `vectorize_masked_lanes`; at most one thread
has a partial vector, or one per row in the row grid).
The tail calls a copy of the root subgraph function, so that each copy has one caller and is
inlined. Where the vectored size is a multiple of the vector (`SymbolicGrid.whole_vectors`: a
speculated version, runtime/speculation.py, or a static minor size) no vector is partial: the
thread runs the loop or nothing, with no tail (the static path's code).
"""

from __future__ import annotations

import math

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

import hlocc.codegen.emitters.elemental_reduce  # noqa: F401  (registers reduce and reduce-window)
from hlocc.analysis.affine_expr import IndexingError, dim, linear_form, variables
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.indexing_analysis import fusion_parameter_maps, fusion_roots
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims, SymbolicGrid, loop_launch_dims, loop_launch_map, symbolic_loop_grid
from hlocc.analysis.linearize import linear_index
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import array_leaves, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.ir import ApplyIndexingOp, LoopOp, PureCallOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.errors import UnsupportedError
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.symbolic import DimExpr

SYMBOLIC_LOOP_OPS = frozenset({
    *(name for name, info in OPCODES.items() if info.is_elementwise), "map", "parameter", "constant", "broadcast",
    "transpose", "iota", "reshape", "bitcast", "reverse", "slice", "tuple", "get-tuple-element", "reduce",
    "concatenate", "pad", "copy", "dynamic-slice", "gather", "reduce-window", "bitcast-convert"})
"""What the loop emitter compiles on symbolic shapes (index maps with `$size` atoms, module doc).
A bitcast-convert between types of one width is elementwise (identity indexing); one that changes
the width is refused by its elemental emitter on any shape, so it stays compiled per size."""


ROW_CHUNK_COST = 1.2
"""A row grid's vector relative to a whole flat one (`_flat_cost`): the mask, and the threads'
divisions by the chunk count. Measured with exp(x - m[i]) over f32[2048, n] on the development VM
(Sapphire Rapids, AVX-512): 7.2 ns per chunk against 6.3 per flat vector at n = 16."""

STRADDLE_COST = {1: 1.0, 2: 1.1, 4: 1.33, 8: 1.6}
"""A flat vector that holds s pieces of rows (s = vector / gcd(n, vector) for rows of n), relative
to one inside a row, when a value per row is read (`m[i]`): LLVM proves each piece's row the same
and assembles the vector from s scalar loads; from 16 pieces on it gives up and the whole body
runs lane by lane (4.3x). Same measurement as ROW_CHUNK_COST: n = 24 (2 pieces) 6.8 ns per
vector, n = 12, 20, 28 (4) 8.2-8.6, n = 6 (8) 10, odd n (16) 26-28."""


def _flat_cost(n: int, vector: int, across: bool) -> float:
    """The cost of the flat grid's vectors over one row of n elements, in whole vectors: n / vector
    of them, each as costly as its pieces of rows make it (STRADDLE_COST). A read across the row
    (`b[j]`) is a gather per lane unless the row length divides the vector (then the lanes' pattern
    repeats in every vector, and LLVM loads it once): 7x at n = 3, 4x at n = 24."""
    pieces = vector // math.gcd(n, vector)
    if across and vector % n:
        return n / vector * 7.0
    return n / vector * STRADDLE_COST.get(pieces, 4.3)


class LoopEmitter(FusionEmitterBase):
    symbolic_ops = SYMBOLIC_LOOP_OPS

    def launch(self) -> tuple[LaunchDims, int]:
        """(launch dims, elements per thread) for the fusion's first output."""
        leaves = array_leaves(self.fusion.root.shape)
        first = leaves[0]
        n = first.num_elements
        bits = [max(leaf.element_type.bits, 1) for leaf in leaves]
        per_thread = self.target.loop_elements_per_thread(size_bound(n), min(bits), max(bits))
        whole_bytes = max(1, -(-8 // min(bits)))  # elements a thread writes at least: whole bytes
        if self.symbols and any(i.opcode == "reduce" for i in self.fusion.instructions):
            # An output element is a whole row or more of a symbolic size: one per thread, as the
            # reduction emitter's CPU form (16 unrolled rows per thread only grew the code; 32
            # copies of a pred[] reduction's loop nest over [?b, 4, ?n] took LLVM 60 s).
            per_thread = whole_bytes
        if isinstance(n, DimExpr):
            return loop_launch_dims(n, self.target.threads_per_block, per_thread), per_thread
        # no wider than the output (a power of two): a vector past it is only guarded code
        per_thread = min(per_thread, max(whole_bytes, 1 << max(0, n - 1).bit_length()))
        threads = max(1, min(self.target.threads_per_block, -(-n // per_thread)))
        return loop_launch_dims(n, threads, per_thread), per_thread

    def emit(self) -> KernelModule:
        sizes = {leaf.num_elements for leaf in array_leaves(self.fusion.root.shape)}
        if len(sizes) > 1:
            # XLA's loop fusions have roots of one element count; writing others through the first
            # root's grid would leave elements unwritten or write out of bounds.
            raise UnsupportedError(f"unsupported: loop fusion '{self.fusion.name}' whose outputs have different "
                                   f"numbers of elements ({', '.join(sorted(map(str, sizes)))})")
        partitioned = self.partition()
        functions = self.subgraph_functions(partitioned)
        root_subgraph = partitioned.fusion.root_subgraph
        leaves = array_leaves(self.fusion.root.shape)
        first = leaves[0]
        launch, per_thread = self.launch()
        rows = per_thread > 1 and self._row_grid_pays(leaves, per_thread)
        if rows:  # a row shorter than the vector: a vector of its length's power of two (module doc)
            per_thread = min(per_thread, 1 << (first.dims[first.minor_to_major[0]] - 1).bit_length())
        grid = None
        if self.symbols:
            grid = symbolic_loop_grid(first.dims, launch.threads_per_block, per_thread, first.minor_to_major,
                                      tile_rows=self._transposed_tile_rows(first), rows=rows)
            launch, loop_map = grid.launch, grid.map
        elif rows:
            launch, loop_map = self._static_row_grid(first, per_thread)
        else:
            loop_map = loop_launch_map(first.dims, launch, vector_size=per_thread,
                                       minor_to_major=first.minor_to_major)

        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, leaves)
        b = KernelBuilder(block)
        thread_id, block_id = thread_and_block_ids(b, launch)

        outputs = list(block.args[len(params):])
        ids = [thread_id, block_id]

        def emit_loop(at: KernelBuilder, m: IndexingMap, callee: str) -> list[SSAValue]:
            loop = LoopOp(m, ids, outputs)
            at.insert(loop)
            body = KernelBuilder(loop.body.block)
            index = list(loop.map_results)
            result_types = [element_type(leaf.element_type) for leaf in leaves]
            call = PureCallOp(callee, [*block.args[:len(params)], *index], result_types)
            body.insert(call)
            indexer = ElementEmitter(body, partitioned.fusion, None, [])
            inserted = []
            for k, (leaf, it, value) in enumerate(zip(leaves, loop.region_iter_args, call.results)):
                out_index = index if k == 0 else indexer.apply(bitcast_map(first, leaf), index)
                inserted.append(store_element(body, value, it, leaf, out_index))
            body.insert(YieldOp(*inserted))
            return list(loop.results)

        if grid is not None:
            results = self._emit_guarded_loops(b, ids, grid, root_subgraph.name, functions, emit_loop, outputs)
        else:
            results = emit_loop(b, loop_map, root_subgraph.name)
        b.insert(func.ReturnOp(*results))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        module = ModuleOp([entry, *functions])
        return KernelModule(module, self.name, launch, len(params), len(leaves), symbols=self.symbols)

    def _row_grid_pays(self, leaves, per_thread: int) -> bool:
        """Whether a thread's vector should stay inside one row (the row grid, module doc).

        Only where the physical minor dim is static and not a multiple of the vector, and each
        parameter is read at the output's own linear position (contiguous in both grids), at one
        element, or at a position that moves with the minor index by 0 or 1: a broadcast along
        the rows (`m[i]` of `x[i, j] - m[i]`) or across them (a bias `b[j]`). Any other read (a
        transpose's strided one, a gather, a reduce's loop) is element by element in both grids,
        and the rows' partial vectors would only cost. Then `_flat_cost` against the rows'."""
        first = leaves[0]
        if self.target.kind != "cpu" or first.rank < 2 or per_thread < 2 or first.num_elements == 0:
            return False  # (a GPU thread's few elements are no SIMD vector)
        minor = first.minor_to_major[0]
        n = first.dims[minor]
        if isinstance(n, DimExpr) or n % per_thread == 0 or n == 1 or first.dims[minor] == first.num_elements:
            return False
        if any(leaf.dims != first.dims or leaf.minor_to_major != first.minor_to_major for leaf in leaves[1:]):
            return False
        position = linear_index(first.dims, [dim(i) for i in range(first.rank)], first.minor_to_major)
        along = across = False  # a read per row; a read of a run of each row
        for root in fusion_roots(self.fusion):
            try:
                reads = fusion_parameter_maps(self.fusion, root)
            except IndexingError:
                return False
            for p, maps in zip(self.fusion.parameters, reads):
                for m in maps:
                    if m is None or m.symbols or m.runtime:
                        return False
                    linear = linear_index(p.shape.dims, list(m.results), p.shape.minor_to_major)
                    terms, _ = linear_form(linear)
                    if not terms or not linear_form(linear - position)[0]:
                        continue  # one element, or the output's own position
                    stride = terms.get(dim(minor), 0)
                    if stride not in (0, 1) or any(dim(minor) in variables(a) for a in terms if a != dim(minor)):
                        return False
                    along |= stride == 0
                    across |= stride == 1
        if not (along or across):
            return False
        return _flat_cost(n, per_thread, across) > ROW_CHUNK_COST * -(-n // per_thread)

    def _static_row_grid(self, first, per_thread: int) -> tuple[LaunchDims, IndexingMap]:
        """The row grid on static shapes: `symbolic_loop_grid(rows=True)` with its `inside`
        expressions as constraints of one loop (a row's last chunk, and the threads past the last
        chunk of a partial block), which `vectorize-loads-stores-unaligned` makes one masked loop."""
        n = first.dims[first.minor_to_major[0]]
        threads = max(1, min(self.target.threads_per_block, first.num_elements // n * -(-n // per_thread)))
        grid = symbolic_loop_grid(first.dims, threads, per_thread, first.minor_to_major, rows=True)
        m = grid.map
        for inside in grid.inside:
            if m.expr_range(inside).lo < 1:
                m = m.with_constraint(inside, Interval(1, NO_UPPER_BOUND))
        return grid.launch, m

    def _transposed_tile_rows(self, output) -> int:
        """Rows per tile of the symbolic grid (`tiled_symbolic_grid`) where a transpose in the fusion
        gives the output's minor dim from a dim of its operand that is not the operand's minor one
        (its reads would stride by whole rows): a cache line of the operand's elements; else 0."""
        for t in self.fusion.instructions:
            if t.opcode != "transpose" or t.shape.dims != output.dims or t.shape.rank < 2:
                continue
            operand = t.operands[0].shape
            if t.attrs["dimensions"][t.shape.minor_to_major[0]] != operand.minor_to_major[0]:
                return max(2, 64 // max(1, operand.element_type.bits // 8))
        return 0

    @staticmethod
    def _emit_guarded_loops(b: KernelBuilder, ids: list[SSAValue], grid: SymbolicGrid, root: str,
                            functions: list[func.FuncOp], emit_loop, outputs: list[SSAValue]) -> list[SSAValue]:
        """`scf.if` (the whole vector inside) { the unconstrained loop } else { the checked tail, or
        nothing where no vector is partial }."""
        loop_map = grid.map
        out_types = [o.type for o in outputs]
        rooms = b.insert(ApplyIndexingOp(IndexingMap(loop_map.dims, grid.room), ids)).results
        whole = b.and_([b.cmpi("sge", room, b.index(0)) for room in rooms])
        if grid.whole_vectors:
            then_block, else_block = Block(), Block()
            then_b = KernelBuilder(then_block)
            then_b.insert(scf.YieldOp(*emit_loop(then_b, loop_map, root)))
            KernelBuilder(else_block).insert(scf.YieldOp(*outputs))
            return list(b.insert(scf.IfOp(whole, out_types, Region(then_block), Region(else_block))).results)
        tail_map = loop_map
        for inside in grid.inside:
            tail_map = tail_map.with_constraint(inside, Interval(1, NO_UPPER_BOUND))
        tail = next(f for f in functions if f.sym_name.data == root).clone()
        tail.sym_name = StringAttr(f"{root}_tail")
        functions.append(tail)
        then_block, else_block = Block(), Block()
        then_b, else_b = KernelBuilder(then_block), KernelBuilder(else_block)
        then_b.insert(scf.YieldOp(*emit_loop(then_b, loop_map, root)))
        else_b.insert(scf.YieldOp(*emit_loop(else_b, tail_map, tail.sym_name.data)))
        return list(b.insert(scf.IfOp(whole, out_types, Region(then_block), Region(else_block))).results)
