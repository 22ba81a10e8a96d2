"""`widen-narrow-reductions`: sums and products of floats narrower than f32 (bf16, f16, f8) are
accumulated in f32 and rounded once, as XLA's CPU compiler does by normalizing bf16 arithmetic to
f32 (FloatNormalization) and as the reference evaluator does (evaluator/reduction.py):

    r = bf16[n] reduce(x, c), to_apply=add_bf16
      →  r = bf16[n] convert(f32[n] reduce(convert(x), convert(c)), to_apply=add_f32)

Only a single-input reduction whose combiner is one `add` or `multiply` of its two parameters is
rewritten: maximum and minimum are exact in any type, and a general combiner computes what it
says. The converts fuse into the reduction's kernel (it reads the narrow input and writes the
narrow result).

A reduce-window is not widened: XLA:CPU folds each window in its own type (a bf16 window sum of
64 values, and a bf16 `jnp.cumsum`, are XLA's bit for bit that way), and a long cumulative window
is first split by `reduce-window-rewriter` into XLA's two-level scan of blocks of 16, whose
running sums never grow long enough to stall. Except a cumulative window along a *symbolic* axis,
which that rewrite leaves whole: accumulated in its own type, a long bf16 running sum stalls
(once it reaches 256 its ulp is 2 and adding values below 1 rounds back to it: 1000 values in
[0, 1) gave 256 where XLA's blocks give 492), so it accumulates in f32 and is rounded per output
(the scan emitter takes the convert as its epilogue, analysis/scan.py `rounds_scan`).

Part of each backend's prologue (passes/pipeline.py): the numbers must not depend on whether the
optimization passes run.
"""

from __future__ import annotations

from hlocc.analysis.scan import ORDERED_COMBINERS, scan_axis
from hlocc.evaluator.reduction import fast_combiner
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import Shape, primitive_type
from hlocc.passes.base import HloPass, register_hlo_pass

WIDENED_COMBINERS = ORDERED_COMBINERS  # the float folds whose result depends on their order and type


def widened_combiner(instr: HloInstruction) -> str | None:
    """The combiner opcode when `instr` is a reduce or reduce-window that accumulates in a float
    type narrower than f32 with a single `add`/`multiply` of its two parameters, else None."""
    if instr.opcode not in ("reduce", "reduce-window") or len(instr.operands) != 2 or not instr.shape.is_array:
        return None
    if instr.opcode == "reduce-window" and not _symbolic_scan(instr):
        return None
    et = instr.shape.element_type
    if not et.is_float or et.bits >= 32:
        return None
    combiner = fast_combiner(instr.to_apply)
    return combiner if combiner in WIDENED_COMBINERS else None


@register_hlo_pass
class WidenNarrowReductions(HloPass):
    """The rewrite in the module doc, in every computation (fusion bodies included)."""

    name = "widen-narrow-reductions"

    def run(self, module: HloModule) -> bool:
        combiners: dict[str, HloComputation] = {}
        names = {c.name for c in module.computations}
        changed = False
        for comp in list(module.computations):
            for instr in list(comp.instructions):
                opcode = widened_combiner(instr)
                if opcode is None:
                    continue
                if opcode not in combiners:
                    combiners[opcode] = module.add_computation(_f32_combiner(module, opcode, names))
                _widen(comp, instr, combiners[opcode])
                changed = True
        return changed


def _symbolic_scan(instr: HloInstruction) -> bool:
    """A cumulative reduce-window along a symbolic axis (module doc)."""
    found = scan_axis(instr)
    return found is not None and isinstance(instr.operand(0).shape.dims[found[0]], DimExpr)


def _f32_combiner(module: HloModule, opcode: str, taken: set[str]) -> HloComputation:
    name, k = f"{opcode}_f32_widened", 0
    while name in taken:
        k += 1
        name = f"{opcode}_f32_widened.{k}"
    taken.add(name)
    comp = HloComputation(name)
    scalar = Shape.array(primitive_type("f32"), ())
    a = comp.add_fresh(HloInstruction(module.unique_name("lhs"), "parameter", scalar, parameter_number=0))
    b = comp.add_fresh(HloInstruction(module.unique_name("rhs"), "parameter", scalar, parameter_number=1))
    comp.root = comp.add_fresh(HloInstruction(module.unique_name(opcode), opcode, scalar, [a, b]))
    return comp


def _widen(comp: HloComputation, instr: HloInstruction, combiner: HloComputation) -> None:
    f32 = primitive_type("f32")
    x, init = instr.operands
    wide_x = comp.add("convert", [x], shape=x.shape.with_element_type(f32))
    wide_init = comp.add("convert", [init], shape=init.shape.with_element_type(f32))
    attrs = {**instr.attrs, "to_apply": combiner}
    wide = comp.add(instr.opcode, [wide_x, wide_init], attrs, shape=instr.shape.with_element_type(f32))
    narrow = comp.add("convert", [wide], shape=instr.shape)
    instr.replace_all_uses_with(narrow)
    comp.remove_instruction(instr)
    narrow.name = instr.name  # (its users and the printed module keep the name)
    narrow.attrs.update({k: v for k, v in instr.attrs.items() if k == "metadata"})


__all__ = ["WIDENED_COMBINERS", "WidenNarrowReductions", "widened_combiner"]
