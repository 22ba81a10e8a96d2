"""The shared emitter base (XLA's EmitterBase): partition the fused computation, emit one function
per subgraph, and give emitters the kernel's entry function to fill.

Every subgraph becomes `func.func private @name(param tensors..., indices...) -> scalars` whose
body computes its root at the given indices (seed 000). `ElementEmitter` does that: elementwise
ops go to the `elemental` registry, index ops (broadcast, transpose, reshape, slice, pad, ...)
read their operands at indices computed by `xla.apply_indexing` with the op's indexing map from
`analysis.op_indexing`, and an operand that lives in another subgraph is an `xla.pure_call`.

Tensors are in *physical* order: a tensor's dimensions are the HLO dimensions from major to minor
in the shape's layout, so `flatten-tensors` can linearise row-major and the layout needs no
encoding in the tensor type. `physical_indices` reorders logical indices accordingly.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func, scf, tensor
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FunctionType,
    IndexType,
    IntegerType,
    ModuleOp,
    TensorType,
    f64,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue

from hlocc.analysis.affine_expr import dim
from hlocc.analysis.indexing_map import IndexingMap, Variable
from hlocc.analysis.interval import Interval
from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.elemental import ELEMENTAL, convert, emit_elementwise
from hlocc.codegen.ir import ApplyIndexingOp, PureCallOp
from hlocc.codegen.ir.builder import INDEX, KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type, storage_type
from hlocc.codegen.partitioner import PartitionedComputation, PartitionedComputations, Subgraph, partition_fusion
from hlocc.codegen.target import Target
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import PrimitiveType, Shape

# -- shapes as tensors --------------------------------------------------------------------------------

def physical_indices(shape: Shape, logical: Sequence[SSAValue]) -> list[SSAValue]:
    return [logical[d] for d in reversed(shape.minor_to_major)]


def buffer_element_type(pt: PrimitiveType) -> Attribute:
    """The element type of a kernel's tensors: `storage_type`, and i8 for pred, whose buffers hold a
    byte (0 or 1) per element; an i1 tensor would become LLVM `<N x i1>` loads and stores once
    vectorized, which are bit-packed in memory."""
    return IntegerType(8) if pt.is_pred else storage_type(pt)


def physical_tensor_type(shape: Shape) -> TensorType:
    return TensorType(buffer_element_type(shape.element_type), shape.physical_dims)


def from_storage(b: KernelBuilder, stored: SSAValue, pt: PrimitiveType) -> SSAValue:
    """An element of type `pt` from its `buffer_element_type` value (or from the i8 bits of an f8/f4
    constant): a byte holding a pred or a sub-byte integer is truncated to its width; a sub-byte
    float (f4e2m1fn) is truncated to its bits; floats are bitcast."""
    ty = element_type(pt)
    if stored.type == ty:
        return stored
    if pt.is_float:
        if pt.bits < 8:
            stored = b.add(arith.TruncIOp(stored, IntegerType(pt.bits)))
        return b.add(arith.BitcastOp(stored, ty))
    return b.add(arith.TruncIOp(stored, ty))


def to_storage(b: KernelBuilder, value: SSAValue, pt: PrimitiveType) -> SSAValue:
    """`from_storage` reversed: the bits zero-extended to the stored byte."""
    stored = buffer_element_type(pt)
    if value.type == stored:
        return value
    if pt.is_float:
        value = b.add(arith.BitcastOp(value, IntegerType(pt.bits)))
    return b.add(arith.ExtUIOp(value, stored))


def load_element(b: KernelBuilder, t: SSAValue, shape: Shape, logical: Sequence[SSAValue]) -> SSAValue:
    """tensor.extract of the element at logical indices, converted from its storage type."""
    pt = shape.element_type
    stored = b.add(tensor.ExtractOp(t, physical_indices(shape, logical), buffer_element_type(pt)))
    return from_storage(b, stored, pt)


def store_element(b: KernelBuilder, value: SSAValue, t: SSAValue, shape: Shape,
                  logical: Sequence[SSAValue]) -> SSAValue:
    """tensor.insert of `value` at logical indices, converted to its storage type."""
    value = to_storage(b, value, shape.element_type)
    return b.add(tensor.InsertOp(value, t, physical_indices(shape, logical)))


def array_leaves(shape: Shape) -> list[Shape]:
    if not shape.is_tuple:
        return [shape]
    return [leaf for s in shape.tuple_shapes for leaf in array_leaves(s)]


def check_static(computation: HloComputation) -> None:
    for instr in computation.instructions:
        for leaf in array_leaves(instr.shape):
            if any(leaf.dynamic):
                raise UnsupportedError(f"unsupported: dynamic shape {leaf} in a kernel (instruction '{instr.name}'); "
                                       "dynamic shapes are not compiled yet")


@contextmanager
def _deep_recursion(limit: int = 20000):
    """Emission recurses along operand chains (a subgraph holds at most 2000 instructions)."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


# -- element emission ------------------------------------------------------------------------------------

@dataclass
class _Frame:
    """What a function being emitted provides: its parameter tensors."""

    params: list[SSAValue]


class ElementEmitter:
    """Emits the value of instructions of one partitioned computation at given logical indices, into
    one function body. Values are memoised by (instruction, index values), index computations by
    (map, operands)."""

    def __init__(self, b: KernelBuilder, partitioned: PartitionedComputation, subgraph: Subgraph | None,
                 params: list[SSAValue]):
        self.b = b
        self.partitioned = partitioned
        self.subgraph = subgraph
        self.params = params
        self._values: dict[tuple, list[SSAValue]] = {}
        self._maps: dict[tuple, list[SSAValue]] = {}
        self.overrides: dict[int, list[SSAValue]] = {}
        """id(instruction) -> its values, whatever the indices: a hero-based emitter injects a hero's
        value (e.g. a transpose read from shared memory) so that an epilogue is computed from it."""

    # -- indexing -------------------------------------------------------------------------------------
    def apply(self, m: IndexingMap, dims: Sequence[SSAValue], symbols: Sequence[SSAValue] = (),
              runtime: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """The map's results (its constraints are not checked; see `in_bounds`)."""
        if not m.results:
            return []
        if (not symbols and not runtime and len(m.results) == len(dims) == len(m.dims)
                and all(r == dim(i) for i, r in enumerate(m.results))):
            return list(dims)  # the identity (every elementwise use): nothing to compute
        m = IndexingMap(m.dims, m.results, m.symbols, m.runtime)  # constraints dropped
        operands = [*dims, *symbols, *runtime]
        key = (m, tuple(id(v) for v in operands))
        cached = self._maps.get(key)
        if cached is None:
            op = ApplyIndexingOp(m, operands)
            self.b.insert(op)
            cached = self._maps[key] = list(op.results)
        return cached

    def in_bounds(self, m: IndexingMap, dims: Sequence[SSAValue], full_sizes: Sequence[int],
                  symbols: Sequence[SSAValue] = (), runtime: Sequence[SSAValue] = ()) -> SSAValue | None:
        """An i1 that is true where the map's domain holds: its constraints, and the bounds of
        dimensions narrower than the indexed shape (`full_sizes`). None when nothing restricts it."""
        exprs, intervals = [], []
        for i, (v, size) in enumerate(zip(m.dims, full_sizes)):
            if v.bounds.lo > 0 or v.bounds.hi < size - 1:
                exprs.append(dim(i))
                intervals.append(v.bounds)
        for e, iv in m.constraints:
            exprs.append(e)
            intervals.append(iv)
        if not exprs:
            return None
        unbounded = IndexingMap(tuple(Variable(Interval(0, n - 1), v.name) for v, n in zip(m.dims, full_sizes)),
                                tuple(exprs), m.symbols, m.runtime)
        values = self.apply(unbounded, dims, symbols, runtime) if any(e != dim(i) for i, e in enumerate(exprs)) \
            else [dims[e.index] for e in exprs]
        return self.b.in_intervals(values, intervals)

    # -- values ---------------------------------------------------------------------------------------------
    def value(self, instr: HloInstruction, indices: Sequence[SSAValue]) -> list[SSAValue]:
        """The scalar(s) of `instr` at logical `indices` (one per array leaf of its shape)."""
        injected = self.overrides.get(id(instr))
        if injected is not None:
            return injected
        key = (id(instr), tuple(id(v) for v in indices))
        cached = self._values.get(key)
        if cached is not None:
            return cached
        owner = self.partitioned.find_subgraph(instr)
        if self.subgraph is not None and owner is not self.subgraph and instr not in self.subgraph:
            result = self._call(owner, indices)
        else:
            result = self._emit(instr, list(indices))
        self._values[key] = result
        return result

    def scalar(self, instr: HloInstruction, indices: Sequence[SSAValue]) -> SSAValue:
        return self.value(instr, indices)[0]

    def _call(self, subgraph: Subgraph, indices: Sequence[SSAValue]) -> list[SSAValue]:
        sig = subgraph.signature
        types = [element_type(r.shape.element_type) for r in sig.results]
        op = PureCallOp(subgraph.name, [*self.params, *indices], types)
        self.b.insert(op)
        return list(op.results)

    def _emit(self, instr: HloInstruction, indices: list[SSAValue]) -> list[SSAValue]:
        handler = INDEX_OPS.get(instr.opcode)
        if handler is not None:
            return handler(self, instr, indices)
        if instr.opcode in ELEMENTAL:
            maps = output_to_input(instr)
            args = [self.scalar(op, self.apply(m, indices)) for op, m in zip(instr.operands, maps)]
            return [emit_elementwise(self.b, instr, args)]
        raise UnsupportedError(f"unsupported: {instr.opcode} in a loop kernel (instruction '{instr.name}')")

    def operand_at(self, instr: HloInstruction, k: int, indices: Sequence[SSAValue],
                   runtime: Sequence[SSAValue] = ()) -> SSAValue:
        m = output_to_input(instr)[k]
        return self.scalar(instr.operand(k), self.apply(m, indices, (), runtime))

    @contextmanager
    def nested(self, block: Block) -> Iterator[KernelBuilder]:
        """Emit into `block` (a branch or loop body); values computed there are not reused outside."""
        saved = self._values, self._maps
        self._values, self._maps = dict(saved[0]), dict(saved[1])
        try:
            with self.b.at(block) as b:
                yield b
        finally:
            self._values, self._maps = saved

    def if_else_many(self, cond: SSAValue | None, then_fn, else_fn, result_types) -> list[SSAValue]:
        """scf.if cond { then_fn() } else { else_fn() } yielding the lists they return. No condition
        (`in_bounds` found nothing that restricts the domain) is always true."""
        if cond is None:
            return list(then_fn())
        blocks = []
        for fn in (then_fn, else_fn):
            block = Block()
            with self.nested(block) as b:
                b.insert(scf.YieldOp(*fn()))
            blocks.append(block)
        return list(self.b.insert(scf.IfOp(cond, list(result_types), Region(blocks[0]), Region(blocks[1]))).results)

    def if_else(self, cond: SSAValue | None, then_fn, else_fn, result_type) -> SSAValue:
        """`if_else_many` for one scalar."""
        return self.if_else_many(cond, lambda: [then_fn()], lambda: [else_fn()], [result_type])[0]


# -- index ops ----------------------------------------------------------------------------------------------

INDEX_OPS = {}


def _index_op(*opcodes: str):
    def wrap(fn):
        for opcode in opcodes:
            INDEX_OPS[opcode] = fn
        return fn
    return wrap


@_index_op("parameter")
def _parameter(e: ElementEmitter, instr: HloInstruction, indices):
    return [load_element(e.b, e.params[instr.parameter_number], instr.shape, indices)]


@_index_op("constant")
def _constant(e: ElementEmitter, instr: HloInstruction, indices):
    literal = np.asarray(instr.literal)
    pt = instr.shape.element_type
    if literal.size == 1:
        return [scalar_constant(e.b, literal.reshape(()), pt)]
    # An array constant: a dense tensor constant read like a parameter (lowered to a global).
    data = np.transpose(literal, list(reversed(instr.shape.minor_to_major))) if literal.ndim else literal
    at = physical_indices(instr.shape, indices)
    if pt.is_complex:
        # Dense attributes hold no complex numbers: the parts, as a minor dimension of size 2.
        part = element_type(pt).element_type
        parts = np.stack([data.real, data.imag], axis=-1).astype(np.float64)
        ttype = TensorType(part, [*instr.shape.physical_dims, 2])
        t = e.b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, parts.reshape(-1).tolist()), ttype))
        re, im = (e.b.add(tensor.ExtractOp(t, [*at, e.b.index(k)], part)) for k in (0, 1))
        return [e.b.add(complex_dialect.CreateOp(re, im, element_type(pt)))]
    if pt.is_float and pt.bits <= 8:
        # f8/f4 values have no dense-attribute form the translator takes: their bits, as i8.
        bits = np.ascontiguousarray(np.asarray(data, dtype=pt.dtype)).view(np.uint8).astype(np.int64)
        bits = np.where(bits >= 128, bits - 256, bits)
        ttype = TensorType(IntegerType(8), instr.shape.physical_dims)
        t = e.b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(ttype, [int(v) for v in bits.reshape(-1)]),
                                     ttype))
        return [from_storage(e.b, e.b.add(tensor.ExtractOp(t, at, IntegerType(8))), pt)]
    ttype = physical_tensor_type(instr.shape)
    values = [_python_scalar(v) for v in data.reshape(-1)]
    if isinstance(ttype.element_type, IntegerType):
        # xDSL holds signless integers in the signed range (u64 max is -1).
        width = ttype.element_type.width.data
        values = [int(v) - (1 << width) if int(v) >= 1 << (width - 1) else int(v) for v in values]
    attr = DenseIntOrFPElementsAttr.from_list(ttype, values)
    t = e.b.add(arith.ConstantOp(attr, ttype))
    return [load_element(e.b, t, instr.shape, indices)]


def scalar_constant(b: KernelBuilder, value: np.ndarray, pt: PrimitiveType) -> SSAValue:
    """A 0-d literal of type `pt` as an SSA value (a complex number from two float constants)."""
    ty = element_type(pt)
    if pt.is_complex:
        z = complex(value)
        re, im = (b.constant(v, ty.element_type) for v in (z.real, z.imag))
        return b.add(complex_dialect.CreateOp(re, im, ty))
    return b.constant(_python_scalar(value), ty)


def _python_scalar(v) -> int | float | bool:
    v = np.asarray(v)
    if v.dtype == np.bool_:
        return bool(v)
    if np.issubdtype(v.dtype, np.integer):
        return int(v)
    return float(v.astype(np.float64))


@_index_op("iota")
def _iota(e: ElementEmitter, instr: HloInstruction, indices):
    i = indices[int(instr.attrs["iota_dimension"])]
    pt = instr.shape.element_type
    as_int = e.b.add(arith.IndexCastOp(i, i64))
    from hlocc.hlo.types import PRIMITIVE_TYPES

    if pt.is_float or pt.is_complex:
        f = e.b.add(arith.SIToFPOp(as_int, f64))
        return [convert(e.b, f, PRIMITIVE_TYPES["f64"], pt)]
    return [convert(e.b, as_int, PRIMITIVE_TYPES["s64"], pt)]


@_index_op("broadcast", "transpose", "reshape", "bitcast", "slice", "reverse", "copy")
def _data_movement(e: ElementEmitter, instr: HloInstruction, indices):
    value = e.operand_at(instr, 0, indices)
    src, dst = instr.operand(0).shape.element_type, instr.shape.element_type
    if src != dst:  # a bitcast may reinterpret the element type (same width)
        if src.is_complex or dst.is_complex:
            raise UnsupportedError(f"unsupported: {instr.opcode} from {src.name} to {dst.name} in a kernel "
                                   f"(instruction '{instr.name}')")
        value = e.b.add(arith.BitcastOp(value, element_type(dst)))
    return [value]


@_index_op("pad")
def _pad(e: ElementEmitter, instr: HloInstruction, indices):
    m = output_to_input(instr)[0]
    cond = e.in_bounds(m, indices, instr.shape.dims)
    pad_value = lambda: e.scalar(instr.operand(1), [])  # noqa: E731
    if cond is None:
        return [e.operand_at(instr, 0, indices)]
    ty = element_type(instr.shape.element_type)
    return [e.if_else(cond, lambda: e.operand_at(instr, 0, indices), pad_value, ty)]


@_index_op("concatenate")
def _concatenate(e: ElementEmitter, instr: HloInstruction, indices):
    maps = output_to_input(instr)
    ty = element_type(instr.shape.element_type)

    def select_from(k: int) -> SSAValue:
        if k == len(maps) - 1:
            return e.operand_at(instr, k, indices)
        cond = e.in_bounds(maps[k], indices, instr.shape.dims)
        return e.if_else(cond, lambda: e.operand_at(instr, k, indices), lambda: select_from(k + 1), ty)

    return [select_from(0)]


def _clamp_start(b: KernelBuilder, start: SSAValue, pt: PrimitiveType, hi: int) -> SSAValue:
    """A start index of integer type `pt` clamped to [0, hi], as index (XLA's dynamic-slice and
    gather semantics: the slice lies in bounds). Unsigned starts are zero-extended, so u64 starts of
    2^63 and more are large, not negative."""
    wide = start if _width(start) == 64 else b.add((arith.ExtUIOp if pt.is_unsigned else arith.ExtSIOp)(start, i64))
    if pt.is_unsigned:
        wide = b.add(arith.MinUIOp(wide, b.constant(hi, i64)))
    as_index = b.add(arith.IndexCastOp(wide, INDEX))
    return b.add(arith.MaxSIOp(b.add(arith.MinSIOp(as_index, b.index(hi))), b.index(0)))


def _clamped_offsets(e: ElementEmitter, instr: HloInstruction, first: int, window: Sequence[int]) -> list[SSAValue]:
    """The scalar start operands from `first` on, clamped to [0, dim - window]."""
    operand = instr.operand(0).shape
    return [_clamp_start(e.b, e.scalar(instr.operand(first + i), []), instr.operand(first + i).shape.element_type,
                        operand.dims[i] - size)
            for i, size in enumerate(window)]


def _width(v: SSAValue) -> int:
    return v.type.width.data if isinstance(v.type, IntegerType) else 0


@_index_op("dynamic-slice")
def _dynamic_slice(e: ElementEmitter, instr: HloInstruction, indices):
    offsets = _clamped_offsets(e, instr, 1, instr.shape.dims)
    return [e.operand_at(instr, 0, indices, offsets)]


@_index_op("gather")
def _gather(e: ElementEmitter, instr: HloInstruction, indices):
    """As XLA's loop emitter: the output's batch dims pick an index vector of the start indices;
    component k, clamped to its runtime variable's range [0, operand_dim - slice_size], is the start
    of operand dim start_index_map[k] (op_indexing's gather maps place it and add the offsets)."""
    data, vector = output_to_input(instr)
    start_indices = instr.operand(1)
    starts = []
    for k, var in enumerate(data.runtime):
        at = e.apply(vector, indices, [e.b.index(k)] if vector.symbols else [])
        starts.append(_clamp_start(e.b, e.scalar(start_indices, at), start_indices.shape.element_type, var.bounds.hi))
    return [e.operand_at(instr, 0, indices, starts)]


@_index_op("dynamic-update-slice")
def _dynamic_update_slice(e: ElementEmitter, instr: HloInstruction, indices):
    update = instr.operand(1).shape
    offsets = _clamped_offsets(e, instr, 2, update.dims)
    m = output_to_input(instr)[1]
    cond = e.in_bounds(m, indices, instr.shape.dims, (), offsets)
    ty = element_type(instr.shape.element_type)
    return [e.if_else(cond, lambda: e.operand_at(instr, 1, indices, offsets),
                      lambda: e.operand_at(instr, 0, indices), ty)]


@_index_op("tuple")
def _tuple(e: ElementEmitter, instr: HloInstruction, indices):
    from hlocc.codegen.partitioner import _operand_maps

    values = []
    for op, m in zip(instr.operands, _operand_maps(instr)):
        values += e.value(op, e.apply(m, indices))
    return values


@_index_op("map")
def _map(e: ElementEmitter, instr: HloInstruction, indices):
    args = [e.scalar(op, indices) for op in instr.operands]
    return emit_scalar_computation(e.b, instr.to_apply, args)


def emit_scalar_computation(b: KernelBuilder, computation: HloComputation, args: Sequence[SSAValue]) -> list[SSAValue]:
    """Inline a scalar computation (a map or reduce body) on scalar arguments."""
    values: dict[int, list[SSAValue]] = {}
    for instr in computation.post_order():
        if instr.opcode == "parameter":
            values[id(instr)] = [args[instr.parameter_number]]
        elif instr.opcode == "constant":
            values[id(instr)] = [scalar_constant(b, np.asarray(instr.literal).reshape(()), instr.shape.element_type)]
        elif instr.opcode == "tuple":
            values[id(instr)] = [v for op in instr.operands for v in values[id(op)]]
        elif instr.opcode == "get-tuple-element":
            values[id(instr)] = [values[id(instr.operand(0))][int(instr.attrs["index"])]]
        elif instr.opcode in ("broadcast", "reshape", "bitcast", "copy", "transpose") and instr.shape.rank == 0:
            values[id(instr)] = values[id(instr.operand(0))]
        elif instr.opcode in ELEMENTAL:
            values[id(instr)] = [emit_elementwise(b, instr, [values[id(op)][0] for op in instr.operands])]
        else:
            raise UnsupportedError(f"unsupported: {instr.opcode} in scalar computation '{computation.name}' "
                                   f"(instruction '{instr.name}')")
    return values[id(computation.root)]


# -- functions and the module ---------------------------------------------------------------------------------

def emit_subgraph_function(partitioned: PartitionedComputation, subgraph: Subgraph) -> func.FuncOp:
    """`func.func private @name(param tensors..., i0, ..., iN) -> scalars` computing the root."""
    computation = partitioned.computation
    param_types = [physical_tensor_type(p.shape) for p in computation.parameters]
    result_types = [element_type(r.shape.element_type) for r in subgraph.signature.results]
    block = Block(arg_types=[*param_types, *([IndexType()] * subgraph.index_rank)])
    for arg, value in zip(block.args, subgraph.signature.arguments):
        if value.name:
            arg.name_hint = value.name
    b = KernelBuilder(block)
    params = list(block.args[:len(param_types)])
    indices = list(block.args[len(param_types):])
    emitter = ElementEmitter(b, partitioned, subgraph, params)
    with _deep_recursion():
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
      with `xla.atomic_rmw`, which the CPU lowering emulates without atomics)."""

    module: ModuleOp
    entry: str
    launch: object
    num_params: int
    num_outputs: int
    emitter: str = "loop"
    output_aliases: tuple[tuple[int, int], ...] = ()
    serial: bool = False


class FusionEmitterBase:
    """Partitioning and subgraph functions; subclasses write the entry function."""

    def __init__(self, fusion: HloComputation, target: Target, name: str = "main"):
        check_static(fusion)
        self.fusion = fusion
        self.target = target
        self.name = name

    def partition(self) -> PartitionedComputations:
        return partition_fusion(self.fusion)

    def subgraph_functions(self, partitioned: PartitionedComputations) -> list[func.FuncOp]:
        pc = partitioned.fusion
        return [emit_subgraph_function(pc, sg) for sg in pc.subgraphs]


# -- the entry function: shared by every emitter -----------------------------------------------------------

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
    block_id.owner.attributes["xla.range"] = interval_attr(Interval(0, launch.blocks - 1))
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


__all__ = ["ElementEmitter", "FusionEmitterBase", "KernelModule", "array_leaves", "call_subgraph",
           "emit_scalar_computation", "emit_subgraph_function", "entry_block", "interval_attr",
           "physical_indices", "physical_tensor_type", "reachable_functions", "thread_and_block_ids"]
