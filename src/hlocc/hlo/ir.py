"""The HLO IR: HloModule ⊃ HloComputation ⊃ HloInstruction.

An instruction has an opcode (its HLO text name, e.g. "add", "get-tuple-element"), a result shape,
operands, and attributes (`attrs`, keyed by the HLO text attribute name; see hlo/attributes.py).
Computation-valued attributes (to_apply, calls, condition, body, branch_computations, ...) hold
HloComputation objects. A constant holds its value in `literal` (a numpy array, or a tuple of
literals for tuple constants); a parameter its `parameter_number`. Users are maintained by the
computation so that rewrites can walk def-use chains in both directions.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.hlo.types import Shape

COMPUTATION_ATTRS = (
    "to_apply", "calls", "condition", "body", "select", "scatter",
    "true_computation", "false_computation", "branch_computations", "called_computations",
)


class HloInstruction:
    def __init__(self, name: str, opcode: str, shape: Shape, operands=(), attrs=None, *,
                 literal: Any = None, parameter_number: int | None = None):
        self.name = name
        self.opcode = opcode
        self.shape = shape
        self.operands: list[HloInstruction] = list(operands)
        self.attrs: dict[str, Any] = dict(attrs or {})
        self.literal = literal
        self.parameter_number = parameter_number
        # For async ops written as `<op>-start/-update/-done` (e.g. custom-call-start): the wrapped op.
        self.wrapped_opcode: str | None = None
        self.users: list[HloInstruction] = []
        self.parent: HloComputation | None = None

    # -- called computations ------------------------------------------------------------------
    def called_computations(self) -> list[HloComputation]:
        called = []
        for key in COMPUTATION_ATTRS:
            value = self.attrs.get(key)
            if value is None:
                continue
            called.extend(value if isinstance(value, (list, tuple)) else [value])
        return called

    @property
    def to_apply(self) -> HloComputation:
        return self.attrs["to_apply"]

    @property
    def fused_computation(self) -> HloComputation:
        return self.attrs["calls"]

    # -- operands and users -------------------------------------------------------------------
    def operand(self, i: int) -> HloInstruction:
        return self.operands[i]

    def replace_operand(self, old: HloInstruction, new: HloInstruction) -> None:
        for i, op in enumerate(self.operands):
            if op is old:
                self.operands[i] = new
        if self not in new.users:
            new.users.append(self)
        if self in old.users and old not in self.operands:
            old.users.remove(self)

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        for user in list(self.users):
            user.replace_operand(self, new)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def __repr__(self) -> str:
        return f"<{self.name} = {self.shape} {self.opcode}>"


class HloComputation:
    def __init__(self, name: str, *, is_entry: bool = False, execution_thread: str | None = None):
        self.name = name
        self.instructions: list[HloInstruction] = []
        self.root: HloInstruction | None = None
        self.is_entry = is_entry
        self.execution_thread = execution_thread
        self.parent: HloModule | None = None

    @property
    def parameters(self) -> list[HloInstruction]:
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda p: p.parameter_number)

    def parameter(self, number: int) -> HloInstruction:
        return self.parameters[number]

    @property
    def num_parameters(self) -> int:
        return sum(1 for i in self.instructions if i.opcode == "parameter")

    def add_instruction(self, instr: HloInstruction) -> HloInstruction:
        instr.parent = self
        self.instructions.append(instr)
        for op in instr.operands:
            if instr not in op.users:
                op.users.append(instr)
        return instr

    def remove_instruction(self, instr: HloInstruction) -> None:
        assert not instr.users, f"removing {instr.name} which still has users"
        for op in instr.operands:
            if instr in op.users:
                op.users.remove(instr)
        self.instructions.remove(instr)
        instr.parent = None

    def post_order(self) -> list[HloInstruction]:
        """Instructions in an order where every operand comes before its users (iterative DFS,
        linear in the number of edges)."""
        seen: set[int] = set()
        order: list[HloInstruction] = []
        roots = [self.root] + [i for i in self.instructions if i is not self.root]
        for start in roots:
            if id(start) in seen:
                continue
            stack: list[tuple[HloInstruction, int]] = [(start, 0)]
            seen.add(id(start))
            while stack:
                node, i = stack[-1]
                if i < len(node.operands):
                    stack[-1] = (node, i + 1)
                    child = node.operands[i]
                    if id(child) not in seen:
                        seen.add(id(child))
                        stack.append((child, 0))
                else:
                    stack.pop()
                    order.append(node)
        return order

    @property
    def program_shape(self) -> tuple[list[Shape], Shape]:
        return [p.shape for p in self.parameters], self.root.shape

    def __repr__(self) -> str:
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


@dataclass
class HloModule:
    name: str
    computations: list[HloComputation] = field(default_factory=list)
    entry: HloComputation | None = None
    # Module header attributes: typed where hlocc uses them, raw text otherwise.
    input_output_alias: list[tuple[tuple[int, ...], int, tuple[int, ...], str]] = field(default_factory=list)
    header_attrs: dict[str, Any] = field(default_factory=dict)
    # The FileNames/FunctionNames/FileLocations/StackFrames tables, kept as raw text.
    stack_frame_tables: str = ""

    def add_computation(self, comp: HloComputation) -> HloComputation:
        comp.parent = self
        self.computations.append(comp)
        if comp.is_entry:
            self.entry = comp
        return comp

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def all_instructions(self) -> Iterator[HloInstruction]:
        for comp in self.computations:
            yield from comp.instructions

    def computation_post_order(self) -> list[HloComputation]:
        """Computations with callees before callers."""
        seen: set[int] = set()
        order: list[HloComputation] = []

        def visit(comp: HloComputation):
            if id(comp) in seen:
                return
            seen.add(id(comp))
            for instr in comp.instructions:
                for callee in instr.called_computations():
                    visit(callee)
            order.append(comp)

        for comp in self.computations:
            visit(comp)
        return order

    def to_string(self, **kwargs) -> str:
        from hlocc.hlo.printer import print_module

        return print_module(self, **kwargs)

    def __str__(self) -> str:
        return self.to_string()


def literal_equal(a: Any, b: Any) -> bool:
    """Bitwise equality of literals (NaNs with the same bits are equal)."""
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(literal_equal(x, y) for x, y in zip(a, b)))
    if a is None or b is None:
        return a is b
    a = np.asarray(a)
    b = np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
