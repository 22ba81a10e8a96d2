"""The scan emitter: a fusion whose root is a *cumulative* reduce-window (JAX's cumsum, cumprod,
cummax along one axis: a window as long as the axis, padded by its length - 1 before it, or after
it for a reverse scan) computes each output line with one running accumulator instead of a window
per element.

One thread per line (the output's other dims: `loop_launch_map` over them, or the symbolic grid
with one line per thread); the thread walks the axis in the window's order, `acc = to_apply(acc,
x[k])` starting from the init value, and writes every `acc`. That is the order in which the
elemental reduce-window (emitters/elemental_reduce.py) folds each element's window, so the results
are bit-identical for a forward scan, in O(n) per line instead of O(n^2) (a reverse scan walks from
the axis's end: analysis/scan.py `scan_window` leaves short reverse float sums to the elemental
window). A long float sum or product of a static axis reaches this emitter as XLA's two-level scan
(passes/reduce_window_rewriter.py, XLA:CPU's ReduceWindowRewriter): blocks of 16 and their sums.
Runtime dims (dynamic shapes, CPU): the axis length and the line count may be symbolic.
"""

from __future__ import annotations

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp
from xdsl.ir import Block, Region

from hlocc.analysis.indexing_map import NO_UPPER_BOUND
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import loop_launch_map, symbolic_loop_grid
from hlocc.analysis.scan import scan_axis, scan_window
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.ops import convert
from hlocc.codegen.elemental.storage import store_element
from hlocc.codegen.emitters.base import (
    FusionEmitterBase,
    KernelModule,
    call_subgraph,
    entry_block,
    thread_and_block_ids,
)
from hlocc.codegen.emitters.dynamic_update_slice import loop_launch, subgraph_functions_outside
from hlocc.codegen.emitters.loop import SYMBOLIC_LOOP_OPS
from hlocc.codegen.ir import LoopOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.partitioner import partition_fusion, subgraph_roots_for_heroes
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.symbolic import DimExpr


def is_scan_fusion(fusion: HloComputation) -> bool:
    """A fusion the scan emitter computes (analysis/scan.py `scan_window` of its root)."""
    return scan_window(fusion.root) is not None


class ReduceWindowScanEmitter(FusionEmitterBase):
    """One running accumulator per output line of a cumulative reduce-window (module doc)."""

    symbolic_ops = SYMBOLIC_LOOP_OPS

    def __init__(self, fusion: HloComputation, target, name: str = "main"):
        super().__init__(fusion, target, name)
        self.window, self.epilogue = scan_window(fusion.root)
        self.axis, self.reverse = scan_axis(self.window)
        self.shape = self.window.shape
        self.out_shape = fusion.root.shape  # (the window's, or its convert's: same dims and layout)
        self.lines = [n for d, n in enumerate(self.shape.dims) if d != self.axis]
        order = [d for d in self.shape.minor_to_major if d != self.axis]
        self.lines_minor_to_major = [d - (d > self.axis) for d in order]

    def _line_map(self):
        """(th_x, bl_x) -> the index of the thread's line (the output index without the axis)."""
        count = 1
        for n in self.lines:
            count = count * n
        if isinstance(count, DimExpr):
            grid = symbolic_loop_grid(self.lines, self.target.threads_per_block, 1, self.lines_minor_to_major)
            return grid.launch, grid.map.with_constraint(grid.inside[0], Interval(1, NO_UPPER_BOUND))
        launch = loop_launch(self.target, count, 1)
        return launch, loop_launch_map(self.lines, launch, vector_size=1, minor_to_major=self.lines_minor_to_major)

    def emit(self) -> KernelModule:
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes([self.window]))
        pc = partitioned.fusion
        functions = subgraph_functions_outside(pc, [self.window])
        block, param_types, out_types = entry_block(self.fusion, [self.out_shape])
        b = KernelBuilder(block)
        params = list(block.args[:len(param_types)])
        outs = list(block.args[len(param_types):])
        launch, line_map = self._line_map()
        thread_id, block_id = thread_and_block_ids(b, launch)
        (init,) = call_subgraph(b, pc, self.window.operand(1), params, [])
        length = size_value(b, self.shape.dims[self.axis])

        loop = LoopOp(line_map, [thread_id, block_id], outs)
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        line = list(loop.map_results)
        step = Block(arg_types=[IndexType(), init.type, outs[0].type])
        s = KernelBuilder(step)
        k, acc, out = step.args
        if self.reverse:  # the window of element k is [k, n): walk from the end
            k = s.add(arith.SubiOp(s.add(arith.SubiOp(length, k)), s.index(1)))
        index = [*line[:self.axis], k, *line[self.axis:]]
        (value,) = call_subgraph(s, pc, self.window.operand(0), params, index)
        (acc,) = emit_scalar_computation(s, self.window.attrs["to_apply"], [acc, value])
        stored = acc if self.epilogue is None else convert(s, acc, self.shape.element_type,
                                                             self.out_shape.element_type)
        s.insert(scf.YieldOp(acc, store_element(s, stored, out, self.out_shape, index)))
        scan = body.insert(scf.ForOp(body.index(0), length, body.index(1), [init, loop.region_iter_args[0]], step))
        body.insert(YieldOp(scan.results[1]))
        b.insert(func.ReturnOp(*loop.results))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        return KernelModule(ModuleOp([entry, *functions]), self.name, launch, len(params), 1,
                            emitter="reduce-window-scan", symbols=self.symbols)


__all__ = ["ReduceWindowScanEmitter", "is_scan_fusion", "scan_axis", "scan_window"]
