"""`transform.hlocc.hoist_address`: the micro-kernel's panel addresses become loop-carried offsets
advanced by MR and NR each k step, instead of being recomputed from k (seed 004's
`hoist_desc_ops`: the address setup leaves the loop and an increment replaces it; issue 17).

    transform.hlocc.hoist_address %tiled : !transform.any_op

Sets `hoist_address` on packed targets; the k loop of each register block then carries the B (and
packed A) panel offsets as iter_args. LLVM's loop strength reduction often finds the same form; the
op makes it explicit, so the assembly test can rely on it. Unlike the seed's op it returns no new
handle: the loops it changes are made later, by `lower-matmul`, and no handle to them exists yet.

Illegal: an unpacked target.
"""

from __future__ import annotations

from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def

from hlocc.codegen.schedule.handles import mark_packed


@irdl_op_definition
class HoistAddressOp(IRDLOperation):
    """Carry the micro-kernel's panel offsets in its k loop (module doc)."""

    name = "transform.hlocc.hoist_address"

    target = operand_def(TransformHandleType)

    assembly_format = "$target attr-dict `:` type($target)"


def run_hoist_address(op: HoistAddressOp, handle: object) -> tuple:
    return mark_packed(op, handle, "hoist_address")


__all__ = ["HoistAddressOp", "run_hoist_address"]
