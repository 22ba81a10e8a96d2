"""Quasi-affine index expressions: the one expression system of hlocc's indexing maps.

An expression is built from integer constants, variables (dimension `d`, range/symbol `s` and
runtime `r` variables, numbered per kind), sums, multiplication by a constant, and `floordiv`,
`ceildiv` and `mod` by a positive constant, with MLIR's semantics: `x floordiv c = floor(x / c)`,
`x ceildiv c = ceil(x / c)`, `x mod c = x - c * (x floordiv c)` (always in [0, c-1]).

Representation. Multiplication by a constant is not a node: every linear combination is a `Sum`
of (atom, coefficient) pairs plus a constant, where an atom is a `Var`, `FloorDiv`, `CeilDiv` or
`Mod`. Construction keeps sums flat, merges equal atoms and sorts the terms (coefficient
descending, then by the first variable an atom uses), so two expressions built in
different orders from the same linear form compare equal; a sum of one atom with coefficient 1 and
no constant is the atom itself, a sum with no terms is a `Const`. Range-aware simplification
(removing div/mod using variable bounds) lives in `simplifier.py`.

Why not xdsl's `xdsl.ir.affine`: its expressions are MLIR's binary trees, simplified eagerly on
construction by MLIR's own (range-unaware) rules, with only dims and symbols. Indexing maps need a
third variable kind (runtime variables), variable names in the text, a canonical linear form the
range-aware simplifier can rewrite term by term, and control over the printed order of terms (the
seed's maps). Wrapping xdsl's classes would mean converting to such a form and back at every step,
so hlocc has this one implementation instead; `to_xdsl` converts for IR that needs an
`AffineMap` (runtime variables become trailing symbols, as XLA does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from hlocc.analysis.interval import Interval
from hlocc.errors import HloError


class IndexingError(HloError):
    """An ill-formed indexing expression or map (non-affine product, non-positive divisor, a
    variable out of range of its map, malformed map text)."""


class VarKind(IntEnum):
    DIM = 0
    SYMBOL = 1
    RUNTIME = 2

    @property
    def prefix(self) -> str:
        return "dsr"[self]


class Expr:
    """Base of all expressions. Supports `+`, `-`, `*` (by an int or a constant expression),
    `//` (floordiv), `%` (mod) and `ceildiv` with ints."""

    __slots__ = ()

    def __add__(self, other: Expr | int) -> Expr:
        return _add(self, as_expr(other))

    def __radd__(self, other: int) -> Expr:
        return _add(as_expr(other), self)

    def __sub__(self, other: Expr | int) -> Expr:
        return _add(self, as_expr(other) * -1)

    def __rsub__(self, other: int) -> Expr:
        return _add(as_expr(other), self * -1)

    def __neg__(self) -> Expr:
        return self * -1

    def __mul__(self, other: Expr | int) -> Expr:
        if isinstance(other, Expr):
            if isinstance(other, Const):
                return _scale(self, other.value)
            if isinstance(self, Const):
                return _scale(other, self.value)
            raise IndexingError(f"non-affine product ({self}) * ({other})")
        return _scale(self, int(other))

    __rmul__ = __mul__

    def __floordiv__(self, divisor: int) -> Expr:
        return floordiv(self, divisor)

    def __mod__(self, modulus: int) -> Expr:
        return mod(self, modulus)

    def ceildiv(self, divisor: int) -> Expr:
        return ceildiv(self, divisor)

    def __str__(self) -> str:
        return to_text(self)


@dataclass(frozen=True, slots=True, eq=True)
class Const(Expr):
    value: int


@dataclass(frozen=True, slots=True, eq=True)
class Var(Expr):
    kind: VarKind
    index: int


@dataclass(frozen=True, slots=True, eq=True)
class Sum(Expr):
    """sum(atom * coefficient for atom, coefficient in terms) + constant, in canonical order."""

    terms: tuple[tuple[Expr, int], ...]
    constant: int = 0


@dataclass(frozen=True, slots=True, eq=True)
class FloorDiv(Expr):
    lhs: Expr
    divisor: int


@dataclass(frozen=True, slots=True, eq=True)
class CeilDiv(Expr):
    lhs: Expr
    divisor: int


@dataclass(frozen=True, slots=True, eq=True)
class Mod(Expr):
    lhs: Expr
    modulus: int


DivLike = (FloorDiv, CeilDiv, Mod)


def dim(i: int) -> Var:
    return Var(VarKind.DIM, i)


def sym(i: int) -> Var:
    return Var(VarKind.SYMBOL, i)


def rt(i: int) -> Var:
    return Var(VarKind.RUNTIME, i)


def as_expr(value: Expr | int) -> Expr:
    return value if isinstance(value, Expr) else Const(int(value))


# -- canonical linear form -----------------------------------------------------------------------

def linear_form(expr: Expr) -> tuple[dict[Expr, int], int]:
    """(atom -> coefficient, constant) with expr == sum(atom * coeff) + constant."""
    if isinstance(expr, Const):
        return {}, expr.value
    if isinstance(expr, Sum):
        return dict(expr.terms), expr.constant
    return {expr: 1}, 0


def order_key(expr: Expr) -> tuple:
    """A total order on expressions, used to sort the terms of a sum of equal coefficients: by the
    first variable they use (dims, then symbols, then runtime variables), then by structure."""
    first = min(((int(v.kind), v.index) for v in variables(expr)), default=(9, 0))
    return first, _structure_key(expr)


def _structure_key(expr: Expr) -> tuple:
    if isinstance(expr, Const):
        return (-1, expr.value)
    if isinstance(expr, Var):
        return (0, int(expr.kind), expr.index)
    if isinstance(expr, Sum):
        return (4, tuple((_structure_key(a), c) for a, c in expr.terms), expr.constant)
    rank = {FloorDiv: 1, CeilDiv: 2, Mod: 3}[type(expr)]
    return (rank, _structure_key(expr.lhs), _rhs(expr))


def from_linear_form(terms: Mapping[Expr, int], constant: int) -> Expr:
    """The canonical expression of a linear form (zero coefficients dropped, terms sorted)."""
    items = [(atom, c) for atom, c in terms.items() if c != 0]
    if not items:
        return Const(constant)
    if len(items) == 1 and items[0][1] == 1 and constant == 0:
        return items[0][0]
    items.sort(key=lambda item: (-item[1], order_key(item[0])))
    return Sum(tuple(items), constant)


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + b.value)
    terms, constant = linear_form(a)
    b_terms, b_constant = linear_form(b)
    for atom, c in b_terms.items():
        terms[atom] = terms.get(atom, 0) + c
    return from_linear_form(terms, constant + b_constant)


def _scale(a: Expr, factor: int) -> Expr:
    if factor == 1:
        return a
    terms, constant = linear_form(a)
    return from_linear_form({atom: c * factor for atom, c in terms.items()}, constant * factor)


def _check_divisor(op: str, lhs: Expr, divisor) -> int:
    if isinstance(divisor, Const):
        divisor = divisor.value
    if isinstance(divisor, Expr):
        raise IndexingError(f"'{op}' needs a constant right-hand side, got ({lhs}) {op} ({divisor})")
    if divisor <= 0:
        raise IndexingError(f"'{op}' needs a positive constant, got ({lhs}) {op} {divisor}")
    return int(divisor)


def floordiv(lhs: Expr, divisor: int | Expr) -> Expr:
    divisor = _check_divisor("floordiv", lhs, divisor)
    if isinstance(lhs, Const):
        return Const(lhs.value // divisor)
    return lhs if divisor == 1 else FloorDiv(lhs, divisor)


def ceildiv(lhs: Expr, divisor: int | Expr) -> Expr:
    divisor = _check_divisor("ceildiv", lhs, divisor)
    if isinstance(lhs, Const):
        return Const(-(-lhs.value // divisor))
    return lhs if divisor == 1 else CeilDiv(lhs, divisor)


def mod(lhs: Expr, modulus: int | Expr) -> Expr:
    modulus = _check_divisor("mod", lhs, modulus)
    if isinstance(lhs, Const):
        return Const(lhs.value % modulus)
    return Const(0) if modulus == 1 else Mod(lhs, modulus)


def _rhs(expr: Expr) -> int:
    return expr.modulus if isinstance(expr, Mod) else expr.divisor


def rebuild(expr: Expr, lhs: Expr) -> Expr:
    """The div/mod `expr` with its left-hand side replaced (and constant-folded)."""
    if isinstance(expr, FloorDiv):
        return floordiv(lhs, expr.divisor)
    if isinstance(expr, CeilDiv):
        return ceildiv(lhs, expr.divisor)
    return mod(lhs, expr.modulus)


# -- queries and transformations -----------------------------------------------------------------

def variables(expr: Expr) -> set[Var]:
    """All variables occurring in expr."""
    if isinstance(expr, Var):
        return {expr}
    if isinstance(expr, Sum):
        out: set[Var] = set()
        for atom, _ in expr.terms:
            out |= variables(atom)
        return out
    if isinstance(expr, DivLike):
        return variables(expr.lhs)
    return set()


def replace_vars(expr: Expr, fn: Callable[[Var], Expr]) -> Expr:
    """expr with every variable v replaced by fn(v), re-canonicalised (constants folded)."""
    if isinstance(expr, Var):
        return fn(expr)
    if isinstance(expr, Sum):
        out: Expr = Const(expr.constant)
        for atom, c in expr.terms:
            out = out + replace_vars(atom, fn) * c
        return out
    if isinstance(expr, DivLike):
        return rebuild(expr, replace_vars(expr.lhs, fn))
    return expr


def evaluate(expr: Expr, values: Callable[[Var], object]):
    """The value of expr with variable v = values(v). Values may be ints or numpy integer arrays
    (evaluated elementwise with floor semantics)."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return values(expr)
    if isinstance(expr, Sum):
        out = expr.constant
        for atom, c in expr.terms:
            out = out + evaluate(atom, values) * c
        return out
    lhs = evaluate(expr.lhs, values)
    if isinstance(expr, FloorDiv):
        return lhs // expr.divisor
    if isinstance(expr, CeilDiv):
        return -((-lhs) // expr.divisor)
    return lhs % expr.modulus


def expr_range(expr: Expr, bounds: Callable[[Var], Interval]) -> Interval:
    """An interval containing every value of expr when each variable v ranges over bounds(v)."""
    if isinstance(expr, Const):
        return Interval(expr.value, expr.value)
    if isinstance(expr, Var):
        return bounds(expr)
    if isinstance(expr, Sum):
        out = Interval(expr.constant, expr.constant)
        for atom, c in expr.terms:
            out = out + expr_range(atom, bounds).scale(c)
        return out
    lhs = expr_range(expr.lhs, bounds)
    if isinstance(expr, FloorDiv):
        return lhs.floordiv(expr.divisor)
    if isinstance(expr, CeilDiv):
        return Interval(-(-lhs.lo // expr.divisor), -(-lhs.hi // expr.divisor))
    return lhs.mod(expr.modulus)


def coefficient_gcd(terms: Mapping[Expr, int]) -> int:
    """gcd of the coefficients (0 for no terms)."""
    g = 0
    for c in terms.values():
        g = math.gcd(g, c)
    return g


# -- text ----------------------------------------------------------------------------------------

def default_name(var: Var) -> str:
    return f"{var.kind.prefix}{var.index}"


def to_text(expr: Expr, name: Callable[[Var], str] = default_name, strong: bool = False) -> str:
    """MLIR's affine expression syntax. `strong`: the context binds tighter than `+` (the
    left-hand side of `*`, `floordiv`, `ceildiv`, `mod`), so sums and div/mod get parentheses."""
    if isinstance(expr, Const):
        return str(expr.value)
    if isinstance(expr, Var):
        return name(expr)
    if isinstance(expr, Sum):
        text = _sum_text(expr, name)
        return f"({text})" if strong else text
    op = {FloorDiv: "floordiv", CeilDiv: "ceildiv", Mod: "mod"}[type(expr)]
    text = f"{to_text(expr.lhs, name, True)} {op} {_rhs(expr)}"
    return f"({text})" if strong else text


def _product_text(atom: Expr, coefficient: int, name) -> str:
    if coefficient == 1:
        return to_text(atom, name)
    return f"{to_text(atom, name, True)} * {coefficient}"


def _sum_text(expr: Sum, name) -> str:
    parts = []
    for i, (atom, c) in enumerate(expr.terms):
        if i == 0:
            parts.append(f"-{to_text(atom, name, True)}" if c == -1 else _product_text(atom, c, name))
        elif c < 0:
            parts.append(" - " + _product_text(atom, -c, name))
        else:
            parts.append(" + " + _product_text(atom, c, name))
    if expr.constant > 0:
        parts.append(f" + {expr.constant}")
    elif expr.constant < 0:
        parts.append(f" - {-expr.constant}")
    return "".join(parts)


def to_xdsl(expr: Expr, num_dims: int, num_symbols: int):
    """The same expression as an `xdsl.ir.affine.AffineExpr`; runtime variable i becomes symbol
    num_symbols + i."""
    from xdsl.ir.affine import AffineExpr

    if isinstance(expr, Const):
        return AffineExpr.constant(expr.value)
    if isinstance(expr, Var):
        if expr.kind is VarKind.DIM:
            return AffineExpr.dimension(expr.index)
        offset = num_symbols if expr.kind is VarKind.RUNTIME else 0
        return AffineExpr.symbol(expr.index + offset)
    if isinstance(expr, Sum):
        out = AffineExpr.constant(expr.constant)
        for atom, c in expr.terms:
            out = out + to_xdsl(atom, num_dims, num_symbols) * c
        return out
    lhs = to_xdsl(expr.lhs, num_dims, num_symbols)
    if isinstance(expr, FloorDiv):
        return lhs // expr.divisor
    if isinstance(expr, CeilDiv):
        return lhs.ceil_div(expr.divisor)
    return lhs % expr.modulus
