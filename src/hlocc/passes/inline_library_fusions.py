"""`inline-library-fusions`: inline every fusion that holds a dot or a convolution (XLA's gemm and
cuDNN fusions, which a module optimized by XLA brings), so the dot runs as a library call and the
rest as kernels instead of the whole fusion on the host. hlocc's own dot fusions
(passes/gemm_fusion.py, made only with `gemm="codegen"`) stay: the matmul emitter compiles them.

The runtime's pipelines run it before scheduling (passes/pipeline.py `BACKEND_PIPELINES`); the
cuda pipeline runs it first too, so that convolution-to-gemm sees the convolutions such fusions hold.
"""

from __future__ import annotations

from typing import ClassVar

from hlocc.analysis.hero import UNFUSED_KINDS, EmitterKind, emitter_kind
from hlocc.hlo.ir import HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.call_inliner import inline_call
from hlocc.passes.gemm_fusion import is_gemm_fusion

_LIBRARY_KINDS = (EmitterKind.GEMM, EmitterKind.CONVOLUTION)


def _is_library_op(instr) -> bool:
    """A dot or convolution (by opcode: analysing each fused op as a fusion of its own cost a
    walk per op), or a nested fusion that is one."""
    if instr.opcode == "fusion":
        return emitter_kind(instr) in _LIBRARY_KINDS
    return UNFUSED_KINDS.get(instr.opcode) in _LIBRARY_KINDS


def inline_library_fusions(module: HloModule) -> list[str]:
    """Inline the fusions holding a dot or a convolution; returns the fusions' names."""
    inlined = []
    for comp in list(module.computations):
        for instr in [i for i in comp.instructions if i.opcode == "fusion" and not is_gemm_fusion(i)]:
            fused = instr.fused_computation
            if any(_is_library_op(i) for i in fused.instructions):
                inlined.append(instr.name)
                inline_call(instr, fused)
                module.remove_computations([fused])
    return inlined


@register_hlo_pass
class InlineLibraryFusions(HloPass):
    """Inlines gemm and convolution fusions (module doc)."""

    name = "inline-library-fusions"
    # The runtime schedules right after this pass, from the order inlining leaves (the inlined ops
    # at the end of their computation), as it did before inlining became a pass: re-sorting would
    # change the schedules.
    sort_after: ClassVar[bool] = False

    def run(self, module: HloModule) -> bool:
        return bool(inline_library_fusions(module))
