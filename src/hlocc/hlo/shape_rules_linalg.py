"""Shape rules of the contraction and linear-algebra ops: dot, ragged-dot, scaled-dot,
convolution, fft, cholesky, triangular-solve, the batch-norm ops and the random number ops
(XLA's ShapeInference::InferDotOpShape, InferRaggedDotOpShape, InferConvolveShape, InferFftShape,
InferCholeskyShape, InferTriangularSolveShape, InferBatchNorm*Shape).

Dot and convolution take their result element type from the declared shape (XLA's "preferred
element type"); their dimensions are inferred.
"""

from __future__ import annotations

from hlocc.hlo.attributes import ConvDimensionNumbers
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array,
    array_operand,
    check_arity,
    check_dims_in_rank,
    check_same_element_type,
    check_scalar,
    complex_component_type,
    declared,
    declared_element_type,
    declared_shape,
    dims_agree,
    fail,
    get_attr,
    window_output_size,
)
from hlocc.hlo.types import PRIMITIVE_TYPES, U64, Shape


# -- dot --------------------------------------------------------------------------------------------
def _dot_dimension_numbers(instr: HloInstruction, lhs: Shape, rhs: Shape) -> tuple[tuple, tuple, tuple, tuple]:
    """Check and return (lhs_contracting, rhs_contracting, lhs_batch, rhs_batch)."""
    lc = get_attr(instr, "lhs_contracting_dims", ())
    rc = get_attr(instr, "rhs_contracting_dims", ())
    lb = get_attr(instr, "lhs_batch_dims", ())
    rb = get_attr(instr, "rhs_batch_dims", ())
    for name, dims, shape in (("lhs_contracting_dims", lc, lhs), ("rhs_contracting_dims", rc, rhs),
                              ("lhs_batch_dims", lb, lhs), ("rhs_batch_dims", rb, rhs)):
        check_dims_in_rank(instr, dims, shape.rank, name)
    if len(lc) != len(rc):
        fail(instr, f"lhs has {len(lc)} contracting dimensions but rhs has {len(rc)}")
    if len(lb) != len(rb):
        fail(instr, f"lhs has {len(lb)} batch dimensions but rhs has {len(rb)}")
    if set(lc) & set(lb) or set(rc) & set(rb):
        fail(instr, "a dimension cannot be both a contracting and a batch dimension")
    for kind, ldims, rdims in (("contracting", lc, rc), ("batch", lb, rb)):
        for a, b in zip(ldims, rdims):
            if not dims_agree(lhs, a, rhs, b):
                fail(instr, f"lhs {kind} dimension {a} (size {lhs.dims[a]}) does not match rhs {kind} "
                            f"dimension {b} (size {rhs.dims[b]})")
    return lc, rc, lb, rb


def _free_dims(shape: Shape, *used: tuple) -> list[int]:
    taken = {d for dims in used for d in dims}
    return [i for i in range(shape.rank) if i not in taken]


def _pick(shape: Shape, indices) -> tuple[list[int], list[bool]]:
    return [shape.dims[i] for i in indices], [shape.dynamic[i] for i in indices]


def _dot_shape(instr: HloInstruction, lhs: Shape, rhs: Shape, rhs_extra_used: tuple = ()) -> Shape:
    """Result dims: batch, lhs free, rhs free (rhs dimensions in `rhs_extra_used` excluded)."""
    lc, rc, lb, rb = _dot_dimension_numbers(instr, lhs, rhs)
    order = [(lhs, list(lb)), (lhs, _free_dims(lhs, lc, lb)), (rhs, _free_dims(rhs, rc, rb, rhs_extra_used))]
    dims, dynamic = [], []
    for shape, indices in order:
        d, dyn = _pick(shape, indices)
        dims += d
        dynamic += dyn
    return array(declared_element_type(instr), dims, dynamic)


@register_shape_rule("dot")
def infer_dot(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Contract lhs_contracting_dims with rhs_contracting_dims over the batch dims; the result has
    the batch dims, then lhs's free dims, then rhs's, and the declared element type."""
    check_arity(instr, shapes, 2)
    return _dot_shape(instr, array_operand(instr, shapes, 0, "lhs"), array_operand(instr, shapes, 1, "rhs"))


@register_shape_rule("scaled-dot")
def infer_scaled_dot(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """scaled-dot(lhs, rhs, lhs_scale, rhs_scale): the dot of lhs and rhs; each scale has its
    operand's rank."""
    check_arity(instr, shapes, 4)
    lhs = array_operand(instr, shapes, 0, "lhs")
    rhs = array_operand(instr, shapes, 1, "rhs")
    for i, operand in ((2, lhs), (3, rhs)):
        scale = array_operand(instr, shapes, i, "scale")
        if scale.rank not in (0, operand.rank):
            fail(instr, f"scale {scale} must be a scalar or have the rank of its operand {operand}")
    return _dot_shape(instr, lhs, rhs)


@register_shape_rule("ragged-dot")
def infer_ragged_dot(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """ragged-dot(lhs, rhs, group_sizes) with one lhs ragged dimension: ragged in a free lhs
    dimension, rhs has one group dimension (dropped from the result); ragged in a contracting
    dimension, the result gains a leading group dimension; ragged in a batch dimension, the result
    is the plain dot's. The group count is group_sizes' minor dimension."""
    check_arity(instr, shapes, 3)
    lhs = array_operand(instr, shapes, 0, "lhs")
    rhs = array_operand(instr, shapes, 1, "rhs")
    groups = array_operand(instr, shapes, 2, "group_sizes")
    if groups.rank == 0 or not groups.element_type.is_integer:
        fail(instr, f"group_sizes of ragged-dot must be an integer array, got {groups}")
    ragged = get_attr(instr, "lhs_ragged_dims")
    group_dims = get_attr(instr, "rhs_group_dims", ())
    if len(ragged) != 1:
        fail(instr, f"ragged-dot takes exactly one lhs ragged dimension, got {tuple(ragged)}")
    check_dims_in_rank(instr, ragged, lhs.rank, "lhs_ragged_dims")
    check_dims_in_rank(instr, group_dims, rhs.rank, "rhs_group_dims")
    lc = get_attr(instr, "lhs_contracting_dims", ())
    lb = get_attr(instr, "lhs_batch_dims", ())
    group_count = groups.dims[-1]
    if ragged[0] in lc or ragged[0] in lb:
        if group_dims:
            fail(instr, "rhs_group_dims must be empty unless the lhs ragged dimension is a free dimension")
        plain = _dot_shape(instr, lhs, rhs)
        if ragged[0] in lb:
            return plain
        return array(plain.element_type, (group_count,) + plain.dims, (False,) + plain.dynamic)
    if len(group_dims) != 1:
        fail(instr, "ragged-dot with a free lhs ragged dimension needs exactly one rhs_group_dims entry")
    if rhs.dims[group_dims[0]] != group_count:
        fail(instr, f"rhs group dimension {group_dims[0]} of {rhs} does not match the group count {group_count}")
    return _dot_shape(instr, lhs, rhs, tuple(group_dims))


# -- convolution ------------------------------------------------------------------------------------
def _check_labels(instr: HloInstruction, dn: ConvDimensionNumbers, lhs: Shape, rhs: Shape) -> int:
    """Every label set names each dimension of its operand once; returns the spatial rank."""
    spatial = len(dn.input_spatial)
    groups = (("lhs", lhs.rank, (dn.input_batch, dn.input_feature, *dn.input_spatial)),
              ("rhs", rhs.rank, (dn.kernel_input_feature, dn.kernel_output_feature, *dn.kernel_spatial)),
              ("output", lhs.rank, (dn.output_batch, dn.output_feature, *dn.output_spatial)))
    for role, rank, dims in groups:
        if rank != spatial + 2 or sorted(dims) != list(range(rank)):
            fail(instr, f"dim_labels {dn} do not match the {role} rank {rank} ({spatial} spatial dimensions)")
    return spatial


@register_shape_rule("convolution")
def infer_convolution(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Output batch = input batch / batch_group_count, output feature = kernel output features,
    spatial dims = the window output sizes over the input's spatial dims; laid out by dim_labels,
    with the declared element type. Input features = kernel input features * feature_group_count."""
    check_arity(instr, shapes, 2)
    lhs = array_operand(instr, shapes, 0, "lhs")
    rhs = array_operand(instr, shapes, 1, "rhs")
    dn = get_attr(instr, "dim_labels")
    window = instr.attrs.get("window", ())  # optional: no window is an empty one (XLA)
    spatial = _check_labels(instr, dn, lhs, rhs)
    if len(window) != spatial:
        fail(instr, f"window has {len(window)} dimensions but the convolution has {spatial} spatial dimensions")
    fgc = instr.attrs.get("feature_group_count", 1)
    bgc = instr.attrs.get("batch_group_count", 1)
    if fgc < 1 or bgc < 1 or (fgc > 1 and bgc > 1):
        fail(instr, f"feature_group_count {fgc} and batch_group_count {bgc} must be positive and not both > 1")
    batch = lhs.dims[dn.input_batch]
    in_features = lhs.dims[dn.input_feature]
    kernel_in = rhs.dims[dn.kernel_input_feature]
    kernel_out = rhs.dims[dn.kernel_output_feature]
    if in_features % fgc or in_features // fgc != kernel_in:
        fail(instr, f"input feature dimension (size {in_features}) must be feature_group_count ({fgc}) times "
                    f"the kernel input feature dimension (size {kernel_in})")
    if kernel_out % fgc:
        fail(instr, f"kernel output features ({kernel_out}) must be a multiple of feature_group_count ({fgc})")
    if batch % bgc or kernel_out % bgc:
        fail(instr, f"input batch ({batch}) and kernel output features ({kernel_out}) must be multiples of "
                    f"batch_group_count ({bgc})")
    dims = [0] * lhs.rank
    dynamic = [False] * lhs.rank
    dims[dn.output_batch] = batch // bgc
    dynamic[dn.output_batch] = lhs.dynamic[dn.input_batch]
    dims[dn.output_feature] = kernel_out
    for i, w in enumerate(window):
        if w.size != rhs.dims[dn.kernel_spatial[i]]:
            fail(instr, f"window size {w.size} of spatial dimension {i} does not match the kernel's "
                        f"(size {rhs.dims[dn.kernel_spatial[i]]})")
        dims[dn.output_spatial[i]] = window_output_size(instr, i, lhs.dims[dn.input_spatial[i]], w)
        dynamic[dn.output_spatial[i]] = lhs.dynamic[dn.input_spatial[i]]
    return array(declared_element_type(instr), dims, dynamic)


# -- fft and linear algebra -------------------------------------------------------------------------
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}


@register_shape_rule("fft")
def infer_fft(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """FFT/IFFT: complex, same shape. RFFT: f32/f64 to complex, minor dim L -> L/2+1. IRFFT:
    complex to real, minor dim L/2+1 -> L. The minor len(fft_length) dims match fft_length."""
    check_arity(instr, shapes, 1)
    operand = array_operand(instr, shapes, 0)
    kind = get_attr(instr, "fft_type")
    lengths = tuple(get_attr(instr, "fft_length"))
    n = len(lengths)
    if not 1 <= n <= 3 or n > operand.rank:
        fail(instr, f"fft_length {lengths} must have 1 to 3 entries, at most the operand rank {operand.rank}")
    minor = operand.dims[operand.rank - n:]
    et = operand.element_type
    if kind in ("FFT", "IFFT"):
        expected, out_type, out_minor = lengths, et, lengths
        if not et.is_complex:
            fail(instr, f"{kind} requires a complex operand, got {operand}")
    elif kind == "RFFT":
        if et.name not in _COMPLEX_OF:
            fail(instr, f"RFFT requires an f32 or f64 operand, got {operand}")
        expected, out_type = lengths, PRIMITIVE_TYPES[_COMPLEX_OF[et.name]]
        out_minor = lengths[:-1] + ((lengths[-1] // 2 + 1) if lengths[-1] else 0,)
    elif kind == "IRFFT":
        if not et.is_complex:
            fail(instr, f"IRFFT requires a complex operand, got {operand}")
        expected = lengths[:-1] + ((lengths[-1] // 2 + 1) if lengths[-1] else 0,)
        out_type, out_minor = complex_component_type(et), lengths
    else:
        fail(instr, f"unknown fft_type '{kind}' (expected FFT, IFFT, RFFT or IRFFT)")
    if tuple(minor) != tuple(expected):
        fail(instr, f"{kind} operand {operand} must end in dimensions {list(expected)} for fft_length {list(lengths)}")
    dims = operand.dims[:operand.rank - n] + tuple(out_minor)
    return array(out_type, dims, operand.dynamic)


def _check_square_matrices(instr: HloInstruction, a: Shape, role: str) -> None:
    if a.rank < 2 or a.dims[-1] != a.dims[-2]:
        fail(instr, f"{role} of {instr.opcode} must be square matrices of rank >= 2, got {a}")
    if not (a.element_type.is_float or a.element_type.is_complex):
        fail(instr, f"{role} of {instr.opcode} must be floating-point or complex, got {a}")


@register_shape_rule("cholesky")
def infer_cholesky(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """The operand's shape: a batch of square float/complex matrices."""
    check_arity(instr, shapes, 1)
    a = array_operand(instr, shapes, 0)
    _check_square_matrices(instr, a, "operand")
    return array(a.element_type, a.dims, a.dynamic)


@register_shape_rule("triangular-solve")
def infer_triangular_solve(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """triangular-solve(a, b): b's shape. a is [..., m, m]; b is [..., m, n] (left_side) or
    [..., n, m], with equal batch dimensions and element type."""
    check_arity(instr, shapes, 2)
    a = array_operand(instr, shapes, 0, "a")
    b = array_operand(instr, shapes, 1, "b")
    _check_square_matrices(instr, a, "a")
    check_same_element_type(instr, a, b, "a and b")
    if b.rank != a.rank or a.dims[:-2] != b.dims[:-2]:
        fail(instr, f"a {a} and b {b} must have the same rank and batch dimensions")
    solved = -2 if instr.attrs.get("left_side", False) else -1
    if b.dims[solved] != a.dims[-1]:
        fail(instr, f"dimension {b.rank + solved} of b {b} must match the size {a.dims[-1]} of a")
    transpose = instr.attrs.get("transpose_a", "NO_TRANSPOSE")
    if transpose not in ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"):
        fail(instr, f"transpose_a must be NO_TRANSPOSE, TRANSPOSE or ADJOINT, got '{transpose}'")
    return array(b.element_type, b.dims, b.dynamic)


# -- batch norm -------------------------------------------------------------------------------------
def _batch_norm_operands(instr: HloInstruction, shapes: list[Shape], roles: tuple[str, ...]) -> tuple[Shape, Shape]:
    """Check a float operand and the per-feature vectors named by `roles` (operands 1..); return the
    operand and the feature vector shape."""
    operand = array_operand(instr, shapes, 0, "operand")
    if not operand.element_type.is_float:
        fail(instr, f"operand of {instr.opcode} must be floating-point, got {operand}")
    feature_index = get_attr(instr, "feature_index")
    check_dims_in_rank(instr, (feature_index,), operand.rank, "feature_index")
    feature = array(operand.element_type, (operand.dims[feature_index],))
    for i, role in enumerate(roles, start=1):
        shape = array_operand(instr, shapes, i, role)
        if not shape.compatible(feature):
            fail(instr, f"{role} of {instr.opcode} must be {feature} (the feature dimension), got {shape}")
    return operand, feature


@register_shape_rule("batch-norm-training")
def infer_batch_norm_training(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(operand, scale, offset) -> (normalized, batch mean, batch variance)."""
    check_arity(instr, shapes, 3)
    operand, feature = _batch_norm_operands(instr, shapes, ("scale", "offset"))
    return Shape.tuple([array(operand.element_type, operand.dims, operand.dynamic), feature, feature])


@register_shape_rule("batch-norm-inference")
def infer_batch_norm_inference(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(operand, scale, offset, mean, variance) -> normalized operand."""
    check_arity(instr, shapes, 5)
    operand, _ = _batch_norm_operands(instr, shapes, ("scale", "offset", "mean", "variance"))
    return array(operand.element_type, operand.dims, operand.dynamic)


@register_shape_rule("batch-norm-grad")
def infer_batch_norm_grad(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(operand, scale, mean, variance, grad_output) -> (grad_operand, grad_scale, grad_offset)."""
    check_arity(instr, shapes, 5)
    operand, feature = _batch_norm_operands(instr, shapes, ("scale", "mean", "variance"))
    grad = array_operand(instr, shapes, 4, "grad_output")
    if not grad.compatible(array(operand.element_type, operand.dims, operand.dynamic)):
        fail(instr, f"grad_output {grad} must have the operand's shape {operand}")
    return Shape.tuple([array(operand.element_type, operand.dims, operand.dynamic), feature, feature])


# -- random numbers ---------------------------------------------------------------------------------
@register_shape_rule("rng")
def infer_rng(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """rng(a, b): the declared shape, whose element type is that of the scalar parameters a, b."""
    check_arity(instr, shapes, 2)
    for i, role in enumerate(("a", "b")):
        check_scalar(instr, shapes[i], f"parameter {role}")
    check_same_element_type(instr, shapes[0], shapes[1], "parameters")
    distribution = get_attr(instr, "distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        fail(instr, f"rng distribution must be rng_uniform or rng_normal, got '{distribution}'")
    if distribution == "rng_normal" and not shapes[0].element_type.is_float:
        fail(instr, f"rng_normal requires floating-point parameters, got {shapes[0]}")
    if declared_element_type(instr) != shapes[0].element_type:
        fail(instr, f"rng result {instr.shape} must have the parameters' element type {shapes[0].element_type}")
    return declared(instr)


@register_shape_rule("rng-bit-generator")
def infer_rng_bit_generator(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """(new state, random bits): the declared tuple, whose first element is the state's shape."""
    check_arity(instr, shapes, 1)
    state = array_operand(instr, shapes, 0, "state")
    out = declared_shape(instr)
    if not out.is_tuple or len(out.tuple_shapes) != 2 or not out.tuple_shapes[0].compatible(state):
        fail(instr, f"rng-bit-generator must produce (state, bits) with state {state}, declared {out}")
    algorithm = get_attr(instr, "algorithm")
    if algorithm not in ("rng_default", "rng_three_fry", "rng_philox"):
        fail(instr, f"unknown rng-bit-generator algorithm '{algorithm}'")
    return declared(instr)


@register_shape_rule("rng-get-and-update-state")
def infer_rng_get_and_update_state(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """u64[2]: the old random state."""
    check_arity(instr, shapes, 0)
    return array(U64, (2,))
