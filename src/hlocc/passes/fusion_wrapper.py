"""`fusion-wrapper`: every op that still needs a generated kernel after fusion becomes a fusion of
its own (XLA's FusionWrapper, which runs after the fusion passes), so that each kernel hlocc emits
is a fusion instruction and the emitters see one kind of input.

Wrapped: elementwise ops (except a copy that keeps its layout, which is a memcpy), bitcast-convert,
broadcast, concatenate, dynamic-slice, dynamic-update-slice, gather, iota, map, pad, reduce,
reduce-precision, reduce-window, reshape, reverse, scatter, select, slice, transpose, and — since
hlocc has no layout normalization turning them into transposes — copies that change the layout.
Not wrapped: parameters, constants, tuples, get-tuple-elements, bitcasts and reshapes that are
bitcasts in their layouts (no kernel: the runtime aliases their buffers), and the
library and host ops (dot and convolution go to BLAS/cuBLAS in hlocc, unlike XLA's wrapper which
lists them for its elemental fallback).

The wrapper visits the entry computation and, recursively, the computations of while,
conditional, call and async ops. A wrapped op `add` becomes `wrapped_add = ... fusion(...),
kind=kLoop, calls=wrapped_add_computation` (kInput for reductions, scatters and tiled transposes,
XLA's ChooseFusionKind).
"""

from __future__ import annotations

from hlocc.analysis.hero import is_elementwise
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.shape_util import reshape_is_row_major_bitcast
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.fusible import choose_fusion_kind
from hlocc.passes.fusion_utils import FusionBuilder

_WRAPPED = frozenset({
    "bitcast-convert", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "iota",
    "map", "pad", "reduce", "reduce-precision", "reduce-window", "reshape", "reverse", "scatter", "select",
    "slice", "transpose", "stochastic-convert",
})
_RECURSE_INTO = frozenset({"while", "conditional", "call", "async-start"})


def must_wrap(instr: HloInstruction) -> bool:
    """Whether `instr` needs a generated kernel but is not in a fusion (module doc)."""
    if instr.opcode == "copy":
        return not instr.shape.same_layout(instr.operand(0).shape)
    if instr.opcode == "reshape" and reshape_is_row_major_bitcast(instr.operand(0).shape, instr.shape):
        return False  # it moves no data: the runtime aliases its buffer (a bitcast, as XLA makes it)
    return instr.opcode in _WRAPPED or is_elementwise(instr)


@register_hlo_pass
class FusionWrapper(HloPass):
    """See the module doc."""

    name = "fusion-wrapper"

    def run(self, module: HloModule) -> bool:
        builder = FusionBuilder(module)
        changed = False
        visited: set[int] = set()

        def visit(comp: HloComputation) -> None:
            nonlocal changed
            if id(comp) in visited:
                return
            visited.add(id(comp))
            for instr in comp.post_order():
                if instr.opcode in _RECURSE_INTO:
                    for callee in instr.called_computations():
                        visit(callee)
                    continue
                if not must_wrap(instr):
                    continue
                opcode = instr.opcode
                fusion = builder.create_fusion(instr, choose_fusion_kind(instr, instr))
                fusion.name = builder.instruction_names.unique(f"wrapped_{opcode}")
                comp_ = fusion.attrs["calls"]
                comp_.name = builder.computation_names.unique(f"wrapped_{opcode}_computation")
                changed = True

        visit(module.entry)
        builder.finish()
        return changed
