"""HLO literal text: parsing a constant's literal against its shape, and printing it back exactly.

Forms: scalars (`1`, `-2.5e-3`, `true`, `inf`, `-nan`, `nan(0x7f)`), nested braces per dimension
(`{{1,2},{3,4}}`), complex elements `(re, im)`, tuples `(lit, lit)`, and the elided array `{...}`
(filled with zeros, as XLA fills it with deterministic data). Floats print in the shortest form that
reads back to the same value of their type, so print→parse is bit exact (NaN payloads excepted).
"""

from __future__ import annotations

import math
import re

import numpy as np

from hlocc.hlo.types import Shape

_TOKEN_RE = re.compile(r"([-+]?nan\(0x[0-9a-fA-F]+\)|\{|\}|\(|\)|,|\.\.\.|[^\s{}(),]+)")
_SKIPPED_RE = re.compile(r"(?:\s+|/\*.*?\*/)*", re.S)
"""Blanks, and the `/*i0=1*/` index comments XLA's printer writes into literals of rank 3 and more."""
_SPECIAL = {"inf": math.inf, "+inf": math.inf, "-inf": -math.inf, "nan": math.nan, "+nan": math.nan,
            "-nan": -math.nan}


class LiteralSyntaxError(ValueError):
    """Raised with an offset into the literal text; the parser turns it into an HloParseError."""

    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def tokenize(text: str) -> list[tuple[str, int]]:
    tokens = []
    pos = 0
    while True:
        pos = _SKIPPED_RE.match(text, pos).end()
        if pos >= len(text):
            return tokens
        m = _TOKEN_RE.match(text, pos)
        if not m or m.group(1).startswith("/*"):
            raise LiteralSyntaxError("bad literal token" if not m else "unterminated comment in literal", pos)
        tokens.append((m.group(1), m.start(1)))
        pos = m.end()


def _scalar(token: str, offset: int, shape: Shape):
    et = shape.element_type
    low = token.lower()
    if et.is_pred:
        if low in ("true", "1"):
            return True
        if low in ("false", "0"):
            return False
        raise LiteralSyntaxError(f"expected true or false for a pred literal, found '{token}'", offset)
    if low.startswith(("nan(", "-nan(")):
        low = low.split("(")[0]
    if low in _SPECIAL:
        if not (et.is_float or et.is_complex):
            raise LiteralSyntaxError(f"'{token}' is not a valid {et.name} value", offset)
        return _SPECIAL[low]
    try:
        if et.is_integer:
            return _integer(token, offset, et)
        return float(token)
    except LiteralSyntaxError:
        raise
    except ValueError:
        raise LiteralSyntaxError(f"bad {et.name} literal value '{token}'", offset) from None


def _integer(token: str, offset: int, et) -> int:
    try:
        value = int(token)
    except ValueError:
        as_float = float(token)
        if not math.isfinite(as_float):  # 31e999: an integral spelling past any float
            raise LiteralSyntaxError(f"value {token} is out of range for {et.name}", offset) from None
        if as_float != int(as_float):
            raise LiteralSyntaxError(f"'{token}' is not an integer ({et.name} literal)", offset) from None
        value = int(as_float)
    lo, hi = (-(1 << (et.bits - 1)), (1 << (et.bits - 1)) - 1) if et.is_signed else (0, (1 << et.bits) - 1)
    if not lo <= value <= hi:
        raise LiteralSyntaxError(f"value {value} is out of range for {et.name}", offset)
    return value


class _Reader:
    def __init__(self, text: str):
        self.tokens = tokenize(text)
        self.i = 0
        self.text = text

    def peek(self) -> str | None:
        return self.tokens[self.i][0] if self.i < len(self.tokens) else None

    def offset(self) -> int:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else len(self.text)

    def take(self, expected: str | None = None) -> str:
        if self.i >= len(self.tokens):
            raise LiteralSyntaxError(f"expected {expected or 'a value'}, found end of literal", len(self.text))
        tok, off = self.tokens[self.i]
        if expected is not None and tok != expected:
            raise LiteralSyntaxError(f"expected '{expected}' in literal, found '{tok}'", off)
        self.i += 1
        return tok


def _element(reader: _Reader, shape: Shape):
    if shape.element_type.is_complex:
        reader.take("(")
        re_tok, re_off = reader.take(), reader.offset()
        reader.take(",")
        im_tok = reader.take()
        reader.take(")")
        return complex(_scalar(re_tok, re_off, shape), _scalar(im_tok, re_off, shape))
    off = reader.offset()
    return _scalar(reader.take(), off, shape)


def _nested(reader: _Reader, shape: Shape, dim: int, out: list) -> None:
    size = shape.dims[dim]
    reader.take("{")
    count = 0
    while reader.peek() != "}":
        if count:
            reader.take(",")
            if reader.peek() == "}":  # trailing comma
                break
        if dim + 1 == shape.rank:
            out.append(_element(reader, shape))
        else:
            _nested(reader, shape, dim + 1, out)
        count += 1
    off = reader.offset()
    reader.take("}")
    if count != size and shape.dynamic[dim]:
        # XLA reads such a literal as a constant whose dynamic size is `count`; hlocc's constants
        # are arrays at the bound, so a shorter literal would carry made-up elements.
        raise LiteralSyntaxError(f"literal has {count} elements in dynamic dimension {dim} of {shape}: "
                                 f"constants smaller than their bound ({size}) are not supported", off)
    if count != size:
        raise LiteralSyntaxError(f"literal has {count} elements in dimension {dim}, but the shape "
                                 f"{shape} needs {size}", off)


def _to_array(values: list, shape: Shape) -> np.ndarray:
    dtype = shape.dtype
    et = shape.element_type
    if et.is_float and dtype != np.float64:
        with np.errstate(over="ignore", invalid="ignore"):
            return np.array(values, dtype=np.float64).astype(dtype).reshape(shape.dims)
    if et.is_integer and et.bits < 8:
        return np.array(values, dtype=np.int64).astype(dtype).reshape(shape.dims)
    return np.array(values, dtype=dtype).reshape(shape.dims)


def parse_literal(text: str, shape: Shape):
    """Parse the full literal `text` (without the surrounding `constant(...)`) against `shape`.
    Returns a numpy array, a tuple of literals for tuple shapes; raises LiteralSyntaxError."""
    if not isinstance(shape, Shape):
        raise LiteralSyntaxError("a literal needs a shape to be read against", 0)
    reader = _Reader(text)
    value = _literal(reader, shape)
    if reader.peek() is not None:
        raise LiteralSyntaxError(f"unexpected '{reader.peek()}' after literal", reader.offset())
    return value


def _literal(reader: _Reader, shape: Shape):
    if shape.is_tuple:
        reader.take("(")
        elems = []
        for i, sub in enumerate(shape.tuple_shapes):
            if i:
                reader.take(",")
            elems.append(_literal(reader, sub))
        reader.take(")")
        return tuple(elems)
    if shape.is_token:
        return None
    if shape.rank == 0:
        return _to_array([_element(reader, shape)], shape)
    if any(not isinstance(d, int) or d < 0 for d in shape.dims):  # `?` unbounded, or a symbolic size
        raise LiteralSyntaxError(f"a constant of {shape} has no size to hold: its dimensions must be static or "
                                 "bounded (<=N)", reader.offset())
    if reader.peek() == "{" and reader.i + 1 < len(reader.tokens) and reader.tokens[reader.i + 1][0] == "...":
        reader.take("{")
        reader.take("...")
        reader.take("}")
        return np.zeros(shape.dims, dtype=shape.dtype)
    values: list = []
    _nested(reader, shape, 0, values)
    return _to_array(values, shape)


# -- printing --------------------------------------------------------------------------------
def format_scalar(value, shape: Shape) -> str:
    et = shape.element_type
    if et.is_pred:
        return "true" if bool(value) else "false"
    if et.is_integer:
        return str(int(value))
    if et.is_complex:
        return f"({_format_float(float(value.real), 64)}, {_format_float(float(value.imag), 64)})"
    return _format_float(float(value), et.bits)


def _format_float(x: float, bits: int) -> str:
    if math.isnan(x):
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if bits == 64:
        text = repr(x)
    else:
        text = str(np.float32(x))  # shortest f32 text; narrower types are exact in f32
    return text[:-2] if text.endswith(".0") else text


def format_literal(value, shape: Shape) -> str:
    if shape.is_tuple:
        return "(" + ", ".join(format_literal(v, s) for v, s in zip(value, shape.tuple_shapes)) + ")"
    arr = np.asarray(value)
    if shape.rank == 0:
        return format_scalar(arr.reshape(()).item() if arr.dtype.kind not in "fV" else arr.reshape(()), shape)
    flat = [format_scalar(v, shape) for v in _iter_values(arr)]

    def nest(dim: int, start: int) -> tuple[str, int]:
        if dim == shape.rank - 1:
            n = shape.dims[dim]
            return "{" + ", ".join(flat[start:start + n]) + "}", start + n
        parts = []
        for _ in range(shape.dims[dim]):
            text, start = nest(dim + 1, start)
            parts.append(text)
        return "{" + ", ".join(parts) + "}", start

    return nest(0, 0)[0]


def _iter_values(arr: np.ndarray):
    if arr.dtype.kind in "biuc" or arr.dtype == np.float64:
        return arr.reshape(-1).tolist()
    return arr.reshape(-1).astype(np.float64).tolist()
