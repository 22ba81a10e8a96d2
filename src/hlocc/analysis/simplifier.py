"""Range-aware simplification of index expressions.

Given an inclusive interval for every variable, `simplify(expr, bounds)` returns an expression equal
to `expr` at every point of the box and (usually) without the div/mod that reshapes, launch-grid
delinearisation and composition introduce. Every rewrite below is an identity over the integers
under its stated side condition; each is one small function, applied bottom-up until nothing
changes:

- point ranges: an expression whose range is one value c becomes c (dimension variables only when
  `replace_point_dims`);
- `x ceildiv c` -> `(x + c - 1) floordiv c` (one division form to reason about);
- floordiv: `x floordiv c` -> k when x is in [k*c, k*c + c-1]; `(x mod m) floordiv c` ->
  `(x floordiv c) mod (m/c)` if c | m; `(x floordiv a) floordiv b` -> `x floordiv (a*b)`;
  in a sum, terms whose coefficient is a multiple of c (and whole multiples of c in the constant)
  move out of the division; `(g*H + L) floordiv c` -> `H floordiv (c/g)` when g | c and L is in
  [0, g-1]; `(y floordiv c0 + R) floordiv c` -> `(y + R*c0) floordiv (c0*c)` when the sum has
  exactly one floordiv term;
- mod: `x mod m` -> x - k*m when x is in [k*m, k*m + m-1]; `(x mod a) mod m` -> `x mod m` if
  m | a; in a sum, terms with coefficient a multiple of m are dropped and the constant reduced;
  `(g*H + L) mod m` -> `(H mod (m/g)) * g + L` when g | m and L is in [0, g-1];
- sums: `(x mod c) * k + (x floordiv c) * (c*k)` -> `x * k` (this is what makes a reshape followed
  by its inverse the identity);
- symbolic sizes (affine_expr's `$n` nodes), exact identities only: terms `x * $n` move out of a
  `floordiv $n` (and drop out of a `mod $n`); `(x mod $n) floordiv $n` -> 0; `(x mod $n) mod $n`
  -> `x mod $n`; `(x mod $n) * k + (x floordiv $n) * $n * k` -> `x * k`; divisions by constants
  and by sizes nest in one order (`(x floordiv $n) floordiv c` -> `(x floordiv c) floordiv $n`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hlocc.analysis.affine_expr import (
    CeilDiv,
    Const,
    Expr,
    FloorDiv,
    Mod,
    Size,
    SizeFloorDiv,
    SizeMod,
    SizeProduct,
    Sum,
    Var,
    VarKind,
    expr_range,
    floordiv,
    from_linear_form,
    linear_form,
    mod,
    size_expr,
    variables,
)
from hlocc.analysis.interval import Interval

Bounds = Callable[[Var], Interval]


class Simplifier:
    """Simplifies expressions over fixed variable bounds (memoised per expression)."""

    def __init__(self, bounds: Bounds, replace_point_dims: bool = True):
        self.bounds = bounds
        self.replace_point_dims = replace_point_dims
        self._done: dict[Expr, Expr] = {}

    def range(self, expr: Expr) -> Interval:
        return expr_range(expr, self.bounds)

    def simplify(self, expr: Expr) -> Expr:
        """Rewrite to a fixpoint."""
        cached = self._done.get(expr)
        if cached is not None:
            return cached
        current = expr
        for _ in range(64):
            nxt = self._once(current)
            if nxt == current:
                break
            current = nxt
        self._done[expr] = current
        return current

    # -- one bottom-up step --------------------------------------------------------------------
    def _once(self, expr: Expr) -> Expr:
        if isinstance(expr, Const):
            return expr
        point = self._point_value(expr)
        if point is not None:
            return Const(point)
        if isinstance(expr, (Var, Size)):
            return expr
        if isinstance(expr, Sum):
            return self._rewrite_sum(expr)
        lhs = self.simplify(expr.lhs)
        if isinstance(expr, SizeProduct):
            return lhs * Size(expr.size)
        if isinstance(expr, (SizeFloorDiv, SizeMod)):
            return self._rewrite_size_div(lhs, expr)
        if isinstance(expr, CeilDiv):
            return floordiv(lhs + (expr.divisor - 1), expr.divisor)
        if isinstance(expr, FloorDiv):
            return self._rewrite_floordiv(lhs, expr.divisor)
        return self._rewrite_mod(lhs, expr.modulus)

    def _point_value(self, expr: Expr) -> int | None:
        r = self.range(expr)
        if not r.is_point:
            return None
        if not self.replace_point_dims and any(v.kind is VarKind.DIM for v in variables(expr)):
            return None
        return r.lo

    # -- sums ----------------------------------------------------------------------------------
    def _rewrite_sum(self, expr: Sum) -> Expr:
        out: Expr = Const(expr.constant)
        for atom, c in expr.terms:
            out = out + self.simplify(atom) * c
        if isinstance(out, Sum):
            out = self._merge_mod_div_pairs(out)
        if isinstance(out, Sum):
            out = _merge_size_mod_div_pairs(out)
        return out

    def _merge_mod_div_pairs(self, expr: Sum) -> Expr:
        """(x mod c) * k + (x floordiv c) * (c*k) -> x * k, repeatedly."""
        terms, constant = linear_form(expr)
        changed = True
        while changed:
            changed = False
            for atom, k in list(terms.items()):
                # (x mod c) * $m * k + (x floordiv c) * $m * (c*k) -> x * $m * k as well
                inner, size = (atom.lhs, Size(atom.size)) if isinstance(atom, SizeProduct) else (atom, None)
                if not isinstance(inner, Mod) or terms.get(atom, 0) != k:
                    continue
                partner = self.simplify(floordiv(inner.lhs, inner.modulus))
                if size is not None:
                    partner = partner * size
                if terms.get(partner) != k * inner.modulus:
                    continue
                del terms[atom]
                del terms[partner]
                merged = from_linear_form(terms, constant) + (inner.lhs if size is None else inner.lhs * size) * k
                terms, constant = linear_form(merged)
                changed = True
                break
        return from_linear_form(terms, constant)

    # -- division by a symbolic size ----------------------------------------------------------
    def _rewrite_size_div(self, lhs: Expr, expr: SizeFloorDiv | SizeMod) -> Expr:
        """Multiples of the size leave the division; a remainder already reduced by it stays."""
        n = expr.size
        terms, constant = linear_form(lhs)
        outside: dict[Expr, int] = {}
        for atom, c in list(terms.items()):
            if isinstance(atom, SizeProduct) and atom.size == n:
                outside[atom.lhs] = outside.get(atom.lhs, 0) + c
                del terms[atom]
            elif isinstance(atom, Size) and atom.value == n:
                constant_part = outside.get(Const(1), 0) + c
                outside[Const(1)] = constant_part
                del terms[atom]
        rest = from_linear_form(terms, constant)
        reduced = isinstance(rest, SizeMod) and rest.size == n
        if isinstance(expr, SizeMod):
            return rest if reduced else mod(rest, n)
        quotient = from_linear_form({a: c for a, c in outside.items() if a != Const(1)}, outside.get(Const(1), 0))
        return quotient if reduced else quotient + floordiv(rest, n)

    # -- floordiv ------------------------------------------------------------------------------
    def _rewrite_floordiv(self, lhs: Expr, d: int) -> Expr:
        block = self._block_index(lhs, d)
        if block is not None:
            return Const(block)
        if isinstance(lhs, Mod) and lhs.modulus % d == 0:
            return mod(floordiv(lhs.lhs, d), lhs.modulus // d)
        if isinstance(lhs, FloorDiv):
            return floordiv(lhs.lhs, lhs.divisor * d)
        if isinstance(lhs, Sum):
            return self._rewrite_sum_floordiv(lhs, d)
        return floordiv(lhs, d)

    def _rewrite_sum_floordiv(self, lhs: Sum, d: int) -> Expr:
        terms, constant = linear_form(lhs)
        extracted: dict[Expr, int] = {}
        for atom, c in list(terms.items()):
            if c % d == 0:
                extracted[atom] = c // d
                del terms[atom]
        outside = from_linear_form(extracted, constant // d)
        rest = from_linear_form(terms, constant % d)
        rest, d = self._drop_low_part(rest, d)
        block = self._block_index(rest, d)
        if block is not None:
            return outside + block
        rest, d = self._absorb_inner_floordiv(rest, d)
        return outside + floordiv(rest, d)

    def _drop_low_part(self, expr: Expr, d: int) -> tuple[Expr, int]:
        """(g*H + L) floordiv d == H floordiv (d/g) when g | d and L in [0, g-1]."""
        split = self._split_by_gcd(expr, d)
        if split is None:
            return expr, d
        high, g, _ = split
        return high, d // g

    def _absorb_inner_floordiv(self, expr: Expr, d: int) -> tuple[Expr, int]:
        """(y floordiv c0 + R) floordiv d == (y + R*c0) floordiv (c0*d) for integer R, when the
        sum has exactly one floordiv term (with coefficient 1)."""
        terms, constant = linear_form(expr)
        divs = [a for a, c in terms.items() if isinstance(a, FloorDiv) and c == 1]
        if len(divs) != 1:
            return expr, d
        inner = divs[0]
        del terms[inner]
        return inner.lhs + from_linear_form(terms, constant) * inner.divisor, d * inner.divisor

    # -- mod -----------------------------------------------------------------------------------
    def _rewrite_mod(self, lhs: Expr, m: int) -> Expr:
        block = self._block_index(lhs, m)
        if block is not None:
            return lhs - block * m
        if isinstance(lhs, Mod) and lhs.modulus % m == 0:
            return mod(lhs.lhs, m)
        if not isinstance(lhs, Sum):
            return mod(lhs, m)
        terms, constant = linear_form(lhs)
        reduced = from_linear_form({a: c for a, c in terms.items() if c % m}, constant % m)
        block = self._block_index(reduced, m)
        if block is not None:
            return reduced - block * m
        split = self._split_by_gcd(reduced, m)
        if split is not None:
            high, g, low = split
            return mod(high, m // g) * g + low
        return mod(reduced, m)

    # -- helpers -------------------------------------------------------------------------------
    def _block_index(self, expr: Expr, d: int) -> int | None:
        """k when expr always lies in [k*d, k*d + d-1], else None."""
        r = self.range(expr)
        if r.is_empty or r.lo // d != r.hi // d:
            return None
        return r.lo // d

    def _split_by_gcd(self, expr: Expr, d: int) -> tuple[Expr, int, Expr] | None:
        """(H, g, L) with expr == g*H + L, g > 1 dividing d, L in [0, g-1], H not constant; the
        largest such g among gcd(coefficient, d). None when there is none."""
        terms, constant = linear_form(expr)
        candidates = sorted({math.gcd(c, d) for c in terms.values()} - {1}, reverse=True)
        for g in candidates:
            high = {a: c // g for a, c in terms.items() if c % g == 0}
            low = from_linear_form({a: c for a, c in terms.items() if c % g}, constant)
            if high and Interval(0, g - 1).contains(self.range(low)):
                return from_linear_form(high, 0), g, low
        return None


def _merge_size_mod_div_pairs(expr: Sum) -> Expr:
    """(x mod $n) * k + (x floordiv $n) * $n * k -> x * k, repeatedly (the partner is matched in its
    distributed form, so sizes of several monomials work too)."""
    terms, constant = linear_form(expr)
    changed = True
    while changed:
        changed = False
        for atom, k in list(terms.items()):
            if not isinstance(atom, SizeMod):
                continue
            partner, partner_constant = linear_form(floordiv(atom.lhs, atom.size) * size_expr(atom.size) * k)
            if partner_constant or any(terms.get(a) != c for a, c in partner.items()):
                continue
            for a in [atom, *partner]:
                del terms[a]
            terms, constant = linear_form(from_linear_form(terms, constant) + atom.lhs * k)
            changed = True
            break
    return from_linear_form(terms, constant)


def simplify_expr(expr: Expr, bounds: Bounds, replace_point_dims: bool = True) -> Expr:
    """Simplify one expression over the given variable bounds."""
    return Simplifier(bounds, replace_point_dims).simplify(expr)

