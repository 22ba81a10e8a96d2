"""A small pattern language over HLO instructions, for rewrite tables written as data.

A `Pat` matches an instruction by opcode, operand patterns, a predicate, and binds it to a name;
`op`, `var` and `splat` build them:

    op("add", var("x"), splat(is_zero))          add(x, <all zeros>), in either operand order
    op("negate", op("negate", var("x")))         negate(negate(x))

Binary commutative opcodes (add, multiply, maximum, minimum, and, or, xor) match their operand
patterns in either order. A name bound twice must bind the same instruction (`op("and", var("x"),
var("x"))` is and(x, x)). A `Rule` pairs a pattern with a rewrite `fn(Match) -> HloInstruction |
None` that returns the instruction replacing the matched one (an existing one, or one it created
with `Match.add`) or None to decline. `RuleTable` indexes rules by the root opcode.

Splat values: `splat_value(instr)` is the one value all elements of `instr` hold when it is a
constant (at most `MAX_SPLAT_SCAN` elements are examined) or a broadcast of one. Predicates on such
values distinguish +0.0 from -0.0, since the rules must preserve values exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import PrimitiveType, Shape

COMMUTATIVE = frozenset({"add", "multiply", "maximum", "minimum", "and", "or", "xor"})
MAX_SPLAT_SCAN = 4096
"""Constants with more elements are not examined for a splat value (keeps rule matching cheap)."""

Predicate = Callable[[HloInstruction], bool]


@dataclass(frozen=True)
class Pat:
    """Matches an instruction whose opcode is in `opcodes` (None: any), whose operands match
    `operands` (None: any operands), and which satisfies `where`; binds it to `bind`."""

    opcodes: frozenset[str] | None = None
    operands: tuple[Pat, ...] | None = None
    bind: str | None = None
    where: Predicate | None = None

    def match(self, instr: HloInstruction, bound: dict[str, HloInstruction]) -> bool:
        """Whether `instr` matches; on success `bound` holds the bindings (it may hold partial
        bindings after a failure, so pass a fresh or copied dict)."""
        if self.opcodes is not None and instr.opcode not in self.opcodes:
            return False
        if self.bind is not None:
            previous = bound.get(self.bind)
            if previous is not None and previous is not instr:
                return False
        if self.where is not None and not self.where(instr):
            return False
        if self.operands is not None and not self._match_operands(instr, bound):
            return False
        if self.bind is not None:
            bound[self.bind] = instr
        return True

    def _match_operands(self, instr: HloInstruction, bound: dict[str, HloInstruction]) -> bool:
        if len(instr.operands) != len(self.operands):
            return False
        orders = [instr.operands]
        if instr.opcode in COMMUTATIVE and len(instr.operands) == 2:
            orders.append(instr.operands[::-1])
        for operands in orders:
            trial = dict(bound)
            if all(p.match(o, trial) for p, o in zip(self.operands, operands)):
                bound.update(trial)
                return True
        return False


def op(opcodes: str | Iterable[str], *operands: Pat, bind: str | None = None, where: Predicate | None = None) -> Pat:
    """An instruction of `opcodes` (one name or several); with no operand patterns, any operands."""
    names = frozenset([opcodes] if isinstance(opcodes, str) else opcodes)
    return Pat(names, tuple(operands) if operands else None, bind, where)


def var(name: str, where: Predicate | None = None) -> Pat:
    """Any instruction (satisfying `where`), bound to `name`."""
    return Pat(None, None, name, where)


def splat(test: Callable[[Any, PrimitiveType], bool], bind: str | None = None) -> Pat:
    """A constant or broadcast of a constant whose elements all equal one value v with
    `test(v, element_type)`."""

    def where(instr: HloInstruction) -> bool:
        value = splat_value(instr)
        return value is not None and bool(test(value, instr.shape.element_type))

    return Pat(None, None, bind, where)


# -- splat values -------------------------------------------------------------------------------
def splat_value(instr: HloInstruction) -> np.generic | None:
    """The single value of every element of `instr` (a constant, or a broadcast of a constant),
    or None. Elements are compared bitwise, so +0.0 and -0.0 differ and equal NaNs agree."""
    if instr.opcode == "broadcast":
        instr = instr.operands[0]
    if instr.opcode != "constant" or not instr.shape.is_array or instr.literal is None:
        return None
    array = np.asarray(instr.literal)
    if array.size == 0 or array.size > MAX_SPLAT_SCAN:
        return None
    flat = array.reshape(-1)
    if array.size > 1:
        raw = flat.view(np.uint8).reshape(flat.size, -1)
        if not (raw == raw[0]).all():
            return None
    return flat[0]


def is_zero(v, et: PrimitiveType) -> bool:
    """0 of any sign (use only where the sign of a float zero cannot matter)."""
    return bool(v == 0)


def is_neg_zero(v, et: PrimitiveType) -> bool:
    return et.is_float and bool(v == 0) and bool(np.signbit(np.float64(v)))


def is_pos_zero(v, et: PrimitiveType) -> bool:
    return bool(v == 0) and not (et.is_float and bool(np.signbit(np.float64(v))))


def is_one(v, et: PrimitiveType) -> bool:
    return bool(v == 1)


def is_all_ones(v, et: PrimitiveType) -> bool:
    """Every bit set: true for pred, -1 for signed, the maximum for unsigned integers."""
    if et.is_pred:
        return bool(v)
    if et.is_integer:
        return int(v) == (-1 if et.is_signed else (1 << et.bits) - 1)
    return False


def is_lowest(v, et: PrimitiveType) -> bool:
    """The identity of maximum: -inf for floats with infinities, the minimum integer."""
    if et.is_float:
        return bool(np.isneginf(np.float64(v)))
    if et.is_integer:
        return int(v) == (-(1 << (et.bits - 1)) if et.is_signed else 0)
    return et.is_pred and not bool(v)


def is_highest(v, et: PrimitiveType) -> bool:
    """The identity of minimum: +inf for floats with infinities, the maximum integer."""
    if et.is_float:
        return bool(np.isposinf(np.float64(v)))
    if et.is_integer:
        return int(v) == ((1 << (et.bits - 1)) - 1 if et.is_signed else (1 << et.bits) - 1)
    return et.is_pred and bool(v)


# -- predicates on instructions -----------------------------------------------------------------
def of_type(*kinds: str) -> Predicate:
    """An array of one of the kinds: 'int' (signed or unsigned), 'pred', 'float', 'complex'."""

    def where(instr: HloInstruction) -> bool:
        et = instr.shape.element_type
        if instr.shape.is_tuple or et is None:
            return False
        return any(getattr(et, "is_integer" if k == "int" else f"is_{k}") for k in kinds)

    return where


# -- rules --------------------------------------------------------------------------------------
@dataclass
class Match:
    """A successful match: the matched instruction `root` and the bound instructions."""

    root: HloInstruction
    bound: dict[str, HloInstruction]

    def __getitem__(self, name: str) -> HloInstruction:
        return self.bound[name]

    @property
    def computation(self) -> HloComputation:
        return self.root.parent

    def add(self, opcode: str, operands, attrs=None, *, shape: Shape | None = None) -> HloInstruction:
        """A new instruction in the root's computation (shape inferred when None), carrying the
        root's metadata like XLA's derived instructions."""
        attrs = dict(attrs or {})
        if "metadata" in self.root.attrs:
            attrs.setdefault("metadata", self.root.attrs["metadata"])
        return self.computation.add(opcode, operands, attrs, shape=shape)

    def constant(self, value, shape: Shape) -> HloInstruction:
        """A splat of `value` with `shape`: a scalar constant, broadcast unless `shape` is a scalar."""
        scalar = Shape.array(shape.element_type, ())
        const = self.computation.add("constant", (), shape=scalar,
                                     literal=np.asarray(value, dtype=shape.dtype).reshape(()))
        if shape.rank == 0:
            return const
        return self.add("broadcast", [const], {"dimensions": ()}, shape=shape)


Rewrite = Callable[[Match], "HloInstruction | None"]


@dataclass(frozen=True)
class Rule:
    """`pattern` → `rewrite`: the rewrite returns the replacement of the matched instruction or
    None. `name` says what the rule does, in HLO terms (`add(x, -0.0) → x`)."""

    name: str
    pattern: Pat
    rewrite: Rewrite


@dataclass
class RuleTable:
    """Rules indexed by the opcode their pattern's root matches (rules for any opcode apply to all)."""

    rules: tuple[Rule, ...]
    _by_opcode: dict[str, list[Rule]] = field(default_factory=dict, init=False, repr=False)
    _any: list[Rule] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self):
        names = [r.name for r in self.rules]
        duplicates = {n for n in names if names.count(n) > 1}
        if duplicates:
            raise ValueError(f"rule names used twice: {sorted(duplicates)}")
        for rule in self.rules:
            if rule.pattern.opcodes is None:
                self._any.append(rule)
            else:
                for opcode in rule.pattern.opcodes:
                    self._by_opcode.setdefault(opcode, []).append(rule)

    def candidates(self, opcode: str) -> list[Rule]:
        return self._by_opcode.get(opcode, []) + self._any

    def matches(self, instr: HloInstruction) -> Iterator[tuple[Rule, Match]]:
        """The rules whose pattern matches `instr`, in table order, with their matches."""
        for rule in self.candidates(instr.opcode):
            bound: dict[str, HloInstruction] = {}
            if rule.pattern.match(instr, bound):
                yield rule, Match(instr, bound)
