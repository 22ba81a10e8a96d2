"""Small HLO constructions that more than one producer of HLO needs: a filled array (`full`) and
gelu in its erf and tanh forms (`gelu`: the PyTorch frontend's F.gelu, cuBLASLt's GELU epilogue in
hlo/library_calls.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import Shape


def full(comp: HloComputation, value: Any, shape: Shape) -> HloInstruction:
    """`value` broadcast to `shape` (a scalar constant of its element type)."""
    scalar = comp.add("constant", shape=Shape.array(shape.element_type, ()),
                      literal=np.array(value).astype(shape.element_type.dtype))
    return scalar if shape.rank == 0 else comp.add("broadcast", [scalar], {"dimensions": ()}, shape=shape)


def gelu(comp: HloComputation, x: HloInstruction, approximate: str = "none") -> HloInstruction:
    """0.5·x·(1 + erf(x/√2)), or with approximate="tanh" 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))),
    in x's element type."""
    def c(v):
        return full(comp, v, x.shape)

    if approximate == "tanh":
        cube = comp.add("multiply", [comp.add("multiply", [x, x]), x])
        inner = comp.add("multiply", [c(math.sqrt(2 / math.pi)),
                                      comp.add("add", [x, comp.add("multiply", [c(0.044715), cube])])])
        t = comp.add("tanh", [inner])
    else:
        t = comp.add("erf", [comp.add("multiply", [x, c(1 / math.sqrt(2))])])
    return comp.add("multiply", [comp.add("multiply", [x, c(0.5)]), comp.add("add", [c(1), t])])


__all__ = ["full", "gelu"]
