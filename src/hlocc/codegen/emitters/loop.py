"""The loop emitter (XLA's LoopFusion, seed 000 "Loop emitter"): one thread per group of
consecutive output elements, writes in the output's physical order so they coalesce.

The entry function is `@main(param tensors..., output tensors...) -> output tensors`: thread and
block ids (with their `xla.range`), one `xla.loop` over the launch map's range variable
(`vector_index`), a `xla.pure_call` of the root subgraph at the map's output index, and one
`tensor.insert` per output. A multi-output fusion (tuple root) writes every output at the same
physical position (all roots of a loop fusion have the same number of elements), through the
bitcast map from the first root's index.
"""

from __future__ import annotations

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Region

import hlocc.codegen.emitters.elemental_reduce  # noqa: F401  (registers reduce and reduce-window)
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.launch import LaunchDims, loop_launch_dims, loop_launch_map
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import array_leaves, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.ir import LoopOp, PureCallOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.errors import UnsupportedError


class LoopEmitter(FusionEmitterBase):
    def launch(self) -> tuple[LaunchDims, int]:
        """(launch dims, elements per thread) for the fusion's first output."""
        leaves = array_leaves(self.fusion.root.shape)
        first = leaves[0]
        n = first.num_elements
        bits = [max(leaf.element_type.bits, 1) for leaf in leaves]
        per_thread = self.target.loop_elements_per_thread(n, min(bits), max(bits))
        threads = max(1, min(self.target.threads_per_block, -(-n // per_thread)))
        return loop_launch_dims(n, threads, per_thread), per_thread

    def emit(self) -> KernelModule:
        sizes = {leaf.num_elements for leaf in array_leaves(self.fusion.root.shape)}
        if len(sizes) > 1:
            # XLA's loop fusions have roots of one element count; writing others through the first
            # root's grid would leave elements unwritten or write out of bounds.
            raise UnsupportedError(f"unsupported: loop fusion '{self.fusion.name}' whose outputs have different "
                                   f"numbers of elements ({', '.join(map(str, sorted(sizes)))})")
        partitioned = self.partition()
        functions = self.subgraph_functions(partitioned)
        root_subgraph = partitioned.fusion.root_subgraph
        leaves = array_leaves(self.fusion.root.shape)
        first = leaves[0]
        launch, per_thread = self.launch()
        loop_map = loop_launch_map(first.dims, launch, vector_size=per_thread, minor_to_major=first.minor_to_major)

        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, leaves)
        b = KernelBuilder(block)
        thread_id, block_id = thread_and_block_ids(b, launch)

        outputs = list(block.args[len(params):])
        loop = LoopOp(loop_map, [thread_id, block_id], outputs)
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        index = list(loop.map_results)
        result_types = [element_type(leaf.element_type) for leaf in leaves]
        call = PureCallOp(root_subgraph.name, [*block.args[:len(params)], *index], result_types)
        body.insert(call)
        indexer = ElementEmitter(body, partitioned.fusion, None, [])
        inserted = []
        for k, (leaf, it, value) in enumerate(zip(leaves, loop.region_iter_args, call.results)):
            out_index = index if k == 0 else indexer.apply(bitcast_map(first, leaf), index)
            inserted.append(store_element(body, value, it, leaf, out_index))
        body.insert(YieldOp(*inserted))
        b.insert(func.ReturnOp(*loop.results))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        module = ModuleOp([entry, *functions])
        return KernelModule(module, self.name, launch, len(params), len(leaves))
