"""The HLO IR: HloModule ⊃ HloComputation ⊃ HloInstruction.

An instruction has an opcode (its HLO text name, e.g. "add", "get-tuple-element"), a result shape,
operands, and attributes (`attrs`, keyed by the HLO text attribute name; see hlo/attributes.py).
Computation-valued attributes (to_apply, calls, condition, body, branch_computations, ...) hold
HloComputation objects. A constant holds its value in `literal` (a numpy array, or a tuple of
literals for tuple constants); a parameter its `parameter_number`. Users are maintained by the
computation so that rewrites can walk def-use chains in both directions.

Mutation helpers for passes, all linear in what they touch: `HloComputation.add` (a new
instruction with an inferred shape and a module-unique name), `add_fresh`, `remove_instructions`
(many at once), `replace_instruction`, `sort_instructions` (stable def-before-use order);
`HloInstruction.clone`, `set_operand`, `replace_all_uses_with`, `has_side_effect`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.hlo.name_uniquer import NameUniquer
from hlocc.hlo.opcodes import infer_shape
from hlocc.hlo.printer import print_module
from hlocc.hlo.types import Shape

COMPUTATION_ATTRS = (
    "to_apply", "calls", "condition", "body", "select", "scatter",
    "true_computation", "false_computation", "branch_computations", "called_computations",
)
_COMPUTATION_ATTR_SET = frozenset(COMPUTATION_ATTRS)

# Opcodes whose every instance has a side effect (XLA's HasSideEffectNoRecurse list; `rng` and
# `rng-get-and-update-state` read and advance hidden state, so they count too).
SIDE_EFFECTING_OPCODES = frozenset({
    "send", "send-done", "recv", "recv-done", "infeed", "outfeed", "rng", "rng-get-and-update-state",
    "all-reduce-start", "all-reduce-done", "all-gather-start", "all-gather-done", "collective-broadcast",
    "collective-permute-start", "collective-permute-done",
})


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
        if self.attrs.keys().isdisjoint(_COMPUTATION_ATTR_SET):  # most instructions: one set test
            return []
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
        """Every use of `old` among this instruction's operands becomes a use of `new`."""
        if old is new:
            return
        already_user = any(op is new for op in self.operands)
        for i, op in enumerate(self.operands):
            if op is old:
                self.operands[i] = new
        if not already_user:
            new.users.append(self)
        if self in old.users and old not in self.operands:
            old.users.remove(self)

    def set_operand(self, index: int, new: HloInstruction) -> None:
        """Operand `index` becomes `new` (other uses of the old operand stay)."""
        old = self.operands[index]
        if old is new:
            return
        already_user = any(op is new for op in self.operands)
        self.operands[index] = new
        if not already_user:
            new.users.append(self)
        if not any(op is old for op in self.operands):
            old.users.remove(self)

    def replace_all_uses_with(self, new: HloInstruction) -> None:
        """Every user of this instruction uses `new` instead (and `new` becomes the root where this
        was). Linear in the users and their operand counts: a user already uses `new` exactly when
        `new` is among its operands, so no users list is searched."""
        if new is self:
            return
        users, self.users = self.users, []
        for user in users:
            already_user = any(op is new for op in user.operands)
            for i, op in enumerate(user.operands):
                if op is self:
                    user.operands[i] = new
            if not already_user:
                new.users.append(user)
        if self.parent is not None and self.parent.root is self:
            self.parent.root = new

    def remove_user(self, user: HloInstruction) -> None:
        """Drop every entry of `user` from `users` (the parser lists a user once per use, other code
        once per user; list.remove compares by identity here, at C speed)."""
        while True:
            try:
                self.users.remove(user)
            except ValueError:
                return

    def detach(self) -> None:
        """Unregister this instruction, which has no users, from its operands' user lists. It stays
        in its computation's list: a caller removing many at once drops them from it in one pass."""
        assert not self.users, f"removing '{self.name}', which still has users"
        seen: set[int] = set()
        for op in self.operands:
            if id(op) not in seen:
                seen.add(id(op))
                op.remove_user(self)

    # -- cloning and side effects ---------------------------------------------------------------
    def clone(self, operands: list[HloInstruction] | None = None, *, shape: Shape | None = None,
              name: str | None = None) -> HloInstruction:
        """A new, unattached instruction like this one (same opcode, attributes, literal, parameter
        number; called computations are shared) with `operands` (default: the same operands),
        `shape` and `name` (default: the same). Add it with `HloComputation.add_fresh`."""
        instr = HloInstruction(self.name if name is None else name, self.opcode,
                               self.shape if shape is None else shape,
                               self.operands if operands is None else operands, self.attrs,
                               literal=self.literal, parameter_number=self.parameter_number)
        instr.wrapped_opcode = self.wrapped_opcode
        return instr

    def has_side_effect_no_recurse(self) -> bool:
        """Whether this instruction itself has an effect beyond its result (XLA's
        HloInstruction::HasSideEffectNoRecurse): communication (send/recv, infeed/outfeed, the async
        collective starts/dones, collective-broadcast), the stateful rng ops, collectives whose layout
        is constrained or that carry a channel id (cross-module communication), and custom calls marked
        `custom_call_has_side_effect=true`. Such an instruction must not be removed, merged or
        evaluated at compile time."""
        opcode = self.opcode
        if opcode in SIDE_EFFECTING_OPCODES:
            return True
        if opcode in ("all-reduce", "all-gather", "all-to-all", "reduce-scatter", "collective-permute"):
            return bool(self.attrs.get("constrain_layout")) or "channel_id" in self.attrs
        if opcode == "custom-call":
            return bool(self.attrs.get("custom_call_has_side_effect"))
        return False

    def has_side_effect(self, memo: dict[int, bool] | None = None) -> bool:
        """`has_side_effect_no_recurse`, or an instruction of a called computation has a side
        effect (a while whose body sends, a call of an rng). `memo` caches per computation."""
        if self.has_side_effect_no_recurse():
            return True
        if self.opcode in ("async-update", "async-done"):  # as the async-start of its chain
            return self.operands[0].has_side_effect(memo)
        return any(computation_has_side_effect(c, memo) for c in self.called_computations())

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
        """The parameter numbered `number` (one scan; `parameters` also sorts them all)."""
        for instr in self.instructions:
            if instr.opcode == "parameter" and instr.parameter_number == number:
                return instr
        raise IndexError(f"computation '{self.name}' has no parameter {number}")

    @property
    def num_parameters(self) -> int:
        return sum(1 for i in self.instructions if i.opcode == "parameter")

    def add_instruction(self, instr: HloInstruction) -> HloInstruction:
        instr.parent = self
        self.instructions.append(instr)
        for op in instr.operands:
            if instr not in op.users:
                op.users.append(instr)
        if self.parent is not None:
            self.parent.note_name(instr.name)
        return instr

    def remove_instruction(self, instr: HloInstruction) -> None:
        assert not instr.users, f"removing {instr.name} which still has users"
        for op in instr.operands:
            if instr in op.users:
                op.users.remove(instr)
        self.instructions.remove(instr)
        instr.parent = None

    def add(self, opcode: str, operands=(), attrs=None, *, shape: Shape | None = None, name: str | None = None,
            literal: Any = None) -> HloInstruction:
        """Create and add a new instruction. Its name is `name` or `<opcode>.N`, made unique in the
        module; its shape is `shape` or, when None, inferred from the operands and attributes (ops
        whose result type the producer chooses — convert, broadcast, reshape, dot, constant, ... —
        need `shape`)."""
        instr = HloInstruction(self.unique_name(name or opcode), opcode, shape, operands, attrs, literal=literal)
        if shape is None:
            instr.shape = infer_shape(instr)
        return self.add_fresh(instr)

    def add_fresh(self, instr: HloInstruction) -> HloInstruction:
        """Add an instruction that is not yet registered as a user of its operands (a new one or a
        clone): linear in its operand count, whatever the operands' user counts."""
        instr.parent = self
        self.instructions.append(instr)
        seen: set[int] = set()
        for op in instr.operands:
            if id(op) not in seen:
                seen.add(id(op))
                op.users.append(instr)
        if self.parent is not None:
            self.parent.note_name(instr.name)
        return instr

    def unique_name(self, base: str) -> str:
        """A fresh instruction name derived from `base` (unique in the module when the computation
        belongs to one, else in the computation)."""
        if self.parent is not None:
            return self.parent.unique_name(base)
        return NameUniquer(i.name for i in self.instructions).unique(base)

    def remove_instructions(self, dead) -> None:
        """Remove the instructions `dead` (an iterable) at once: linear in the computation's size and
        the dead instructions' operands. Their users must be dead too (or none); the root may not be."""
        dead_ids = {id(i) for i in dead}
        if not dead_ids:
            return
        assert self.root is None or id(self.root) not in dead_ids, f"removing the root of {self.name}"
        touched: dict[int, HloInstruction] = {}
        kept = []
        for instr in self.instructions:
            if id(instr) in dead_ids:
                for op in instr.operands:
                    touched[id(op)] = op
                instr.parent = None
            else:
                kept.append(instr)
        self.instructions[:] = kept
        for op in touched.values():
            if id(op) not in dead_ids:
                op.users[:] = [u for u in op.users if id(u) not in dead_ids]
        for instr in dead:
            assert all(id(u) in dead_ids for u in instr.users), f"removing {instr.name} which still has users"
            instr.users = []
            instr.operands = []

    def replace_instruction(self, old: HloInstruction, new: HloInstruction) -> None:
        """Every use of `old` (and the root, where it was) becomes `new`; `old` is removed when it
        has no side effect."""
        old.replace_all_uses_with(new)
        if not old.has_side_effect():
            self.remove_instructions([old])

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

    def sort_instructions(self) -> None:
        """Put `instructions` in a def-before-use order that keeps the current order where it
        already is one: each instruction comes right after its not-yet-placed operands (a stable
        topological sort, linear in the number of edges). Rewrites append new instructions at the
        end; this moves them before their first user, so printed modules read in source order."""
        placed: set[int] = set()
        order: list[HloInstruction] = []
        for start in self.instructions:
            if id(start) in placed:
                continue
            stack: list[tuple[HloInstruction, int]] = [(start, 0)]
            placed.add(id(start))
            while stack:
                node, i = stack[-1]
                if i < len(node.operands):
                    stack[-1] = (node, i + 1)
                    child = node.operands[i]
                    if id(child) not in placed:
                        placed.add(id(child))
                        stack.append((child, 0))
                else:
                    stack.pop()
                    order.append(node)
        self.instructions[:] = order

    def reachable_computations(self) -> list[HloComputation]:
        """This computation and every computation it calls, directly or not: callers before
        callees, each once (linear in the instructions visited)."""
        order: list[HloComputation] = []
        seen: set[int] = set()
        stack: list[HloComputation] = [self]
        while stack:
            comp = stack.pop()
            if id(comp) in seen:
                continue
            seen.add(id(comp))
            order.append(comp)
            for instr in comp.instructions:
                stack.extend(reversed(instr.called_computations()))
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
    # Conditions on the dimension variables checked at each call (hlo/guards.py `ShapeGuard`s).
    guards: list = field(default_factory=list)
    # Dimension equality classes found by the `shape-constraints` pass, one text line each.
    shape_facts: list[str] = field(default_factory=list)
    # Constants whose text elided their values (`constant({...})`, XLA's default for large ones):
    # they read as zeros (hlo/literals.py), which `hlocc run` warns about.
    elided_constants: list[str] = field(default_factory=list, compare=False)
    # Where the parsed text defined an instruction: (computation, instruction) -> an
    # errors.SourceLocation, or None (the verifier's errors say it; hlo/parser.py).
    source_location: Callable[[str, str], Any] | None = field(default=None, repr=False, compare=False)
    # Instruction names in use, built on the first `unique_name` call and kept up to date after it.
    _names: NameUniquer | None = field(default=None, init=False, repr=False, compare=False)

    def add_computation(self, comp: HloComputation) -> HloComputation:
        comp.parent = self
        self.computations.append(comp)
        if comp.is_entry:
            self.entry = comp
        if self._names is not None:
            for instr in comp.instructions:
                self._names.reserve(instr.name)
        return comp

    def computation(self, name: str) -> HloComputation:
        for comp in self.computations:
            if comp.name == name:
                return comp
        raise KeyError(name)

    def remove_computations(self, dead) -> None:
        """Remove the computations `dead` (an iterable; nothing may call them any more)."""
        dead_ids = {id(c) for c in dead}
        assert self.entry is None or id(self.entry) not in dead_ids, "removing the entry computation"
        self.computations[:] = [c for c in self.computations if id(c) not in dead_ids]
        for comp in dead:
            comp.parent = None

    def unique_name(self, base: str) -> str:
        """A fresh instruction name `base` or `base.N` no instruction of the module has (XLA's
        NameUniquer: a trailing `.N` of `base` is replaced, so clones of `add.3` are `add.4`, ...)."""
        if self._names is None:
            self._names = NameUniquer(i.name for i in self.all_instructions())
        return self._names.unique(base)

    def note_name(self, name: str) -> None:
        """Record an instruction name taken outside `unique_name` (keeps later names unique)."""
        if self._names is not None:
            self._names.reserve(name)

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
        return print_module(self, **kwargs)

    def __str__(self) -> str:
        return self.to_string()


def operands_post_order(roots) -> list[HloInstruction]:
    """`roots` and every instruction they read, each once, operands before their users (an iterative
    DFS: deep operand chains do not hit Python's recursion limit)."""
    order: list[HloInstruction] = []
    seen: set[int] = set()
    stack = [(r, False) for r in reversed(list(roots))]
    while stack:
        instr, expanded = stack.pop()
        if expanded:
            order.append(instr)
            continue
        if id(instr) in seen:
            continue
        seen.add(id(instr))
        stack.append((instr, True))
        stack.extend((o, False) for o in reversed(instr.operands) if id(o) not in seen)
    return order


def computation_has_side_effect(comp: HloComputation, memo: dict[int, bool] | None = None) -> bool:
    """Whether any instruction of `comp` (or of a computation it calls) has a side effect."""
    memo = {} if memo is None else memo
    known = memo.get(id(comp))
    if known is None:
        memo[id(comp)] = False  # a recursive call graph is not valid HLO; this just stops a cycle
        known = any(i.has_side_effect(memo) for i in comp.instructions)
        memo[id(comp)] = known
    return known


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
