"""Shape guards: conditions on the dimension variables that a module with symbolic shapes needs
at call time (JAX's `@shape_assertion`s, and equalities the frontend assumes), checked once per
call before anything runs.

A `SizePredicate` is a conjunction of comparisons of symbolic sizes (`b >= 1`, `mod(s, 2) == 0`);
a `ShapeGuard` pairs one with the message to raise (JAX's text, whose `{0}`, `{1}`, ... are filled
with the values of `message_args`). `HloModule.guards` holds them; the printer writes each as a
`// guard:` line after the module header, which the parser reads back (`parse_guard`), so a
printed module keeps its guards.
"""

from __future__ import annotations

import json
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass

from hlocc.errors import ArgumentError, HloError
from hlocc.hlo.symbolic import Dim, DimExpr, evaluate, parse_dim_expr, substitute

_COMPARE = {"EQ": operator.eq, "NE": operator.ne, "LT": operator.lt, "LE": operator.le, "GT": operator.gt,
            "GE": operator.ge}
_SYMBOL = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


@dataclass(frozen=True)
class SizeComparison:
    direction: str  # an HLO comparison direction: EQ, NE, LT, LE, GT, GE
    lhs: Dim
    rhs: Dim

    def holds(self, binding: Mapping[str, int]) -> bool:
        return _COMPARE[self.direction](evaluate(self.lhs, binding), evaluate(self.rhs, binding))

    def substitute(self, mapping: Mapping[str, Dim]) -> SizeComparison:
        return SizeComparison(self.direction, substitute(self.lhs, mapping), substitute(self.rhs, mapping))

    def __str__(self) -> str:
        return f"{self.lhs} {_SYMBOL[self.direction]} {self.rhs}"


@dataclass(frozen=True)
class SizePredicate:
    """All of `comparisons` hold (an empty predicate always holds)."""

    comparisons: tuple[SizeComparison, ...]

    def holds(self, binding: Mapping[str, int]) -> bool:
        return all(c.holds(binding) for c in self.comparisons)

    def __and__(self, other: SizePredicate) -> SizePredicate:
        return SizePredicate(self.comparisons + other.comparisons)

    def __str__(self) -> str:
        return " and ".join(map(str, self.comparisons)) or "true"


@dataclass(frozen=True)
class ShapeGuard:
    predicate: SizePredicate
    message: str
    message_args: tuple[Dim, ...] = ()

    def check(self, binding: Mapping[str, int]) -> None:
        """Raise ArgumentError with the guard's message when its predicate fails for `binding`."""
        if self.predicate.holds(binding):
            return
        values = [evaluate(a, binding) for a in self.message_args]
        try:
            text = self.message.format(*values)
        except (IndexError, KeyError, ValueError):
            text = self.message
        raise ArgumentError(text)

    def __str__(self) -> str:
        """`<predicate>: "<message>"`, then ` % (<arg>, ...)` with message arguments: the text of a
        `// guard:` line, which `parse_guard` reads back (the message as a JSON string)."""
        args = f" % ({', '.join(map(str, self.message_args))})" if self.message_args else ""
        return f"{self.predicate}: {json.dumps(self.message)}{args}"


_COMPARISON_RE = re.compile(r"(.*?) (==|!=|<=|>=|<|>) (.*)")


def parse_guard(text: str) -> ShapeGuard:
    """The guard a `// guard:` line's `text` writes (`ShapeGuard.__str__`), or an HloError."""
    head, colon, rest = text.partition(': "')
    if not colon:
        raise HloError(f"guard '{text}': expected '<predicate>: \"<message>\"'")
    try:
        message, end = json.JSONDecoder().raw_decode('"' + rest)
    except json.JSONDecodeError as e:
        raise HloError(f"guard '{text}': the message is not a JSON string ({e.msg})") from None
    tail = rest[end - 1:].strip()
    args: tuple[Dim, ...] = ()
    if tail:
        if not (tail.startswith("% (") and tail.endswith(")")):
            raise HloError(f"guard '{text}': expected '% (<size>, ...)' after the message, found '{tail}'")
        args = tuple(parse_dim_expr(a) for a in tail[3:-1].split(",") if a.strip())
    comparisons = []
    for part in ([] if head.strip() == "true" else head.split(" and ")):
        m = _COMPARISON_RE.fullmatch(part.strip())
        if not m:
            raise HloError(f"guard '{text}': cannot read the comparison '{part}'")
        direction = next(d for d, symbol in _SYMBOL.items() if symbol == m.group(2))
        comparisons.append(SizeComparison(direction, parse_dim_expr(m.group(1)), parse_dim_expr(m.group(3))))
    return ShapeGuard(SizePredicate(tuple(comparisons)), message, args)


def window_fit_guards(module) -> list[ShapeGuard]:
    """Guards that every dynamic-slice, gather and dynamic-update-slice window fits its operand where
    that depends on the sizes (`f32[?k,16]` into `f32[?n,16]`: k <= n), which the shape rules leave
    to the call: a kernel clamps its start to `n - k` and would read or write outside the buffer
    otherwise. The shape rules assume variables >= 1; a plan also runs size 0 (a module without
    JAX's `b >= 1`), so a window of 1 row in `f32[?b,4]` gets the guard `1 <= b` too."""
    guards = []
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in ("reduce-window", "convolution", "select-and-scatter"):
                guards += _window_op_guards(instr)
                continue
            if instr.opcode == "slice":
                guards += _slice_guards(instr)
                continue
            if instr.opcode == "dynamic-slice":
                windows, what = instr.attrs["dynamic_slice_sizes"], "slice size"
            elif instr.opcode == "gather":
                windows, what = instr.attrs["slice_sizes"], "slice size"
            elif instr.opcode == "dynamic-update-slice":
                windows, what = instr.operand(1).shape.dims, "update dimension"
            else:
                continue
            for i, (w, n) in enumerate(zip(windows, instr.operand(0).shape.dims)):
                if not isinstance(w, DimExpr) and not isinstance(n, DimExpr):
                    continue
                if _fits_at_every_size(w, n):
                    continue
                size = f"{w} = {{0}}" if isinstance(w, DimExpr) else f"{w}"
                guards.append(ShapeGuard(SizePredicate((SizeComparison("LE", w, n),)),
                                         f"{instr.opcode} '{instr.name}': {what} {i} ({size}) exceeds the "
                                         f"operand's dimension ({n} = {{1}})", (w, n)))
    return guards


def _window_op_guards(instr) -> list[ShapeGuard]:
    """A window op's output sizes are JAX's `floordiv(padded - window, stride) + 1` where the shape
    rules cannot decide whether the window fits (hlo/shape_rules_common.py): negative, at a size
    where the padded operand is more than a stride shorter than the window, which a guard refuses."""
    from hlocc.hlo.symbolic import InconclusiveDimensionError

    shape = instr.operand(1).shape if instr.opcode == "select-and-scatter" else instr.shape
    first = shape.leaves()[0]  # the other results of a variadic reduce-window have its dims
    guards = []
    for i, w in enumerate(instr.attrs.get("window") or ()):
        if isinstance(w.size, DimExpr) and not _fits_at_every_size(1, w.size):  # a weight gradient's
            guards.append(ShapeGuard(SizePredicate((SizeComparison("GE", w.size, 1),)),  # window
                                     f"{instr.opcode} '{instr.name}': window dimension {i} has size "
                                     f"{w.size} = {{0}}, not positive", (w.size,)))
    for i, n in enumerate(first.dims):
        if not isinstance(n, DimExpr):
            continue
        try:
            if n >= 0:
                continue
        except InconclusiveDimensionError:
            pass
        guards.append(ShapeGuard(SizePredicate((SizeComparison("GE", n, 0),)),
                                 f"{instr.opcode} '{instr.name}': the window does not fit dimension {i} "
                                 f"of its padded operand (an output size {n} = {{0}})", (n,)))
    return guards


def _slice_guards(instr) -> list[ShapeGuard]:
    """`start <= limit <= size` for each dimension of a slice where that depends on the sizes
    (shape_rules_data.infer_slice lets it pass): a negative extent or a limit past the operand
    would read outside its buffer."""
    guards = []
    for i, (s, n) in enumerate(zip(instr.attrs["slice"], instr.operand(0).shape.dims)):
        for low, high, what in ((s.start, s.limit, "its start"), (s.limit, n, "the operand's dimension")):
            if (isinstance(low, DimExpr) or isinstance(high, DimExpr)) and not _fits_at_every_size(low, high):
                guards.append(ShapeGuard(SizePredicate((SizeComparison("LE", low, high),)),
                                         f"slice '{instr.name}': dimension {i} needs {low} = {{0}} <= {high} = {{1}} "
                                         f"({what})", (low, high)))
    return guards


def _fits_at_every_size(w: Dim, n: Dim) -> bool:
    """`w <= n` for every value >= 0 of the variables (v >= 0 is u - 1 for a u >= 1, the shape
    rules' assumption); False where it may fail or cannot be decided."""
    from hlocc.hlo.symbolic import InconclusiveDimensionError, symbol, variables_of

    shifted = {v: symbol(v) - 1 for v in variables_of([w, n])}
    try:
        return substitute(w, shifted) <= substitute(n, shifted)
    except InconclusiveDimensionError:
        return False
