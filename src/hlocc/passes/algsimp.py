"""`algsimp`: the algebraic simplifier (XLA's AlgebraicSimplifier), as a table of rewrite rules.

The rules live in three tables by concept: `algsimp_rules_arith` (identity and absorbing
elements, involutions, select, conversions), `algsimp_rules_shape` (reshape, transpose,
broadcast, slice, pad, concatenate, reverse, copy, dynamic slices, elementwise ops of broadcasts)
and `algsimp_rules_dot` (transposes folded into dot dimension numbers). Each rule is a pattern and a
rewrite (passes/pattern.py); its name states the rewrite in HLO terms.

Every rule preserves values exactly, bit for bit up to NaN payloads: no reassociation, and on
floats no rule that only holds for finite values or ignores the sign of zero (x + 0.0 is not x
when x is -0.0; x * 0.0 is not 0.0 when x is NaN or infinite). Rules that hold only for integers
say so in their patterns.

The driver visits each computation (fusion bodies aside) in post order. For each instruction it
applies the first rule that rewrites it, then tries the rules again on the replacement when a rule
created it (up to MAX_CHAIN times); the fixed-point pipeline repeats the pass until nothing
changes. A replacement must have the instruction's shape; a new instruction takes over the
instruction's layout, an existing one must already have it. Replaced instructions, and operands only
they used, are removed.
"""

from __future__ import annotations

from hlocc.hlo.call_graph import fusion_computations
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.algsimp_rules_arith import ARITH_RULES
from hlocc.passes.algsimp_rules_dot import DOT_RULES
from hlocc.passes.algsimp_rules_shape import SHAPE_RULES
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import remove_dead_roots
from hlocc.passes.pattern import RuleTable

ALGSIMP_RULES = RuleTable(ARITH_RULES + SHAPE_RULES + DOT_RULES)
MAX_CHAIN = 8


def rewrite_once(instr: HloInstruction, table: RuleTable) -> tuple[HloInstruction, bool] | None:
    """The replacement the first applicable rule gives for `instr` and whether the rule created it,
    or None. Instructions a rule created but did not use (it declined, or its result had the wrong
    shape) are removed again."""
    comp = instr.parent
    for rule, match in table.matches(instr):
        mark = len(comp.instructions)
        replacement = rule.rewrite(match)
        created = comp.instructions[mark:]
        if replacement is not None and replacement is not instr and replacement.shape == instr.shape:
            is_new = any(c is replacement for c in created)
            if is_new:
                replacement.shape = instr.shape  # the new instruction takes over the layout
                return replacement, True
            if replacement.shape.same_layout(instr.shape):
                return replacement, False
        comp.remove_instructions(created)
    return None


def simplify_computation(comp: HloComputation, table: RuleTable) -> bool:
    replaced: list[HloInstruction] = []
    for instr in comp.post_order():
        current = instr
        for _ in range(MAX_CHAIN):
            if current.parent is not comp or (not current.users and current is not comp.root):
                break  # dead code is dce's business
            rewritten = rewrite_once(current, table)
            if rewritten is None:
                break
            replacement, is_new = rewritten
            current.replace_all_uses_with(replacement)
            replaced.append(current)
            if not is_new:
                break
            current = replacement
    remove_dead_roots(comp, replaced)
    return bool(replaced)


@register_hlo_pass
class AlgebraicSimplifier(HloPass):
    """Applies the algebraic simplification rules (see the module docstring)."""

    name = "algsimp"
    rules: RuleTable = ALGSIMP_RULES

    def run(self, module: HloModule) -> bool:
        fused = fusion_computations(module)
        changed = False
        for comp in module.computation_post_order():
            if id(comp) not in fused:
                changed |= simplify_computation(comp, self.rules)
        return changed
