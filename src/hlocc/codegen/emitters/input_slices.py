"""The input-slices emitter (XLA's InputSlicesFusion, xla/backends/gpu/codegen/emitters/input_slices.cc,
deleted from XLA in 2025-08 and kept by hlocc; facts §4.4).

A multi-output fusion whose roots are all unit-stride slices of operands of one shape (and layout)
is one kernel over that common *input* shape: each thread computes the slices' operands once at
its input index (one `xla.pure_call` per distinct operand) and writes the value to every output
whose slice window contains the index, at (index - start), under an `scf.if`. A thread whose
element no slice reads still computes it (XLA's note: the launch is not optimal when the input is
not used fully); an empty slice is never written.

Launch: the loop emitter's grid over the input shape. On the GPU, XLA's unroll: one element per
thread, or enough for a whole byte of the narrowest output (no unrolling for large inputs, unlike
loop fusions). On the CPU, the loop emitter's vector of elements per thread.
"""

from __future__ import annotations

from functools import cached_property

from xdsl.ir import SSAValue

from hlocc.analysis.affine_expr import dim
from hlocc.analysis.hero import EmitterKind
from hlocc.analysis.indexing_map import IndexingMap, Variable, compose
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.analysis.transpose_info import bit_width
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import array_leaves, physical_tensor_type, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule
from hlocc.codegen.emitters.concatenate import (
    entry_function_block,
    kernel_module_op,
    loop_grid,
    thread_to_element_map,
)
from hlocc.codegen.ir import LoopOp, PureCallOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.partitioner import partition_fusion, subgraph_roots_for_heroes
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape


def slice_input_to_output(slice_: HloInstruction) -> IndexingMap:
    """Index of a unit-stride slice's operand -> its index in the slice, defined on the window."""
    dims = tuple(Variable(Interval(s.start, s.limit - 1)) for s in slice_.attrs["slice"])
    return IndexingMap(dims, tuple(dim(i) - s.start for i, s in enumerate(slice_.attrs["slice"])))


class InputSlicesEmitter(FusionEmitterBase):
    def __init__(self, fusion: HloComputation, target, name: str = "main"):
        super().__init__(fusion, target, name)
        root = fusion.root
        self.roots: list[HloInstruction] = list(root.operands) if root.opcode == "tuple" else [root]
        self.outputs: list[Shape] = array_leaves(root.shape)
        if len(self.roots) != len(self.outputs) or any(not self._is_unit_slice(r) for r in self.roots):
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' is not an input-slices fusion (every "
                                   "output must be a unit-stride slice)")
        self.input: Shape = self.roots[0].operand(0).shape
        if any(r.operand(0).shape.dims != self.input.dims
               or r.operand(0).shape.minor_to_major != self.input.minor_to_major for r in self.roots):
            raise UnsupportedError(f"unsupported: the slices of input-slices fusion '{fusion.name}' read operands "
                                   "of different shapes or layouts")

    @staticmethod
    def _is_unit_slice(instr: HloInstruction) -> bool:
        return instr.opcode == "slice" and all(s.stride == 1 for s in instr.attrs["slice"])

    # -- launch and indexing -----------------------------------------------------------------------------
    @cached_property
    def launch_and_unroll(self) -> tuple[LaunchDims, int]:
        n = self.input.num_elements
        bits = [bit_width(s.element_type) for s in self.outputs]
        if self.target.kind == "cpu":
            unroll = self.target.loop_elements_per_thread(n, min(bits), max(bits))
        else:
            unroll = max(1, -(-8 // min(bits)))
        return loop_grid(n, unroll, self.target.threads_per_block), unroll

    def launch(self) -> LaunchDims:
        return self.launch_and_unroll[0]

    @cached_property
    def input_map(self) -> IndexingMap:
        """(th_x, bl_x)[vector_index] -> the input index a thread computes."""
        launch, unroll = self.launch_and_unroll
        return thread_to_element_map(self.input, launch, unroll)

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int = 0) -> IndexingMap:
        """(th_x, bl_x)[...] -> the index of the slice's operand a thread reads: all of it, once."""
        return self.input_map

    def thread_id_to_output_indexing(self, root_index: int) -> IndexingMap:
        """(th_x, bl_x)[...] -> the index of output `root_index` a thread writes."""
        return compose(self.input_map, slice_input_to_output(self.roots[root_index]))

    # -- emission ----------------------------------------------------------------------------------------
    def emit(self) -> KernelModule:
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes(self.roots))
        pc = partitioned.fusion
        functions = self.subgraph_functions(partitioned)
        launch = self.launch()
        block, b, params, outputs, thread_id, block_id = entry_function_block(self.fusion, launch, self.outputs)
        results = list(outputs)
        if self.input.num_elements:
            loop = LoopOp(self.input_map, [thread_id, block_id], outputs)
            b.insert(loop)
            body = KernelBuilder(loop.body.block)
            index = list(loop.map_results)
            indexer = ElementEmitter(body, pc, None, [])
            values: dict[int, SSAValue] = {}
            written = []
            for root, shape, tensor in zip(self.roots, self.outputs, loop.region_iter_args):
                operand = root.operand(0)
                window = slice_input_to_output(root)
                if shape.num_elements == 0:
                    written.append(tensor)
                    continue
                if id(operand) not in values:
                    call = PureCallOp(pc.find_subgraph(operand).name, [*params, *index],
                                      [element_type(operand.shape.element_type)])
                    body.insert(call)
                    values[id(operand)] = call.results[0]
                value = values[id(operand)]
                cond = indexer.in_bounds(window, index, self.input.dims)

                def write(root=root, shape=shape, tensor=tensor, value=value, window=window):
                    out_index = indexer.apply(window, index)
                    return [store_element(indexer.b, value, tensor, shape, out_index)]

                written += indexer.if_else_many(cond, write, lambda tensor=tensor: [tensor],
                                                [physical_tensor_type(shape)])
            body.insert(YieldOp(*written))
            results = list(loop.results)
        module = kernel_module_op(self.name, block, results, functions)
        return KernelModule(module, self.name, launch, len(params), len(self.outputs),
                            emitter=EmitterKind.INPUT_SLICES.value)


__all__ = ["InputSlicesEmitter", "slice_input_to_output"]
