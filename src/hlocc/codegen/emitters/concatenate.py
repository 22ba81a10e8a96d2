"""The concatenate emitter (XLA's ConcatenateFusion, xla/backends/gpu/codegen/emitters/concatenate.cc
and xla/codegen/emitters/concatenate_kernel_emitter.cc; facts §4.4).

A fusion whose single root is a concatenate (possibly behind an epilogue of elementwise ops and
bitcasts) is one kernel over the concatenate's *largest operand* (the one largest along the
concatenated dimension): the loop emitter's launch over that shape. Each thread takes its element
index of the largest operand and, for each operand k in turn, if the index lies inside operand k,
computes operand k there (its subgraph function) and writes the root at the output index: the
index shifted by operand k's offset along the concatenated dimension, then carried through the
epilogue. One `xla.loop` per operand, whose map's constraints select the threads operand k has;
the loop's map gives both the operand index and the output index, so the body needs no other
index arithmetic. The epilogue is a function `@<fusion>__epilogue__<root>(params..., output
index..., hero value) -> root value` (XLA's EmitEpilogue): the concatenate's value is injected
into the element emitter, everything else of the epilogue is computed at the output index.

Launch: on the GPU, XLA's numbers: the loop fusion config of the largest operand (unroll 1, or
the largest power of two ≤ 4 dividing it when the fusion fills the GPU, at least a byte per thread
for sub-byte outputs) sizes the grid; the per-thread unroll is that factor's gcd with every
operand's size along the concatenated dimension, so that a thread's elements never straddle two
operands (with a smaller unroll the grid's threads loop over `chunk`s). On the CPU one thread
handles the loop emitter's vector of elements, made to divide each operand's extent (its size
along the concatenated dimension times the physical stride of that dimension) for the same reason.

`entry_function_block` and `kernel_module_op` are the entry-function scaffolding the input-slices
emitter shares.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp
from xdsl.ir import Block, Region, SSAValue

from hlocc.analysis.affine_expr import Const, dim, sym
from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import EmitterKind, analyze_fusion
from hlocc.analysis.indexing_map import IndexingMap, Variable, compose, variables_from_sizes
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims, loop_launch_dims
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.transpose_info import bit_width
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import array_leaves, physical_tensor_type, store_element
from hlocc.codegen.emitters.base import (
    FusionEmitterBase,
    KernelModule,
    entry_block,
    reachable_functions,
    thread_and_block_ids,
)
from hlocc.codegen.ir import LoopOp, PureCallOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.partitioner import partition_fusion, sanitize_name, subgraph_roots_for_heroes
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape

# -- launch-grid maps ------------------------------------------------------------------------------------


def thread_to_element_map(shape: Shape, launch: LaunchDims, unroll: int) -> IndexingMap:
    """(th_x, bl_x)[chunk, vector_index] -> the element of `shape` a thread handles (XLA's
    GetDefaultThreadIdIndexingMap): `unroll` consecutive elements in the shape's physical order per
    thread, and as many chunks of the whole grid as the shape needs beyond one (the grid may be
    sized for a larger unroll). Unit symbols are simplified away; the ids keep their launch ranges."""
    n = shape.num_elements
    per_chunk = launch.num_threads * unroll
    chunks = -(-n // per_chunk)
    linear = sym(0) * per_chunk + (dim(1) * launch.threads_per_block + dim(0)) * unroll + sym(1)
    m = IndexingMap(
        (Variable(Interval(0, launch.threads_per_block - 1), "th_x"), Variable(Interval(0, launch.blocks - 1), "bl_x")),
        tuple(delinearize(linear, shape.dims, shape.minor_to_major)),
        (Variable(Interval(0, chunks - 1), "chunk"), Variable(Interval(0, unroll - 1), "vector_index")))
    if chunks * per_chunk > n:
        m = m.with_constraint(linear, Interval(0, n - 1))
    return keep_launch_dims(m.simplify(), launch)


def loop_grid(num_elements: int, per_thread: int, max_threads: int) -> LaunchDims:
    """XLA's CalculateLaunchDimensions: up to `max_threads` threads per block, enough blocks for
    `per_thread` elements per thread (at least one thread and one block)."""
    threads = max(1, min(max_threads, -(-num_elements // per_thread)))
    return loop_launch_dims(num_elements, threads, per_thread)


def keep_launch_dims(m: IndexingMap, launch: LaunchDims) -> IndexingMap:
    """`m` with the thread and block ids at their launch ranges again, a narrower range that
    simplification derived (e.g. only the first blocks reach a small operand) kept as a
    constraint: loops check constraints but trust the ids to lie in their variables' ranges."""
    full = (Interval(0, launch.threads_per_block - 1), Interval(0, launch.blocks - 1))
    dims, constraints = [], list(m.constraints)
    for i, (v, bounds) in enumerate(zip(m.dims, full)):
        if v.bounds != bounds:
            constraints.append((dim(i), v.bounds))
            v = replace(v, bounds=bounds)
        dims.append(v)
    return replace(m, dims=tuple(dims), constraints=tuple(constraints))


# -- the entry function ------------------------------------------------------------------------------------

def entry_function_block(fusion: HloComputation, launch: LaunchDims, outputs: Sequence[Shape]):
    """The entry block `(param tensors..., output tensors...)` with the thread and block ids (and
    their `xla.range`s) emitted: (block, builder, params, outputs, thread_id, block_id)."""
    params = fusion.parameters
    block, _, _ = entry_block(fusion, outputs)
    b = KernelBuilder(block)
    thread_id, block_id = thread_and_block_ids(b, launch)
    return block, b, list(block.args[:len(params)]), list(block.args[len(params):]), thread_id, block_id


def kernel_module_op(name: str, block: Block, results: Sequence[SSAValue],
                     functions: Sequence[func.FuncOp]) -> ModuleOp:
    """The module of the entry function `name` (its block returning `results`) and the functions it
    calls, directly or not: subgraph functions the entry does not need (a hero's own function when
    the emitter computes the hero itself) are left out."""
    b = KernelBuilder(block)
    b.insert(func.ReturnOp(*results))
    arg_types = list(block.arg_types)
    entry = func.FuncOp(name, FunctionType.from_lists(arg_types, [r.type for r in results]), Region(block))
    return ModuleOp([entry, *reachable_functions(entry, functions)])


def _call(b: KernelBuilder, callee: str, args: Sequence[SSAValue], shape: Shape) -> SSAValue:
    op = PureCallOp(callee, list(args), [element_type(shape.element_type)])
    b.insert(op)
    return op.results[0]


# -- the emitter -------------------------------------------------------------------------------------------

def _intermediate_to_user(operand: HloInstruction, user: HloInstruction) -> IndexingMap:
    """Index of `operand` -> index of `user`, for the ops between a hero and its root: bitcasts
    (reshapes and transposes that are bitcasts) keep the physical position, elementwise ops the
    logical index."""
    if user.opcode in ("bitcast", "reshape", "transpose"):
        return bitcast_map(operand.shape, user.shape)
    return IndexingMap.identity(user.shape.dims)


def epilogue_map(hero: HloInstruction, root: HloInstruction) -> IndexingMap:
    """Index of the hero -> index of the root it becomes (XLA's ComputeEpilogueInputToOutputIndexing),
    along a path of intermediate ops from the root down to the hero."""
    memo: dict[int, IndexingMap | None] = {}

    def walk(instr: HloInstruction) -> IndexingMap | None:
        if instr is hero:
            return IndexingMap.identity(hero.shape.dims)
        if id(instr) not in memo:
            memo[id(instr)] = None
            for op in instr.operands:
                m = walk(op)
                if m is not None:
                    memo[id(instr)] = compose(m, _intermediate_to_user(op, instr))
                    break
        return memo[id(instr)]

    m = walk(root)
    if m is None:
        raise UnsupportedError(f"unsupported: root '{root.name}' does not reach its hero '{hero.name}'")
    return m


class ConcatenateEmitter(FusionEmitterBase):
    def __init__(self, fusion: HloComputation, target, name: str = "main"):
        super().__init__(fusion, target, name)
        analysis = analyze_fusion(FusionAdaptor.for_computation(fusion))
        outputs = array_leaves(fusion.root.shape)
        if len(analysis.roots) != 1 or len(outputs) != 1 or analysis.heroes[0].opcode != "concatenate":
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' is not a single-output concatenate fusion "
                                   "(the concatenate emitter needs one root whose hero is a concatenate)")
        self.root = analysis.roots[0]
        self.hero = analysis.heroes[0]
        self.output = outputs[0]
        self.axis = int(self.hero.attrs["dimensions"][0])

    # -- launch and indexing -----------------------------------------------------------------------------
    @cached_property
    def sizes(self) -> list[int]:
        """Each operand's size along the concatenated dimension."""
        return [op.shape.dims[self.axis] for op in self.hero.operands]

    @cached_property
    def offsets(self) -> list[int]:
        return [sum(self.sizes[:k]) for k in range(len(self.sizes))]

    @cached_property
    def largest(self) -> Shape:
        """The shape the grid covers: the first operand of the largest size along the axis."""
        return self.hero.operands[self.sizes.index(max(self.sizes))].shape

    @cached_property
    def launch_and_unroll(self) -> tuple[LaunchDims, int]:
        n = self.largest.num_elements
        smallest = bit_width(self.output.element_type)
        widest = max(smallest, bit_width(self.hero.shape.element_type))
        config = self.target.loop_elements_per_thread(n, smallest, widest)
        if self.target.kind == "cpu":
            order = list(self.largest.minor_to_major)
            stride = math.prod(self.largest.dims[d] for d in order[:order.index(self.axis)])
            config = unroll = math.gcd(config, *(stride * s for s in self.sizes))
        else:
            unroll = math.gcd(config, *self.sizes)
        return loop_grid(n, config, self.target.threads_per_block), unroll

    def launch(self) -> LaunchDims:
        return self.launch_and_unroll[0]

    @cached_property
    def input_map(self) -> IndexingMap:
        """(th_x, bl_x)[chunk, vector_index] -> index of the largest operand."""
        launch, unroll = self.launch_and_unroll
        return thread_to_element_map(self.largest, launch, unroll)

    @cached_property
    def epilogue(self) -> IndexingMap:
        return epilogue_map(self.hero, self.root)

    def _operand_window(self, k: int) -> tuple[Variable, ...]:
        """The largest operand's index space cut to operand k's extent along the axis."""
        dims = list(variables_from_sizes(self.largest.dims))
        dims[self.axis] = Variable(Interval(0, self.sizes[k] - 1))
        return tuple(dims)

    def _operand_to_output(self, k: int) -> IndexingMap:
        """Operand k's index -> root index (XLA's ComputeInputToOutputIndexing of the concatenate,
        then the epilogue)."""
        rank = len(self.largest.dims)
        shifted = tuple(dim(i) + self.offsets[k] if i == self.axis else dim(i) for i in range(rank))
        return compose(IndexingMap(self._operand_window(k), shifted), self.epilogue)

    def operand_loop_map(self, k: int) -> IndexingMap:
        """The map of operand k's `xla.loop`: (th_x, bl_x)[...] -> (operand index..., root index...)."""
        rank = len(self.largest.dims)
        to_output = self._operand_to_output(k)
        both = replace(to_output, results=(*(dim(i) for i in range(rank)), *to_output.results))
        return keep_launch_dims(compose(self.input_map, both), self.launch())

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int) -> IndexingMap:
        """(th_x, bl_x)[...] -> the index of hero operand `hero_operand_index` a thread reads."""
        k = hero_operand_index
        rank = len(self.largest.dims)
        return compose(self.input_map, IndexingMap(self._operand_window(k), tuple(dim(i) for i in range(rank))))

    def thread_id_to_output_indexing(self, root_index: int, operand_index: int | None = None) -> IndexingMap:
        """(th_x, bl_x)[..., operand] -> the root index a thread writes. The kernel's loop over the
        operands is the range variable `operand`; the offset of operand k along the axis, and its
        extent, are written with the indicator `[k >= j] = (k + K - j) floordiv K` of K operands.
        With `operand_index` given: the map of that operand's loop alone."""
        if operand_index is not None:
            return compose(self.input_map, self._operand_to_output(operand_index))
        count, axis, rank = len(self.sizes), self.axis, len(self.largest.dims)
        m = self.input_map
        first = replace(m, results=(*m.results, sym(len(m.symbols))),
                        symbols=(*m.symbols, Variable(Interval(0, count - 1), "operand")))
        k = dim(rank)
        at_least = [(k + count - j) // count for j in range(1, count)]
        offset = sum((a * self.sizes[j - 1] for j, a in enumerate(at_least, 1)), Const(0))
        growth = sum((a * (self.sizes[j] - self.sizes[j - 1]) for j, a in enumerate(at_least, 1)), Const(0))
        dims = (*variables_from_sizes(self.largest.dims), Variable(Interval(0, count - 1)))
        results = tuple(dim(i) + offset if i == axis else dim(i) for i in range(rank))
        largest = max(self.sizes)
        second = IndexingMap(dims, results, constraints=((dim(axis) - growth, Interval(-largest, self.sizes[0] - 1)),))
        return compose(compose(first, second), self.epilogue)

    # -- emission ----------------------------------------------------------------------------------------
    def _epilogue_function(self, partitioned) -> func.FuncOp:
        """`@<fusion>__epilogue__<root>(params..., root index..., hero value) -> root value`."""
        pc = partitioned.fusion
        params = self.fusion.parameters
        param_types = [physical_tensor_type(p.shape) for p in params]
        indices = [IndexType()] * len(self.root.shape.dims)
        arg_types = [*param_types, *indices, element_type(self.hero.shape.element_type)]
        block = Block(arg_types=arg_types)
        b = KernelBuilder(block)
        emitter = ElementEmitter(b, pc, pc.find_subgraph(self.root), list(block.args[:len(params)]))
        emitter.overrides[id(self.hero)] = [block.args[-1]]
        results = emitter.value(self.root, list(block.args[len(params):-1]))
        b.insert(func.ReturnOp(*results))
        name = sanitize_name(f"{self.fusion.name}__epilogue__{self.root.name}")
        return func.FuncOp(name, FunctionType.from_lists(arg_types, [r.type for r in results]), Region(block),
                           "private")

    def emit(self) -> KernelModule:
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes([self.hero]))
        pc = partitioned.fusion
        functions = self.subgraph_functions(partitioned)
        epilogue = None
        if self.root is not self.hero:
            epilogue = self._epilogue_function(partitioned)
            functions.append(epilogue)
        launch = self.launch()
        block, b, params, (result,), thread_id, block_id = entry_function_block(self.fusion, launch, [self.output])
        rank = len(self.largest.dims)
        for k, operand in enumerate(self.hero.operands):
            if operand.shape.num_elements == 0:
                continue
            loop_map = self.operand_loop_map(k)
            if loop_map.is_known_empty:
                continue
            loop = LoopOp(loop_map, [thread_id, block_id], [result])
            b.insert(loop)
            body = KernelBuilder(loop.body.block)
            index = list(loop.map_results)
            value = _call(body, pc.find_subgraph(operand).name, [*params, *index[:rank]], operand.shape)
            if epilogue is not None:
                value = _call(body, epilogue.sym_name.data, [*params, *index[rank:], value], self.root.shape)
            body.insert(YieldOp(store_element(body, value, loop.region_iter_args[0], self.output, index[rank:])))
            result = loop.results[0]
        module = kernel_module_op(self.name, block, [result], functions)
        return KernelModule(module, self.name, launch, len(params), 1, emitter=EmitterKind.CONCATENATE.value)


__all__ = ["ConcatenateEmitter", "entry_function_block", "epilogue_map", "keep_launch_dims", "kernel_module_op",
           "loop_grid", "thread_to_element_map"]
