"""PyTorch's types in hlocc's terms: dtypes → HLO element types, sizes (ints, SymInts, sympy
expressions) → hlocc sizes (`int` or `DimExpr`, hlo/symbolic.py), FakeTensors → Shapes, and the
shape environment's value ranges → guards (hlo/guards.py).

PyTorch names its symbolic sizes `s0`, `s1`, ... (dynamo) or after `torch.export.Dim`s; hlocc keeps
those names, so a guard or an argument error says `s0` as PyTorch's own messages do.

Divisibility. PyTorch writes what it knows of a size in its guards, not in the sizes: after
`x.chunk(2, 1)` and a `stack` of the halves its sizes are `floordiv(s + 1, 2)` and
`s - floordiv(s + 1, 2)`, and a guard `Eq(s - floordiv(s + 1, 2), floordiv(s + 1, 2))` says they are
equal, which holds exactly when `s` is even. hlocc cannot prove two sizes equal from a guard, but
it can write `s` as `2 * s_over_2` (`divisibility`): every size of the graph is then an expression
of `s_over_2` in which the floor divisions by 2 are exact (symbolic.py), the halves are one size,
and the argument's size binds `s_over_2` with a check that it is even (specialize.py) — dynamo's
guard, which runs first, makes that check redundant, never wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.symbolic import Dim, DimExpr, evaluate, floordiv, lower_bound, mod, substitute, symbol
from hlocc.hlo.types import Shape


def is_tensor(value: Any) -> bool:
    """Whether an FX value (`meta["val"]`) is a tensor (a FakeTensor or a real one, not an array)."""
    return hasattr(value, "dtype") and hasattr(value, "shape") and not isinstance(value, np.ndarray)


MAX_DIVISOR = 16  # the largest k `divisibility` tries

# torch dtype name → HLO element type
ELEMENT_TYPES = {
    "float32": "f32", "float64": "f64", "float16": "f16", "bfloat16": "bf16",
    "int64": "s64", "int32": "s32", "int16": "s16", "int8": "s8", "uint8": "u8", "bool": "pred",
    "complex64": "c64", "complex128": "c128",
}


def element_type(dtype: Any) -> str:
    """The HLO element type of a torch dtype (UnsupportedError for one hlocc has no type for)."""
    name = str(dtype).removeprefix("torch.")
    if name not in ELEMENT_TYPES:
        raise UnsupportedError(f"dtype {dtype} has no hlocc element type")
    return ELEMENT_TYPES[name]


def to_dim(size: Any, facts: Mapping[str, Dim] | None = None) -> Dim:
    """An int, a SymInt or a sympy expression as an hlocc size; `facts` (`divisibility`) replaces
    the symbols PyTorch's guards show to be multiples."""
    node = getattr(size, "node", None)
    if node is not None:  # a SymInt: its expression, or its hint when the expression is a constant
        size = node.expr
    if isinstance(size, int):
        return size
    dim = _sympy_to_dim(size)
    return substitute(dim, facts) if facts else dim


def divisibility(shape_env: Any) -> dict[str, Dim]:
    """`{s: k * s_over_k}` for each symbol PyTorch's shape environment knows to be a multiple of
    some k > 1 (module doc): from its `divisible` set (`Mod(s, k)` known to be 0), and from each
    equality guard over one symbol that holds at `s = k * t` identically (in hlocc's algebra) and
    fails at every non-multiple of k tried. Several facts of one symbol combine to their lcm."""
    import sympy

    divisors: dict[str, int] = {}

    def note(name: str, k: int) -> None:
        divisors[name] = math.lcm(divisors.get(name, 1), k)

    for fact in getattr(shape_env, "divisible", ()) or ():
        if isinstance(fact, sympy.Mod) and isinstance(fact.args[0], sympy.Symbol) and fact.args[1].is_Integer:
            note(fact.args[0].name, int(fact.args[1]))
    for guard in getattr(shape_env, "guards", ()) or ():
        expr = getattr(guard, "expr", None)
        if not isinstance(expr, sympy.Eq):
            continue
        try:
            difference = _sympy_to_dim(expr.lhs) - _sympy_to_dim(expr.rhs)
        except (UnsupportedError, HloError, TypeError):
            continue
        if isinstance(difference, DimExpr) and len(difference.variables) == 1:
            [name] = difference.variables
            for k in range(2, MAX_DIVISOR + 1):
                if _implies_multiple(difference, name, k):
                    note(name, k)
    return {name: k * symbol(f"{name}_over_{k}") for name, k in sorted(divisors.items()) if k > 1}


def _implies_multiple(difference: DimExpr, name: str, k: int) -> bool:
    """Whether `difference = 0` holds at every multiple of k (identically at `name = k * t`) and at
    no other value of `name` in [1, 4k]."""
    if substitute(difference, {name: k * symbol(f"{name}_over_{k}")}) != 0:
        return False
    for value in range(1, 4 * k):
        if value % k:
            try:
                if evaluate(difference, {name: value}) == 0:
                    return False
            except (ZeroDivisionError, HloError):
                continue
    return True


def _sympy_to_dim(expr: Any) -> Dim:
    import sympy

    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return symbol(expr.name)
    name = type(expr).__name__
    if name in ("TruncToInt", "FloorToInt", "CeilToInt"):  # a size from a float: interpolate's
        return _rounded(name, expr)                         # `trunc(1.5 * float(s))`
    args = [_sympy_to_dim(a) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return _fold(args, lambda a, b: a + b)
    if isinstance(expr, sympy.Mul):
        return _fold(args, lambda a, b: a * b)
    if isinstance(expr, sympy.Pow) and isinstance(args[1], int) and args[1] >= 0:
        return _fold([args[0]] * args[1], lambda a, b: a * b) if args[1] else 1
    if name in ("FloorDiv", "CleanDiv"):
        return floordiv(args[0], args[1])
    if name in ("Mod", "PythonMod"):
        return mod(args[0], args[1])
    raise UnsupportedError(f"symbolic size '{expr}' ({name}) has no hlocc form")


def _rounded(name: str, expr: Any) -> Dim:
    """`TruncToInt`/`FloorToInt`/`CeilToInt` of a float computed from sizes, as a floor division:
    exact where every float is a dyadic fraction (1.5, 0.25: `floor(1.5 * s)` is `floordiv(3*s, 2)`,
    and the double product is exact) and every division is by an integer; a trunc only of a sum
    that cannot be negative (where it is the floor)."""
    numerator, denominator = _fraction(expr.args[0], expr)
    low = lower_bound(numerator)
    if name == "TruncToInt" and (low is None or low < 0):
        raise UnsupportedError(f"symbolic size '{expr}' truncates a value that may be negative")
    if name == "CeilToInt":
        numerator = numerator + denominator - 1
    return floordiv(numerator, denominator)


def _fraction(expr: Any, whole: Any) -> tuple[Dim, int]:
    """A float computed from sizes as (integer polynomial, positive denominator); UnsupportedError
    for a float that is not a dyadic fraction (its products would round)."""
    import sympy

    name = type(expr).__name__
    if name == "ToFloat":
        return _sympy_to_dim(expr.args[0]), 1
    if isinstance(expr, sympy.Number):
        value = Fraction(float(expr)) if isinstance(expr, sympy.Float) else Fraction(int(expr.p), int(expr.q))
        if value.denominator & (value.denominator - 1) or value.denominator > 1 << 20:
            raise UnsupportedError(f"symbolic size '{whole}' scales a size by {float(expr)!r}, which is not a "
                                   "dyadic fraction (a multiple of 1/2^k): its product would round")
        return value.numerator, value.denominator
    if isinstance(expr, (sympy.Add, sympy.Mul)):
        parts = [_fraction(a, whole) for a in expr.args]
        if isinstance(expr, sympy.Add):
            denominator = math.lcm(*(d for _, d in parts))
            return _fold([n * (denominator // d) for n, d in parts], lambda a, b: a + b), denominator
        return _fold([n for n, _ in parts], lambda a, b: a * b), math.prod(d for _, d in parts)
    if name in ("FloatTrueDiv", "IntTrueDiv") and isinstance(expr.args[1], sympy.Integer) and int(expr.args[1]) > 0:
        numerator, denominator = _fraction(expr.args[0], whole)
        return numerator, denominator * int(expr.args[1])
    raise UnsupportedError(f"symbolic size '{whole}' ({name} of a float) has no hlocc form")


def _fold(values: list, op) -> Dim:
    result = values[0]
    for v in values[1:]:
        result = op(result, v)
    return result


def _bound(value: Any) -> int | None:
    """A finite range bound as an int; None for ±∞ (sympy's oo, PyTorch's int_oo)."""
    try:
        return int(value)
    except (TypeError, AttributeError, ValueError, OverflowError):
        return None


def tensor_shape(value: Any, facts: Mapping[str, Dim] | None = None) -> Shape:
    """The Shape of a (fake) tensor: its element type and sizes, symbolic ones as DimExprs."""
    return Shape.array(element_type(value.dtype), [to_dim(s, facts) for s in value.shape])


def range_guards(shape_env: Any, names: set[str], where: str,
                 facts: Mapping[str, Dim] | None = None) -> list[ShapeGuard]:
    """Guards for the value ranges PyTorch's shape environment (or an ExportedProgram's
    range_constraints, a {symbol: ValueRanges} dict) keeps for the symbols of the sizes `names`
    (a symbol in `facts` as its expression there): a call whose sizes leave a range fails with the
    message naming the symbol and the range."""
    ranges = getattr(shape_env, "var_to_range", shape_env) or {}
    facts = facts or {}
    guards = []
    for sym, vr in sorted(ranges.items(), key=lambda kv: str(kv[0])):
        name = str(sym)
        size = facts.get(name, symbol(name))
        if not isinstance(size, DimExpr) or not size.variables <= names:
            continue
        comparisons = []
        lo, hi = _bound(vr.lower), _bound(vr.upper)
        if lo is not None and lo > 1:
            comparisons.append(SizeComparison("GE", size, lo))
        if hi is not None:
            comparisons.append(SizeComparison("LE", size, hi))
        if comparisons:
            guards.append(ShapeGuard(SizePredicate(tuple(comparisons)),
                                     f"{where}: size {name} = {{0}} is outside its range "
                                     f"[{lo if lo is not None else 0}, {hi if hi is not None else 'inf'}]",
                                     (size,)))
    return guards
