"""The one op table of the PyTorch frontend: ATen op name (`aten.add.Tensor`, a Python operator
for SymInt arithmetic) → its rule. A rule takes the `LoweringContext` and the node's lowered
arguments and returns the instruction of its result (a list for several results, None for one it
does not lower); the result shape PyTorch computed for the node is its shape rule, and
`lowering.py` checks every result against it.

The entries live by concept in `ops_elementwise.py`, `ops_shape.py`, `ops_reduce.py` and
`ops_linalg.py`, `ops_embedding.py`, `ops_sort.py`, `ops_conv.py`,
`ops_pool.py`, `ops_strided.py`. Random ops are refused by name (`refusal`), never lowered.
"""

from __future__ import annotations

from hlocc.frontends.torch import (
    ops_conv,
    ops_elementwise,
    ops_embedding,
    ops_linalg,
    ops_pool,
    ops_reduce,
    ops_shape,
    ops_sort,
    ops_special,
    ops_strided,
)

ATEN_OPS = {**ops_elementwise.OPS, **ops_shape.OPS, **ops_reduce.OPS, **ops_linalg.OPS, **ops_embedding.OPS,
            **ops_conv.OPS, **ops_pool.OPS, **ops_sort.OPS, **ops_special.OPS, **ops_strided.OPS}


def refusal(name: str) -> str | None:
    """Why op `name` is never lowered, or None."""
    parts = name.split(".")
    if len(parts) >= 2 and parts[1] in ops_linalg.RANDOM:
        return "draws random numbers (hlocc does not reproduce PyTorch's generator stream)"
    return None


def why_not_lowered(name: str) -> str | None:
    """None when the table lowers op `name`, else the reason."""
    return refusal(name) or (None if name in ATEN_OPS else "no lowering for this op")
