"""Facts about shapes and their layouts that several stages read (XLA's ShapeUtil): sizes with
dynamic dimensions at their bound, physical strides, and whether a reshape or a transpose moves no
element in memory.

- `static_dims`, `static_elements`, `physical_strides`, `dimensions_consecutive`: sizes and the
  layout (the shapes' minor-to-major orders, row-major when absent).
- `transpose_is_bitcast`, `reshape_is_bitcast`, `is_reshape_or_transpose_bitcast`: XLA's ShapeUtil
  predicates of the same names (hero analysis and fusion decisions read them).
- `reshape_is_row_major_bitcast`: the stricter test the runtime's dataflow and the fusion wrapper
  use for a reshape whose result may share its operand's buffer: both shapes static and laid out in
  logical order. Every reshape it accepts `reshape_is_bitcast` accepts too.

Everything here reads shapes only; nothing touches the IR.
"""

from __future__ import annotations

from collections.abc import Sequence

from hlocc.hlo.types import UNBOUNDED, Shape

UNBOUNDED_DIM_ESTIMATE = 1 << 20
"""Size assumed for a `?` dimension when a classification needs a number (it is "large")."""



def static_dims(shape: Shape) -> tuple[int, ...]:
    """The dimension sizes, bounded dynamic dimensions at their bound and `?` dimensions as a large
    size, for the size-based decisions of hero analysis."""
    return tuple(UNBOUNDED_DIM_ESTIMATE if d == UNBOUNDED else d for d in shape.dims)


def physical_strides(shape: Shape) -> list[int]:
    """Element stride of every logical dimension in the shape's layout."""
    dims = static_dims(shape)
    strides = [0] * len(dims)
    stride = 1
    for d in shape.minor_to_major:
        strides[d] = stride
        stride *= dims[d]
    return strides


def dimensions_consecutive(shape: Shape, dims: Sequence[int]) -> bool:
    """Whether `dims` occupy consecutive positions of the layout (XLA's AreDimensionsConsecutive);
    true for no dimensions."""
    position = {d: i for i, d in enumerate(shape.minor_to_major)}
    places = sorted(position[d] for d in dims)
    return all(b == a + 1 for a, b in zip(places, places[1:]))


def transpose_is_bitcast(operand: Shape, shape: Shape, permutation: Sequence[int]) -> bool:
    """A transpose moves nothing when output dimension i's place in the layout is held by operand
    dimension permutation[i] (XLA's strict check: size-1 dimensions count too)."""
    if operand.element_type != shape.element_type or operand.rank != shape.rank:
        return False
    return tuple(permutation[d] for d in shape.minor_to_major) == tuple(operand.minor_to_major)


def _unit_indices_agree(a: Shape, b: Shape) -> bool:
    """For every dimension of `a` longer than 1, the element one step along it sits at the same
    physical offset in `a` as the element of `b` with the same row-major linear index."""
    a_dims, b_dims = static_dims(a), static_dims(b)
    a_phys, b_phys = physical_strides(a), physical_strides(b)
    logical = [1] * len(a_dims)
    for i in range(len(a_dims) - 2, -1, -1):
        logical[i] = logical[i + 1] * a_dims[i + 1]
    for i, size in enumerate(a_dims):
        if size <= 1:
            continue
        linear = logical[i]
        offset = 0
        for d in range(len(b_dims) - 1, -1, -1):
            index = linear % b_dims[d] if b_dims[d] else 0
            linear = linear // b_dims[d] if b_dims[d] else 0
            offset += index * b_phys[d]
        if offset != a_phys[i]:
            return False
    return True


def reshape_is_bitcast(operand: Shape, shape: Shape) -> bool:
    """A reshape moves nothing when every unit step of either shape lands on the same physical
    offset in the other (XLA's ReshapeIsBitcast; always true for row-major layouts)."""
    if operand.element_type != shape.element_type:
        return False
    n_in, n_out = static_elements(operand), static_elements(shape)
    if n_in != n_out:
        return False
    if n_in == 0 or (operand.is_row_major and shape.is_row_major):
        return True
    return _unit_indices_agree(operand, shape) and _unit_indices_agree(shape, operand)


def is_reshape_or_transpose_bitcast(a: Shape, b: Shape) -> bool:
    """Whether `b` is `a` reinterpreted without moving data, through a reshape or a transpose,
    ignoring element types (XLA's IsReshapeOrTransposeBitcast)."""
    if a.is_tuple or b.is_tuple:
        return False
    a2, b2 = a.with_element_type(b.element_type), b
    if static_dims(a) == static_dims(b) and a.minor_to_major == b.minor_to_major:
        return True
    if reshape_is_bitcast(a2, b2):
        return True
    if a.rank != b.rank:
        return False
    # The transpose that keeps the physical order: output dim b_m2m[i] is input dim a_m2m[i].
    permutation = [0] * b.rank
    for a_dim, b_dim in zip(a.minor_to_major, b.minor_to_major):
        permutation[b_dim] = a_dim
    return all(static_dims(b)[i] == static_dims(a)[permutation[i]] for i in range(b.rank))


def static_elements(shape: Shape) -> int:
    """Elements of an array shape, with `static_dims`' sizes."""
    n = 1
    for d in static_dims(shape):
        n *= d
    return n


def _physical_order_is_logical(shape: Shape) -> bool:
    major_to_minor = [d for d in reversed(shape.minor_to_major) if shape.dims[d] != 1]
    return major_to_minor == sorted(major_to_minor)


def reshape_is_row_major_bitcast(operand: Shape, result: Shape) -> bool:
    """A reshape moves no data when both shapes lay their elements out in logical row-major order
    (size-1 dimensions may sit anywhere in the layout) and no dimension is dynamic."""
    return (operand.element_type == result.element_type and operand.num_elements == result.num_elements
            and not any(operand.dynamic) and not any(result.dynamic)
            and _physical_order_is_logical(operand) and _physical_order_is_logical(result))
