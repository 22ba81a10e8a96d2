"""The in-place dynamic-update-slice emitter (XLA's InPlaceDynamicUpdateSliceFusion,
xla/backends/gpu/codegen/emitters/in_place_dynamic_update_slice.cc and
xla/codegen/emitters/dynamic_update_slice_kernel_emitter.cc).

A fusion whose every root is a dynamic-update-slice (possibly behind bitcasts) of a fusion parameter
(`analysis.hero.can_emit_dynamic_update_slice_in_place`) writes only the update: the output starts
as the updated parameter (`KernelModule.output_aliases`: the runtime gives both one buffer, or
copies the parameter in first), and the kernel is launched over the *update* shape, loop-emitter
style (XLA's unroll rule on the GPU target, a vector register per thread on the CPU). Each thread
computes its update elements (`xla.pure_call` of the update's subgraph) and inserts them at
`start + index`, the start indices clamped to `[0, dim - update_dim]` as the operation semantics
say. The starts do not depend on the element: they are computed once per thread, before the loop.
Several roots (a multi-output fusion) share the update shape and are written in the same loop.

Runtime dims (dynamic shapes, CPU): the operand, the update or both may have symbolic dims; the
kernel compiles once. The clamp bound `dim - update_dim` is then computed in the kernel from the
dimension values, and a symbolic update is covered by the loop emitter's symbolic grid
(`symbolic_loop_grid`: `ceildiv(N, threads)` blocks per call) with one element per thread and the
per-element constraint `N - linear >= 1` (the grid's last block is partial). An update of static
shape keeps the static launch and its vectors whatever the operand's size (a KV-cache append).

The module also holds the pieces of an entry function that the scatter emitter shares (thread and
block ids, subgraph calls, the subgraph functions outside the hero's epilogue).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Region, SSAValue

from hlocc.analysis.affine_expr import dim, rt
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.hero import EmitterKind
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, Variable, compose, size_bound, variables_from_sizes
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims, loop_launch_dims, loop_launch_map, symbolic_loop_grid
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import clamp_start
from hlocc.codegen.elemental.storage import array_leaves, store_element
from hlocc.codegen.emitters.base import (
    FusionEmitterBase,
    KernelModule,
    call_subgraph,
    emit_subgraph_function,
    entry_block,
    thread_and_block_ids,
)
from hlocc.codegen.emitters.loop import SYMBOLIC_LOOP_OPS
from hlocc.codegen.ir import LoopOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.partitioner import PartitionedComputation, partition_fusion, subgraph_roots_for_heroes
from hlocc.codegen.target import Target
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import Shape

UPDATE_OPERAND = 1
FIRST_START_OPERAND = 2


# -- entry-function pieces shared with the scatter emitter --------------------------------------------

def fusion_roots(fusion: HloComputation) -> list[HloInstruction]:
    """The instructions that produce the fusion's outputs, one per output (the root tuple's operands)."""
    root = fusion.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def subgraph_functions_outside(partitioned: PartitionedComputation,
                               epilogue: Iterable[HloInstruction]) -> list[func.FuncOp]:
    """The functions of every subgraph but those rooted at `epilogue` instructions (the hero and
    what lies between it and the fusion roots): the entry function emits those itself."""
    skip = {id(i) for i in epilogue}
    return [emit_subgraph_function(partitioned, sg) for sg in partitioned.subgraphs if id(sg.roots[0]) not in skip]


def strip_bitcasts(instr: HloInstruction) -> tuple[HloInstruction, list[HloInstruction]]:
    """The first non-bitcast below `instr`, and the bitcasts passed on the way."""
    passed = []
    while instr.opcode == "bitcast":
        passed.append(instr)
        instr = instr.operand(0)
    return instr, passed


def elements_per_thread(target: Target, num_elements: int, shapes: Iterable[Shape]) -> int:
    """The loop emitter's elements per thread (XLA's unroll factor on the GPU) for a launch over
    `num_elements` elements writing elements of `shapes`."""
    bits = [max(s.element_type.bits, 1) for s in shapes]
    return target.loop_elements_per_thread(num_elements, min(bits), max(bits))


def loop_launch(target: Target, num_elements: int, per_thread: int) -> LaunchDims:
    """XLA's CalculateLaunchDimensions: min(threads per block, work items) threads per block."""
    threads = max(1, min(target.threads_per_block, -(-num_elements // per_thread)))
    return loop_launch_dims(num_elements, threads, per_thread)


# -- the emitter --------------------------------------------------------------------------------------------

class InPlaceDynamicUpdateSliceEmitter(FusionEmitterBase):
    """Writes the update of every dynamic-update-slice root into its operand's buffer (module doc)."""

    symbolic_ops = SYMBOLIC_LOOP_OPS | {"dynamic-update-slice"}

    def __init__(self, fusion: HloComputation, target: Target, name: str = "main"):
        super().__init__(fusion, target, name)
        self.roots = fusion_roots(fusion)
        self.dus_ops = [strip_bitcasts(r)[0] for r in self.roots]
        for dus in self.dus_ops:
            if dus.opcode != "dynamic-update-slice":
                raise UnsupportedError(f"unsupported: root '{dus.name}' of fusion '{fusion.name}' is not a "
                                       "dynamic-update-slice (in-place dynamic-update-slice emitter)")
            if dus.shape.minor_to_major != dus.operand(0).shape.minor_to_major:
                raise UnsupportedError(f"unsupported: dynamic-update-slice '{dus.name}' changes the layout of its "
                                       "operand, so it cannot update the operand's buffer in place")
        self.update_shape = self.dus_ops[0].operand(UPDATE_OPERAND).shape
        if any(d.operand(UPDATE_OPERAND).shape.dims != self.update_shape.dims for d in self.dus_ops):
            raise UnsupportedError(f"unsupported: the dynamic-update-slices of fusion '{fusion.name}' have updates "
                                   "of different shapes")

    # -- launch and indexing ------------------------------------------------------------------------------
    def launch(self) -> tuple[LaunchDims, int]:
        """(launch dims, elements per thread) over the update shape."""
        n = self.update_shape.num_elements
        if isinstance(n, DimExpr):
            return self._symbolic_grid().launch, 1
        shapes = [self.update_shape, *array_leaves(self.fusion.root.shape)]
        per_thread = elements_per_thread(self.target, n, shapes)
        return loop_launch(self.target, n, per_thread), per_thread

    def update_indexing(self) -> IndexingMap:
        """(th_x, bl_x)[vector_index] -> the update element each thread writes."""
        if isinstance(self.update_shape.num_elements, DimExpr):
            grid = self._symbolic_grid()
            return grid.map.with_constraint(grid.inside[0], Interval(1, NO_UPPER_BOUND))
        launch, per_thread = self.launch()
        return loop_launch_map(self.update_shape.dims, launch, vector_size=per_thread,
                               minor_to_major=self.update_shape.minor_to_major)

    def _symbolic_grid(self):
        """The grid over a symbolic update: one element per thread, linear (module doc)."""
        return symbolic_loop_grid(self.update_shape.dims, self.target.threads_per_block, 1,
                                  self.update_shape.minor_to_major)

    def _dus_write_map(self, root_index: int) -> IndexingMap:
        """(update index){start offsets} -> the element of the dynamic-update-slice written: `u + r`,
        each offset in [0, dim - update_dim] (the clamped start)."""
        dus = self.dus_ops[root_index]
        update = self.update_shape.dims
        offsets = tuple(Variable(Interval(0, max(0, size_bound(n) - (0 if isinstance(u, DimExpr) else u))), "",
                                 (dus, FIRST_START_OPERAND + i))
                        for i, (n, u) in enumerate(zip(dus.shape.dims, update)))
        return IndexingMap(variables_from_sizes(update), tuple(dim(i) + rt(i) for i in range(len(update))),
                           runtime=offsets)

    def _write_map(self, root_index: int) -> IndexingMap:
        """`_dus_write_map` through the bitcasts to the root's logical index."""
        dus, root = self.dus_ops[root_index], self.roots[root_index]
        m = self._dus_write_map(root_index)
        if dus.shape.dims != root.shape.dims or dus.shape.minor_to_major != root.shape.minor_to_major:
            m = compose(m, bitcast_map(dus.shape, root.shape))
        return m

    def thread_id_to_output_indexing(self, root_index: int) -> IndexingMap:
        """The output elements a thread writes: the update map shifted by the clamped start indices,
        runtime variables here (XLA has no static map: it returns nullopt)."""
        return compose(self.update_indexing(), self._write_map(root_index))

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int) -> IndexingMap:
        """Operand 1 (the update): the update element each thread reads, a bijection onto the update
        (XLA's --bijection_inputs=dus:1). Operand 0: the elements overwritten (the output map before
        the root bitcasts). The start indices: the scalar, read by every thread."""
        update_map = self.update_indexing()
        dus = self.dus_ops[root_index]
        if hero_operand_index == UPDATE_OPERAND:
            return update_map
        if hero_operand_index == 0:
            return compose(update_map, self._dus_write_map(root_index))
        if FIRST_START_OPERAND <= hero_operand_index < len(dus.operands):
            return IndexingMap(update_map.dims, (), update_map.symbols, update_map.runtime, update_map.constraints)
        raise IndexError(f"dynamic-update-slice '{dus.name}' has no operand {hero_operand_index}")

    # -- emission ------------------------------------------------------------------------------------------
    def output_aliases(self) -> tuple[tuple[int, int], ...]:
        """Output k starts as the parameter its dynamic-update-slice updates."""
        aliases = []
        for k, dus in enumerate(self.dus_ops):
            target, _ = strip_bitcasts(dus.operand(0))
            if target.opcode != "parameter":
                raise UnsupportedError(f"unsupported: dynamic-update-slice '{dus.name}' updates '{target.name}', "
                                       "which is not a fusion parameter, in place")
            aliases.append((k, target.parameter_number))
        return tuple(aliases)

    def emit(self) -> KernelModule:
        aliases = self.output_aliases()
        outputs = [r.shape for r in self.roots]
        epilogue = {id(i): i for r in self.roots for i in (r, *strip_bitcasts(r)[1], strip_bitcasts(r)[0])}
        if self.fusion.root.opcode == "tuple":
            epilogue[id(self.fusion.root)] = self.fusion.root
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes(self.dus_ops))
        pc = partitioned.fusion
        functions = subgraph_functions_outside(pc, epilogue.values())

        block, param_types, out_types = entry_block(self.fusion, outputs)
        b = KernelBuilder(block)
        params = list(block.args[:len(param_types)])
        outs = list(block.args[len(param_types):])
        launch, _ = self.launch()
        if isinstance(self.update_shape.num_elements, int) and self.update_shape.num_elements == 0:
            # Nothing to write: the outputs are the operands (output_aliases) as they are.
            b.insert(func.ReturnOp(*outs))
            launch = LaunchDims(1, 1)
        else:
            results = self._emit_loop(b, pc, params, outs, launch)
            b.insert(func.ReturnOp(*results))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        return KernelModule(ModuleOp([entry, *functions]), self.name, launch, len(params), len(outs),
                            emitter=EmitterKind.IN_PLACE_DYNAMIC_UPDATE_SLICE.value, output_aliases=aliases,
                            symbols=self.symbols)

    def _emit_loop(self, b: KernelBuilder, pc: PartitionedComputation, params: list[SSAValue],
                   outs: list[SSAValue], launch: LaunchDims) -> list[SSAValue]:
        thread_id, block_id = thread_and_block_ids(b, launch)
        # The clamped starts do not depend on the element: once per thread, before the loop.
        starts: dict[tuple[int, int], SSAValue] = {}
        per_root: list[list[SSAValue]] = []
        for dus in self.dus_ops:
            clamped = []
            for i, size in enumerate(self.update_shape.dims):
                index = dus.operand(FIRST_START_OPERAND + i)
                hi = dus.shape.dims[i] - size
                key = (id(index), hi)
                if key not in starts:
                    (value,) = call_subgraph(b, pc, index, params, [])
                    starts[key] = clamp_start(b, value, index.shape.element_type, hi)
                clamped.append(starts[key])
            per_root.append(clamped)

        loop = LoopOp(self.update_indexing(), [thread_id, block_id], outs)
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        indexer = ElementEmitter(body, pc, None, [])
        update_index = list(loop.map_results)
        values: dict[int, SSAValue] = {}
        inserted = []
        for k, (dus, root, out) in enumerate(zip(self.dus_ops, self.roots, loop.region_iter_args)):
            update = dus.operand(UPDATE_OPERAND)
            if id(update) not in values:
                (values[id(update)],) = call_subgraph(body, pc, update, params, update_index)
            value = values[id(update)]
            if root.shape.element_type != dus.shape.element_type:  # a bitcast reinterpreting the bits
                value = body.add(arith.BitcastOp(value, element_type(root.shape.element_type)))
            index = indexer.apply(self._write_map(k), update_index, (), per_root[k])
            inserted.append(store_element(body, value, out, root.shape, index))
        body.insert(YieldOp(*inserted))
        return list(loop.results)


__all__ = ["InPlaceDynamicUpdateSliceEmitter", "fusion_roots", "strip_bitcasts", "subgraph_functions_outside"]
