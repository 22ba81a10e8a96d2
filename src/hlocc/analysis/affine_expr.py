"""Quasi-affine index expressions: the one expression system of hlocc's indexing maps.

An expression is built from integer constants, variables (dimension `d`, range/symbol `s` and
runtime `r` variables, numbered per kind), sums, multiplication by a constant, and `floordiv`,
`ceildiv` and `mod` by a positive constant, with MLIR's semantics: `x floordiv c = floor(x / c)`,
`x ceildiv c = ceil(x / c)`, `x mod c = x - c * (x floordiv c)` (always in [0, c-1]).

Symbolic sizes (dynamic shapes). A size that is a `DimExpr` (hlo/symbolic.py) enters an expression
as `Size` atoms, one per non-constant monomial (`2*b + 1` is `Size(b) * 2 + 1`; printed `$b`,
`$(b*s)`), whose value the kernel reads at run time. The only products and divisions that are
not quasi-affine are by sizes: `SizeProduct(x, m)` (`x * $m`, m a monomial, x an atom),
`SizeFloorDiv(x, D)` and `SizeMod(x, D)` (`x floordiv $(D)`, `x mod $(D)`, D any non-constant
size, assumed positive where the expression is evaluated). Arithmetic with a `DimExpr` operand or
a size-only expression (every atom a `Size`) builds them, so the shape code that linearises and
delinearises (linearize.py, op_indexing.py) works on symbolic shapes unchanged. The simplifier
treats them conservatively: a size ranges over [0, SIZE_BOUND], and only exact identities
(`(x * $n) floordiv $n = x`, `(x floordiv $n) * $n + x mod $n = x`) remove them.

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

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import IntEnum

from hlocc.analysis.interval import Interval
from hlocc.errors import HloError
from hlocc.hlo.hash_once import hash_once
from hlocc.hlo.symbolic import DimExpr


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


SIZE_BOUND = 1 << 40
"""The largest value a symbolic size may take in range analysis (sizes are never negative)."""


class Expr:
    """Base of all expressions. Supports `+`, `-`, `*` (by an int, a constant expression, a symbolic
    size or a size-only expression), `//` (floordiv), `%` (mod) and `ceildiv` with ints or sizes."""

    __slots__ = ("_hash",)  # set at the first hash (hlo/hash_once.py)

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
        if isinstance(other, DimExpr):
            other = size_expr(other)
        if isinstance(other, Expr):
            if isinstance(other, Const):
                return _scale(self, other.value)
            if isinstance(self, Const):
                return _scale(other, self.value)
            if is_size_only(other):
                return _size_product(self, other)
            if is_size_only(self):
                return _size_product(other, self)
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


@dataclass(frozen=True, slots=True, eq=True)
class Size(Expr):
    """The run-time value of a symbolic size monomial (a `DimExpr` with one term, coefficient 1)."""

    value: DimExpr


@dataclass(frozen=True, slots=True, eq=True)
class SizeProduct(Expr):
    """`lhs * $size`: an atom (not a `Size`) times a size monomial."""

    lhs: Expr
    size: DimExpr


@dataclass(frozen=True, slots=True, eq=True)
class SizeFloorDiv(Expr):
    """`lhs floordiv $(size)` for a non-constant size (positive wherever it is evaluated)."""

    lhs: Expr
    size: DimExpr


@dataclass(frozen=True, slots=True, eq=True)
class SizeMod(Expr):
    """`lhs mod $(size)` for a non-constant size (positive wherever it is evaluated)."""

    lhs: Expr
    size: DimExpr


for _cls in (Const, Var, Sum, FloorDiv, CeilDiv, Mod, Size, SizeProduct, SizeFloorDiv, SizeMod):
    hash_once(_cls)
SizeDivLike = (SizeFloorDiv, SizeMod)
SIZE_NODES = (Size, SizeProduct, SizeFloorDiv, SizeMod)


def dim(i: int) -> Var:
    return Var(VarKind.DIM, i)


def sym(i: int) -> Var:
    return Var(VarKind.SYMBOL, i)


def rt(i: int) -> Var:
    return Var(VarKind.RUNTIME, i)


def as_expr(value: Expr | int | DimExpr) -> Expr:
    if isinstance(value, DimExpr):
        return size_expr(value)
    return value if isinstance(value, Expr) else Const(int(value))


# -- symbolic sizes ------------------------------------------------------------------------------

def size_expr(value: int | DimExpr) -> Expr:
    """A size as an expression: `Size` atoms for its non-constant monomials, plus the constant."""
    if not isinstance(value, DimExpr):
        return Const(int(value))
    terms: dict[Expr, int] = {}
    constant = 0
    for monomial, c in value.terms:
        if monomial == ():
            constant += c
        else:
            terms[Size(DimExpr(((monomial, 1),)))] = c
    return from_linear_form(terms, constant)


def is_size_only(expr: Expr) -> bool:
    """Whether expr is built from constants and `Size` atoms only (a symbolic size)."""
    if isinstance(expr, (Const, Size)):
        return True
    return isinstance(expr, Sum) and all(isinstance(a, Size) for a, _ in expr.terms)


def as_size(expr: Expr | int | DimExpr) -> int | DimExpr:
    """The size a size-only expression (or an int or DimExpr) stands for."""
    if isinstance(expr, (int, DimExpr)):
        return expr
    if isinstance(expr, Const):
        return expr.value
    if not is_size_only(expr):
        raise IndexingError(f"'{expr}' is not a size: a divisor must be a constant or a symbolic size")
    terms, constant = linear_form(expr)
    out: int | DimExpr = constant
    for atom, c in terms.items():
        out = out + atom.value * c
    return out


def _atom_times_monomial(atom: Expr, monomial: DimExpr) -> Expr:
    if isinstance(atom, Size):
        return Size(atom.value * monomial)
    if isinstance(atom, SizeProduct):
        return SizeProduct(atom.lhs, atom.size * monomial)
    return SizeProduct(atom, monomial)


def _size_product(expr: Expr, size: Expr) -> Expr:
    """expr * size, for a size-only `size`: distributed over the terms of both."""
    terms, constant = linear_form(expr)
    size_terms, size_constant = linear_form(size)
    out: dict[Expr, int] = {}
    for atom, c in terms.items():
        if size_constant:
            out[atom] = out.get(atom, 0) + c * size_constant
        for s, k in size_terms.items():
            product = _atom_times_monomial(atom, s.value)
            out[product] = out.get(product, 0) + c * k
    for s, k in size_terms.items():
        out[s] = out.get(s, 0) + constant * k
    return from_linear_form(out, constant * size_constant)


def _constant_factor(size: DimExpr) -> tuple[int, DimExpr]:
    """(c, m) with size == c * m for a one-term size `c * m` (c > 0), else (1, size)."""
    if len(size.terms) == 1 and size.terms[0][1] > 0:
        monomial, c = size.terms[0]
        return c, DimExpr(((monomial, 1),))
    return 1, size


def _size_divisor(lhs: Expr, divisor) -> int | DimExpr:
    """The divisor as an int or a non-constant DimExpr (from a size-only expression)."""
    if isinstance(divisor, Expr) and not isinstance(divisor, Const):
        return as_size(divisor)
    return divisor


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
    if isinstance(expr, Size):
        return (5, _size_text(expr.value))
    rank = {FloorDiv: 1, CeilDiv: 2, Mod: 3, SizeProduct: 6, SizeFloorDiv: 7, SizeMod: 8}[type(expr)]
    return (rank, _structure_key(expr.lhs), _size_text(expr.size) if isinstance(expr, SIZE_NODES) else _rhs(expr))


_size_text = functools.lru_cache(maxsize=1 << 12)(str)  # sizes recur in every sort of a sum's terms


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


def floordiv(lhs: Expr, divisor: int | Expr | DimExpr) -> Expr:
    divisor = _size_divisor(lhs, divisor)
    if isinstance(divisor, DimExpr):
        factor, monomial = _constant_factor(divisor)
        if factor > 1:  # x floordiv (c*m) == (x floordiv c) floordiv m: one form for the simplifier
            return floordiv(floordiv(lhs, factor), monomial)
        if isinstance(lhs, SizeProduct) and lhs.size == divisor:
            return lhs.lhs
        return Const(0) if lhs == Const(0) else SizeFloorDiv(lhs, divisor)
    divisor = _check_divisor("floordiv", lhs, divisor)
    if isinstance(lhs, Const):
        return Const(lhs.value // divisor)
    if isinstance(lhs, SizeFloorDiv) and divisor > 1:  # constant divisions innermost: one form
        return SizeFloorDiv(floordiv(lhs.lhs, divisor), lhs.size)
    return lhs if divisor == 1 else FloorDiv(lhs, divisor)


def ceildiv(lhs: Expr, divisor: int | Expr | DimExpr) -> Expr:
    divisor = _size_divisor(lhs, divisor)
    if isinstance(divisor, DimExpr):
        return floordiv(lhs + size_expr(divisor) - 1, divisor)
    divisor = _check_divisor("ceildiv", lhs, divisor)
    if isinstance(lhs, Const):
        return Const(-(-lhs.value // divisor))
    return lhs if divisor == 1 else CeilDiv(lhs, divisor)


def mod(lhs: Expr, modulus: int | Expr | DimExpr) -> Expr:
    modulus = _size_divisor(lhs, modulus)
    if isinstance(modulus, DimExpr):
        factor, monomial = _constant_factor(modulus)
        if factor > 1:  # x mod (c*m) == ((x floordiv c) mod m) * c + x mod c
            return mod(floordiv(lhs, factor), monomial) * factor + mod(lhs, factor)
        if lhs == Const(0) or isinstance(lhs, SizeProduct) and lhs.size == modulus:
            return Const(0)
        return SizeMod(lhs, modulus)
    modulus = _check_divisor("mod", lhs, modulus)
    if isinstance(lhs, Const):
        return Const(lhs.value % modulus)
    return Const(0) if modulus == 1 else Mod(lhs, modulus)


def _rhs(expr: Expr) -> int:
    return expr.modulus if isinstance(expr, Mod) else expr.divisor


def rebuild(expr: Expr, lhs: Expr) -> Expr:
    """The div/mod (or size product) `expr` with its left-hand side replaced (and constant-folded)."""
    if isinstance(expr, SizeProduct):
        return lhs * Size(expr.size)
    if isinstance(expr, SizeFloorDiv):
        return floordiv(lhs, expr.size)
    if isinstance(expr, SizeMod):
        return mod(lhs, expr.size)
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
    if isinstance(expr, (*DivLike, SizeProduct, *SizeDivLike)):
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
    if isinstance(expr, (*DivLike, SizeProduct, *SizeDivLike)):
        return rebuild(expr, replace_vars(expr.lhs, fn))
    return expr


def evaluate(expr: Expr, values: Callable[[Var], object], binding: Mapping[str, int] | None = None):
    """The value of expr with variable v = values(v) and the symbolic sizes at `binding` (dimension
    variable -> value). Values may be ints or numpy integer arrays (evaluated elementwise with floor
    semantics)."""
    if isinstance(expr, Const):
        return expr.value
    if isinstance(expr, Var):
        return values(expr)
    if isinstance(expr, Sum):
        out = expr.constant
        for atom, c in expr.terms:
            out = out + evaluate(atom, values, binding) * c
        return out
    if isinstance(expr, SIZE_NODES):
        if binding is None:
            raise IndexingError(f"'{expr}' reads a symbolic size: evaluating it needs a binding")
        if isinstance(expr, Size):
            return expr.value.evaluate(binding)
        lhs, size = evaluate(expr.lhs, values, binding), expr.size.evaluate(binding)
        return lhs * size if isinstance(expr, SizeProduct) else lhs // size if isinstance(expr, SizeFloorDiv) \
            else lhs % size
    lhs = evaluate(expr.lhs, values, binding)
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
    if isinstance(expr, Size):
        return Interval(0, SIZE_BOUND)
    lhs = expr_range(expr.lhs, bounds)
    if isinstance(expr, SizeProduct):
        ends = (lhs.lo * SIZE_BOUND, lhs.hi * SIZE_BOUND, 0)
        return Interval(min(ends), max(ends))
    if isinstance(expr, SizeFloorDiv):  # by a size >= 1: between 0 and lhs
        return Interval(min(lhs.lo, 0), max(lhs.hi, 0))
    if isinstance(expr, SizeMod):
        return Interval(0, min(lhs.hi, SIZE_BOUND - 1) if lhs.lo >= 0 else SIZE_BOUND - 1)
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
    if isinstance(expr, Size):
        return size_text(expr.value)
    op = {FloorDiv: "floordiv", CeilDiv: "ceildiv", Mod: "mod", SizeProduct: "*", SizeFloorDiv: "floordiv",
          SizeMod: "mod"}[type(expr)]
    rhs = size_text(expr.size) if isinstance(expr, SIZE_NODES) else _rhs(expr)
    text = f"{to_text(expr.lhs, name, True)} {op} {rhs}"
    return f"({text})" if strong else text


def size_text(size: DimExpr) -> str:
    """`$b` for a lone variable, else `$(text)` (no spaces)."""
    text = str(size).replace(" ", "")
    return f"${text}" if text.isidentifier() else f"$({text})"


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
    if isinstance(expr, SIZE_NODES):
        raise IndexingError(f"'{expr}' reads a symbolic size: it has no affine form")
    lhs = to_xdsl(expr.lhs, num_dims, num_symbols)
    if isinstance(expr, FloorDiv):
        return lhs // expr.divisor
    if isinstance(expr, CeilDiv):
        return lhs.ceil_div(expr.divisor)
    return lhs % expr.modulus
