"""PyTorch's types in hlocc's terms: dtypes → HLO element types, sizes (ints, SymInts, sympy
expressions) → hlocc sizes (`int` or `DimExpr`, hlo/symbolic.py), FakeTensors → Shapes, and the
shape environment's value ranges → guards (hlo/guards.py).

PyTorch names its symbolic sizes `s0`, `s1`, ... (dynamo) or after `torch.export.Dim`s; hlocc keeps
those names, so a guard or an argument error says `s0` as PyTorch's own messages do.
"""

from __future__ import annotations

from typing import Any

from hlocc.errors import UnsupportedError
from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.symbolic import Dim, floordiv, mod, symbol
from hlocc.hlo.types import Shape

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


def to_dim(size: Any) -> Dim:
    """An int, a SymInt or a sympy expression as an hlocc size."""
    node = getattr(size, "node", None)
    if node is not None:  # a SymInt: its expression, or its hint when the expression is a constant
        size = node.expr
    if isinstance(size, int):
        return size
    return _sympy_to_dim(size)


def _sympy_to_dim(expr: Any) -> Dim:
    import sympy

    if isinstance(expr, sympy.Integer):
        return int(expr)
    if isinstance(expr, sympy.Symbol):
        return symbol(expr.name)
    args = [_sympy_to_dim(a) for a in expr.args]
    if isinstance(expr, sympy.Add):
        return _fold(args, lambda a, b: a + b)
    if isinstance(expr, sympy.Mul):
        return _fold(args, lambda a, b: a * b)
    if isinstance(expr, sympy.Pow) and isinstance(args[1], int) and args[1] >= 0:
        return _fold([args[0]] * args[1], lambda a, b: a * b) if args[1] else 1
    name = type(expr).__name__
    if name in ("FloorDiv", "CleanDiv"):
        return floordiv(args[0], args[1])
    if name in ("Mod", "PythonMod"):
        return mod(args[0], args[1])
    raise UnsupportedError(f"symbolic size '{expr}' ({name}) has no hlocc form")


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


def tensor_shape(value: Any) -> Shape:
    """The Shape of a (fake) tensor: its element type and sizes, symbolic ones as DimExprs."""
    return Shape.array(element_type(value.dtype), [to_dim(s) for s in value.shape])


def range_guards(shape_env: Any, names: set[str], where: str) -> list[ShapeGuard]:
    """Guards for the value ranges PyTorch's shape environment (or an ExportedProgram's
    range_constraints, a {symbol: ValueRanges} dict) keeps for the symbols `names`: a call whose
    sizes leave a range fails with the message naming the symbol and the range."""
    ranges = getattr(shape_env, "var_to_range", shape_env) or {}
    guards = []
    for sym, vr in sorted(ranges.items(), key=lambda kv: str(kv[0])):
        name = str(sym)
        if name not in names:
            continue
        comparisons = []
        lo, hi = _bound(vr.lower), _bound(vr.upper)
        if lo is not None and lo > 1:
            comparisons.append(SizeComparison("GE", symbol(name), lo))
        if hi is not None:
            comparisons.append(SizeComparison("LE", symbol(name), hi))
        if comparisons:
            guards.append(ShapeGuard(SizePredicate(tuple(comparisons)),
                                     f"{where}: size {name} = {{0}} is outside its range "
                                     f"[{lo if lo is not None else 0}, {hi if hi is not None else 'inf'}]",
                                     (symbol(name),)))
    return guards
