"""The arithmetic of symbolic sizes that StableHLO's shape computations need beyond `DimExpr`'s
own (frontends/dynamic_shapes.py `SIZE_RULES` applies them): elementwise rules over shape tensors,
min/max where the algebra orders the operands for every size (and, for a symbolic size against a
constant, the order of large sizes with a guard), comparisons that stay predicates unless their
difference is a constant, conjunction and select of predicates, sign, and division and remainder
truncating as StableHLO's do."""

from __future__ import annotations

import operator

from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError, floordiv, mod


def elementwise(fn):
    def rule(cx, *args):
        n = max(len(a) for a in args)
        if any(len(a) not in (1, n) for a in args):
            return None
        return [fn(*(a[0] if len(a) == 1 else a[i] for a in args)) for i in range(n)]
    return rule


def size_min(a, b):
    """The smaller size where the algebra decides it for every size, asked both ways: `a*b <= b`
    is open (a = 1 gives equality, the bounds see no strict order) where `b <= a*b` holds."""
    try:
        return a if a <= b else b
    except InconclusiveDimensionError:
        return b if b <= a else a


def size_max(a, b):
    try:
        return a if a >= b else b
    except InconclusiveDimensionError:
        return b if b >= a else a


SPECULATED = {"stablehlo.maximum": "GE", "stablehlo.minimum": "LE"}


def speculated_extremum(cx, a: tuple, b: tuple) -> list | None:
    """max/min of a symbolic size and a constant the algebra cannot order for every size (JAX's
    `x[-3:]`: start max(b - 3, 0), size min(3, b)): the order of sizes at least as large as the
    constant (max: the symbolic operand, min: the constant), with a guard that refuses the other
    sizes by name at call time — one plan instead of none. None where both or neither operand is
    symbolic (refused, as before)."""
    direction = SPECULATED[cx.name]
    n = max(len(a), len(b))
    if any(len(v) not in (1, n) for v in (a, b)):
        return None
    values, guards = [], []
    for i in range(n):
        x, y = a[0 if len(a) == 1 else i], b[0 if len(b) == 1 else i]
        try:
            values.append(size_max(x, y) if direction == "GE" else size_min(x, y))
            continue
        except InconclusiveDimensionError:
            pass
        symbolic = [isinstance(v, DimExpr) and not isinstance(v, SizePredicate) for v in (x, y)]
        if symbolic[0] == symbolic[1]:
            return None
        large, constant = (x, y) if symbolic[0] else (y, x)
        chosen, other = (large, constant) if direction == "GE" else (constant, large)
        values.append(chosen)
        guards.append(ShapeGuard(
            SizePredicate((SizeComparison(direction, chosen, other),)),
            f"{cx.location()}: {cx.name}: this program's plan takes {chosen} {'>=' if direction == 'GE' else '<='} "
            f"{other} (a size computed with {cx.name.split('.')[-1]} of dimension sizes), which fails here: "
            f"{chosen} = {{0}}, {other} = {{1}}", (chosen, other)))
    cx.importer.module.guards.extend(guards)
    return values


def compare_sizes(cx, a, b):
    """A comparison of sizes is decided here only when their difference is a constant; otherwise it
    stays a predicate (a shape assertion's must: deciding `b >= 1` from the assumption that
    variables are ≥ 1 would drop the guard that checks it)."""
    direction = str(cx.op.attributes["comparison_direction"]).split()[-1].rstrip(">")

    def compare(x, y):
        if _is_truth(x) or _is_truth(y):
            return SizeComparison(direction, int(_truth(x)), int(_truth(y))).holds({})
        if isinstance(x - y, int):
            return SizeComparison(direction, x - y, 0).holds({})
        return SizePredicate((SizeComparison(direction, x, y),))
    return elementwise(compare)(cx, a, b)


def _is_truth(value) -> bool:
    return isinstance(value, (bool, SizePredicate))


def _truth(value) -> bool:
    """A predicate's value where the guards make it known (variables ≥ 1), for choosing values."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, SizePredicate):
        raise InconclusiveDimensionError(f"{value} is not a predicate")
    return all(_holds_for_all(c) for c in value.comparisons)


def _holds_for_all(comparison: SizeComparison) -> bool:
    difference = comparison.lhs - comparison.rhs
    if isinstance(difference, int):
        return comparison.holds({})
    if comparison.direction in ("EQ", "NE"):
        if difference >= 1 or difference <= -1:  # provably different (raises where undecided)
            return comparison.direction == "NE"
        raise InconclusiveDimensionError(str(comparison))
    return {"LT": operator.lt, "LE": operator.le, "GT": operator.gt, "GE": operator.ge}[comparison.direction](
        comparison.lhs, comparison.rhs)


def _conjunction(x, y):
    if isinstance(x, bool) and isinstance(y, bool):
        return x and y
    if isinstance(x, bool) or isinstance(y, bool):
        flag, other = (x, y) if isinstance(x, bool) else (y, x)
        return other if flag else False
    if isinstance(x, SizePredicate) and isinstance(y, SizePredicate):
        return x & y
    raise InconclusiveDimensionError("'and' of sizes")


def and_sizes(cx, a, b):
    return elementwise(_conjunction)(cx, a, b)


def select_size(cx, pred, a, b):
    n = max(len(pred), len(a), len(b))
    pick = [_truth(pred[0 if len(pred) == 1 else i]) for i in range(n)]
    return [(a[0 if len(a) == 1 else i] if p else b[0 if len(b) == 1 else i]) for i, p in enumerate(pick)]


def size_sign(x):
    if isinstance(x, int):
        return (x > 0) - (x < 0)
    if x >= 1:
        return 1
    if x <= -1:
        return -1
    raise InconclusiveDimensionError(f"sign of {x}")


def truncating_divide(x, y):
    """StableHLO's integer divide, which rounds toward zero: `floordiv` of the magnitudes, signed."""
    if isinstance(x, int) and isinstance(y, int):
        return abs(x) // abs(y) * size_sign(x) * size_sign(y)
    if size_sign(y) < 0:
        return -truncating_divide(x, -y)
    return floordiv(x, y) if x >= 0 else -floordiv(-x, y)


def truncating_remainder(x, y):
    """StableHLO's integer remainder, with the dividend's sign: `mod` of the magnitudes, signed."""
    if isinstance(x, int) and isinstance(y, int):
        return abs(x) % abs(y) * size_sign(x)
    y = -y if size_sign(y) < 0 else y
    return mod(x, y) if x >= 0 else -mod(-x, y)
