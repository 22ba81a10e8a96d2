"""Shape rules of gather and scatter, following XLA's ShapeInference::InferGatherShape and
InferScatterShape (docs/operation_semantics.md, "Gather" and "Scatter").

Indices are "expanded": when index_vector_dim equals the indices' rank, a trailing dimension of
size 1 is implied. The batch dimensions of the indices are all its (expanded) dimensions except
index_vector_dim.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_shape_rule
from hlocc.hlo.shape_rules_common import (
    array,
    array_operand,
    check_dims_in_rank,
    check_scalar_reducer,
    computation_attr,
    fail,
    get_attr,
)
from hlocc.hlo.types import Shape


def _index_batch_dims(instr: HloInstruction, indices: Shape, index_vector_dim: int,
                      index_vector_size: int) -> tuple[list[int], list[bool]]:
    """Check the indices' element type and index vector; return the batch dims of the indices."""
    if not indices.element_type.is_integer:
        fail(instr, f"indices of {instr.opcode} must be integers, got {indices}")
    if not 0 <= index_vector_dim <= indices.rank:
        fail(instr, f"index_vector_dim {index_vector_dim} is out of range for indices {indices}")
    dims, dynamic = list(indices.dims), list(indices.dynamic)
    if index_vector_dim == indices.rank:
        dims.append(1)
        dynamic.append(False)
    if dims[index_vector_dim] != index_vector_size:
        fail(instr, f"index vector dimension {index_vector_dim} of indices {indices} has size "
                    f"{dims[index_vector_dim]}, expected {index_vector_size} (the index map's length)")
    del dims[index_vector_dim]
    del dynamic[index_vector_dim]
    return dims, dynamic


def _check_batching_dims(instr: HloInstruction, operand_batching: tuple, indices_batching: tuple,
                         operand: Shape, indices: Shape, index_vector_dim: int, names: tuple[str, str]) -> None:
    check_dims_in_rank(instr, operand_batching, operand.rank, names[0], ascending=True)
    check_dims_in_rank(instr, indices_batching, indices.rank, names[1])
    if index_vector_dim in indices_batching:
        fail(instr, f"{names[1]} must not contain index_vector_dim {index_vector_dim}")
    if len(operand_batching) != len(indices_batching):
        fail(instr, f"{names[0]} and {names[1]} must have equal length")
    for od, idim in zip(operand_batching, indices_batching):
        if operand.dims[od] != indices.dims[idim]:
            fail(instr, f"batching dimension {od} of {operand} does not match dimension {idim} of {indices}")


@register_shape_rule("gather")
def infer_gather(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """Output rank = len(offset_dims) + batch rank of the indices; offset_dims (ascending) hold the
    slice sizes of the operand dimensions neither collapsed nor batching, in order, and the other
    output dimensions the indices' batch dimensions, in order."""
    operand = array_operand(instr, shapes, 0, "operand")
    indices = array_operand(instr, shapes, 1, "start indices")
    offset_dims = get_attr(instr, "offset_dims")
    collapsed = get_attr(instr, "collapsed_slice_dims")
    start_index_map = get_attr(instr, "start_index_map")
    index_vector_dim = get_attr(instr, "index_vector_dim")
    slice_sizes = get_attr(instr, "slice_sizes")
    operand_batching = get_attr(instr, "operand_batching_dims", ())
    indices_batching = get_attr(instr, "start_indices_batching_dims", ())

    batch_dims, batch_dynamic = _index_batch_dims(instr, indices, index_vector_dim, len(start_index_map))
    check_dims_in_rank(instr, collapsed, operand.rank, "collapsed_slice_dims", ascending=True)
    check_dims_in_rank(instr, start_index_map, operand.rank, "start_index_map")
    _check_batching_dims(instr, operand_batching, indices_batching, operand, indices, index_vector_dim,
                         ("operand_batching_dims", "start_indices_batching_dims"))
    if set(collapsed) & set(operand_batching):
        fail(instr, "collapsed_slice_dims and operand_batching_dims must be disjoint")
    if len(slice_sizes) != operand.rank:
        fail(instr, f"slice_sizes has {len(slice_sizes)} entries but the operand {operand} has rank {operand.rank}")
    for i, s in enumerate(slice_sizes):
        if s < 0 or s > operand.dims[i] >= 0:
            fail(instr, f"slice size {s} of dimension {i} is out of bounds for operand {operand}")
    for d in (*collapsed, *operand_batching):
        if slice_sizes[d] > 1:
            fail(instr, f"slice size of collapsed or batching dimension {d} must be <= 1, got {slice_sizes[d]}")
    if len(offset_dims) + len(collapsed) + len(operand_batching) != operand.rank:
        fail(instr, f"offset_dims, collapsed_slice_dims and operand_batching_dims must together cover the "
                    f"operand rank {operand.rank}")
    out_rank = len(offset_dims) + len(batch_dims)
    check_dims_in_rank(instr, offset_dims, out_rank, "offset_dims", ascending=True)

    removed = set(collapsed) | set(operand_batching)
    window = [slice_sizes[i] for i in range(operand.rank) if i not in removed]
    dims, dynamic = [], []
    offset_iter, batch_iter = iter(window), iter(zip(batch_dims, batch_dynamic))
    for i in range(out_rank):
        if i in offset_dims:
            dims.append(next(offset_iter))
            dynamic.append(False)
        else:
            size, dyn = next(batch_iter)
            dims.append(size)
            dynamic.append(dyn)
    return array(operand.element_type, dims, dynamic)


@register_shape_rule("scatter")
def infer_scatter(instr: HloInstruction, shapes: list[Shape]) -> Shape:
    """scatter(inputs..., indices, updates...): the inputs' shape (a tuple for several inputs).
    Updates have rank len(update_window_dims) + batch rank of the indices; their scatter dimensions
    equal the indices' batch dimensions and their window dimensions fit in the operand; to_apply
    combines (current, update) scalars per input."""
    if len(shapes) < 3 or len(shapes) % 2 == 0:
        fail(instr, f"scatter takes N inputs, indices and N updates (an odd count >= 3), got {len(shapes)}")
    n = (len(shapes) - 1) // 2
    inputs = [array_operand(instr, shapes, i, f"input {i}") for i in range(n)]
    indices = array_operand(instr, shapes, n, "scatter indices")
    updates = [array_operand(instr, shapes, n + 1 + i, f"update {i}") for i in range(n)]
    operand = inputs[0]
    for k, (inp, upd) in enumerate(zip(inputs, updates)):
        if inp.dims != operand.dims:
            fail(instr, f"scatter inputs must have equal dimensions, got {operand} and {inp}")
        if upd.dims != updates[0].dims:
            fail(instr, f"scatter updates must have equal dimensions, got {updates[0]} and {upd}")
        if upd.element_type != inp.element_type:
            fail(instr, f"update {k} {upd} must have the element type of input {k} {inp}")

    window_dims = get_attr(instr, "update_window_dims")
    inserted = get_attr(instr, "inserted_window_dims")
    to_operand = get_attr(instr, "scatter_dims_to_operand_dims")
    index_vector_dim = get_attr(instr, "index_vector_dim")
    input_batching = get_attr(instr, "input_batching_dims", ())
    indices_batching = get_attr(instr, "scatter_indices_batching_dims", ())

    batch_dims, _ = _index_batch_dims(instr, indices, index_vector_dim, len(to_operand))
    update = updates[0]
    check_dims_in_rank(instr, window_dims, update.rank, "update_window_dims", ascending=True)
    check_dims_in_rank(instr, inserted, operand.rank, "inserted_window_dims", ascending=True)
    check_dims_in_rank(instr, to_operand, operand.rank, "scatter_dims_to_operand_dims")
    _check_batching_dims(instr, input_batching, indices_batching, operand, indices, index_vector_dim,
                         ("input_batching_dims", "scatter_indices_batching_dims"))
    if set(inserted) & set(input_batching):
        fail(instr, "inserted_window_dims and input_batching_dims must be disjoint")
    if len(window_dims) + len(inserted) + len(input_batching) != operand.rank:
        fail(instr, f"update_window_dims, inserted_window_dims and input_batching_dims must together cover "
                    f"the operand rank {operand.rank}")
    if update.rank != len(window_dims) + len(batch_dims):
        fail(instr, f"updates {update} must have rank {len(window_dims) + len(batch_dims)} "
                    f"(window dims + scatter batch dims)")

    removed = set(inserted) | set(input_batching)
    operand_window = [operand.dims[i] for i in range(operand.rank) if i not in removed]
    for window_dim, bound in zip(window_dims, operand_window):
        if update.dims[window_dim] > bound >= 0:
            fail(instr, f"update window dimension {window_dim} (size {update.dims[window_dim]}) exceeds the "
                        f"operand's window bound {bound}")
    scatter_dims = [update.dims[i] for i in range(update.rank) if i not in window_dims]
    if scatter_dims != batch_dims:
        fail(instr, f"update scatter dimensions {scatter_dims} must equal the indices' batch dimensions {batch_dims}")

    check_scalar_reducer(instr, computation_attr(instr, "to_apply"), "to_apply", inputs, inputs)
    results = [array(s.element_type, s.dims, s.dynamic) for s in inputs]
    return results[0] if n == 1 else Shape.tuple(results)
