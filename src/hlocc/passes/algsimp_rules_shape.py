"""Algebraic simplifier rules on data movement: no-op reshapes, transposes, broadcasts, slices,
pads, concatenates, reverses, copies and dynamic slices; chains of one op folded into one; data
movement of a broadcast scalar done on the scalar; elementwise ops on broadcasts done before the
broadcast (a smaller op, which constant folding can then fold); zero-element results.

All of these only move or select elements, so they are exact for every element type. Dynamic
dimensions are left alone where a rule would need their run-time size.
"""

from __future__ import annotations

import numpy as np

from hlocc.hlo.attributes import SliceDim
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.types import Shape
from hlocc.passes.pattern import Match, Pat, Rule, op, splat_value, var


def _x(m: Match) -> HloInstruction:
    return m["x"]


def _static(instr: HloInstruction) -> bool:
    return instr.shape.is_array and instr.shape.is_static


def _sized(instr: HloInstruction) -> bool:
    """An array whose every dim is a size for the whole run: a number or a symbolic expression
    (hlo/symbolic.py), not a bounded dynamic dim (`<=N`, whose runtime size the dims do not say)."""
    shape = instr.shape
    return shape.is_array and not shape.has_bounded_dims


def _is_scalar_broadcast(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and instr.operands[0].shape.rank == 0


def _broadcast(m: Match, x: HloInstruction, dims) -> HloInstruction:
    return m.add("broadcast", [x], {"dimensions": tuple(dims)}, shape=m.root.shape)


# -- broadcast ----------------------------------------------------------------------------------
def _identity_broadcast(instr: HloInstruction) -> bool:
    return tuple(instr.attrs.get("dimensions", ())) == tuple(range(instr.shape.rank))


def _broadcast_of_broadcast(m: Match) -> HloInstruction:
    inner, outer = m["inner"].attrs["dimensions"], m.root.attrs["dimensions"]
    return _broadcast(m, m["x"], [outer[d] for d in inner])


def _moved_scalar(m: Match) -> HloInstruction | None:
    """Reshape/transpose/slice/reverse/broadcast/copy of broadcast(scalar) → broadcast(scalar)."""
    if not _static(m.root):
        return None
    return _broadcast(m, m["bcast"].operands[0], ())


def _degenerate_map(src: tuple[int, ...], dst: tuple[int, ...]) -> list[int | None] | None:
    """For a reshape `src` → `dst` that only inserts or deletes size-1 dims: where each src dim
    goes (None for a size-1 src dim). None when the reshape does more than that."""
    if [d for d in src if d != 1] != [d for d in dst if d != 1]:
        return None
    targets = iter(j for j, d in enumerate(dst) if d != 1)
    return [None if d == 1 else next(targets) for d in src]


def _reshape_of_broadcast(m: Match) -> HloInstruction | None:
    """reshape(broadcast(x)) where the reshape only adds or drops size-1 dims and x has none:
    one broadcast of x to the reshape's shape. Symbolic dims count as dims that are not 1: the
    reshape keeps them in order whatever their values, so the rewrite holds at every size."""
    x, bcast = m["x"], m["bcast"]
    if not (_sized(m.root) and _sized(bcast)) or 1 in x.shape.dims:
        return None
    where = _degenerate_map(bcast.shape.dims, m.root.shape.dims)
    if where is None:
        return None
    return _broadcast(m, x, [where[d] for d in bcast.attrs["dimensions"]])


def _broadcast_of_reshape(m: Match) -> HloInstruction | None:
    """broadcast(reshape(x)) where the reshape only adds or drops size-1 dims and x has none:
    broadcast x directly."""
    x, reshape = m["x"], m["reshape"]
    if not (_sized(x) and _sized(reshape)) or 1 in x.shape.dims:
        return None
    where = _degenerate_map(x.shape.dims, reshape.shape.dims)
    if where is None:
        return None
    dims = m.root.attrs["dimensions"]
    return _broadcast(m, x, [dims[where[i]] for i in range(x.shape.rank)])


# -- reshape and transpose ----------------------------------------------------------------------
def _reshape_of_reshape(m: Match) -> HloInstruction:
    return m.add("reshape", [m["x"]], shape=m.root.shape)


def _identity_transpose(instr: HloInstruction) -> bool:
    return tuple(instr.attrs["dimensions"]) == tuple(range(instr.shape.rank))


def _transpose_of_transpose(m: Match) -> HloInstruction:
    inner, outer = m["inner"].attrs["dimensions"], m.root.attrs["dimensions"]
    perm = tuple(inner[d] for d in outer)
    if perm == tuple(range(len(perm))):
        return m["x"]
    return m.add("transpose", [m["x"]], {"dimensions": perm})


def _transpose_is_reshape(m: Match) -> HloInstruction | None:
    """A transpose that only moves size-1 dims keeps the element order: a reshape."""
    x = m["x"]
    if not _static(x):
        return None
    perm = m.root.attrs["dimensions"]
    moved = [p for p in perm if x.shape.dims[p] != 1]
    if moved != sorted(moved):
        return None
    return m.add("reshape", [x], shape=m.root.shape)


# -- slice, pad, concatenate, reverse -----------------------------------------------------------
def _full_slice(instr: HloInstruction) -> bool:
    dims = instr.operands[0].shape.dims
    return all(s.start == 0 and s.stride == 1 and s.limit == d for s, d in zip(instr.attrs["slice"], dims))


def _slice_of_slice(m: Match) -> HloInstruction | None:
    """slice(slice(x)): output index j of a dim reads inner index s2 + j*t2, which reads
    x index s1 + (s2 + j*t2)*t1."""
    if not _static(m["x"]):
        return None
    composed = []
    for inner, outer, n in zip(m["inner"].attrs["slice"], m.root.attrs["slice"], m.root.shape.dims):
        start = inner.start + outer.start * inner.stride
        stride = inner.stride * outer.stride
        composed.append(SliceDim(start, start + (n - 1) * stride + 1 if n else start, stride))
    return m.add("slice", [m["x"]], {"slice": tuple(composed)})


def _no_padding(instr: HloInstruction) -> bool:
    return all(p.lo == 0 and p.hi == 0 and p.interior == 0 for p in instr.attrs["padding"])


def _concatenate_without_empty(m: Match) -> HloInstruction | None:
    axis = m.root.attrs["dimensions"][0]
    kept = [o for o in m.root.operands if o.shape.dims[axis] != 0]
    if len(kept) == len(m.root.operands) or not kept or not _static(m.root):
        return None
    if len(kept) == 1:
        return kept[0]
    return m.add("concatenate", kept, {"dimensions": (axis,)}, shape=m.root.shape)


def _reverse_of_reverse(m: Match) -> HloInstruction | None:
    same = sorted(m["inner"].attrs["dimensions"]) == sorted(m.root.attrs["dimensions"])
    return m["x"] if same else None


def _reverse_of_unit_dims(instr: HloInstruction) -> bool:
    return all(instr.shape.dims[d] == 1 for d in instr.attrs["dimensions"])


# -- dynamic slices -----------------------------------------------------------------------------
def _constant_starts(instr: HloInstruction, first: int) -> list[int] | None:
    """The start indices (scalar operands from `first` on) when all are constants."""
    starts = []
    for index in instr.operands[first:]:
        value = splat_value(index) if index.shape.rank == 0 else None
        if value is None:
            return None
        starts.append(int(value))
    return starts


def _dynamic_slice_to_slice(m: Match) -> HloInstruction | None:
    """dynamic-slice with constant starts: a slice at the starts clamped into [0, dim - size]."""
    x = m.root.operands[0]
    if not _static(x):
        return None
    starts = _constant_starts(m.root, 1)
    if starts is None or len(starts) != x.shape.rank:
        return None
    sizes = m.root.attrs["dynamic_slice_sizes"]
    spec = []
    for start, size, dim in zip(starts, sizes, x.shape.dims):
        begin = min(max(start, 0), dim - size)
        spec.append(SliceDim(begin, begin + size, 1))
    return m.add("slice", [x], {"slice": tuple(spec)})


def _full_dynamic_slice(instr: HloInstruction) -> bool:
    """A dynamic slice of the whole operand (starts clamp to 0)."""
    x = instr.operands[0]
    return _static(x) and tuple(instr.attrs["dynamic_slice_sizes"]) == x.shape.dims


def _full_update(instr: HloInstruction) -> bool:
    """A dynamic update of the whole operand (starts clamp to 0): the result is the update."""
    return _static(instr) and instr.operands[1].shape.dims == instr.shape.dims


# -- elementwise ops on broadcasts --------------------------------------------------------------
def _elementwise_of_broadcasts(instr: HloInstruction) -> bool:
    info = OPCODES.get(instr.opcode)
    if info is None or not info.is_elementwise or not instr.operands or not _static(instr):
        return False
    first = instr.operands[0]
    if first.opcode != "broadcast" or first.operands[0].shape.num_elements >= instr.shape.num_elements:
        return False
    dims, source = first.attrs["dimensions"], first.operands[0].shape.dims
    return all(o.opcode == "broadcast" and o.attrs["dimensions"] == dims and o.operands[0].shape.dims == source
               for o in instr.operands)


def _sink_broadcast(m: Match) -> HloInstruction:
    """op(broadcast(a), broadcast(b)) → broadcast(op(a, b)): the same values, computed once per
    element of the broadcast operands."""
    root = m.root
    sources = [o.operands[0] for o in root.operands]
    shape = Shape.array(root.shape.element_type, sources[0].shape.dims)
    small = m.computation.add_fresh(root.clone(sources, shape=shape, name=m.computation.unique_name(root.opcode)))
    return _broadcast(m, small, root.operands[0].attrs["dimensions"])


# -- elementwise ops on reshapes (XLA's ReshapeMover) --------------------------------------------
def _reshape_source(instr: HloInstruction) -> tuple[int, ...] | None:
    """The common source dims when `instr` is an elementwise op whose operands are reshapes of
    arrays of those dims or broadcast scalars, and sinking the reshape below it adds no reshape
    (one of the reshapes has this op as its only user)."""
    info = OPCODES.get(instr.opcode)
    if info is None or not info.is_elementwise or not _static(instr):
        return None
    reshapes = [o for o in instr.operands if o.opcode == "reshape"]
    if not reshapes or not any(len(r.users) == 1 for r in reshapes):
        return None
    source = reshapes[0].operands[0].shape
    if not source.is_static or source.dims == instr.shape.dims:
        return None
    for o in instr.operands:
        if not (_is_scalar_broadcast(o) or (o.opcode == "reshape" and o.operands[0].shape.dims == source.dims)):
            return None
    return source.dims


def _has_reshape_source(instr: HloInstruction) -> bool:
    return _reshape_source(instr) is not None


def _sink_reshape(m: Match) -> HloInstruction:
    """op(reshape(a), reshape(b), broadcast(s)) → reshape(op(a, b, broadcast'(s))): the same
    elementwise values in another arrangement; reshapes meeting below then cancel."""
    root = m.root
    dims = _reshape_source(root)
    operands = []
    for o in root.operands:
        if o.opcode == "reshape":
            operands.append(o.operands[0])
        else:
            shape = Shape.array(o.shape.element_type, dims)
            operands.append(m.add("broadcast", [o.operands[0]], {"dimensions": ()}, shape=shape))
    shape = Shape.array(root.shape.element_type, dims)
    moved = m.computation.add_fresh(root.clone(operands, shape=shape, name=m.computation.unique_name(root.opcode)))
    return m.add("reshape", [moved], shape=root.shape)


# -- zero-element results -----------------------------------------------------------------------
def _zero_elements(instr: HloInstruction) -> bool:
    """An array result with no elements, computed without side effects (any value will do)."""
    return (instr.opcode not in ("constant", "parameter", "custom-call") and _static(instr)
            and instr.shape.num_elements == 0 and not instr.has_side_effect())


def _empty_constant(m: Match) -> HloInstruction:
    literal = np.zeros(m.root.shape.dims, dtype=m.root.shape.dtype)
    return m.computation.add("constant", (), shape=m.root.shape, literal=literal)


def _reduce_of_empty(instr: HloInstruction) -> bool:
    """A single-result reduce over zero elements: every output element is the init value."""
    return (len(instr.operands) == 2 and _static(instr) and instr.operands[0].shape.is_static
            and instr.operands[0].shape.num_elements == 0 and instr.operands[1].shape.rank == 0)


_MOVERS = ("reshape", "transpose", "slice", "reverse", "broadcast", "copy")
_ELEMENTWISE = tuple(name for name, info in OPCODES.items() if info.is_elementwise)

SHAPE_RULES: tuple[Rule, ...] = (
    Rule("copy(x) → x", op("copy", var("x")), _x),
    Rule("bitcast(x) to x's shape → x", op("bitcast", var("x")), _x),
    Rule("reshape(x) to x's shape → x", op("reshape", var("x"), where=lambda i: i.shape == i.operands[0].shape), _x),
    Rule("reshape(reshape(x)) → reshape(x)", op("reshape", op("reshape", var("x"))), _reshape_of_reshape),
    Rule("broadcast(x) to x's shape → x", op("broadcast", var("x"), where=_identity_broadcast), _x),
    Rule("broadcast(broadcast(x)) → broadcast(x)", op("broadcast", op("broadcast", var("x"), bind="inner")),
         _broadcast_of_broadcast),
    Rule("mover(broadcast(scalar)) → broadcast(scalar)", op(_MOVERS, var("bcast", _is_scalar_broadcast)),
         _moved_scalar),
    Rule("reshape(broadcast(x)) adding or dropping 1s → broadcast(x)",
         op("reshape", op("broadcast", var("x"), bind="bcast")), _reshape_of_broadcast),
    Rule("broadcast(reshape(x)) adding or dropping 1s → broadcast(x)",
         op("broadcast", op("reshape", var("x"), bind="reshape")), _broadcast_of_reshape),
    Rule("transpose(x) with identity permutation → x", op("transpose", var("x"), where=_identity_transpose), _x),
    Rule("transpose(transpose(x)) → transpose(x) or x", op("transpose", op("transpose", var("x"), bind="inner")),
         _transpose_of_transpose),
    Rule("transpose(x) moving only 1s → reshape(x)", op("transpose", var("x")), _transpose_is_reshape),
    Rule("slice(x) of all of x → x", op("slice", var("x"), where=_full_slice), _x),
    Rule("slice(slice(x)) → slice(x)", op("slice", op("slice", var("x"), bind="inner")), _slice_of_slice),
    Rule("pad(x, v) without padding → x", op("pad", var("x"), var("v"), where=_no_padding), _x),
    Rule("concatenate(x) → x", op("concatenate", var("x")), _x),
    Rule("concatenate(..., empty, ...) → concatenate(...)", op("concatenate"), _concatenate_without_empty),
    Rule("reverse(reverse(x)) → x", op("reverse", op("reverse", var("x"), bind="inner")), _reverse_of_reverse),
    Rule("reverse(x) of size-1 dims → x", op("reverse", var("x"), where=_reverse_of_unit_dims), _x),
    Rule("dynamic-slice(x) of all of x → x", op("dynamic-slice", where=_full_dynamic_slice),
         lambda m: m.root.operands[0]),
    Rule("dynamic-slice(x, constants) → slice(x)", op("dynamic-slice"), _dynamic_slice_to_slice),
    Rule("dynamic-update-slice(x, u) of all of x → u", op("dynamic-update-slice", where=_full_update),
         lambda m: m.root.operands[1]),
    Rule("op(broadcast(a), broadcast(b)) → broadcast(op(a, b))", op(_ELEMENTWISE, where=_elementwise_of_broadcasts),
         _sink_broadcast),
    Rule("op(reshape(a), reshape(b)) → reshape(op(a, b))", op(_ELEMENTWISE, where=_has_reshape_source),
         _sink_reshape),
    Rule("reduce over zero elements → broadcast(init)", op("reduce", where=_reduce_of_empty),
         lambda m: _broadcast(m, m.root.operands[1], ())),
    Rule("zero-element result → empty constant", Pat(where=_zero_elements), _empty_constant),
)
