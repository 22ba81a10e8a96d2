"""Logical buffers (HloValues): which instruction leaf defines new storage and which only forwards
an operand's, in the spirit of XLA's HloDataflowAnalysis.

Every array or token leaf `(instruction, shape index)` of an instruction in a sequential
computation (call_graph.py) is a *position*, and every position holds exactly one `HloValue`.
hlocc needs no phi values: where XLA merges values (a while's state, a conditional's result), hlocc
defines one value per region (the while result, the body parameter, the condition parameter) and
alias_analysis.py puts them into one buffer.

Forwarding (the position holds an operand's value; no storage of its own):
  get-tuple-element, tuple, bitcast, a reshape that is a bitcast in the layout, opt-barrier, domain,
  add-dependency, async-update/-done, copy-done, all-reduce-done, all-gather-done,
  collective-permute-done; a `call` or `async-start` with one call site (its result is the callee
  root's value, the callee's parameters are the caller's operands); a conditional branch's
  parameters (the conditional's operands).
Defining: everything else, `copy` included; the parameters of the entry (caller-owned), of while
conditions and bodies (the loop state), and of computations with several call sites (copied in).

A tuple never has storage of its own: the top-level index of a tuple-shaped instruction is not a
position (XLA keeps a pointer table there; hlocc's runtime passes leaves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.call_graph import CallGraph, build_call_graph, sequential_callees
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.shape_util import reshape_is_row_major_bitcast
from hlocc.hlo.types import UNBOUNDED, Shape

ShapeIndex = tuple[int, ...]


_ARRAY_LEAVES: tuple[ShapeIndex, ...] = ((),)


def leaf_indices(shape: Shape) -> tuple[ShapeIndex, ...]:
    """Shape indices of the array and token leaves of `shape`, in order; ((),) for an array."""
    return _ARRAY_LEAVES if shape.tuple_shapes is None else _tuple_leaf_indices(shape)


@lru_cache(maxsize=4096)
def _tuple_leaf_indices(shape: Shape) -> tuple[ShapeIndex, ...]:
    return tuple((i,) + sub for i, s in enumerate(shape.tuple_shapes) for sub in leaf_indices(s))


def subshape(shape: Shape, index: ShapeIndex) -> Shape:
    for i in index:
        if not shape.is_tuple or not 0 <= i < len(shape.tuple_shapes):
            raise HloError(f"shape index {format_index(index)} does not exist in {shape}")
        shape = shape.tuple_shapes[i]
    return shape


def format_index(index: ShapeIndex) -> str:
    return "{" + ",".join(map(str, index)) + "}"


def buffer_size(shape: Shape, where: str) -> int:
    """Bytes of an array leaf (dynamic dimensions at their bound; tokens and opaque values take none)."""
    if not shape.element_type.is_array_type:
        return 0
    if UNBOUNDED in shape.dims:
        raise UnsupportedError(f"{where}: shape {shape} has an unbounded dynamic dimension; buffer "
                               f"assignment needs a bound ('<=N')")
    return shape.byte_size()


def is_bitcast(instr: HloInstruction) -> bool:
    return instr.opcode == "bitcast" or (
        instr.opcode == "reshape" and reshape_is_row_major_bitcast(instr.operands[0].shape, instr.shape))


@dataclass(frozen=True)
class HloUse:
    """`instruction` reads the value at leaf `operand_index` of its operand `operand_number`."""

    instruction: HloInstruction
    operand_number: int
    operand_index: ShapeIndex = ()


@dataclass(eq=False)
class HloValue:
    """One logical buffer: the array defined at `index` of `instruction`."""

    id: int
    instruction: HloInstruction
    index: ShapeIndex
    shape: Shape
    size: int
    positions: list[tuple[HloInstruction, ShapeIndex]] = field(default_factory=list, repr=False)
    uses: list[HloUse] = field(default_factory=list, repr=False)

    @property
    def name(self) -> str:
        return f"{self.instruction.name}{format_index(self.index)}"

    @property
    def is_entry_parameter(self) -> bool:
        comp = self.instruction.parent
        return self.instruction.opcode == "parameter" and comp is not None and comp.is_entry

    @property
    def is_constant(self) -> bool:
        return self.instruction.opcode == "constant"

    def __repr__(self) -> str:
        return f"<{self.id} {self.name}>"


def _result_part(done: HloInstruction, index: ShapeIndex) -> tuple[HloInstruction, ShapeIndex]:
    """A `*-done` forwards its start's result: element 1 of an (operands, results, ...) tuple, or
    the whole start when it is written in the older array-shaped form."""
    start = done.operands[0]
    return (start, (1,) + index) if start.shape.is_tuple else (start, index)


# Forwarding rules, as data: opcode -> (instr, index) -> the position whose value this one holds.
# Rules that depend on the call graph (parameters, call, async-start) are methods of HloDataflow.
_FORWARD = {
    "get-tuple-element": lambda instr, index: (instr.operands[0], (instr.attrs["index"],) + index),
    "tuple": lambda instr, index: (instr.operands[index[0]], index[1:]),
    "bitcast": lambda instr, index: (instr.operands[0], index),
    "opt-barrier": lambda instr, index: (instr.operands[0], index),
    "domain": lambda instr, index: (instr.operands[0], index),
    "add-dependency": lambda instr, index: (instr.operands[0], index),
    "async-update": lambda instr, index: (instr.operands[0], index),
    "async-done": lambda instr, index: (instr.operands[0], (1,) + index),
    "copy-done": lambda instr, index: (instr.operands[0], (0,) + index),
    "all-reduce-done": lambda instr, index: (instr.operands[0], index),
    "all-gather-done": lambda instr, index: _result_part(instr, index),
    "collective-permute-done": lambda instr, index: _result_part(instr, index),
}


def is_pure_forwarding(instr: HloInstruction) -> bool:
    """Instructions that only forward values: they read nothing at run time, so they are no use."""
    return instr.opcode in _FORWARD or is_bitcast(instr)


class HloDataflow:
    """The values of every sequential computation of `module`, their positions and their uses.

    `value_at(instr, index)` is the value at a position; uses are recorded at the instructions that
    read a value at run time (pure forwarding instructions are no use; a computation's root is read
    by its caller, which liveness.py accounts for)."""

    def __init__(self, module: HloModule, graph: CallGraph | None = None):
        self.module = module
        self.graph = graph if graph is not None else build_call_graph(module)
        self._at: dict[tuple[HloInstruction, ShapeIndex], HloValue] = {}
        self._defined: dict[HloInstruction, list[HloValue]] = {}
        created: list[HloValue] = []
        for comp in self.graph.computations:
            for instr in comp.instructions:
                for index in leaf_indices(instr.shape):
                    value = self._resolve(instr, index, created)
                    value.positions.append((instr, index))
        # Number values in program text order, so dumps read top to bottom.
        self.values: list[HloValue] = []
        for comp in self.graph.computations:
            for instr in comp.instructions:
                for value in self._defined.get(instr, ()):
                    value.id = len(self.values)
                    self.values.append(value)
        for comp in self.graph.computations:
            for user in comp.instructions:
                if is_pure_forwarding(user):
                    continue
                for k, operand in enumerate(user.operands):
                    for index in leaf_indices(operand.shape):
                        self._at[(operand, index)].uses.append(HloUse(user, k, index))

    # -- queries -------------------------------------------------------------------------------
    def value_at(self, instr: HloInstruction, index: ShapeIndex = ()) -> HloValue:
        value = self._at.get((instr, tuple(index)))
        if value is None:
            comp = instr.parent
            if comp is None:
                raise HloError(f"'{instr.name}' is in no computation")
            if not self.graph.is_sequential(comp):
                raise HloError(f"'{instr.name}' is in fused or embedded computation '{comp.name}', whose "
                               f"instructions have no buffers (only the calling instruction's results do)")
            raise HloError(f"'{instr.name}' has no array at shape index {format_index(index)} "
                           f"(shape {instr.shape}); tuples have no storage of their own")
        return value

    def values_defined_by(self, instr: HloInstruction) -> list[HloValue]:
        return self._defined.get(instr, [])

    def defines(self, instr: HloInstruction, index: ShapeIndex) -> bool:
        return self.value_at(instr, index).instruction is instr

    # -- resolution ----------------------------------------------------------------------------
    def _resolve(self, instr: HloInstruction, index: ShapeIndex, created: list[HloValue]) -> HloValue:
        """Follow forwarding links to the defining position (iteratively: chains may be long)."""
        path = []
        key = (instr, index)
        while key not in self._at:
            source = self._forwarded(*key)
            if source is None:
                self._at[key] = self._new_value(*key, created)
                break
            path.append(key)
            key = source
        value = self._at[key]
        for k in path:
            self._at[k] = value
        return value

    def _new_value(self, instr: HloInstruction, index: ShapeIndex, created: list[HloValue]) -> HloValue:
        shape = subshape(instr.shape, index)
        value = HloValue(len(created), instr, index, shape, buffer_size(shape, f"'{instr.name}'"))
        created.append(value)
        self._defined.setdefault(instr, []).append(value)
        return value

    def _forwarded(self, instr: HloInstruction, index: ShapeIndex):
        rule = _FORWARD.get(instr.opcode)
        if rule is not None:
            return rule(instr, index)
        op = instr.opcode
        if op == "reshape" and is_bitcast(instr):
            return instr.operands[0], index
        if op == "parameter":
            return self._parameter_source(instr, index)
        if op == "call" and self.graph.unique_caller(instr.attrs["to_apply"]) is instr:
            return instr.attrs["to_apply"].root, index
        if op == "async-start" and self.graph.unique_caller(instr.attrs["calls"]) is instr:
            if index[:1] == (0,):
                return instr.operands[index[1]], index[2:]
            if index[:1] == (1,):
                return instr.attrs["calls"].root, index[1:]
        return None

    def _parameter_source(self, param: HloInstruction, index: ShapeIndex):
        caller = self.graph.unique_caller(param.parent)
        if caller is None or caller.opcode == "while":
            return None
        if caller.opcode == "conditional":
            branch = sequential_callees(caller).index(param.parent)
            return caller.operands[branch + 1], index
        return caller.operands[param.parameter_number], index  # call, async-start
