"""The host shape function of a module with symbolic dimensions (BladeDISC's host-side shape
computation): one Python function, generated once at compile time from the module's DimExprs
(hlo/symbolic.py) and compiled with `compile()`, that maps the argument dimensions of a call to
every size the call needs.

    fn = ShapeFunction.build(module, sizes, maxima)   # sizes: the DimExprs the plan needs, in order
    values = fn(arg_dims)                             # arg_dims: one tuple per entry parameter

The generated function, in order: checks each symbolic parameter's rank; solves each dimension
variable from the argument dimension that binds it (a lone variable, or `k*v + c` once the other
variables are known: hlo/specialize.py's rule, decided here once instead of per call); checks every
other symbolic dimension against its expression and every guard (hlo/guards.py); computes the
`slot<k>` sizes of the buffer assignment (the largest of their blocks' sizes); and returns the
tuple of `sizes` evaluated. Any failed check calls the slow path — `bind_symbols` and the guards,
which raise the ArgumentError naming the variable and both values, or the guard's message — so
the messages are written once (specialize.py, guards.py) and the fast path stays a few lines of
arithmetic. `source` keeps the generated text for dumps and tests; `body`, `names` and `scope` let
a caller inline the checks and solving into a function of its own (dynamic_program.py's binding of
a new size: one generated function instead of three, which a first call at a new size runs with
cold caches).

`floordiv`/`mod` are Python's `//` and `%`, which round down and give a non-negative remainder for
a positive divisor: the semantics of symbolic.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.ir import HloModule
from hlocc.hlo.specialize import bind_symbols
from hlocc.hlo.symbolic import Dim, DimExpr, substitute, symbol


def expr_source(value: Dim, names: Mapping[str, str]) -> str:
    """Python source computing `value`, with each variable read from the local `names[variable]`."""
    if isinstance(value, int):
        return str(value)
    terms = []
    for monomial, coefficient in value.terms:
        factors = [] if coefficient == 1 and monomial else [str(coefficient)]
        for atom, power in monomial:
            if atom.op == "var":
                base = names[atom.args[0]]
            else:
                a, b = (expr_source(x, names) for x in atom.args)
                base = f"(({a}) // ({b}))" if atom.op == "floordiv" else f"(({a}) % ({b}))"
            factors += [base] * power
        terms.append("*".join(factors))
    return "(" + " + ".join(terms) + ")"


@dataclass
class ShapeFunction:
    """The compiled shape function (module doc): `__call__(arg_dims)` → the sizes, in order."""

    source: str
    variables: tuple[str, ...]  # the dimension variables, in the order the source solves them
    fn: Callable[[Sequence[Any]], tuple[int, ...]]
    body: tuple[str, ...] = ()  # the lines before the return: checks, solving, sizes (over `dims`)
    names: Mapping[str, str] = field(default_factory=dict)  # variable or slot size -> its local in `body`
    scope: Mapping[str, Any] = field(default_factory=dict)  # the globals `body` reads (`_slow`)

    def __call__(self, arg_dims: Sequence[Any]) -> tuple[int, ...]:
        return self.fn(arg_dims)

    @staticmethod
    def build(module: HloModule, sizes: Sequence[Dim], maxima: Mapping[str, Sequence[Dim]] | None = None
              ) -> ShapeFunction:
        maxima = maxima or {}
        names: dict[str, str] = {}
        lines = ["def shape_function(dims):"]
        pending = []
        for index, param in enumerate(module.entry.parameters):
            shape = param.shape
            if shape.is_tuple or shape.is_token or not shape.is_symbolic:
                continue
            lines.append(f"    if len(dims[{index}]) != {shape.rank}: return _slow(dims)")
            pending += [(index, d, size) for d, size in enumerate(shape.dims) if isinstance(size, DimExpr)]
        solved: dict[int, tuple[int, int]] = {}  # pending position -> the variable it binds (solved by it)
        for _ in range(2):  # lone variables first, then k*v + c forms (bind_symbols' order)
            for k, (index, d, size) in enumerate(pending):
                step = _solve_step(size, names)
                if step is None:
                    continue
                name, coefficient, rest = step
                local = names[name] = f"v{len(names)}"
                dim = f"dims[{index}][{d}]"
                rest_text = expr_source(rest, names)
                if coefficient == 1:
                    lines.append(f"    {local} = {dim}" + (f" - {rest_text}" if rest != 0 else ""))
                else:
                    lines.append(f"    if ({dim} - {rest_text}) % {coefficient}: return _slow(dims)")
                    lines.append(f"    {local} = ({dim} - {rest_text}) // {coefficient}")
                solved[k] = (index, d)
        for k, (index, d, size) in enumerate(pending):
            unknown = sorted(v for v in size.variables if v not in names)
            if unknown:
                raise UnsupportedError(f"argument {index} dimension {d}: no argument dimension binds "
                                       f"{', '.join(unknown)} of '{size}'")
            if k not in solved:
                lines.append(f"    if dims[{index}][{d}] != {expr_source(size, names)}: return _slow(dims)")
        if names:
            lines.append("    if " + " or ".join(f"{v} < 0" for v in names.values()) + ": return _slow(dims)")
        for guard in module.guards:
            for c in guard.predicate.comparisons:
                condition = f"{expr_source(c.lhs, names)} {_PYTHON_COMPARE[c.direction]} {expr_source(c.rhs, names)}"
                lines.append(f"    if not ({condition}): return _slow(dims)")
        for name, candidates in maxima.items():
            unknown = sorted(set().union(*(getattr(c, "variables", frozenset()) for c in candidates)) - set(names))
            if unknown:
                raise HloError(f"internal error: size '{name}' uses unbound variables {unknown}")
            names[name] = f"s{len(names)}"
            lines.append(f"    {names[name]} = max({', '.join(expr_source(c, names) for c in candidates)})")
        body = tuple(lines[1:])
        values = [expr_source(s, names) for s in sizes]
        lines.append(f"    return ({''.join(v + ', ' for v in values)})")
        source = "\n".join(lines) + "\n"
        scope = {"_slow": lambda dims: _slow_path(module, dims)}
        exec(compile(source, f"<shape function of {module.name}>", "exec"), scope)  # noqa: S102 (our own text)
        variables = tuple(v for v in names if v not in maxima)
        return ShapeFunction(source, variables, scope.pop("shape_function"), body, names, scope)


_PYTHON_COMPARE = {"EQ": "==", "NE": "!=", "LT": "<", "LE": "<=", "GT": ">", "GE": ">="}


def _solve_step(size: DimExpr, names: Mapping[str, str]) -> tuple[str, int, Dim] | None:
    """(variable, k, rest) when `size` is `k*variable + rest` with `rest` in known variables and `k` a
    non-zero constant, and `variable` the one unknown; None otherwise."""
    free = [v for v in size.variables if v not in names]
    if len(free) != 1:
        return None
    name = free[0]
    rest = substitute(size, {name: 0})
    k = substitute(size, {name: 1}) - rest
    if not isinstance(k, int) or k == 0 or size != k * symbol(name) + rest:
        return None
    return name, k, rest


def _slow_path(module: HloModule, dims: Sequence[Any]) -> tuple[int, ...]:
    """The checks of the generated function failed: raise the error bind_symbols or a guard gives."""
    binding = bind_symbols(module, [tuple(d) if d is not None else None for d in dims])
    for variable, value in binding.items():
        if value < 0:
            from hlocc.errors import ArgumentError

            raise ArgumentError(f"dimension variable {variable} = {value}: a size cannot be negative")
    for guard in module.guards:
        guard.check(binding)
    raise HloError(f"internal error: the shape function of '{module.name}' rejected sizes {list(dims)} that "
                   "bind_symbols and the guards accept")


__all__ = ["ShapeFunction", "expr_source"]
