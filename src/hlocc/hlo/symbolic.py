"""Symbolic dimension sizes: integer polynomials over named dimension variables (JAX's symbolic
shapes: `b`, `b + c`, `2*s`, `floordiv(s, 2)`, `mod(s, 2)`, products such as `b*s`).

A `DimExpr` is frozen, hashable and kept in one canonical form (a sorted sum of coefficient ×
monomial, each monomial a sorted product of atoms with powers; an atom is a variable or a
`floordiv`/`mod` of two expressions), so equal expressions compare equal and the arithmetic of the
shape rules (`+`, `-`, `*`, `//`, `%`, `==`) works on symbolic sizes unchanged. Every operation
returns a plain `int` when its result is a constant. Dimension variables are assumed ≥ 1 (as JAX
assumes); a comparison that this does not decide raises `InconclusiveDimensionError`.

`evaluate(binding)` gives the size for concrete variable values, `substitute` replaces variables
by values or expressions, `parse_dim_expr` reads the text `str()` writes.

Nested divisions by constants are one division (`floordiv(floordiv(s + 1, 2) + 1, 2)` is
`floordiv(s + 3, 4)`, `mod(mod(s, 8), 2)` is `mod(s, 2)`), so the sizes of strided windows applied
in turn compare equal to the sizes a frontend simplified.

`size_hint(binding)` is for heuristics only (the cost model and fusion decisions, which need a
number where the size is symbolic): inside it, a comparison the lower bounds do not decide is
decided at the hint's values, and `/`, `float()` and `hint_value` evaluate there (BladeDISC's
"likely values"). A size may be 0 there, so a heuristic divides by `hint_value(size)` after testing
it for 0. Nothing whose correctness depends on the answer may run inside it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Union

from hlocc.errors import HloError

Dim = Union[int, "DimExpr"]


class InconclusiveDimensionError(HloError):
    """A comparison of symbolic sizes that holds for some values of the variables and not others."""


@dataclass(frozen=True, order=True)
class _Atom:
    """A variable (`op` == "var", `args` == (name,)) or `floordiv`/`mod` of two sizes."""

    op: str
    args: tuple

    def __str__(self) -> str:
        if self.op == "var":
            return self.args[0]
        return f"{self.op}({self.args[0]}, {self.args[1]})"

    def sort_key(self) -> str:
        return str(self)


# One monomial: ((atom, power), ...) sorted by atom text; () is the constant monomial.
_Monomial = tuple


@dataclass(frozen=True)
class DimExpr:
    """A non-constant symbolic size: `terms` is ((monomial, coefficient), ...) in canonical order."""

    terms: tuple

    # -- construction -----------------------------------------------------------------------------
    @staticmethod
    def _of(coeffs: dict) -> Dim:
        items = sorted(((m, c) for m, c in coeffs.items() if c != 0), key=lambda mc: _monomial_key(mc[0]))
        if not items:
            return 0
        if len(items) == 1 and items[0][0] == ():
            return items[0][1]
        return DimExpr(tuple(items))

    def _coeffs(self) -> dict:
        return dict(self.terms)

    # -- arithmetic -------------------------------------------------------------------------------
    def __add__(self, other) -> Dim:
        if isinstance(other, float):
            return float(self) + other  # a heuristic's number (size_hint)
        if not isinstance(other, (int, DimExpr)):
            return NotImplemented
        out = self._coeffs()
        for m, c in _terms(other):
            out[m] = out.get(m, 0) + c
        return DimExpr._of(out)

    __radd__ = __add__

    def __neg__(self) -> Dim:
        return DimExpr._of({m: -c for m, c in self.terms})

    def __sub__(self, other) -> Dim:
        if not isinstance(other, (int, float, DimExpr)):
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other) -> Dim:
        return (-self) + other

    def __mul__(self, other) -> Dim:
        if isinstance(other, float):
            return float(self) * other  # a heuristic's number (size_hint)
        if not isinstance(other, (int, DimExpr)):
            return NotImplemented
        out: dict = {}
        for m1, c1 in self.terms:
            for m2, c2 in _terms(other):
                m = _monomial_mul(m1, m2)
                out[m] = out.get(m, 0) + c1 * c2
        return DimExpr._of(out)

    __rmul__ = __mul__

    def __floordiv__(self, other) -> Dim:
        return floordiv(self, other)

    def __rfloordiv__(self, other) -> Dim:
        return floordiv(other, self)

    def __mod__(self, other) -> Dim:
        return mod(self, other)

    def __rmod__(self, other) -> Dim:
        return mod(other, self)

    # -- comparisons (decided from the variables' lower bound 1) -----------------------------------
    def __ge__(self, other) -> bool:
        return _nonnegative(self - other)

    def __gt__(self, other) -> bool:
        return _nonnegative(self - other - 1)

    def __le__(self, other) -> bool:
        return _nonnegative(other - self)

    def __lt__(self, other) -> bool:
        return _nonnegative(other - self - 1)

    # -- numbers at the size hint (heuristics only: see `size_hint`) --------------------------------
    def __truediv__(self, other) -> float:
        return float(self) / float(other)

    def __rtruediv__(self, other) -> float:
        return float(other) / float(self)

    def __float__(self) -> float:
        hint = current_size_hint()
        if hint is None:
            raise InconclusiveDimensionError(f"symbolic size '{self}' has no number at compile time")
        return float(_at_hint(self, hint))

    def __index__(self):
        raise InconclusiveDimensionError(f"symbolic size '{self}' has no integer value at compile time")

    # -- queries ----------------------------------------------------------------------------------
    @property
    def variables(self) -> frozenset[str]:
        return frozenset(v for m, _ in self.terms for atom, _ in m for v in _atom_variables(atom))

    def evaluate(self, binding: Mapping[str, int]) -> int:
        """The size for concrete values of the variables (a KeyError names a missing variable)."""
        value = substitute(self, binding)
        if not isinstance(value, int):
            raise HloError(f"symbolic size '{self}' still has variables {sorted(value.variables)} after binding")
        return value

    def lower_bound(self) -> int | None:
        """A lower bound of the value for variables ≥ 1, or None when none is known: a `mod`
        or `floordiv` term is first replaced by its bound in the direction its sign needs
        (`b - mod(x, b)` ≥ 1, `b - floordiv(b, 2)` ≥ 1), as JAX's shape polymorphism bounds them."""
        for (m, c) in self.terms:
            if len(m) == 1 and m[0][1] == 1 and m[0][0].op != "var":
                bounded = _bound_atom(m[0][0], c)
                if bounded is not None:
                    scale, replacement = bounded
                    low = lower_bound(scale * (self - c * DimExpr(((m, 1),))) + replacement)
                    return None if low is None else -(-low // scale)
        return self._plain_lower_bound()

    def _plain_lower_bound(self) -> int | None:
        """Each variable at 1, a negative term `-c*m` of variables first paid from positive terms of
        variables that `m` divides (`a*b - b` >= 0, so JAX's `min(a*b, b)` of `flat[:b]` is `b`)."""
        of_variables = {m for m, _ in self.terms if all(a.op == "var" for a, _ in m)}
        positive = {m: c for m, c in self.terms if c > 0 and m and m in of_variables}
        low = 0
        for m, c in self.terms:
            if m == ():
                low += c
            elif c < 0:
                owed = -c
                for multiple, have in positive.items():
                    if owed and m in of_variables and all(dict(multiple).get(a, 0) >= p for a, p in m):
                        paid = min(owed, have)
                        positive[multiple] -= paid  # paid * multiple - paid * m >= 0 (variables >= 1)
                        owed -= paid
                if owed:
                    return None
        return low + sum(positive.values())  # the rest of each positive term, at every variable 1

    def __str__(self) -> str:
        parts = []
        for m, c in self.terms:
            body = "*".join(f"{a}^{p}" if p > 1 else str(a) for a, p in m)
            if not body:
                text = str(abs(c))
            elif abs(c) == 1:
                text = body
            else:
                text = f"{abs(c)}*{body}"
            if not parts:
                parts.append(("-" if c < 0 else "") + text)
            else:
                parts.append(("- " if c < 0 else "+ ") + text)
        return " ".join(parts)

    def __repr__(self) -> str:
        return f"DimExpr({self})"


def _terms(value: Dim):
    return value.terms if isinstance(value, DimExpr) else ((((), value),) if value else ())


def _monomial_key(m: _Monomial):
    # Higher degree first, then by text; the constant last (as JAX prints `b + 1`).
    return (-sum(p for _, p in m), [(a.sort_key(), -p) for a, p in m]) if m else (1, [])


def _monomial_mul(a: _Monomial, b: _Monomial) -> _Monomial:
    powers: dict = dict(a)
    for atom, p in b:
        powers[atom] = powers.get(atom, 0) + p
    return tuple(sorted(powers.items(), key=lambda ap: ap[0].sort_key()))


def _atom_variables(atom: _Atom):
    if atom.op == "var":
        return (atom.args[0],)
    return tuple(v for arg in atom.args if isinstance(arg, DimExpr) for v in arg.variables)


def lower_bound(value: Dim) -> int | None:
    return value if isinstance(value, int) else value.lower_bound()


def _bound_atom(atom: _Atom, c: int) -> tuple[int, Dim] | None:
    """(k, r) with k * c * atom >= r for every size (k > 0), or None: mod(x, n) is in [0, n - 1];
    floordiv(x, k) for a constant k > 0 is in [(x - k + 1) / k, x / k]."""
    x, n = atom.args
    if atom.op == "mod":
        if isinstance(n, int) and n <= 0:
            return None
        return (1, 0) if c > 0 else (1, c * (n - 1))
    if atom.op == "floordiv" and isinstance(n, int) and n > 0:
        return (n, c * (x - (n - 1))) if c > 0 else (n, c * x)
    return None


def _nonnegative(value: Dim) -> bool:
    """Whether `value` ≥ 0 for every assignment of variables ≥ 1; raises where that depends on them."""
    if isinstance(value, (int, float)):  # a float: against a heuristic's number (size_hint)
        return value >= 0
    low = value.lower_bound()
    if low is not None and low >= 0:
        return True
    high = (-value).lower_bound()
    if high is not None and high > 0:
        return False
    hint = current_size_hint()
    if hint is not None:
        return _at_hint(value, hint) >= 0
    raise InconclusiveDimensionError(f"cannot decide whether {value} >= 0 for every size of {sorted(value.variables)}")


_HINT = threading.local()


@contextmanager
def size_hint(binding: Mapping[str, int] | None) -> Iterator[None]:
    """Decide what the lower bounds leave open at `binding`'s values, for heuristics (module doc);
    a variable the binding lacks takes the value HINT_DEFAULT. `None`: no hint (exact answers only)."""
    previous = getattr(_HINT, "binding", None)
    _HINT.binding = dict(binding) if binding is not None else None
    try:
        yield
    finally:
        _HINT.binding = previous


HINT_DEFAULT = 128
"""The value a dimension variable takes in heuristics when no hint names it (BladeDISC's likely size)."""


def current_size_hint() -> Mapping[str, int] | None:
    return getattr(_HINT, "binding", None)


def _at_hint(value: DimExpr, hint: Mapping[str, int]) -> int:
    return value.evaluate({v: hint.get(v, HINT_DEFAULT) for v in value.variables})


def hint_value(value: Dim) -> int:
    """The integer `value` takes at the current size hint (an int as it is), for heuristics that
    divide by a size: a size may be 0 at the hint (`mod(n, 2)` at n = 128), so they test the
    number for 0, not the expression (which is never equal to 0)."""
    if isinstance(value, int):
        return value
    hint = current_size_hint()
    if hint is None:
        raise InconclusiveDimensionError(f"symbolic size '{value}' has no number at compile time")
    return _at_hint(value, hint)


def symbol(name: str) -> DimExpr:
    """The size of dimension variable `name`."""
    return DimExpr(((((_Atom("var", (name,)), 1),), 1),))


def floordiv(a: Dim, b: Dim) -> Dim:
    """`a // b` rounding down. By a positive constant, a nested division by a constant is one
    division (`_flatten_nested_floordiv`: `floordiv(floordiv(s + 1, 2) + 1, 2)` is
    `floordiv(s + 3, 4)`) and the multiples of `b` leave the division (`_split_multiples`:
    `floordiv(2*t + 1, 2)` is `t`); by a monomial dividing every term of `a`, exact
    (`floordiv(s^2, s)` is `s`)."""
    if isinstance(b, int):
        if b == 0:
            raise HloError("symbolic size divided by zero")
        if isinstance(a, int):
            return a // b
        if b == 1:
            return a
        if b > 0:
            if (flat := _flatten_nested_floordiv(a, b)) is not None:
                return flat
            whole, rest = _split_multiples(a, b)
            if isinstance(rest, int):  # 0 <= rest < b
                return whole
            return whole + DimExpr._of({((_Atom("floordiv", (rest, b)), 1),): 1})
        if all(c % b == 0 for _, c in a.terms):
            return DimExpr._of({m: c // b for m, c in a.terms})
    elif a == b:
        return 1
    elif (quotient := _exact_quotient(a, b)) is not None:
        return quotient
    return DimExpr._of({((_Atom("floordiv", (a, b)), 1),): 1})


def mod(a: Dim, b: Dim) -> Dim:
    """`a mod b` (non-negative for positive b): by a positive constant, of `a`'s coefficients
    reduced modulo `b` (`_split_multiples`; 0 when `b` divides them all) and `mod(mod(x, k), b)`
    is `mod(x, b)` where `b` divides the constant `k`; 0 when every term of `a` is a multiple of
    the monomial `b`."""
    if isinstance(b, int):
        if b == 0:
            raise HloError("symbolic size modulo zero")
        if isinstance(a, int):
            return a % b
        if b > 0:
            if (inner := _lone_atom(a)) is not None and inner.op == "mod" and isinstance(inner.args[1], int) \
                    and inner.args[1] % b == 0:
                return mod(inner.args[0], b)  # x - mod(x, k) is a multiple of k, hence of b
            _, rest = _split_multiples(a, b)
            if isinstance(rest, int):
                return rest
            a = rest
        elif all(c % b == 0 for _, c in a.terms):
            return 0
    elif a == b or _exact_quotient(a, b) is not None:
        return 0
    return DimExpr._of({((_Atom("mod", (a, b)), 1),): 1})


def _lone_atom(a: DimExpr) -> _Atom | None:
    """The atom `a` is (one term of coefficient 1 and power 1), or None."""
    if len(a.terms) == 1:
        [(monomial, c)] = a.terms
        if c == 1 and len(monomial) == 1 and monomial[0][1] == 1:
            return monomial[0][0]
    return None


def _flatten_nested_floordiv(a: DimExpr, n: int) -> Dim | None:
    """`floordiv(floordiv(x, m) + r, n)` as `floordiv(x + m*r, m*n)` (m, n > 0 constants, r any
    integer expression), or None where no term of `a` is a `floordiv(x, m)` of coefficient 1.
    Exact: floor(floor(y) / n) = floor(y / n) for y = (x + m*r) / m, whose floor is
    floordiv(x, m) + r. So a strided convolution then a strided pooling over a symbolic image give
    the size PyTorch's shape environment writes (`floordiv(s + 3, 4)`), one canonical form."""
    for monomial, c in a.terms:
        atom = _lone_atom(DimExpr(((monomial, c),)))
        if atom is not None and atom.op == "floordiv" and isinstance(atom.args[1], int) and atom.args[1] > 0:
            x, m = atom.args
            return floordiv(x + m * (a - DimExpr(((monomial, 1),))), m * n)
    return None


def _split_multiples(a: DimExpr, b: int) -> tuple[Dim, Dim]:
    """`a` as `whole * b + rest` with every coefficient of `rest` in [0, b) (b > 0): then
    `floordiv(a, b) = whole + floordiv(rest, b)` and `mod(a, b) = mod(rest, b)`, exactly, since
    `whole` is an integer. This is what makes `floordiv(2*t + 1, 2)` be `t`, and
    `floordiv(s - 2, 2) + 1` (a pooling window count) be `floordiv(s, 2)`."""
    whole = DimExpr._of({m: c // b for m, c in a.terms})
    rest = DimExpr._of({m: c % b for m, c in a.terms})
    return whole, rest


def _exact_quotient(a: Dim, b: DimExpr) -> Dim | None:
    """`a / b` where `b` is one term `c * m` (m a product of atoms, never 0) dividing every term of
    `a`, or None."""
    if len(b.terms) != 1:
        return None
    [(divisor, c)] = b.terms
    powers = dict(divisor)
    quotient = {}
    for m, k in _terms(a):
        have = dict(m)
        if k % c or any(have.get(atom, 0) < p for atom, p in powers.items()):
            return None
        rest = {atom: p - powers.get(atom, 0) for atom, p in have.items() if p > powers.get(atom, 0)}
        quotient[tuple(sorted(rest.items(), key=lambda ap: ap[0].sort_key()))] = k // c
    return DimExpr._of(quotient)


def is_symbolic(value) -> bool:
    return isinstance(value, DimExpr)


def substitute(value: Dim, mapping: Mapping[str, Dim]) -> Dim:
    """`value` with each variable in `mapping` replaced by its value (an int or an expression)."""
    if isinstance(value, int):
        return value
    try:  # every variable bound to an int (the runtime binding a call's sizes): int arithmetic only
        return _evaluate_terms(value.terms, mapping)
    except (KeyError, TypeError, ZeroDivisionError):
        pass  # a variable left free or bound to an expression, or a division by zero (its HloError below)
    total: Dim = 0
    for m, c in value.terms:
        product: Dim = c
        for atom, p in m:
            product = product * _pow(_substitute_atom(atom, mapping), p)
        total = total + product
    return total


def _evaluate_terms(terms: tuple, binding: Mapping[str, int]) -> int:
    """The value of `terms` with every variable bound to an int in `binding` (Python's `//` and `%`:
    floordiv's and mod's semantics); KeyError or ZeroDivisionError where that is not so."""
    total = 0
    for m, c in terms:
        for atom, p in m:
            if atom.op == "var":
                value = binding[atom.args[0]]
                if not isinstance(value, int):
                    raise TypeError(value)
            else:
                a, b = (x if isinstance(x, int) else _evaluate_terms(x.terms, binding) for x in atom.args)
                value = a // b if atom.op == "floordiv" else a % b
            c *= value if p == 1 else value ** p
        total += c
    return total


def _substitute_atom(atom: _Atom, mapping: Mapping[str, Dim]) -> Dim:
    if atom.op == "var":
        name = atom.args[0]
        return mapping[name] if name in mapping else symbol(name)
    a, b = (substitute(x, mapping) for x in atom.args)
    return floordiv(a, b) if atom.op == "floordiv" else mod(a, b)


def _pow(base: Dim, p: int) -> Dim:
    out: Dim = 1
    for _ in range(p):
        out = out * base
    return out


def evaluate(value: Dim, binding: Mapping[str, int]) -> int:
    return value if isinstance(value, int) else value.evaluate(binding)


def variables_of(dims) -> frozenset[str]:
    """The variables that a sequence of sizes uses."""
    out: set = set()
    for d in dims:
        if isinstance(d, DimExpr):
            out |= d.variables
    return frozenset(out)


# -- text ----------------------------------------------------------------------------------------
def size_text(value: Dim, *, bare_name: bool = False) -> str:
    """HLO text of a size: the integer, or `?(expr)` without spaces (`?name` with `bare_name`, as
    shape dimensions write a lone variable)."""
    if isinstance(value, int):
        return str(value)
    text = str(value).replace(" ", "")
    return "?" + (text if bare_name and text.isidentifier() else f"({text})")


SIZE_PATTERN = r"(?:-?\d+|\?\((?:[^()]|\([^()]*\))*\))"
"""A regex of one size as `size_text` writes it inside attributes (an integer or `?(expr)`)."""


def parse_size(text: str) -> Dim:
    """The size `size_text` wrote."""
    text = text.strip()
    if text.startswith("?"):
        return parse_dim_expr(text[1:])
    return int(text)


_TOKEN_RE = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(//|[-+*%^(),]))")


def parse_dim_expr(text: str) -> Dim:
    """The size `text` writes: integers, variable names, `+ - *`, `^` powers, `floordiv(a, b)`,
    `mod(a, b)` (and `a // b`, `a % b`), parentheses."""
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            if text[pos:].strip() == "":
                break
            raise HloError(f"cannot read symbolic size '{text}' at '{text[pos:]}'")
        tokens.append(int(m.group(1)) if m.group(1) else (m.group(2) or m.group(3)))
        pos = m.end()
    parser = _ExprParser(tokens, text)
    value = parser.sum()
    if parser.i != len(tokens):
        raise HloError(f"cannot read symbolic size '{text}': unexpected '{tokens[parser.i]}'")
    return value


class _ExprParser:
    def __init__(self, tokens: list, text: str):
        self.tokens, self.text, self.i = tokens, text, 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected=None):
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            raise HloError(f"cannot read symbolic size '{self.text}': expected {expected or 'more'}")
        self.i += 1
        return tok

    def sum(self) -> Dim:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Dim:
        value = self.power()
        while self.peek() in ("*", "//", "%"):
            op = self.take()
            rhs = self.power()
            value = value * rhs if op == "*" else (floordiv(value, rhs) if op == "//" else mod(value, rhs))
        return value

    def power(self) -> Dim:
        value = self.factor()
        if self.peek() == "^":
            self.take()
            value = _pow(value, self.take())
        return value

    def factor(self) -> Dim:
        tok = self.take()
        if tok == "-":
            return -self.factor()
        if tok == "(":
            value = self.sum()
            self.take(")")
            return value
        if isinstance(tok, int):
            return tok
        if tok in ("floordiv", "mod") and self.peek() == "(":
            self.take("(")
            a = self.sum()
            self.take(",")
            b = self.sum()
            self.take(")")
            return floordiv(a, b) if tok == "floordiv" else mod(a, b)
        if isinstance(tok, str) and (tok[0].isalpha() or tok[0] == "_"):
            return symbol(tok)
        raise HloError(f"cannot read symbolic size '{self.text}': unexpected '{tok}'")
