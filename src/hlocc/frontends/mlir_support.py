"""jaxlib's MLIR Python bindings, as the StableHLO frontend uses them: the lazily imported context
with JAX's dialects registered, parsing of text and `jax.export.Exported` objects, MLIR types →
hlocc `Shape`s, attribute readers and dense constants → numpy arrays, and `file:line:col` of
locations.

This is the only module that imports jax/jaxlib; it does so on first use, so that the HLO path of
hlocc never needs them. A missing jax is an UnsupportedError naming the `[jax]` extra.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from hlocc.errors import HloError, HloParseError, UnsupportedError
from hlocc.hlo.types import PRIMITIVE_TYPES, UNBOUNDED, PrimitiveType, Shape

JAX_EXTRA_HINT = "the StableHLO frontend needs jax and jaxlib: pip install 'hlocc[jax]'"

# MLIR element type text → XLA primitive type name (signless integers are signed, as in XLA).
_ELEMENT_TYPES = {
    "i1": "pred", "i2": "s2", "i4": "s4", "i8": "s8", "i16": "s16", "i32": "s32", "i64": "s64",
    "ui1": "u1", "ui2": "u2", "ui4": "u4", "ui8": "u8", "ui16": "u16", "ui32": "u32", "ui64": "u64",
    "si8": "s8", "si16": "s16", "si32": "s32", "si64": "s64",
    "f16": "f16", "bf16": "bf16", "f32": "f32", "f64": "f64",
    "f8E5M2": "f8e5m2", "f8E4M3": "f8e4m3", "f8E4M3FN": "f8e4m3fn", "f8E4M3B11FNUZ": "f8e4m3b11fnuz",
    "f8E3M4": "f8e3m4", "f8E5M2FNUZ": "f8e5m2fnuz", "f8E4M3FNUZ": "f8e4m3fnuz", "f4E2M1FN": "f4e2m1fn",
    "f8E8M0FNU": "f8e8m0fnu", "complex<f32>": "c64", "complex<f64>": "c128",
}
# Element types whose dense attributes numpy reads directly (the others are read from their text:
# reading a complex attribute through the bindings aborts the process).
_BUFFER_READABLE = {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"}


def mlir_modules():
    """(ir, dialects.stablehlo, dialects.chlo, make_ir_context) from jax; UnsupportedError without jax."""
    try:
        from jax._src.interpreters.mlir import make_ir_context
        from jaxlib.mlir import ir
        from jaxlib.mlir.dialects import chlo, stablehlo
    except ImportError as e:
        raise UnsupportedError(f"{JAX_EXTRA_HINT} ({e})") from None
    return ir, stablehlo, chlo, make_ir_context


def parse_module(source: Any, filename: str):
    """An MLIR module (and its context) from StableHLO text (pretty or generic form), MLIR bytecode,
    a portable artifact (`Exported.mlir_module_serialized`), an `Exported` object (its
    `mlir_module()`) or an already parsed `ir.Module`."""
    ir, _, _, make_ir_context = mlir_modules()
    if isinstance(source, ir.Module):
        return source
    if hasattr(source, "mlir_module") and callable(source.mlir_module):
        source = source.mlir_module()
    if not isinstance(source, (str, bytes)):
        raise HloError(f"cannot import a {type(source).__name__} as StableHLO (give text or a jax.export.Exported)")
    if isinstance(source, str):
        source = source.removeprefix("\ufeff")
    context = make_ir_context()
    try:
        with context:
            if isinstance(source, bytes) and source[4:15] == b"\rStableHLO_":  # a portable (VHLO) artifact
                from jax.extend.mlir import deserialize_portable_artifact

                return deserialize_portable_artifact(source, context)
            return ir.Module.parse(source)
    except ir.MLIRError as e:
        raise _parse_error(e, source, filename) from None


def _parse_error(error, source, filename: str) -> HloError:
    """The first diagnostic of a failed MLIR parse as an HloParseError with line:column."""
    text = source.decode(errors="replace") if isinstance(source, bytes) else source
    for diag in getattr(error, "error_diagnostics", []):
        m = _LOC_RE.search(str(diag.location))
        if m:
            line, col = int(m.group(2)), int(m.group(3))
            lines = text.split("\n")
            src = lines[line - 1] if 0 < line <= len(lines) else ""
            return HloParseError(diag.message, line=line, column=col, source_line=src, filename=filename)
    return HloError(f"{filename}: cannot parse StableHLO: {error}")


_LOC_RE = re.compile(r'"([^"]*)":(\d+):(\d+)')


def location_text(location, filename: str) -> str:
    """`file:line:col` of an MLIR location: the first file position in it (a JAX `debug_info`
    location names the Python source; a plain text position names `filename`), or `filename`."""
    m = _LOC_RE.search(str(location))
    if not m:
        return filename
    name = filename if m.group(1) in ("-", "") else m.group(1)
    return f"{name}:{m.group(2)}:{m.group(3)}"


# -- types ----------------------------------------------------------------------------------------
def element_type(mlir_type) -> PrimitiveType:
    text = str(mlir_type)
    try:
        return PRIMITIVE_TYPES[_ELEMENT_TYPES[text]]
    except KeyError:
        raise UnsupportedError(f"StableHLO element type '{text}' has no XLA type") from None


def dynamic_dimension(type_text: str, index: int, bound: int | None) -> int:
    """The one place a `?` dimension of a StableHLO type is met: an unbounded one is `?` (UNBOUNDED),
    which the importer replaces by a symbolic size (frontends/dynamic_shapes.py). A bounded one
    (`tensor<?x4xf32, #stablehlo.bounds<8, ?>>`, XLA's `<=8`) is not imported yet."""
    if bound is not None:
        raise UnsupportedError(f"dynamic dimension {index} of {type_text}: bounded dynamic dimensions are not "
                               "imported yet")
    return UNBOUNDED


def unresolved(shape: Shape) -> bool:
    """Whether a shape still has a `?` of a StableHLO type that no symbolic size replaced."""
    return any(d == UNBOUNDED for leaf in shape.leaves() if not leaf.is_token for d in leaf.dims)


def to_shape(mlir_type) -> Shape:
    """The hlocc Shape of an MLIR type: ranked tensors, tuples and tokens."""
    ir = mlir_modules()[0]
    text = str(mlir_type)
    if isinstance(mlir_type, ir.TupleType):
        tup = ir.TupleType(mlir_type)
        return Shape.tuple([to_shape(tup.get_type(i)) for i in range(tup.num_types)])
    if text == "!stablehlo.token":
        return Shape.token()
    if not isinstance(mlir_type, ir.RankedTensorType):
        raise UnsupportedError(f"StableHLO type '{text}' is not supported (ranked tensors, tuples and tokens are)")
    tensor = ir.RankedTensorType(mlir_type)
    bounds = _bounds(tensor)
    dims = [dynamic_dimension(text, i, bounds[i]) if tensor.is_dynamic_dim(i) else tensor.get_dim_size(i)
            for i in range(tensor.rank)]
    return Shape.array(element_type(tensor.element_type), dims, dynamic=[d == UNBOUNDED for d in dims])


def _bounds(tensor) -> list[int | None]:
    """Per dimension the bound of a `#stablehlo.bounds<...>` encoding (None where unbounded or absent)."""
    m = re.search(r"bounds<([^>]*)>", str(tensor.encoding)) if tensor.encoding is not None else None
    if m is None:
        return [None] * tensor.rank
    return [None if word.strip() == "?" else int(word) for word in m.group(1).split(",")]


def result_shape(op) -> Shape:
    """The shape of an op's result, or the tuple of its results' shapes."""
    results = list(op.results)
    if len(results) == 1:
        return to_shape(results[0].type)
    return Shape.tuple([to_shape(r.type) for r in results])


# -- attributes -----------------------------------------------------------------------------------
def ints(op, name: str, default=()) -> tuple[int, ...]:
    """An integer or boolean array attribute (`array<i64: ...>`, `array<i1: ...>` or a dense integer
    tensor such as a padding) as a flat tuple of ints; `default` when absent."""
    if name not in op.attributes:
        return tuple(default)
    ir = mlir_modules()[0]
    attr = op.attributes[name]
    for kind in (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr, ir.DenseBoolArrayAttr):
        if isinstance(attr, kind):
            return tuple(int(v) for v in kind(attr))
    return tuple(int(v) for v in np.asarray(attr).reshape(-1))


def int_attr(op, name: str, default: int | None = None) -> int | None:
    if name not in op.attributes:
        return default
    ir = mlir_modules()[0]
    return ir.IntegerAttr(op.attributes[name]).value


def bool_attr(op, name: str) -> bool:
    if name not in op.attributes:
        return False
    ir = mlir_modules()[0]
    return ir.BoolAttr(op.attributes[name]).value


def string_attr(op, name: str) -> str | None:
    if name not in op.attributes:
        return None
    ir = mlir_modules()[0]
    return ir.StringAttr(op.attributes[name]).value


def padding_pairs(op, name: str, rank: int) -> list[tuple[int, int]]:
    """A `dense<[[lo, hi], ...]> : tensor<Nx2xi64>` padding attribute (all zero when absent)."""
    values = ints(op, name, (0,) * (2 * rank))
    return [(values[2 * i], values[2 * i + 1]) for i in range(rank)]


# -- constants ------------------------------------------------------------------------------------
def dense_constant(op, shape: Shape) -> tuple[np.ndarray, bool]:
    """The value of a `stablehlo.constant` as a numpy array of the shape's storage dtype (bf16 and
    float8 through ml_dtypes; a splat expanded), and whether it is a splat of several elements."""
    dtype = shape.element_type.dtype
    several = shape.num_elements > 1
    if shape.element_type.name in _BUFFER_READABLE:
        attr = op.attributes["value"]
        try:
            array = np.asarray(attr)
        except (TypeError, ValueError, RuntimeError):  # a type the buffer protocol does not take
            array = None
        if array is not None and (array.dtype == np.dtype(dtype) or shape.element_type.is_pred):
            splat = several and mlir_modules()[0].DenseElementsAttr(attr).is_splat
            return np.broadcast_to(array.astype(dtype), shape.dims).copy(), splat
    body = _dense_body(op.operation.get_asm()).strip()
    one_element_blob = 4 + 2 * shape.element_type.byte_size  # `"0x` + hex digits + `"`
    splat = several and not body.startswith("[") and not (body.startswith('"0x') and len(body) > one_element_blob)
    return _dense_from_text(body, shape), splat


def _dense_body(asm: str) -> str:
    """The text between `dense<` and its matching `>`."""
    start = asm.index("dense<") + len("dense<")
    depth, i = 1, start
    while depth:
        c = asm[i]
        if c == '"':
            i = asm.index('"', i + 1)
        depth += (c == "<") - (c == ">")
        i += 1
    return asm[start:i - 1]


_ELEMENT_RE = re.compile(r"\(\s*([^,()]+)\s*,\s*([^,()]+)\s*\)|true|false|[-+0-9.a-zA-Z]+")


def _dense_from_text(body: str, shape: Shape) -> np.ndarray:
    et = shape.element_type
    dtype = et.dtype
    count = shape.num_elements
    body = body.strip()
    if body.startswith('"0x'):  # raw little-endian bytes of all elements (or of one, a splat)
        raw = bytes.fromhex(body[3:-1])
        storage = np.dtype(np.bool_) if et.is_pred else dtype
        flat = np.frombuffer(raw, dtype=storage)
        values = flat if flat.size == count else np.broadcast_to(flat[:1], (count,))
        return values.astype(dtype).reshape(shape.dims)
    values = [_element(m, et) for m in _ELEMENT_RE.finditer(body)]
    if len(values) == 1 and count != 1:
        values = values * count
    if len(values) != count:
        raise HloError(f"constant of {shape} holds {len(values)} elements")
    return np.array([np.asarray(v, dtype=dtype) for v in values], dtype=dtype).reshape(shape.dims)


def _element(m: re.Match, et: PrimitiveType):
    if m.group(1) is not None:  # complex (re, im)
        part = PRIMITIVE_TYPES["f32" if et.name == "c64" else "f64"]
        return complex(_scalar(m.group(1), part), _scalar(m.group(2), part))
    return _scalar(m.group(0), et)


def _scalar(word: str, et: PrimitiveType):
    word = word.strip()
    if word in ("true", "false"):
        return word == "true"
    if word.startswith("0x") and et.is_float:  # a float written as its bit pattern
        bits = np.array([int(word, 16)], dtype=np.dtype(f"u{max(1, et.bits // 8)}"))
        return bits.view(et.dtype)[0]
    if et.is_float or et.is_complex:
        return float(word)
    return int(word, 0)


def free_values(*regions) -> list:
    """The values that must be passed into the regions: those they use but that are defined in an
    enclosing scope, constants excepted (they are sunk into the region), in first-use order."""
    seen: dict = {}
    for region in regions:
        for value in used_from_above(region):
            if not is_constant(value):
                seen[value] = None
    return list(seen)


def used_from_above(region) -> list:
    """Values `region` (or a region nested in it) uses but does not define, in first-use order."""
    defined: set = set()
    used: dict = {}

    def walk(region):
        for block in region.blocks:
            defined.update(block.arguments)
            for op in block.operations:
                used.update((v, None) for v in op.operands)
                for inner in op.regions:
                    walk(inner)
                defined.update(op.results)

    walk(region)
    return [v for v in used if v not in defined]


def is_constant(value) -> bool:
    owner = value.owner
    return not isinstance(owner, mlir_modules()[0].Block) and owner.name == "stablehlo.constant"
