"""The computation partitioner: split a fused computation into subgraphs that are each emitted as one
function (seed 000, "Partitioning"; XLA's PartitionedComputation).

Emitting a fusion as one function per root would evaluate an instruction read at two different
indices twice per output element, and with many such splits the code grows exponentially. So an
instruction is emitted inside its users' function only when that is safe:

- an instruction whose users all lie in one subgraph and read it through one indexing (the
  composed map from that subgraph's root index to the instruction's index, from the per-op maps of
  `analysis.op_indexing`) joins that subgraph; with a single use this always holds;
- otherwise it is the root of a subgraph of its own: it has no users (the fusion root), its users
  lie in different subgraphs, they read it through different maps, some read it through an
  undefined map (no indexing map expresses it) and it is read more than once, or the emitter marks
  it with `is_subgraph_root` (heroes of transposes and reductions and their operands). When in
  doubt the partitioner splits: a split costs a call, a wrong merge gives wrong results.
- Maps with runtime variables (dynamic-slice offsets, gather indices) are equal only when those
  variables come from the same operand; `IndexingMap` equality alone ignores where they come from.

Parameters, constants and iotas are instructions like any other, as in XLA: one read through
several indexings becomes a subgraph of its own, marked `has_no_compute` so the inliner always
inlines it. A subgraph is capped at `max_instructions_per_subgraph` instructions (XLA: 2000); past
that, the next instruction starts a new subgraph.

The walk visits every instruction once, users before operands, composing one map per use edge:
linear in instructions plus edges. Every subgraph gets its function signature in the seed's form:
for a fusion computation, one tensor per fusion parameter and one index per dimension of the
root's (first) array shape, returning one scalar per root array; for a called computation
(reducers, map bodies) the parameters are scalars. `entry_function_signature` gives the kernel's
entry function: parameters and outputs as tensors, returning the updated outputs.

This module only reads the HLO; it builds no IR. Emitters walk the result.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hlocc.analysis.bitcast import bitcast_map
from hlocc.analysis.indexing_map import IndexingMap, compose
from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.ir.mlir_types import mlir_element_type
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.printer import print_instruction
from hlocc.hlo.types import Shape

MAX_INSTRUCTIONS_PER_SUBGRAPH = 2000
"""XLA's kMaxHloOpsPerSubgraph: larger subgraphs are cut so no single function grows unboundedly."""

SubgraphRootPredicate = Callable[[HloInstruction], bool]

_NO_COMPUTE_OPCODES = frozenset({"parameter", "constant", "iota"})


# -- function signatures -------------------------------------------------------------------------

@dataclass(frozen=True)
class FunctionValue:
    """One argument or result of a function: a tensor (`shape`), an index (`bound`: the exclusive
    upper bound, printed as `xla.range = [0, bound-1]`; None for a dynamic dimension) or a scalar
    (`shape` is the rank-0 shape of its element type)."""

    kind: str  # "tensor" | "index" | "scalar"
    name: str = ""
    shape: Shape | None = None
    bound: int | None = None

    @property
    def mlir_type(self) -> str:
        if self.kind == "index":
            return "index"
        element = mlir_element_type(self.shape.element_type)
        if self.kind == "scalar":
            return element
        dims = "".join(("?" if dynamic else str(d)) + "x" for d, dynamic in zip(self.shape.dims, self.shape.dynamic))
        return f"tensor<{dims}{element}>"

    def __str__(self) -> str:
        text = f"%{self.name}: {self.mlir_type}" if self.name else self.mlir_type
        if self.kind == "index" and self.bound is not None:
            text += f" {{xla.range = [0 : index, {self.bound - 1} : index]}}"
        return text


@dataclass(frozen=True)
class FunctionSignature:
    name: str
    arguments: tuple[FunctionValue, ...]
    results: tuple[FunctionValue, ...]

    @property
    def tensor_arguments(self) -> tuple[FunctionValue, ...]:
        return tuple(a for a in self.arguments if a.kind == "tensor")

    @property
    def index_arguments(self) -> tuple[FunctionValue, ...]:
        return tuple(a for a in self.arguments if a.kind == "index")

    def __str__(self) -> str:
        args = ", ".join(str(a) for a in self.arguments)
        results = ", ".join(str(r) for r in self.results)
        if len(self.results) != 1:
            results = f"({results})"
        return f"func.func @{self.name}({args}) -> {results}"


def sanitize_name(name: str) -> str:
    """A symbol name MLIR and LLVM accept unquoted (XLA's SanitizeFunctionName)."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return name if name and not name[0].isdigit() else "_" + name


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for name in names:
        candidate, n = name, 0
        while candidate in seen:
            n += 1
            candidate = f"{name}_{n}"
        seen.add(candidate)
        out.append(candidate)
    return out


def _leaves(shape: Shape) -> list[Shape]:
    return shape.leaves() if shape.is_tuple else [shape]


def _first_leaf(shape: Shape) -> Shape:
    while shape.is_tuple:
        shape = shape.tuple_shapes[0]
    return shape


def _tensor_arguments(computation: HloComputation, extra: Iterable[str] = (),
                      params: list[HloInstruction] | None = None) -> tuple[list[FunctionValue], list[str]]:
    params = computation.parameters if params is None else params
    names = _unique([sanitize_name(p.name) for p in params] + list(extra))
    values = [FunctionValue("tensor", n, p.shape) for n, p in zip(names, params)]
    return values, names[len(params):]


def entry_function_signature(computation: HloComputation, name: str = "main") -> FunctionSignature:
    """The kernel's entry function: `(parameter tensors..., output tensors...) -> (output tensors)`,
    one output per array of the root's (flattened) shape, as in the seed's GELU example."""
    outputs = _leaves(computation.root.shape)
    params, out_names = _tensor_arguments(computation, [f"out{k}" for k in range(len(outputs))])
    out_values = tuple(FunctionValue("tensor", n, s) for n, s in zip(out_names, outputs))
    return FunctionSignature(sanitize_name(name), tuple(params) + out_values,
                             tuple(FunctionValue("tensor", shape=s) for s in outputs))


def _subgraph_signature(name: str, computation: HloComputation, roots: tuple[HloInstruction, ...],
                        index_shape: Shape, tensor_parameters: bool,
                        parameters: list[HloInstruction]) -> FunctionSignature:
    results = tuple(FunctionValue("scalar", shape=Shape.array(leaf.element_type))
                    for root in roots for leaf in _leaves(root.shape))
    if not tensor_parameters:
        names = _unique(sanitize_name(p.name) for p in parameters)
        args = tuple(FunctionValue("scalar", n, Shape.array(p.shape.element_type))
                     for n, p in zip(names, parameters))
        return FunctionSignature(name, args, results)
    rank = len(index_shape.dims)
    params, index_names = _tensor_arguments(computation, [f"i{k}" for k in range(rank)], parameters)
    indices = [FunctionValue("index", n, bound=None if dynamic else size)
               for n, size, dynamic in zip(index_names, index_shape.dims, index_shape.dynamic)]
    return FunctionSignature(name, tuple(params + indices), results)


# -- the partition -------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class Subgraph:
    """Instructions emitted as one function. `instructions` are in a valid emission order (every
    operand inside the subgraph before its users); `roots` are the instructions whose values the
    function returns (one scalar per array of their shapes); `index_ranges` are the sizes of the
    index arguments: the root's first array shape."""

    name: str
    roots: tuple[HloInstruction, ...]
    instructions: tuple[HloInstruction, ...]
    index_ranges: tuple[int, ...]
    signature: FunctionSignature
    has_no_compute: bool = False
    constant_valued: bool = False
    """Every instruction is a one-element constant or moves such a value (broadcast, reshape, ...):
    the root's value is that constant at every index, so a user emits it in place rather than call
    (element_emitter.py)."""

    @property
    def index_rank(self) -> int:
        return len(self.index_ranges)

    def __contains__(self, instr: object) -> bool:
        return id(instr) in self._members

    @functools.cached_property
    def _members(self) -> frozenset[int]:
        return frozenset(map(id, self.instructions))  # (the instructions are kept alive by the tuple)

    def to_string(self, indentation: int = 0) -> str:
        indent = " " * indentation
        lines = [f"{indent}SUBGRAPH {self.name} {{"]
        for instr in self.instructions:
            prefix = "ROOT " if any(instr is r for r in self.roots) else ""
            lines.append(f"{indent}  {prefix}{print_instruction(instr, print_metadata=False)}")
        lines.append(f"{indent}}}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True, eq=False)
class PartitionedComputation:
    """A computation split into subgraphs, the subgraph of the computation root first (subgraphs
    are ordered by their roots, users before operands)."""

    computation: HloComputation
    subgraphs: tuple[Subgraph, ...]
    instr_to_subgraph: Mapping[HloInstruction, Subgraph]

    def find_subgraph(self, instr: HloInstruction) -> Subgraph:
        return self.instr_to_subgraph[instr]

    @property
    def root_subgraph(self) -> Subgraph:
        return self.instr_to_subgraph[self.computation.root]

    def to_string(self, indentation: int = 0) -> str:
        parts = [f"PartitionedComputation {self.computation.name}:"]
        parts += [sg.to_string(indentation) for sg in self.subgraphs]
        return "\n".join(parts)

    def __str__(self) -> str:
        return self.to_string()


@dataclass(frozen=True, eq=False)
class PartitionedComputations:
    """The partition of a fusion and of every computation it calls (transitively), e.g. reducers."""

    fusion: PartitionedComputation
    computations: tuple[PartitionedComputation, ...]

    def find_partitioned_computation(self, computation: HloComputation) -> PartitionedComputation:
        for pc in self.computations:
            if pc.computation is computation:
                return pc
        raise KeyError(computation.name)

    def find_subgraph(self, instr: HloInstruction) -> Subgraph:
        return self.find_partitioned_computation(instr.parent).find_subgraph(instr)

    def __str__(self) -> str:
        return "PartitionedComputations:\n" + "\n".join(str(pc) for pc in self.computations)


# -- the algorithm -------------------------------------------------------------------------------

_UNDEFINED = object()  # the key of an access no indexing map expresses


def _indexing_key(m: IndexingMap | None) -> object:
    """Equal keys mean equal accesses. Runtime variables compare by their source operand too."""
    if m is None:
        return _UNDEFINED
    return m, tuple(v.source for v in m.runtime)


@functools.lru_cache(maxsize=256)
def _identity(dims: tuple[int, ...]) -> IndexingMap:
    return IndexingMap.identity(dims)


def _is_identity(m: IndexingMap) -> bool:
    """Composing with the identity (every elementwise use) changes nothing: skip the work."""
    return m == _identity(tuple(v.bounds.hi + 1 for v in m.dims))


def operand_maps(instr: HloInstruction) -> list[IndexingMap | None]:
    """One map per operand slot from the instruction's index (its first array shape) to the
    operand's index (the operand's first array shape), or None where no map expresses it."""
    if instr.opcode == "tuple":
        # A (root) tuple is indexed by its first element's index, every element at the same
        # physical position: what the loop emitter writes through a bitcast map per output.
        # Element k is read at the logical index of the tuple's k-th element shape (whose layout is
        # the output buffer's; the operand's own layout may differ but its logical values do not).
        first = _first_leaf(instr.shape)
        return [bitcast_map(first, _first_leaf(s)) for s in instr.shape.tuple_shapes]
    if instr.opcode == "get-tuple-element":
        return [bitcast_map(instr.shape, _first_leaf(instr.operand(0).shape))] if not instr.shape.is_tuple else [None]
    return output_to_input(instr)


def partition_computation(computation: HloComputation, is_subgraph_root: SubgraphRootPredicate | None = None,
                          *, tensor_parameters: bool = True,
                          max_instructions_per_subgraph: int = MAX_INSTRUCTIONS_PER_SUBGRAPH) -> PartitionedComputation:
    """Partition one computation (module docstring). `tensor_parameters` is True for the fusion
    computation (subgraph functions take the parameters as tensors plus indices) and False for a
    called scalar computation (they take the parameters as scalars)."""
    pre_order = computation.post_order()[::-1]  # users before operands
    position = {id(instr): i for i, instr in enumerate(pre_order)}
    n = len(pre_order)
    keys: list[set] = [set() for _ in range(n)]  # distinct accesses of each instruction
    access: list[IndexingMap | None] = [None] * n  # one of them, to compose through
    user_subgraphs: list[set[int]] = [set() for _ in range(n)]
    uses = [0] * n
    subgraph_of = [-1] * n
    is_root = [False] * n
    sizes: list[int] = []

    for i, instr in enumerate(pre_order):
        root = (len(user_subgraphs[i]) != 1 or len(keys[i]) > 1 or (_UNDEFINED in keys[i] and uses[i] > 1)
                or (is_subgraph_root is not None and is_subgraph_root(instr)))
        if not root and sizes[next(iter(user_subgraphs[i]))] >= max_instructions_per_subgraph:
            root = True
        if root:
            sg = len(sizes)
            sizes.append(0)
            index_map: IndexingMap | None = None  # the identity: operand maps are used as they are
        else:
            sg = next(iter(user_subgraphs[i]))
            index_map = access[i]
        sizes[sg] += 1
        subgraph_of[i], is_root[i] = sg, root
        defined = root or index_map is not None
        for operand, op_map in zip(instr.operands, operand_maps(instr)):
            j = position[id(operand)]
            uses[j] += 1
            user_subgraphs[j].add(sg)
            if not defined or op_map is None:
                composed = None
            else:
                if root:
                    composed = op_map
                elif _is_identity(op_map):
                    composed = index_map
                else:
                    composed = compose(index_map, op_map)
                if composed.is_known_empty:
                    continue  # this use reads nothing (e.g. a concatenate operand never selected)
            key = _indexing_key(composed)
            if key not in keys[j]:
                keys[j].add(key)
                access[j] = composed

    members: list[list[HloInstruction]] = [[] for _ in sizes]
    for i in range(n - 1, -1, -1):  # operands before users
        members[subgraph_of[i]].append(pre_order[i])
    roots = [pre_order[i] for i in range(n) if is_root[i]]  # subgraph k's root is the k-th root found
    names = _unique(sanitize_name(f"{computation.name}_{r.name}") for r in roots)

    subgraphs = []
    parameters = computation.parameters  # (a scan of the computation: once, not once per subgraph)
    for name, root, instrs in zip(names, roots, members):
        index_shape = _first_leaf(root.shape)
        signature = _subgraph_signature(name, computation, (root,), index_shape, tensor_parameters, parameters)
        subgraphs.append(Subgraph(
            name=name, roots=(root,), instructions=tuple(instrs), index_ranges=tuple(index_shape.dims),
            signature=signature, has_no_compute=all(i.opcode in _NO_COMPUTE_OPCODES for i in instrs),
            constant_valued=all(_moves_a_scalar_constant(i) for i in instrs)))
    instr_to_subgraph = {instr: subgraphs[subgraph_of[i]] for i, instr in enumerate(pre_order)}
    return PartitionedComputation(computation, tuple(subgraphs), MappingProxyType(instr_to_subgraph))


_MOVING_OPCODES = frozenset({"broadcast", "reshape", "bitcast", "copy", "transpose"})


def _moves_a_scalar_constant(instr: HloInstruction) -> bool:
    """A one-element constant, or an op that only moves its operand's elements, reading one (its
    operand, in a subgraph where every instruction passes this test, is such a constant or move)."""
    if instr.opcode == "constant":
        return instr.shape.is_array and instr.shape.num_elements == 1
    return instr.opcode in _MOVING_OPCODES and instr.operand(0).shape.is_array and \
        instr.operand(0).shape.num_elements == 1


def subgraph_roots_for_heroes(heroes: Iterable[HloInstruction]) -> SubgraphRootPredicate:
    """The predicate XLA's emitters pass for hero-based fusions (transpose, reduction): each hero
    and each of its operands is the root of a subgraph, so the hero's prologue and epilogue are
    emitted as separate functions around the hero's own code."""
    marked = {id(h) for h in heroes}
    marked |= {id(op) for h in heroes for op in h.operands}
    return lambda instr: id(instr) in marked


def partition_fusion(fusion: HloComputation, is_subgraph_root: SubgraphRootPredicate | None = None,
                     *, max_instructions_per_subgraph: int = MAX_INSTRUCTIONS_PER_SUBGRAPH) -> PartitionedComputations:
    """Partition a fused computation and every computation it calls (callees after callers)."""
    order = fusion.reachable_computations()
    partitioned = tuple(
        partition_computation(comp, is_subgraph_root, tensor_parameters=comp is fusion,
                              max_instructions_per_subgraph=max_instructions_per_subgraph)
        for comp in order)
    return PartitionedComputations(partitioned[0], partitioned)
