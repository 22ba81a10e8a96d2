"""XLA's text form of indexing maps: printing and parsing.

    (d0, d1)[s0]{r0} -> (d1, d0 floordiv 4 + s0), domain: d0 in [0, 127], d1 in [0, 3],
    s0 in [0, 3], r0 in [0, 9], d0 + s0 in [0, 20]

Variables print with their names (default `d<i>`, `s<i>`, `r<i>`); the domain lists every
variable's bounds in order dims, symbols, runtime variables, then the constraints. A map with a
provably empty domain prints as `KNOWN EMPTY`. The parser accepts the same text (any whitespace;
`rt<i>` as well as `r<i>` for default runtime variable names; symbolic sizes as `$b` or
`$(b*s)`) and reports malformed text as `IndexingError` with the column. Terms of a sum print in
canonical order (see `affine_expr`), so text in another order parses to the same map but prints
differently.

The printer, `map_to_text`, lives beside `IndexingMap` (its `__str__`) in indexing_map.py and is
exported here with the parser, so that this module depends on the map and not the reverse.
"""

from __future__ import annotations

import re

from hlocc.analysis.affine_expr import Const, Expr, IndexingError, Var, VarKind, ceildiv, floordiv, mod, size_expr
from hlocc.analysis.indexing_map import KNOWN_EMPTY, IndexingMap, Variable, map_to_text
from hlocc.analysis.interval import Interval
from hlocc.errors import HloError
from hlocc.hlo.symbolic import parse_dim_expr, symbol

_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op>->|[-+*()\[\]{},:$]))")


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.tokens: list[tuple[str, str, int]] = []
        pos = 0
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            if pos >= len(text):
                break
            match = _TOKEN.match(text, pos)
            if not match:
                self.fail(pos, f"unexpected character '{text[pos]}'")
            kind = match.lastgroup
            self.tokens.append((kind, match.group(kind), match.start(kind)))
            pos = match.end()
        self.i = 0
        self.names: dict[str, Var] = {}

    def fail(self, pos: int, message: str):
        raise IndexingError(f"indexing map:1:{pos + 1}: error: {message}\n{self.text}\n{' ' * pos}^")

    def peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def pos(self) -> int:
        return self.tokens[self.i][2] if self.i < len(self.tokens) else len(self.text)

    def take(self, expected: str | None = None) -> tuple[str, str, int]:
        if self.i >= len(self.tokens):
            self.fail(len(self.text), f"expected '{expected}', found end of text" if expected else "unexpected end")
        tok = self.tokens[self.i]
        if expected is not None and tok[1] != expected:
            self.fail(tok[2], f"expected '{expected}', found '{tok[1]}'")
        self.i += 1
        return tok

    def accept(self, value: str) -> bool:
        if self.peek() == value:
            self.i += 1
            return True
        return False

    # -- grammar -------------------------------------------------------------------------------
    def var_list(self, open_: str, close: str, kind: VarKind) -> list[str]:
        names: list[str] = []
        if not self.accept(open_):
            return names
        while not self.accept(close):
            if names:
                self.take(",")
            kind_, value, at = self.take()
            if kind_ != "name" or value in self.names:
                self.fail(at, f"expected a new variable name, found '{value}'")
            self.names[value] = Var(kind, len(names))
            names.append(value)
        return names

    def integer(self) -> int:
        negative = self.accept("-")
        kind, value, at = self.take()
        if kind != "int":
            self.fail(at, f"expected an integer, found '{value}'")
        return -int(value) if negative else int(value)

    def interval(self) -> Interval:
        self.take("[")
        lo = self.integer()
        self.take(",")
        hi = self.integer()
        self.take("]")
        return Interval(lo, hi)

    def expr(self) -> Expr:
        out = self.term()
        while self.peek() in ("+", "-"):
            sign = 1 if self.take()[1] == "+" else -1
            out = out + self.term() * sign
        return out

    def term(self) -> Expr:
        out = self.unary()
        while self.peek() in ("*", "floordiv", "ceildiv", "mod"):
            op, at = self.take()[1], self.pos()
            rhs = self.unary()
            try:
                if op == "*":
                    out = out * rhs
                else:
                    out = {"floordiv": floordiv, "ceildiv": ceildiv, "mod": mod}[op](out, rhs)
            except IndexingError as e:
                self.fail(at, str(e))
        return out

    def unary(self) -> Expr:
        if self.accept("-"):
            return self.unary() * -1
        kind, value, at = self.take()
        if kind == "int":
            return Const(int(value))
        if value == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if kind == "name" and value in self.names:
            return self.names[value]
        if value == "$":
            return self.size()
        self.fail(at, f"unknown variable or token '{value}'")

    def size(self) -> Expr:
        """After `$`: a dimension variable's name, or a parenthesised size expression (affine_expr)."""
        kind, value, at = self.take()
        if kind == "name":
            return size_expr(symbol(value))
        if value != "(":
            self.fail(at, f"expected a size after '$', found '{value}'")
        depth, start = 1, self.pos()
        while depth:
            kind, value, end = self.take()
            depth += {"(": 1, ")": -1}.get(value, 0)
        try:
            return size_expr(parse_dim_expr(self.text[start:end]))
        except HloError as e:
            self.fail(start, str(e))

    def indexing_map(self) -> IndexingMap:
        if self.peek() == "KNOWN":
            self.take()
            self.take("EMPTY")
            return IndexingMap((), (), known_empty=True)
        dims = self.var_list("(", ")", VarKind.DIM)
        symbols = self.var_list("[", "]", VarKind.SYMBOL)
        runtime = self.var_list("{", "}", VarKind.RUNTIME)
        self.take("->")
        self.take("(")
        results: list[Expr] = []
        while not self.accept(")"):
            if results:
                self.take(",")
            results.append(self.expr())
        bounds: dict[str, Interval] = {}
        constraints: list[tuple[Expr, Interval]] = []
        if self.accept(","):
            self.take("domain")
            self.take(":")
            self.domain(bounds, constraints)
        if self.peek() is not None:
            self.fail(self.pos(), f"unexpected '{self.peek()}' after the map")
        missing = [n for n in dims + symbols + runtime if n not in bounds]
        if missing:
            self.fail(len(self.text), f"no bounds given for {', '.join(missing)}")

        def variables(names):
            return tuple(Variable(bounds[n], "" if _is_default(n, self.names[n]) else n) for n in names)

        return IndexingMap(variables(dims), tuple(results), variables(symbols), variables(runtime),
                           tuple(constraints))

    def domain(self, bounds: dict[str, Interval], constraints: list) -> None:
        while True:
            start = self.i
            kind, value, _ = self.tokens[self.i] if self.i < len(self.tokens) else (None, None, 0)
            if kind == "name" and value in self.names and self.i + 1 < len(self.tokens) \
                    and self.tokens[self.i + 1][1] == "in":
                self.i += 2
                bounds[value] = self.interval()
            else:
                self.i = start
                e = self.expr()
                self.take("in")
                constraints.append((e, self.interval()))
            if not self.accept(","):
                return


def _is_default(name: str, var: Var) -> bool:
    return name == f"{var.kind.prefix}{var.index}" or (var.kind is VarKind.RUNTIME and name == f"rt{var.index}")


def parse_indexing_map(text: str) -> IndexingMap:
    """Parse XLA's indexing-map text (as printed by `map_to_text`)."""
    return _Parser(text).indexing_map()


__all__ = ["KNOWN_EMPTY", "map_to_text", "parse_indexing_map"]
