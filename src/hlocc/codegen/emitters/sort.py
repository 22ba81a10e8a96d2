"""The sort emitter (CPU): a fusion whose root is `sort`, `topk` or custom-call "TopK" becomes a
kernel that sorts each row along the sort dimension with the comparator compiled to code (what
XLA:CPU does with its runtime key-value sort, `__xla_cpu_runtime_KeyValueSort`, and a compiled
comparator; XLA:GPU emits the sort itself).

The kernel is in two parts:

- the comparator: `func.func @sort_compare(lhs_0, rhs_0, lhs_1, rhs_1, ...) -> i1`, each
  argument an element's storage bits (an integer of the element's width, i8 for pred and sub-byte
  types), its body the comparator computation emitted by the elemental emitter
  (`emit_scalar_computation`), so every dtype, NaN and -0.0 behave as in any other kernel and as
  the comparator is written (JAX's TOTALORDER comparators, lexicographic keys, a key on a payload
  operand). It goes through the CPU kernel pipeline like every kernel's functions.
- the row loop, written directly in LLVM IR (codegen/llvm/sort_rows.py; the kernel IR has no
  while loop, which an insertion sort and a merge need): the kernel's entry, `main(buffers...,
  thread, block)`, which the block loop calls once per row (one block per row, so large sorts
  spread their rows over the thread pool): a stable merge sort of the row's positions calling the
  comparator, or for a comparator of keys with an order on their bits (`RadixKey`) a radix sort of
  the keys, or for a top-k of a few a selecting pass; then every output gathered by the permutation.

top-k is the same kernel with a comparator made here (greater-than in total order for the
largest, less-than for the smallest: the evaluator's and XLA:CPU's order, ties by lower index
since the sort is stable) whose outputs are the first k positions: the values and the s32
positions.

Runtime dims (dynamic shapes): with symbolic shapes the kernel's `symbols` are the fusion's
dimension variables, one block per row at every binding; the sizes the row loop needs (the row
length, each buffer's strides) come from `@sort_sizes`, which computes them from the table of the
variables' values (`size_value`, `lower-symbol-values`).

What it does not compile (UnsupportedError: the runtime keeps the library call,
runtime/library.py): targets other than the CPU, complex elements, a sort whose operands are not
the fusion's parameters, a comparator with an op the elemental emitter lacks, rows longer than
2^31 - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FunctionType, IndexType, IntegerType, ModuleOp, i1
from xdsl.ir import Block, Region

from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.elemental.storage import array_leaves, from_storage
from hlocc.codegen.emitters.base import KernelModule, fusion_symbols
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.llvm.sort_rows import COMPARATOR, KEY, SIZES, add_sort_rows
from hlocc.codegen.target import Target
from hlocc.errors import UnsupportedError, count_of
from hlocc.evaluator.sorting import ComparatorKey, comparator_keys, topk_custom_call_k  # shared with the evaluator
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import Dim, DimExpr
from hlocc.hlo.types import PrimitiveType, Shape


def is_sort_root(instr: HloInstruction) -> bool:
    """Whether `instr` is an op this emitter compiles: sort, topk or custom-call "TopK"."""
    return instr.opcode in ("sort", "topk") or (instr.opcode == "custom-call"
                                                 and instr.attrs.get("custom_call_target") == "TopK")


def is_sort_fusion(fusion: HloComputation) -> bool:
    return fusion.root is not None and is_sort_root(fusion.root)


@dataclass(frozen=True)
class BufferGeometry:
    """Where a row's elements lie in one buffer: element (row, i) is at `row_offset(row) + i *
    stride`, `row_offset` summing `index * step` over the row's indices in the non-sort dims
    (`SortSpec.row_dims`, most major first)."""

    shape: Shape
    steps: tuple[Dim, ...]  # per non-sort dim: its stride in the buffer, in elements
    stride: Dim  # the sort dim's stride, in elements
    bits: int  # the element's storage width (8 for pred and sub-byte types)


@dataclass(frozen=True)
class RadixKey:
    """A key comparator (evaluator/sorting.py `comparator_key`: compare(f(lhs_i), f(rhs_i)), what
    JAX emits) whose compare orders f's values as unsigned integers of their bits once mapped:
    TOTALORDER floats (negative: all bits flipped; else the sign bit set), FLOAT floats the same
    after -0.0 becomes +0.0 (an order only without NaN: a row holding one is merge sorted),
    signed integers (the sign bit flipped), unsigned integers and pred (as they are); `descending`
    flips every bit. A lexicographic comparator (`radix_keys`) has one per key.
    Such rows are sorted by a stable LSD radix sort of those integers (codegen/llvm/sort_rows.py)
    with f computed once per element by `function` (parameter 0: the operand's element)."""

    operand: int
    bits: int
    order: str  # "total", "float" (FLOAT compare: -0.0 is +0.0; a NaN row is merge sorted), "signed", "unsigned"
    descending: bool
    function: HloComputation
    infinity: int = 0  # a float key's +inf bits: the magnitudes above are NaNs


def radix_keys(comparator: HloComputation) -> tuple[RadixKey, ...]:
    """The RadixKeys of `comparator`, most significant first: one for a key comparator, one per
    key of a lexicographic one (evaluator/sorting.py `comparator_keys`); none where the comparator
    is neither or a key has no order on its bits (then the merge sort calls the comparator)."""
    keys = tuple(_radix_key(found) for found in comparator_keys(comparator) or ())
    return keys if keys and all(k is not None for k in keys) else ()


def _radix_key(found: ComparatorKey) -> RadixKey | None:
    kt = found.key.shape.element_type
    if kt.is_float and found.compare_type in ("TOTALORDER", "FLOAT") and kt.bits in (16, 32, 64):
        order = "total" if found.compare_type == "TOTALORDER" else "float"
    elif kt.is_pred:
        order = "unsigned"
    elif kt.is_integer and kt.bits in (8, 16, 32, 64) and found.compare_type == ("SIGNED" if kt.is_signed
                                                                                else "UNSIGNED"):
        order = "signed" if kt.is_signed else "unsigned"
    else:
        return None
    function = HloComputation("key")
    clones = {id(found.param): function.add_instruction(HloInstruction("x", "parameter", found.param.shape,
                                                                       parameter_number=0))}
    for node in found.order:
        clones[id(node)] = function.add_instruction(node.clone([clones[id(o)] for o in node.operands]))
    function.root = clones[id(found.key)]
    infinity = int(np.array(np.inf, found.key.shape.dtype).view(f"u{kt.bits // 8}")) if kt.is_float else 0
    return RadixKey(found.operand, 8 if kt.is_pred else kt.bits, order, found.descending, function, infinity)


@dataclass(frozen=True)
class SortSpec:
    """One sort kernel: `rows` rows of `length` elements (the sort dim) in every operand, sorted by
    `comparator` over all operands (its parameters 2i, 2i + 1 the lhs and rhs of operand i), and
    `keep` first positions written to each output from `sources[o]` (an operand, or -1: the
    position itself, top-k's indices)."""

    operands: tuple[BufferGeometry, ...]
    outputs: tuple[BufferGeometry, ...]
    sources: tuple[int, ...]
    row_dims: tuple[Dim, ...]  # the sizes of the non-sort dims, most major first
    length: Dim
    keep: Dim
    comparator: HloComputation
    keys: tuple[RadixKey, ...] = ()  # the radix sort's keys, most significant first (none: merge sort only)

    @property
    def rows(self) -> Dim:
        rows: Dim = 1
        for d in self.row_dims:
            rows = rows * d
        return rows

    @property
    def sizes(self) -> tuple[DimExpr, ...]:
        """The symbolic sizes the row loop reads, each once, in the order `@sort_sizes` returns them."""
        found: dict[DimExpr, None] = {}
        for g in (*self.operands, *self.outputs):
            for d in (*g.steps, g.stride, g.shape.num_elements):
                found[d] = None
        for d in (*self.row_dims, self.length, self.keep):
            found[d] = None
        return tuple(d for d in found if isinstance(d, DimExpr))


def _geometry(shape: Shape, dim: int) -> BufferGeometry:
    strides = [0] * shape.rank
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= shape.dims[d]
    pt = shape.element_type
    if pt.is_complex:
        raise UnsupportedError(f"sort kernel: {pt.name} elements (the library call sorts them)")
    bits = 8 if pt.is_pred or pt.bits < 8 else pt.bits
    return BufferGeometry(shape, tuple(strides[d] for d in range(shape.rank) if d != dim), strides[dim], bits)


def _topk_comparator(pt: PrimitiveType, largest: bool) -> HloComputation:
    """compare(p0, p1), GT for the largest (LT for the smallest), in total order for floats."""
    comp = HloComputation(f"topk_{'gt' if largest else 'lt'}_{pt.name}")
    scalar = Shape.array(pt)
    lhs, rhs = (comp.add_instruction(HloInstruction(f"p{k}", "parameter", scalar, parameter_number=k))
                for k in range(2))
    kind = "TOTALORDER" if pt.is_float else ("SIGNED" if pt.is_signed else "UNSIGNED")
    comp.root = comp.add_instruction(HloInstruction("compare", "compare", Shape.array("pred"), [lhs, rhs],
                                                    {"direction": "GT" if largest else "LT", "type": kind}))
    return comp


def sort_spec(fusion: HloComputation) -> SortSpec:
    """The kernel's facts for a fusion whose root is a sort, a topk or a custom-call "TopK"."""
    root = fusion.root
    if any(o.opcode != "parameter" for o in root.operands):
        raise UnsupportedError("sort kernel: the sort's operands must be the fusion's parameters")
    outputs = array_leaves(root.shape)
    if root.opcode == "sort":
        dim = int(root.attrs["dimensions"][0])
        comparator: HloComputation = root.to_apply
        sources = tuple(range(len(root.operands)))
        keep = root.operands[0].shape.dims[dim]
    else:
        dim = root.operands[0].shape.rank - 1
        keep = int(root.attrs["k"]) if root.opcode == "topk" else topk_custom_call_k(root)
        comparator = _topk_comparator(root.operands[0].shape.element_type, root.attrs.get("largest", True))
        sources = (0, -1)
    shape = root.operands[0].shape
    length = shape.dims[dim]
    if not isinstance(length, DimExpr) and length >= 2**31:
        raise UnsupportedError(f"sort kernel: rows of {length} elements (positions are 32-bit)")
    return SortSpec(tuple(_geometry(o.shape, dim) for o in root.operands), tuple(_geometry(s, dim) for s in outputs),
                    sources, tuple(d for k, d in enumerate(shape.dims) if k != dim), length, keep, comparator,
                    radix_keys(comparator))


def comparator_function(spec: SortSpec) -> func.FuncOp:
    """`@sort_compare(lhs_0, rhs_0, ...) -> i1` (module doc): the storage bits of each operand's
    pair converted to their element type, then the comparator inlined."""
    params = spec.comparator.parameters
    if len(params) != 2 * len(spec.operands):
        raise UnsupportedError(f"sort kernel: comparator '{spec.comparator.name}' takes "
                               f"{count_of(len(params), 'parameter')} for {len(spec.operands)} operands")
    types = [IntegerType(spec.operands[p.parameter_number // 2].bits) for p in params]
    block = Block(arg_types=types)
    b = KernelBuilder(block)
    args = [from_storage(b, a, p.shape.element_type) for a, p in zip(block.args, params)]
    (less,) = emit_scalar_computation(b, spec.comparator, args)
    b.insert(func.ReturnOp(less))
    return func.FuncOp(COMPARATOR, FunctionType.from_lists(types, [i1]), Region(block))


def key_function(spec: SortSpec, k: int) -> func.FuncOp:
    """`@sort_key<k>(x) -> iN`: RadixKey k's f of an element's storage bits, as its own bits."""
    key = spec.keys[k]
    param = key.function.parameters[0]
    block = Block(arg_types=[IntegerType(spec.operands[key.operand].bits)])
    b = KernelBuilder(block)
    (value,) = emit_scalar_computation(b, key.function, [from_storage(b, block.args[0], param.shape.element_type)])
    kt = key.function.root.shape.element_type
    if kt.is_float:
        value = b.op(arith.BitcastOp, value, IntegerType(key.bits))
    elif kt.is_pred:
        value = b.op(arith.ExtUIOp, value, IntegerType(8))
    b.insert(func.ReturnOp(value))
    return func.FuncOp(f"{KEY}{k}", FunctionType.from_lists([block.args[0].type], [IntegerType(key.bits)]),
                       Region(block))


def sizes_function(spec: SortSpec) -> func.FuncOp:
    """`@sort_sizes() -> (index, ...)`: `spec.sizes` at the kernel's binding."""
    block = Block()
    b = KernelBuilder(block)
    b.insert(func.ReturnOp(*[size_value(b, d) for d in spec.sizes]))
    return func.FuncOp(SIZES, FunctionType.from_lists([], [IndexType()] * len(spec.sizes)), Region(block))


class SortEmitter:
    """The sort emitter (module doc); `emit()` gives the KernelModule: the comparator in kernel IR,
    the row loop added after translation (`KernelModule.llvm_entry`)."""

    def __init__(self, fusion: HloComputation, target: Target, name: str = "main"):
        self.fusion, self.target, self.name = fusion, target, name

    def emit(self) -> KernelModule:
        if self.target.kind != "cpu":
            raise UnsupportedError(f"no sort kernel for the {self.target.kind} target (the library call sorts)")
        spec = sort_spec(self.fusion)

        def llvm_entry(module, noalias: bool, check_bounds: bool) -> None:
            add_sort_rows(module, self.name, spec, noalias=noalias, check_bounds=check_bounds)

        functions = [comparator_function(spec)] + [key_function(spec, k) for k in range(len(spec.keys))]
        symbols = fusion_symbols(self.fusion)
        if symbols:
            functions.append(sizes_function(spec))
        return KernelModule(ModuleOp(functions), self.name, LaunchDims(1, spec.rows),
                            len(spec.operands), len(spec.outputs), emitter="sort", symbols=symbols,
                            llvm_entry=llvm_entry)


__all__ = ["COMPARATOR", "KEY", "SIZES", "BufferGeometry", "RadixKey", "SortEmitter", "SortSpec", "comparator_function",
           "is_sort_fusion", "is_sort_root", "key_function", "radix_keys", "sort_spec"]
