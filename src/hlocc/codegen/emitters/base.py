"""The shared emitter base (XLA's EmitterBase): partition the fused computation, emit one function
per subgraph, and give emitters the kernel's entry function to fill.

Every subgraph becomes `func.func private @name(param tensors..., indices...) -> scalars` whose
body computes its root at the given indices (seed 000), emitted by the `ElementEmitter` of
codegen/elemental/: elementwise ops go to the `elemental` registry, index ops (broadcast,
transpose, reshape, slice, pad, ...) read their operands at indices computed by
`xla.apply_indexing` with the op's indexing map from `analysis.op_indexing`, and an operand that
lives in another subgraph is an `xla.pure_call`.

Tensors are in *physical* order (elemental/storage.py): a tensor's dimensions are the HLO
dimensions from major to minor in the shape's layout, so `flatten-tensors` can linearise row-major
and the layout needs no encoding in the tensor type.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xdsl.dialects import func
from xdsl.dialects.builtin import (
    FunctionType,
    IndexType,
    ModuleOp,
)
from xdsl.ir import Block, Region, SSAValue

from hlocc.analysis.interval import Interval
from hlocc.codegen.elemental.element_emitter import ElementEmitter, deep_recursion
from hlocc.codegen.elemental.storage import array_leaves, physical_tensor_type
from hlocc.codegen.ir import PureCallOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.ir.size_ops import set_kernel_symbols
from hlocc.codegen.partitioner import PartitionedComputation, PartitionedComputations, Subgraph, partition_fusion
from hlocc.codegen.target import Target
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import DimExpr, variables_of
from hlocc.hlo.types import Shape


def fusion_symbols(computation: HloComputation) -> tuple[str, ...]:
    """The dimension variables of a fused computation's shapes, sorted: the order of the values a
    kernel with runtime dims receives (its `xla.symbols`, the CompiledKernel's `symbols`)."""
    names: set[str] = set()
    for instr in computation.instructions:
        for leaf in array_leaves(instr.shape):
            names |= variables_of(leaf.dims)
    return tuple(sorted(names))


def check_shapes(computation: HloComputation, emitter: str, symbolic_ops: frozenset[str]) -> None:
    """Refuse what an emitter cannot compile: bounded dynamic dims (`<=N`), and symbolic dims unless
    the emitter compiles every instruction's opcode on symbolic shapes (`symbolic_ops`). The
    UnsupportedError says "symbolic <emitter> not built" so that the host can specialise instead."""
    symbolic = bool(fusion_symbols(computation))
    for instr in computation.instructions:
        for leaf in array_leaves(instr.shape):
            bounded = [i for i, dyn in enumerate(leaf.dynamic) if dyn and not isinstance(leaf.dims[i], DimExpr)]
            if bounded:
                raise UnsupportedError(f"unsupported: dynamic shape {leaf} in a kernel (instruction '{instr.name}'); "
                                       "bounded dynamic dimensions are not compiled yet")
        if symbolic and instr.opcode not in symbolic_ops:
            what = f"'{instr.name}' ({instr.opcode})" if symbolic_ops else "its fusions"
            raise UnsupportedError(f"unsupported: symbolic {emitter} not built: {what} on symbolic shapes in "
                                   f"fusion '{computation.name}'")


def emit_subgraph_function(partitioned: PartitionedComputation, subgraph: Subgraph) -> func.FuncOp:
    """`func.func private @name(param tensors..., i0, ..., iN) -> scalars` computing the root."""
    # The signature's tensor arguments are the computation's parameters, in order (a scan of the
    # computation per subgraph asked `computation.parameters`).
    param_types = [physical_tensor_type(v.shape) for v in subgraph.signature.arguments if v.kind == "tensor"]
    result_types = [element_type(r.shape.element_type) for r in subgraph.signature.results]
    block = Block(arg_types=[*param_types, *([IndexType()] * subgraph.index_rank)])
    for arg, value in zip(block.args, subgraph.signature.arguments):
        if value.name:
            arg.name_hint = value.name
    b = KernelBuilder(block)
    params = list(block.args[:len(param_types)])
    indices = list(block.args[len(param_types):])
    emitter = ElementEmitter(b, partitioned, subgraph, params)
    with deep_recursion():
        results = emitter.value(subgraph.roots[0], indices)
    b.insert(func.ReturnOp(*results))
    return func.FuncOp(subgraph.name, FunctionType.from_lists([*param_types, *block.arg_types[len(param_types):]],
                                                              result_types), Region(block), "private")


@dataclass
class KernelModule:
    """An emitted kernel before lowering: the MLIR module, its entry function's name, the launch,
    and what the caller must provide beyond the buffers:

    - `emitter`: the emitter that generated it (stats, tests);
    - `output_aliases`: (output, parameter) pairs whose output buffer must hold the parameter's
      contents when the kernel starts, because the kernel writes only part of it (the in-place
      dynamic-update-slice and scatter emitters). The runtime gives both one buffer when buffer
      assignment allows, and copies the parameter in first otherwise;
    - `serial`: the kernel's blocks must not run concurrently on the CPU (it updates elements
      with `xla.atomic_rmw`, which the CPU lowering emulates without atomics);
    - `symbols`: the dimension variables of a kernel with runtime dims, in the order of the table
      of their values it receives (empty for a static kernel);
    - `llvm_entry`: for an emitter that writes its entry function in LLVM IR, not kernel IR (the
      sort emitter: its loops need a `while`), `llvm_entry(llvm_module, noalias, check_bounds)`
      adds the entry `entry` to the translated module (which holds `module`'s functions)."""

    module: ModuleOp
    entry: str
    launch: object
    num_params: int
    num_outputs: int
    emitter: str = "loop"
    output_aliases: tuple[tuple[int, int], ...] = ()
    serial: bool = False
    symbols: tuple[str, ...] = ()
    llvm_entry: Callable[[Any, bool, bool], None] | None = None

    def __post_init__(self) -> None:
        if self.symbols:  # the table order lower-symbol-values loads from (emitters/base.fusion_symbols)
            set_kernel_symbols(self.module, list(self.symbols))


class FusionEmitterBase:
    """Partitioning and subgraph functions; subclasses write the entry function. `symbolic_ops`:
    the opcodes a subclass compiles on symbolic shapes (none: it takes static shapes only)."""

    symbolic_ops: frozenset[str] = frozenset()

    def __init__(self, fusion: HloComputation, target: Target, name: str = "main"):
        # "ReductionEmitter" -> "reduction emitter" (what an UnsupportedError names)
        label = re.sub(r"(?<!^)(?=[A-Z])", " ", type(self).__name__).lower()
        check_shapes(fusion, label, self.symbolic_ops)
        self.symbols = fusion_symbols(fusion)
        self.fusion = fusion
        self.target = target
        self.name = name

    def partition(self) -> PartitionedComputations:
        return partition_fusion(self.fusion)

    def subgraph_functions(self, partitioned: PartitionedComputations) -> list[func.FuncOp]:
        pc = partitioned.fusion
        return [emit_subgraph_function(pc, sg) for sg in pc.subgraphs]


def entry_block(fusion: HloComputation, outputs: Sequence[Shape]) -> tuple[Block, list, list]:
    """The entry function's block `(param tensors..., output tensors...)` and the two type lists."""
    param_types = [physical_tensor_type(p.shape) for p in fusion.parameters]
    out_types = [physical_tensor_type(s) for s in outputs]
    block = Block(arg_types=[*param_types, *out_types])
    for arg, p in zip(block.args, fusion.parameters):
        arg.name_hint = p.name.replace(".", "_").replace("-", "_")
    return block, param_types, out_types


def thread_and_block_ids(b: KernelBuilder, launch) -> tuple[SSAValue, SSAValue]:
    """`gpu.thread_id x` and `gpu.block_id x`, each with its `xla.range` (a 1-D launch)."""
    from xdsl.dialects import gpu

    thread_id = b.add(gpu.ThreadIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X)))
    thread_id.owner.attributes["xla.range"] = interval_attr(Interval(0, launch.threads_per_block - 1))
    block_id = b.add(gpu.BlockIdOp(gpu.DimensionAttr(gpu.DimensionEnum.X)))
    block_id.owner.attributes["xla.range"] = interval_attr(Interval(0, launch.max_blocks - 1))
    return thread_id, block_id


def call_subgraph(b: KernelBuilder, partitioned: PartitionedComputation, instr: HloInstruction,
                  params: Sequence[SSAValue], indices: Sequence[SSAValue]) -> list[SSAValue]:
    """`xla.pure_call` of the subgraph whose root is `instr`, at logical `indices` (XLA's
    ProvideParameter for an operand of the hero)."""
    subgraph = partitioned.find_subgraph(instr)
    if subgraph.roots[0] is not instr:
        raise UnsupportedError(f"unsupported: '{instr.name}' is not the root of a subgraph")
    types = [element_type(r.shape.element_type) for r in subgraph.signature.results]
    call = PureCallOp(subgraph.name, [*params, *indices], types)
    b.insert(call)
    return list(call.results)


def reachable_functions(entry: func.FuncOp, functions: Sequence[func.FuncOp]) -> list[func.FuncOp]:
    """The functions the entry calls, directly or not, in their order (a hero's own subgraph
    function, which the emitter computes itself, is left out)."""
    by_name = {f.sym_name.data: f for f in functions}
    seen: set[str] = set()
    pending = [entry]
    while pending:
        for op in pending.pop().walk():
            if isinstance(op, PureCallOp):
                callee = op.callee.root_reference.data
                if callee not in seen and callee in by_name:
                    seen.add(callee)
                    pending.append(by_name[callee])
    return [f for f in functions if f.sym_name.data in seen]


def interval_attr(iv: Interval):
    from xdsl.dialects.builtin import ArrayAttr, IntegerAttr

    return ArrayAttr([IntegerAttr(iv.lo, IndexType()), IntegerAttr(iv.hi, IndexType())])
