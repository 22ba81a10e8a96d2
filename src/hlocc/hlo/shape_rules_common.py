"""Helpers shared by the shape rules (`shape_rules_*.py`): error construction, operand and
attribute checks, dynamic-dimension merging, window arithmetic and called-computation signatures.

Every check raises `HloVerifyError` whose message starts with `instruction '<name>': ` and then
states the broken rule. Inferred shapes carry no layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from hlocc.errors import HloVerifyError, count_of
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import InconclusiveDimensionError
from hlocc.hlo.types import PRED, PRIMITIVE_TYPES, S32, UNBOUNDED, PrimitiveType, Shape, TypeKind

_MISSING = object()


def fail(instr: HloInstruction, message: str) -> NoReturn:
    """Raise the HloVerifyError for `instr` breaking the rule described by `message`."""
    raise HloVerifyError(f"instruction '{instr.name}': {message}")


def strip_layout(shape: Shape) -> Shape:
    """`shape` without any layout (recursively for tuples)."""
    if shape.is_tuple:
        return Shape.tuple(strip_layout(s) for s in shape.tuple_shapes)
    return Shape(shape.element_type, shape.dims, shape.dynamic)


def array(element_type: PrimitiveType, dims: Sequence[int], dynamic: Sequence[bool] | None = None) -> Shape:
    return Shape.array(element_type, dims, None, dynamic)


def scalar(element_type: PrimitiveType) -> Shape:
    return Shape.array(element_type, ())


def declared_shape(instr: HloInstruction) -> Shape:
    """The shape the text declares, for rules that need it; an error where the text left it out
    (the parser infers omitted shapes, but not those the operands do not imply)."""
    if instr.shape is None:
        fail(instr, f"{instr.opcode} needs a declared result shape: it is not implied by its operands")
    return instr.shape


def declared(instr: HloInstruction) -> Shape:
    """The instruction's declared shape without layout: the rule for ops whose shape XLA cannot
    infer from the operands (custom-call, infeed, parameter, ...)."""
    return strip_layout(declared_shape(instr))


def get_attr(instr: HloInstruction, name: str, default: Any = _MISSING) -> Any:
    """`instr.attrs[name]`, or `default` when absent; a missing attribute without default fails."""
    value = instr.attrs.get(name, default)
    if value is _MISSING:
        fail(instr, f"{instr.opcode} requires attribute '{name}'")
    return value


def check_arity(instr: HloInstruction, shapes: list[Shape], count: int) -> None:
    if len(shapes) != count:
        fail(instr, f"{instr.opcode} takes {count} operands, got {len(shapes)}")


def array_operand(instr: HloInstruction, shapes: list[Shape], index: int, role: str = "") -> Shape:
    """Operand `index` as an array shape (not a tuple or token)."""
    if index >= len(shapes):
        fail(instr, f"{instr.opcode} is missing operand {index}" + (f" ({role})" if role else ""))
    shape = shapes[index]
    if not shape.is_array:
        what = role or f"operand {index}"
        fail(instr, f"{what} of {instr.opcode} must be an array, got {shape}")
    return shape


def check_scalar(instr: HloInstruction, shape: Shape, role: str, integral: bool = False) -> None:
    """`shape` must be a rank-0 array (of an integer type when `integral`)."""
    if not shape.is_array or shape.rank != 0:
        fail(instr, f"{role} of {instr.opcode} must be a scalar, got {shape}")
    if integral and not shape.element_type.is_integer:
        fail(instr, f"{role} of {instr.opcode} must be an integer scalar, got {shape}")


def check_pred_scalar(instr: HloInstruction, shape: Shape, role: str) -> None:
    if shape != scalar(PRED):
        fail(instr, f"{role} of {instr.opcode} must be pred[], got {shape}")


def check_same_element_type(instr: HloInstruction, a: Shape, b: Shape, what: str) -> None:
    if a.element_type != b.element_type:
        fail(instr, f"{what} of {instr.opcode} must have equal element types, got {a} and {b}")


def check_dims_in_rank(instr: HloInstruction, dims: Sequence[int], rank: int, attr: str,
                       unique: bool = True, ascending: bool = False) -> None:
    """Every entry of attribute `attr` is a dimension number in [0, rank)."""
    for d in dims:
        if not 0 <= d < rank:
            fail(instr, f"{attr} entry {d} is out of range for rank {rank}")
    if unique and len(set(dims)) != len(dims):
        fail(instr, f"{attr} {tuple(dims)} has repeated dimensions")
    if ascending and list(dims) != sorted(dims):
        fail(instr, f"{attr} {tuple(dims)} must be sorted in ascending order")


def check_permutation(instr: HloInstruction, perm: Sequence[int], rank: int, attr: str) -> None:
    if sorted(perm) != list(range(rank)):
        fail(instr, f"{attr} {tuple(perm)} is not a permutation of the {rank} dimensions")


def merge_dim(instr: HloInstruction, what: str, a: Shape, i: int, b: Shape, j: int) -> tuple[int, bool]:
    """The size and dynamic flag of the result dimension formed by `a.dims[i]` and `b.dims[j]`,
    which must agree: `?` takes the other side; otherwise sizes (bounds) are equal and the result is
    dynamic if either side is."""
    sa, da = a.dims[i], a.dynamic[i]
    sb, db = b.dims[j], b.dynamic[j]
    if sa == UNBOUNDED:
        return sb, db
    if sb == UNBOUNDED:
        return sa, da
    if sa != sb:
        fail(instr, f"{what}, got {a} and {b}")
    return sa, da or db


def merge_shapes(instr: HloInstruction, what: str, a: Shape, b: Shape) -> tuple[list[int], list[bool]]:
    """Dims and dynamic flags of two equal-rank shapes merged by `merge_dim`."""
    if a.rank != b.rank:
        fail(instr, f"{what}, got {a} and {b}")
    pairs = [merge_dim(instr, what, a, i, b, i) for i in range(a.rank)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def same_type_ignoring_fp_precision(a: PrimitiveType, b: PrimitiveType) -> bool:
    return a == b or (a.kind is TypeKind.FLOAT and b.kind is TypeKind.FLOAT)


def complex_component_type(et: PrimitiveType) -> PrimitiveType:
    """The component type of a complex type: f32 for c64, f64 for c128."""
    return PRIMITIVE_TYPES["f32" if et.name == "c64" else "f64"]


# -- windows --------------------------------------------------------------------------------------
def window_output_size(instr: HloInstruction, index: int, base: int, dim) -> int:
    """Output size of one window dimension over a base of size `base` (XLA's window arithmetic):
    the base is dilated by lhs_dilate and padded, the window dilated by rhs_dilate, then strided."""
    if surely_below(dim.size, 1):  # a symbolic size (a weight gradient's window) is guarded per call
        fail(instr, f"window dimension {index} has non-positive size {dim.size}")
    if dim.stride <= 0:
        fail(instr, f"window dimension {index} has non-positive stride {dim.stride}")
    if dim.lhs_dilate <= 0 or dim.rhs_dilate <= 0:
        fail(instr, f"window dimension {index} has non-positive dilation")
    if base == UNBOUNDED:
        return UNBOUNDED
    dilated_base = 0 if base == 0 else (base - 1) * dim.lhs_dilate + 1
    padded = dilated_base + dim.pad_lo + dim.pad_hi
    dilated_window = (dim.size - 1) * dim.rhs_dilate + 1
    if surely_below(padded, dilated_window):  # JAX's size, `floordiv(h - 2, 2) + 1`: where it
        return 0                                     # would be negative the call fails a guard (guards.py)
    return (padded - dilated_window) // dim.stride + 1


def surely_below(a, b) -> bool:
    """`a < b` at every size; False where that depends on the sizes: the shape rules then let it
    pass, and guards.window_fit_guards checks it per call (a pooling window's `s - 2` limit, with
    PyTorch's `s >= 2` outside the algebra)."""
    try:
        return bool(a < b)
    except InconclusiveDimensionError:
        return False


def window_output_shape(instr: HloInstruction, base: Shape, window, element_type: PrimitiveType) -> Shape:
    """The shape a window op (reduce-window, select-and-scatter) produces over `base`."""
    if len(window) != base.rank:
        fail(instr, f"window has {len(window)} dimensions but the operand {base} has rank {base.rank}")
    dims = [window_output_size(instr, i, base.dims[i], w) for i, w in enumerate(window)]
    return array(element_type, dims, base.dynamic)


# -- called computations --------------------------------------------------------------------------
def computation_attr(instr: HloInstruction, name: str) -> HloComputation:
    comp = get_attr(instr, name)
    if not isinstance(comp, HloComputation):
        fail(instr, f"attribute '{name}' of {instr.opcode} must be a computation")
    return comp


def signature(comp: HloComputation) -> tuple[list[Shape], Shape]:
    """Parameter shapes (by number) and root shape of `comp`."""
    if comp.root is None:
        raise HloVerifyError(f"computation '{comp.name}' has no root instruction")
    return [p.shape for p in comp.parameters], comp.root.shape


def check_call_params(instr: HloInstruction, comp: HloComputation, role: str, expected: Sequence[Shape],
                      ignore_fp_precision: bool = False) -> None:
    """`comp` takes exactly parameters compatible with `expected`."""
    params, _ = signature(comp)
    if len(params) != len(expected):
        fail(instr, f"{role} computation '{comp.name}' takes {count_of(len(params), 'parameter')}, "
                    f"expected {len(expected)}")
    for i, (got, want) in enumerate(zip(params, expected)):
        if not _compatible(got, want, ignore_fp_precision):
            fail(instr, f"parameter {i} of {role} computation '{comp.name}' has shape {got}, expected {want}")


def check_call_result(instr: HloInstruction, comp: HloComputation, role: str, expected: Shape) -> None:
    _, result = signature(comp)
    if not result.compatible(expected):
        fail(instr, f"{role} computation '{comp.name}' returns {result}, expected {expected}")


def _compatible(a: Shape, b: Shape, ignore_fp_precision: bool) -> bool:
    if not ignore_fp_precision or a.is_tuple or b.is_tuple:
        return a.compatible(b)
    return same_type_ignoring_fp_precision(a.element_type, b.element_type) and a.compatible(
        b.with_element_type(a.element_type))


def check_scalar_reducer(instr: HloInstruction, comp: HloComputation, role: str, inputs: Sequence[Shape],
                         inits: Sequence[Shape] | None = None) -> tuple[list[PrimitiveType], bool]:
    """A reducer over N values: takes N accumulators then N input elements (all scalars) and returns
    the N accumulators (a tuple of them, or a bare scalar when N = 1). Accumulator types equal the
    init value types (`inits`, when given); input element types may differ from the accumulators
    only in float precision. Returns the accumulator element types and whether the reducer returns
    a tuple."""
    params, result = signature(comp)
    n = len(inputs)
    if len(params) != 2 * n:
        fail(instr, f"{role} computation '{comp.name}' takes {count_of(len(params), 'parameter')}, expected {2 * n}")
    results = list(result.tuple_shapes) if result.is_tuple else [result]
    if len(results) != n or any(not r.is_array or r.rank != 0 for r in results):
        fail(instr, f"{role} computation '{comp.name}' must return {n} scalar(s), got {result}")
    for i, p in enumerate(params):
        if not p.is_array or p.rank != 0:
            fail(instr, f"parameter {i} of {role} computation '{comp.name}' must be a scalar, got {p}")
    for i in range(n):
        acc = results[i].element_type
        if params[i].element_type != acc:
            fail(instr, f"{role} computation '{comp.name}': accumulator parameter {i} is {params[i]} "
                        f"but result {i} is {results[i]}")
        if inits is not None and inits[i].element_type != acc:
            fail(instr, f"init value {i} {inits[i]} does not match the accumulator type {acc} "
                        f"of {role} computation '{comp.name}'")
        if not same_type_ignoring_fp_precision(params[n + i].element_type, inputs[i].element_type):
            fail(instr, f"parameter {n + i} of {role} computation '{comp.name}' is {params[n + i]}, "
                        f"expected element type of {inputs[i]}")
    return [r.element_type for r in results], result.is_tuple


def s32_scalar() -> Shape:
    return scalar(S32)


def dims_agree(a: Shape, i: int, b: Shape, j: int) -> bool:
    """Dimension i of `a` and j of `b` can be the same size: equal, or one of them `?`."""
    return a.dims[i] == b.dims[j] or UNBOUNDED in (a.dims[i], b.dims[j])


def declared_element_type(instr: HloInstruction) -> PrimitiveType:
    """The element type of the declared (array) shape, for ops whose result type is chosen by the
    producer (convert, dot's preferred element type, ...)."""
    if not declared_shape(instr).is_array:
        fail(instr, f"{instr.opcode} must produce an array, declared {instr.shape}")
    return instr.shape.element_type
