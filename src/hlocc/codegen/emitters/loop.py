"""The loop emitter (XLA's LoopFusion, seed 000 "Loop emitter"): one thread per group of
consecutive output elements, writes in the output's physical order so they coalesce.

The entry function is `@main(param tensors..., output tensors...) -> output tensors`: thread and
block ids (with their `xla.range`), one `xla.loop` over the launch map's range variable
(`vector_index`), a `xla.pure_call` of the root subgraph at the map's output index, and one
`tensor.insert` per output. A multi-output fusion (tuple root) writes every output at the same
physical position (all roots of a loop fusion have the same number of elements), through the
bitcast map from the first root's index.

Runtime dims (dynamic shapes, CPU): a fusion of elementwise, broadcast, iota, transpose, reshape,
slice, reverse, constant ops (and reduces computed elementally) on symbolic shapes compiles once;
the launch is `ceildiv(N, threads * vector)` blocks, evaluated per call, and the launch map divides
by `$size` atoms where a symbolic dimension is not the most major. Instead of the static map's
bound constraint, a thread checks once whether its whole vector lies below N: then it runs the
unconstrained loop (which vectorizes as the static one does), else a copy of the loop with the
per-element constraint `N - linear >= 1` (a scalar tail; at most one thread has a partial vector).
The tail calls a copy of the root subgraph function, so that each copy has one caller and is
inlined. Where the vectored size is a multiple of the vector (`SymbolicGrid.whole_vectors`: a
speculated version, runtime/speculation.py, or a static minor size) no vector is partial: the
thread runs the loop or nothing, with no tail (the static path's code).
"""

from __future__ import annotations

from xdsl.dialects import func, scf
from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
from xdsl.ir import Block, Region, SSAValue

import hlocc.codegen.emitters.elemental_reduce  # noqa: F401  (registers reduce and reduce-window)
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims, SymbolicGrid, loop_launch_dims, loop_launch_map, symbolic_loop_grid
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


class LoopEmitter(FusionEmitterBase):
    symbolic_ops = SYMBOLIC_LOOP_OPS

    def launch(self) -> tuple[LaunchDims, int]:
        """(launch dims, elements per thread) for the fusion's first output."""
        leaves = array_leaves(self.fusion.root.shape)
        first = leaves[0]
        n = first.num_elements
        bits = [max(leaf.element_type.bits, 1) for leaf in leaves]
        per_thread = self.target.loop_elements_per_thread(size_bound(n), min(bits), max(bits))
        if isinstance(n, DimExpr):
            if any(i.opcode == "reduce" for i in self.fusion.instructions):
                # An output element is a whole row or more: one per thread, as the reduction
                # emitter's CPU form (16 unrolled rows per thread only grew the code).
                per_thread = max(1, -(-8 // min(bits)))
            return loop_launch_dims(n, self.target.threads_per_block, per_thread), per_thread
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
        grid = None
        if self.symbols:
            grid = symbolic_loop_grid(first.dims, launch.threads_per_block, per_thread, first.minor_to_major,
                                      tile_rows=self._transposed_tile_rows(first))
            launch, loop_map = grid.launch, grid.map
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
