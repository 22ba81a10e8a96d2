"""IndexingMap: a quasi-affine map with a domain, XLA's unit of indexing analysis.

`(d0, ..., dn-1)[s0, ..., sm-1]{r0, ..., rk-1} -> (e0, ..., ep-1), domain: ...` maps a point of
the domain to the index tuple (e0, ..., ep-1). Dimension variables `d` are the index of the tensor
(or launch grid) the map starts from; range variables (symbols) `s` enumerate the many elements
that one point maps to (reduced dims, contraction dims, window positions, vector and unroll
indices); runtime variables `r` are values known only when the kernel runs (dynamic-slice
offsets, later dynamic sizes). Every variable has an inclusive interval, and the domain is further
restricted by constraints `expr in [lo, hi]`. The map denotes the set of (point, result) pairs
over all points of the domain; a map whose domain is provably empty is "known empty".

All operations return new maps (maps are frozen values). `simplify` normalises constraints, folds
single-variable constraints into variable bounds, rescales symbols constrained by `s mod k in
[n, n]`, simplifies results with the range-aware simplifier, and removes unused range variables.
`map_to_text` prints XLA's text form (`str(map)`); its parser is in `indexing_map_text.py`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from hlocc.analysis.affine_expr import (
    SIZE_BOUND,
    Const,
    Expr,
    FloorDiv,
    IndexingError,
    Mod,
    Sum,
    Var,
    VarKind,
    dim,
    evaluate,
    expr_range,
    from_linear_form,
    linear_form,
    replace_vars,
    rt,
    sym,
    to_text,
    variables,
)
from hlocc.analysis.interval import Interval
from hlocc.analysis.simplifier import Simplifier
from hlocc.hlo.symbolic import DimExpr


@dataclass(frozen=True)
class Variable:
    """A variable's inclusive bounds and optional print name. `source` (ignored by equality) says
    for runtime variables what computes the value, e.g. (instruction, operand number)."""

    bounds: Interval
    name: str = ""
    source: object = field(default=None, compare=False, hash=False)


NO_UPPER_BOUND = 1 << 62
"""Upper end of a constraint interval that has none (`e in [lo, NO_UPPER_BOUND]`: e >= lo), as
constraints over symbolic sizes are written; it fits an i64 index constant."""


def size_bound(size: int | DimExpr) -> int:
    """The largest value a size can take: itself, or SIZE_BOUND for a symbolic size."""
    return SIZE_BOUND if isinstance(size, DimExpr) else int(size)


def variables_from_sizes(sizes: Sequence[int | DimExpr], names: Sequence[str] | None = None) -> tuple[Variable, ...]:
    """Variables with bounds [0, size-1] (a symbolic size: [0, SIZE_BOUND-1], see affine_expr)."""
    names = names or [""] * len(sizes)
    return tuple(Variable(Interval(0, size_bound(n) - 1), name) for n, name in zip(sizes, names))


@dataclass(frozen=True)
class IndexingMap:
    dims: tuple[Variable, ...]
    results: tuple[Expr, ...]
    symbols: tuple[Variable, ...] = ()
    runtime: tuple[Variable, ...] = ()
    constraints: tuple[tuple[Expr, Interval], ...] = ()
    known_empty: bool = False

    # -- construction ----------------------------------------------------------------------------
    @staticmethod
    def from_sizes(dim_sizes: Sequence[int], results: Sequence[Expr | int],
                   symbol_sizes: Sequence[int] = ()) -> IndexingMap:
        """A map over the box [0, size-1] of each dimension and symbol."""
        return IndexingMap(variables_from_sizes(dim_sizes), tuple(_as_expr(e) for e in results),
                           variables_from_sizes(symbol_sizes))

    @staticmethod
    def identity(sizes: Sequence[int]) -> IndexingMap:
        return IndexingMap.from_sizes(sizes, [dim(i) for i in range(len(sizes))])

    # -- variables -------------------------------------------------------------------------------
    def variable(self, var: Var) -> Variable:
        group = (self.dims, self.symbols, self.runtime)[var.kind]
        if not 0 <= var.index < len(group):
            raise IndexingError(f"variable {var} is not a variable of the map {self}")
        return group[var.index]

    def var_bounds(self, var: Var) -> Interval:
        return self.variable(var).bounds

    def var_name(self, var: Var) -> str:
        return self.variable(var).name or f"{var.kind.prefix}{var.index}"

    def all_vars(self) -> list[Var]:
        return ([dim(i) for i in range(len(self.dims))] + [sym(i) for i in range(len(self.symbols))]
                + [rt(i) for i in range(len(self.runtime))])

    # -- queries ---------------------------------------------------------------------------------
    @property
    def is_known_empty(self) -> bool:
        """True when the domain is provably empty (an empty bound or constraint interval)."""
        return (self.known_empty or any(v.bounds.is_empty for v in self.dims + self.symbols + self.runtime)
                or any(iv.is_empty for _, iv in self.constraints))

    def expr_range(self, expr: Expr) -> Interval:
        """Bounds of expr over the variable bounds of this map (constraints are not used)."""
        return expr_range(expr, self.var_bounds)

    def result_ranges(self) -> list[Interval]:
        return [self.expr_range(e) for e in self.results]

    def used_vars(self) -> set[Var]:
        used: set[Var] = set()
        for e in self.results:
            used |= variables(e)
        for e, _ in self.constraints:
            used |= variables(e)
        return used

    def __str__(self) -> str:
        return map_to_text(self)

    # -- evaluation (tests, interpreters) --------------------------------------------------------
    def points(self, limit: int = 1 << 20) -> np.ndarray:
        """All points of the domain as rows (dims, then symbols, then runtime variables), in
        row-major order of the variables; refuses boxes larger than `limit`."""
        vars_ = self.all_vars()
        box = [self.var_bounds(v) for v in vars_]
        count = math.prod(b.size for b in box)
        if count > limit:
            raise IndexingError(f"domain of {count} points is too large to enumerate")
        if not box:
            return np.zeros((1, 0), np.int64)
        grids = np.indices([b.size for b in box]).reshape(len(box), -1)
        grids = grids.astype(np.int64) + np.array([b.lo for b in box], np.int64).reshape(-1, 1)
        mask = self.satisfies(grids)
        return grids[:, mask].T

    def satisfies(self, columns: np.ndarray) -> np.ndarray:
        """Mask of the points (one column per point, rows as in `points`) meeting all constraints."""
        mask = np.ones(columns.shape[1], dtype=bool)
        values = self._value_lookup(columns)
        for expr, iv in self.constraints:
            v = np.asarray(evaluate(expr, values)) + np.zeros(columns.shape[1], np.int64)
            mask &= (v >= iv.lo) & (v <= iv.hi)
        return mask

    def apply(self, points: np.ndarray) -> np.ndarray:
        """Results at the given points (rows as from `points`): an array (N, num_results)."""
        points = np.asarray(points, np.int64)
        columns = points.reshape(len(points), len(self.all_vars())).T
        values = self._value_lookup(columns)
        n = columns.shape[1]
        out = [np.asarray(evaluate(e, values)) + np.zeros(n, np.int64) for e in self.results]
        return np.stack(out, axis=1) if out else np.zeros((n, 0), np.int64)

    def _value_lookup(self, columns: np.ndarray):
        offsets = (0, len(self.dims), len(self.dims) + len(self.symbols))
        return lambda v: columns[offsets[v.kind] + v.index]

    # -- transformations -------------------------------------------------------------------------
    def with_constraint(self, expr: Expr, interval: Interval) -> IndexingMap:
        """The map with `expr in interval` added (intersected with an existing one on expr)."""
        out = dict(self.constraints)
        out[expr] = out[expr].intersect(interval) if expr in out else interval
        return replace(self, constraints=tuple(out.items()))

    def substitute(self, fn, dims=None, symbols=None, runtime=None) -> IndexingMap:
        """Replace every variable v by fn(v) in results and constraints; the new map has the given
        variable lists (default: unchanged)."""
        return IndexingMap(
            self.dims if dims is None else tuple(dims),
            tuple(replace_vars(e, fn) for e in self.results),
            self.symbols if symbols is None else tuple(symbols),
            self.runtime if runtime is None else tuple(runtime),
            _merge_constraints((replace_vars(e, fn), iv) for e, iv in self.constraints),
            self.known_empty)

    def remove_unused_symbols(self) -> IndexingMap:
        """Drop range variables used neither in results nor in constraints (renumbering the rest)."""
        return self._remove_unused(VarKind.SYMBOL)[0]

    def remove_unused_dims(self) -> tuple[IndexingMap, list[int]]:
        """Drop unused dimension variables; also returns the kept dimension numbers."""
        return self._remove_unused(VarKind.DIM)

    def remove_unused_runtime(self) -> tuple[IndexingMap, list[int]]:
        return self._remove_unused(VarKind.RUNTIME)

    def _remove_unused(self, kind: VarKind) -> tuple[IndexingMap, list[int]]:
        group = (self.dims, self.symbols, self.runtime)[kind]
        used = {v.index for v in self.used_vars() if v.kind is kind}
        kept = [i for i in range(len(group)) if i in used]
        if len(kept) == len(group):
            return self, kept
        renumber = {old: new for new, old in enumerate(kept)}

        def fn(v: Var) -> Expr:
            return Var(kind, renumber[v.index]) if v.kind is kind else v

        new_group = tuple(group[i] for i in kept)
        lists = {VarKind.DIM: "dims", VarKind.SYMBOL: "symbols", VarKind.RUNTIME: "runtime"}
        return self.substitute(fn, **{lists[kind]: new_group}), kept

    def rescale_symbols(self) -> IndexingMap:
        """For a symbol s with exactly one constraint `s mod k in [n, n]` (0 <= n < k), substitute
        s -> s*k + n with bounds [ceil((lo-n)/k), floor((hi-n)/k)] and drop the constraint."""
        m = self
        for i in range(len(self.symbols)):
            found = [(e, iv) for e, iv in m.constraints
                     if isinstance(e, Mod) and e.lhs == sym(i) and iv.is_point and 0 <= iv.lo < e.modulus]
            if len(found) != 1:
                continue
            (expr, iv), k = found[0], found[0][0].modulus
            b = m.symbols[i].bounds
            new_var = replace(m.symbols[i], bounds=Interval(-((iv.lo - b.lo) // k), (b.hi - iv.lo) // k))
            rest = tuple(c for c in m.constraints if c[0] != expr)
            m = replace(m, constraints=rest).substitute(
                lambda v, i=i, k=k, n=iv.lo: v * k + n if v == sym(i) else v,
                symbols=m.symbols[:i] + (new_var,) + m.symbols[i + 1:])
        return m

    def simplify(self, replace_point_dims: bool = True) -> IndexingMap:
        """Equivalent map in canonical form (see the module docstring); a map found empty comes
        back with `known_empty` set."""
        m = self
        for _ in range(16):
            if m.is_known_empty:
                return replace(m, known_empty=True)
            nxt = m._simplify_constraints(replace_point_dims).rescale_symbols()
            if nxt.is_known_empty:
                return replace(nxt, known_empty=True)
            s = Simplifier(nxt.var_bounds, replace_point_dims)
            nxt = replace(nxt, results=tuple(s.simplify(e) for e in nxt.results))
            if nxt == m:
                break
            m = nxt
        return m.remove_unused_symbols()

    def simplify_results(self) -> IndexingMap:
        """The results simplified within the variables' bounds, every variable kept as it is: for a
        map whose variables are an op's operands (`xla.apply_indexing`), which `simplify` may drop
        (an unused range variable) or rescale (a symbol with a modulus constraint)."""
        s = Simplifier(self.var_bounds, True)
        return replace(self, results=tuple(s.simplify(e) for e in self.results))

    def _simplify_constraints(self, replace_point_dims: bool) -> IndexingMap:
        s = Simplifier(self.var_bounds, replace_point_dims)
        groups = [list(self.dims), list(self.symbols), list(self.runtime)]
        kept: dict[Expr, Interval] = {}
        for expr, iv in self.constraints:
            expr, iv = _normalize_constraint(s.simplify(expr), iv, s)
            if isinstance(expr, Const):
                if not iv.contains(expr.value):
                    return replace(self, known_empty=True)
                continue
            if isinstance(expr, Var):
                old = groups[expr.kind][expr.index]
                groups[expr.kind][expr.index] = replace(old, bounds=old.bounds.intersect(iv))
                continue
            r = s.range(expr)
            if iv.contains(r):
                continue
            if r.disjoint(iv) or iv.is_empty:
                return replace(self, known_empty=True)
            kept[expr] = kept[expr].intersect(iv) if expr in kept else iv
        return replace(self, dims=tuple(groups[0]), symbols=tuple(groups[1]), runtime=tuple(groups[2]),
                       constraints=tuple(kept.items()))


KNOWN_EMPTY = "KNOWN EMPTY"


def map_to_text(m: IndexingMap, multiline: bool = False) -> str:
    """The map in XLA's syntax (one line, or the domain one entry per line)."""
    if m.is_known_empty:
        return KNOWN_EMPTY
    name = m.var_name
    head = "(" + ", ".join(name(v) for v in m.all_vars() if v.kind is VarKind.DIM) + ")"
    if m.symbols:
        head += "[" + ", ".join(name(v) for v in m.all_vars() if v.kind is VarKind.SYMBOL) + "]"
    if m.runtime:
        head += "{" + ", ".join(name(v) for v in m.all_vars() if v.kind is VarKind.RUNTIME) + "}"
    body = head + " -> (" + ", ".join(to_text(e, name) for e in m.results) + ")"
    domain = [f"{name(v)} in {m.var_bounds(v)}" for v in m.all_vars()]
    domain += [f"{to_text(e, name)} in {iv}" for e, iv in m.constraints]
    if not domain:
        return body
    sep = ",\n" if multiline else ", "
    return body + sep + "domain:" + ("\n" if multiline else " ") + sep.join(domain)


def _as_expr(e: Expr | int) -> Expr:
    return e if isinstance(e, Expr) else Const(int(e))


def _merge_constraints(pairs) -> tuple[tuple[Expr, Interval], ...]:
    out: dict[Expr, Interval] = {}
    for e, iv in pairs:
        out[e] = out[e].intersect(iv) if e in out else iv
    return tuple(out.items())


def _normalize_constraint(expr: Expr, iv: Interval, s: Simplifier) -> tuple[Expr, Interval]:
    """Move constants to the interval, divide by the gcd of the coefficients, make the leading
    coefficient positive, turn `x floordiv c in [lo, hi]` into `x in [lo*c, hi*c + c-1]`, and drop
    a low part that cannot change the outcome (`g*H + L in iv` with the same H-interval for every
    value of L)."""
    for _ in range(32):
        if isinstance(expr, FloorDiv):
            expr, iv = expr.lhs, Interval(iv.lo * expr.divisor, iv.hi * expr.divisor + expr.divisor - 1)
            continue
        if not isinstance(expr, Sum):
            return expr, iv
        terms, constant = linear_form(expr)
        if constant:
            expr, iv = from_linear_form(terms, 0), iv + (-constant)
            continue
        if all(c < 0 for c in terms.values()):
            expr, iv = expr * -1, Interval(-iv.hi, -iv.lo)
            continue
        g = math.gcd(*terms.values())
        if g > 1:
            expr = from_linear_form({a: c // g for a, c in terms.items()}, 0)
            iv = Interval(-(-iv.lo // g), iv.hi // g)
            continue
        dropped = _drop_irrelevant_low_part(terms, iv, s)
        if dropped is None:
            return expr, iv
        expr, iv = dropped
    return expr, iv


def _drop_irrelevant_low_part(terms: dict[Expr, int], iv: Interval, s: Simplifier):
    """`g*H + L in [lo, hi]` -> `H in [ceil((lo-L)/g), floor((hi-L)/g)]` when that interval is the
    same for every value L can take."""
    by_size = sorted(terms.items(), key=lambda t: -abs(t[1]))
    g = 0
    for i in range(len(by_size) - 1):
        g = math.gcd(g, by_size[i][1])
        if g <= 1:
            return None
        high = {a: c // g for a, c in terms.items() if c % g == 0}
        low = from_linear_form({a: c for a, c in terms.items() if c % g}, 0)
        lr = s.range(low)
        lo_a, lo_b = -(-(iv.lo - lr.hi) // g), -(-(iv.lo - lr.lo) // g)
        hi_a, hi_b = (iv.hi - lr.lo) // g, (iv.hi - lr.hi) // g
        if lo_a == lo_b and hi_a == hi_b:
            return from_linear_form(high, 0), Interval(lo_a, hi_a)
    return None


# -- combining maps ------------------------------------------------------------------------------

def compose(first: IndexingMap, second: IndexingMap, simplify: bool = True) -> IndexingMap:
    """The map `second ∘ first`: apply `first` (A -> B), then `second` (B -> C), giving A -> C.

    The result has first's dimensions, range variables [second's..., first's...] and runtime
    variables [second's..., first's...]; its constraints are first's, second's (with second's
    dimensions replaced by first's results), and `first.results[i] in second.dims[i].bounds`.
    """
    if len(first.results) != len(second.dims):
        raise IndexingError(f"cannot compose: {len(first.results)} results into {len(second.dims)} dims")
    ns, nr = len(second.symbols), len(second.runtime)

    def rename_first(v: Var) -> Expr:
        if v.kind is VarKind.SYMBOL:
            return sym(v.index + ns)
        return rt(v.index + nr) if v.kind is VarKind.RUNTIME else v

    inner = [replace_vars(e, rename_first) for e in first.results]

    def into_second(v: Var) -> Expr:
        return inner[v.index] if v.kind is VarKind.DIM else v

    constraints = [(replace_vars(e, rename_first), iv) for e, iv in first.constraints]
    constraints += [(replace_vars(e, into_second), iv) for e, iv in second.constraints]
    constraints += [(e, d.bounds) for e, d in zip(inner, second.dims)]
    out = IndexingMap(first.dims, tuple(replace_vars(e, into_second) for e in second.results),
                      second.symbols + first.symbols, second.runtime + first.runtime,
                      _merge_constraints(constraints), first.known_empty or second.known_empty)
    return out.simplify() if simplify else out


def concat_results(a: IndexingMap, b: IndexingMap) -> IndexingMap:
    """One map with a's results followed by b's; both must have the same dimensions. Range and
    runtime variables are a's followed by b's; constraints are the union."""
    if a.dims != b.dims:
        raise IndexingError("concat_results needs maps over the same dimensions")
    ns, nr = len(a.symbols), len(a.runtime)

    def shift(v: Var) -> Expr:
        if v.kind is VarKind.SYMBOL:
            return sym(v.index + ns)
        return rt(v.index + nr) if v.kind is VarKind.RUNTIME else v

    shifted = b.substitute(shift)
    return IndexingMap(a.dims, a.results + shifted.results, a.symbols + b.symbols, a.runtime + b.runtime,
                       _merge_constraints(a.constraints + shifted.constraints), a.known_empty or b.known_empty)


# -- vectorization query -------------------------------------------------------------------------

@dataclass(frozen=True)
class Contiguity:
    """Result `result` of a map is `offset + stride * s` in the symbol s, where offset does not
    depend on s and is always a multiple of `alignment` (0: the offset is always 0)."""

    stride: int
    alignment: int


def contiguity(m: IndexingMap, symbol: int, result: int = -1) -> Contiguity | None:
    """How result `result` moves with range variable `symbol`, or None when the access is not a
    plain strided run in that symbol: another result depends on it, it occurs inside a div/mod,
    or a constraint mentions it (some elements of the vector would be masked)."""
    s = sym(symbol)
    result = result % len(m.results)
    if any(s in variables(e) for i, e in enumerate(m.results) if i != result):
        return None
    if any(s in variables(e) for e, _ in m.constraints):
        return None
    terms, constant = linear_form(m.results[result])
    stride = terms.pop(s, 0)
    if any(s in variables(atom) for atom in terms):
        return None
    alignment = math.gcd(constant, *terms.values()) if terms else abs(constant)
    return Contiguity(stride, alignment)
