"""XLA primitive types and shapes.

A `PrimitiveType` names an XLA element type (`f32`, `bf16`, `s4`, `pred`, ...) and knows the numpy
dtype that holds its values (through ml_dtypes where numpy has none). A `Shape` is either an array
shape (element type, dimensions, optional layout) or a tuple of shapes; `token[]` is an array shape
of the token type with no dimensions.

Dimensions may be dynamic: `<=N` is a bounded dynamic dimension (size N is its bound), `?` an
unbounded one (size `UNBOUNDED`). They are carried through the IR; compilation of them comes later.

A dimension may also be symbolic: its size is a `DimExpr` over named dimension variables
(hlo/symbolic.py; the dimension counts as dynamic). hlocc's text writes it `?name` for one
variable and `?(expr)` otherwise, without spaces: `f32[?b,128]`, `f32[?(b+c),4]`, `s32[?(2*s)]`,
`f32[?(floordiv(s,2))]`. XLA never writes a name or `(` after `?`, so XLA's `?`/`<=N` text parses
and prints exactly as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import ml_dtypes
import numpy as np

from hlocc.errors import HloError
from hlocc.hlo.symbolic import DimExpr, size_text, variables_of

UNBOUNDED = -1
"""The size recorded for a `?` dimension (XLA's kUnboundedSize)."""


class TypeKind(Enum):
    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"
    TOKEN = "token"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class PrimitiveType:
    """One XLA element type: its text name, kind, width in bits and numpy storage dtype."""

    name: str
    kind: TypeKind
    bits: int
    dtype: np.dtype | None = field(compare=False, repr=False)

    @property
    def is_float(self) -> bool:
        return self.kind is TypeKind.FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind is TypeKind.COMPLEX

    @property
    def is_integer(self) -> bool:
        return self.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED)

    @property
    def is_signed(self) -> bool:
        return self.kind is TypeKind.SIGNED

    @property
    def is_unsigned(self) -> bool:
        return self.kind is TypeKind.UNSIGNED

    @property
    def is_pred(self) -> bool:
        return self.kind is TypeKind.PRED

    @property
    def is_array_type(self) -> bool:
        return self.kind not in (TypeKind.TOKEN, TypeKind.OPAQUE)

    @property
    def byte_size(self) -> int:
        """Bytes one element occupies in an unpacked buffer (sub-byte types take a whole byte)."""
        return max(1, self.bits // 8)

    def __str__(self) -> str:
        return self.name


def _t(name: str, kind: TypeKind, bits: int, dtype) -> PrimitiveType:
    return PrimitiveType(name, kind, bits, None if dtype is None else np.dtype(dtype))


_ALL = [
    _t("pred", TypeKind.PRED, 8, np.bool_),
    _t("s1", TypeKind.SIGNED, 1, ml_dtypes.int1),
    _t("s2", TypeKind.SIGNED, 2, ml_dtypes.int2),
    _t("s4", TypeKind.SIGNED, 4, ml_dtypes.int4),
    _t("s8", TypeKind.SIGNED, 8, np.int8),
    _t("s16", TypeKind.SIGNED, 16, np.int16),
    _t("s32", TypeKind.SIGNED, 32, np.int32),
    _t("s64", TypeKind.SIGNED, 64, np.int64),
    _t("u1", TypeKind.UNSIGNED, 1, ml_dtypes.uint1),
    _t("u2", TypeKind.UNSIGNED, 2, ml_dtypes.uint2),
    _t("u4", TypeKind.UNSIGNED, 4, ml_dtypes.uint4),
    _t("u8", TypeKind.UNSIGNED, 8, np.uint8),
    _t("u16", TypeKind.UNSIGNED, 16, np.uint16),
    _t("u32", TypeKind.UNSIGNED, 32, np.uint32),
    _t("u64", TypeKind.UNSIGNED, 64, np.uint64),
    _t("f16", TypeKind.FLOAT, 16, np.float16),
    _t("bf16", TypeKind.FLOAT, 16, ml_dtypes.bfloat16),
    _t("f32", TypeKind.FLOAT, 32, np.float32),
    _t("f64", TypeKind.FLOAT, 64, np.float64),
    _t("f8e5m2", TypeKind.FLOAT, 8, ml_dtypes.float8_e5m2),
    _t("f8e4m3", TypeKind.FLOAT, 8, ml_dtypes.float8_e4m3),
    _t("f8e4m3fn", TypeKind.FLOAT, 8, ml_dtypes.float8_e4m3fn),
    _t("f8e4m3b11fnuz", TypeKind.FLOAT, 8, ml_dtypes.float8_e4m3b11fnuz),
    _t("f8e3m4", TypeKind.FLOAT, 8, ml_dtypes.float8_e3m4),
    _t("f8e5m2fnuz", TypeKind.FLOAT, 8, ml_dtypes.float8_e5m2fnuz),
    _t("f8e4m3fnuz", TypeKind.FLOAT, 8, ml_dtypes.float8_e4m3fnuz),
    _t("f4e2m1fn", TypeKind.FLOAT, 4, ml_dtypes.float4_e2m1fn),
    _t("f8e8m0fnu", TypeKind.FLOAT, 8, ml_dtypes.float8_e8m0fnu),
    _t("c64", TypeKind.COMPLEX, 64, np.complex64),
    _t("c128", TypeKind.COMPLEX, 128, np.complex128),
    _t("token", TypeKind.TOKEN, 0, None),
    _t("opaque", TypeKind.OPAQUE, 0, None),
]

PRIMITIVE_TYPES: dict[str, PrimitiveType] = {t.name: t for t in _ALL}
_BY_DTYPE: dict[np.dtype, PrimitiveType] = {t.dtype: t for t in _ALL if t.dtype is not None}

PRED = PRIMITIVE_TYPES["pred"]
S32 = PRIMITIVE_TYPES["s32"]
S64 = PRIMITIVE_TYPES["s64"]
U32 = PRIMITIVE_TYPES["u32"]
U64 = PRIMITIVE_TYPES["u64"]
F32 = PRIMITIVE_TYPES["f32"]
F64 = PRIMITIVE_TYPES["f64"]
BF16 = PRIMITIVE_TYPES["bf16"]
F16 = PRIMITIVE_TYPES["f16"]
TOKEN = PRIMITIVE_TYPES["token"]


def primitive_type(name: str) -> PrimitiveType:
    try:
        return PRIMITIVE_TYPES[name]
    except KeyError:
        raise HloError(f"unknown primitive type '{name}'") from None


def from_dtype(dtype) -> PrimitiveType:
    """The XLA type whose storage dtype is `dtype` (e.g. numpy float32 → f32)."""
    try:
        return _BY_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise HloError(f"no XLA type for numpy dtype {np.dtype(dtype)}") from None


@dataclass(frozen=True)
class Layout:
    """A dense layout: `minor_to_major` dimension order plus the raw text of tiling and other
    layout annotations after ':' (accepted and printed back, not interpreted yet)."""

    minor_to_major: tuple[int, ...]
    extra: str = ""

    def __str__(self) -> str:
        body = ",".join(map(str, self.minor_to_major))
        return "{" + body + (":" + self.extra if self.extra else "") + "}"


@dataclass(frozen=True)
class Shape:
    """An array shape (`element_type` with `dims`) or a tuple shape (`tuple_shapes` is not None).

    `dynamic[i]` marks a dynamic dimension: its `dims[i]` is the bound (`<=N`) or UNBOUNDED (`?`).
    Equality ignores the layout; use `same_layout` to compare layouts too.
    """

    element_type: PrimitiveType | None
    dims: tuple[int, ...] = ()
    dynamic: tuple[bool, ...] = ()
    layout: Layout | None = field(default=None, compare=False)
    tuple_shapes: tuple[Shape, ...] | None = None
    # `b(f32[2,4])`: a buffer of this array shape (XLA's buffer type, used by custom calls).
    is_buffer: bool = False

    def __post_init__(self):
        if self.tuple_shapes is None and len(self.dynamic) != len(self.dims):
            object.__setattr__(self, "dynamic", (False,) * len(self.dims))
        if self.tuple_shapes is None and any(isinstance(d, DimExpr) for d in self.dims):
            dynamic = tuple(dyn or isinstance(d, DimExpr) for d, dyn in zip(self.dims, self.dynamic))
            object.__setattr__(self, "dynamic", dynamic)

    # -- constructors --------------------------------------------------------------------------
    @staticmethod
    def array(element_type: PrimitiveType | str, dims=(), layout: Layout | None = None,
              dynamic=None) -> Shape:
        et = primitive_type(element_type) if isinstance(element_type, str) else element_type
        dims = tuple(d if isinstance(d, DimExpr) else int(d) for d in dims)
        dyn = tuple(dynamic) if dynamic is not None else (False,) * len(dims)
        return Shape(et, dims, dyn, layout)

    @staticmethod
    def tuple(shapes) -> Shape:
        return Shape(None, tuple_shapes=tuple(shapes))

    @staticmethod
    def token() -> Shape:
        return Shape(TOKEN)

    # -- queries -------------------------------------------------------------------------------
    @property
    def is_tuple(self) -> bool:
        return self.tuple_shapes is not None

    @property
    def is_token(self) -> bool:
        return self.element_type is TOKEN

    @property
    def is_array(self) -> bool:
        return not self.is_tuple and self.element_type.is_array_type

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def is_static(self) -> bool:
        if self.is_tuple:
            return all(s.is_static for s in self.tuple_shapes)
        return not any(self.dynamic)

    @property
    def has_bounded_dims(self) -> bool:
        """A dynamic dimension that is not symbolic (`<=N`, or `?` without a variable): its runtime
        size is not written in the dims (tuples: in any leaf)."""
        if self.is_tuple:
            return any(s.has_bounded_dims for s in self.tuple_shapes)
        return any(dyn and not isinstance(d, DimExpr) for d, dyn in zip(self.dims, self.dynamic))

    @property
    def symbols(self) -> frozenset[str]:
        """The dimension variables the (nested) shape's sizes use."""
        if self.is_tuple:
            return frozenset().union(*(s.symbols for s in self.tuple_shapes))
        return variables_of(self.dims)

    @property
    def is_symbolic(self) -> bool:
        return bool(self.symbols)

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def dtype(self) -> np.dtype:
        return self.element_type.dtype

    @property
    def minor_to_major(self) -> tuple[int, ...]:
        """The layout's order, or the default row-major order when no layout is given."""
        if self.layout is not None and len(self.layout.minor_to_major) == self.rank:
            return self.layout.minor_to_major
        return tuple(range(self.rank - 1, -1, -1))

    @property
    def physical_dims(self) -> list[int]:
        """The dimension sizes in physical (major-to-minor) order: the shape of the bytes."""
        return [self.dims[d] for d in reversed(self.minor_to_major)]

    @property
    def is_row_major(self) -> bool:
        return self.minor_to_major == tuple(range(self.rank - 1, -1, -1))

    def byte_size(self) -> int:
        if self.is_tuple:
            return 8 * len(self.tuple_shapes)
        return self.num_elements * self.element_type.byte_size

    def leaves(self) -> list[Shape]:
        """Array/token leaves of a (nested) tuple shape in order; [self] for an array shape."""
        if not self.is_tuple:
            return [self]
        return [leaf for s in self.tuple_shapes for leaf in s.leaves()]

    def as_buffer(self) -> Shape:
        return Shape(self.element_type, self.dims, self.dynamic, self.layout, self.tuple_shapes, True)

    def with_element_type(self, element_type: PrimitiveType) -> Shape:
        return Shape(element_type, self.dims, self.dynamic, self.layout)

    def with_dims(self, dims, dynamic=None) -> Shape:
        return Shape.array(self.element_type, dims, None, dynamic)

    def with_layout(self, layout: Layout | None) -> Shape:
        return Shape(self.element_type, self.dims, self.dynamic, layout, self.tuple_shapes)

    def same_layout(self, other: Shape) -> bool:
        if self.is_tuple or other.is_tuple:
            return (self.is_tuple and other.is_tuple and len(self.tuple_shapes) == len(other.tuple_shapes)
                    and all(a.same_layout(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        return self == other and self.minor_to_major == other.minor_to_major

    def compatible(self, other: Shape) -> bool:
        """Equal up to layout, with a dynamic dimension matching any size within its bound."""
        if self.is_tuple or other.is_tuple:
            return (self.is_tuple and other.is_tuple and len(self.tuple_shapes) == len(other.tuple_shapes)
                    and all(a.compatible(b) for a, b in zip(self.tuple_shapes, other.tuple_shapes)))
        if self.element_type != other.element_type or self.rank != other.rank:
            return False
        for a, da, b, db in zip(self.dims, self.dynamic, other.dims, other.dynamic):
            if isinstance(a, DimExpr) or isinstance(b, DimExpr):
                if a == b or UNBOUNDED in (a, b):
                    continue
                return False
            if a == b or (da and (a == UNBOUNDED or b <= a)) or (db and (b == UNBOUNDED or a <= b)):
                continue
            return False
        return True

    # -- text ----------------------------------------------------------------------------------
    def dims_str(self) -> str:
        parts = []
        for d, dyn in zip(self.dims, self.dynamic):
            if isinstance(d, DimExpr):
                parts.append(size_text(d, bare_name=True))
            else:
                parts.append("?" if d == UNBOUNDED else (f"<={d}" if dyn else str(d)))
        return "[" + ",".join(parts) + "]"

    def to_string(self, print_layout: bool = True) -> str:
        if self.is_tuple:
            return "(" + ", ".join(s.to_string(print_layout) for s in self.tuple_shapes) + ")"
        text = self.element_type.name + self.dims_str()
        if print_layout and self.layout is not None and self.element_type.is_array_type:
            text += str(self.layout)
        return f"b({text})" if self.is_buffer else text

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        return f"Shape({self.to_string()})"


def shape_of_array(array: np.ndarray) -> Shape:
    return Shape.array(from_dtype(array.dtype), array.shape)


def raw_elements(array: np.ndarray) -> np.ndarray:
    """`array`'s elements as opaque bytes of the same size (a view). numpy's stride tricks rebuild an
    array's dtype from its typestr, which not every ml_dtypes type survives (float8_e5m2's '<f1' is
    not understood), so they stride the raw elements and view the result as the real dtype."""
    return array.view(np.dtype((np.void, array.dtype.itemsize)))


def as_strided(base: np.ndarray, shape, strides) -> np.ndarray:
    """`np.lib.stride_tricks.as_strided(base, shape, strides)` for every dtype (`raw_elements`)."""
    return np.lib.stride_tricks.as_strided(raw_elements(base), shape, strides).view(base.dtype)


def converted_array(arr: np.ndarray, dtype: np.dtype, convert: bool = True) -> np.ndarray:
    """`arr` converted to `dtype` (an argument given in another type; without `convert`, a
    ValueError with an empty text: the types must match). Raw bytes that np.savez
    stored an ml_dtypes array as ('|V2', which np.load cannot name) are read as `dtype` when their
    sizes agree. Strings, objects, dates and complex numbers for a real type are a ValueError whose
    text completes "expected dtype X, got Y" (converting would fail in numpy, or drop data)."""
    if not convert:
        raise ValueError("")
    if arr.dtype.kind == "V" and arr.dtype.names is None and arr.dtype.itemsize == dtype.itemsize \
            and dtype.type.__module__ == "ml_dtypes":
        return arr.view(dtype)
    if arr.dtype.kind not in "biufc":
        try:
            from_dtype(arr.dtype)  # an ml_dtypes type (bf16, f8, int4: numpy kind 'V') holds numbers
        except HloError:
            raise ValueError(", which is not numbers") from None
    if arr.dtype.kind == "c" and dtype.kind != "c":
        raise ValueError(" (converting would drop the imaginary part)")
    with np.errstate(all="ignore"):
        try:
            return arr.astype(dtype)
        except (TypeError, ValueError) as e:
            raise ValueError(f" (numpy cannot convert it: {e})") from None
