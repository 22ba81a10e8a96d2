"""`constant-folding`: evaluate at compile time what depends only on constants (XLA's
HloConstantFolding), with the reference evaluator, so a folded value is exactly what the program
would have computed.

Folded: an instruction with at least one constant operand whose other operands are constants,
broadcasts of constants or iotas (tuples of those count as such). Like XLA, not folded:
  * broadcast and iota themselves — a broadcast of a scalar is cheaper to keep than a big literal,
    and algsimp moves elementwise ops below broadcasts so that the small op folds instead;
  * parameter, constant, tuple, after-all, and while (a loop may run long at compile time);
  * fft (slow to evaluate), custom-call (the evaluator cannot run it);
  * anything with a side effect or calling a computation with rng or a side effect;
  * pad of a broadcast (XLA's compile-time guard) and instructions with control dependencies;
  * results or operands of more than MAX_FOLDED_ELEMENTS elements.

Why MAX_FOLDED_ELEMENTS is 2**16 and not XLA's 45 million: a folded literal lives in the HLO text
(printed in full), is evaluated by numpy at compile time and is later read from memory by kernels;
above some tens of thousands of elements all three cost more than recomputing the value in a fused
kernel, and hlocc's compile time should stay roughly linear in the module text. Ops the evaluator
does not support are left unfolded.
"""

from __future__ import annotations

import numpy as np

from hlocc.errors import HloError
from hlocc.hlo.call_graph import control_referenced_names, fusion_computations, has_control_dependencies
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.dce import remove_dead_roots

MAX_FOLDED_ELEMENTS = 1 << 16
NEVER_FOLDED = frozenset({"broadcast", "iota", "parameter", "constant", "tuple", "after-all", "while", "fft",
                          "custom-call", "rng", "rng-bit-generator", "rng-get-and-update-state",
                          "partition-id", "replica-id"})


def _is_constant_like(instr: HloInstruction) -> bool:
    """A constant, a broadcast of one, an iota, or a tuple of those."""
    if instr.opcode == "tuple":
        return all(_is_constant_like(o) for o in instr.operands)
    return (instr.opcode in ("constant", "iota")
            or (instr.opcode == "broadcast" and instr.operands[0].opcode == "constant"))


def _has_constant_operand(instr: HloInstruction) -> bool:
    return any(o.opcode == "constant" or (o.opcode == "tuple" and _has_constant_operand(o)) for o in instr.operands)


def _elements(instr: HloInstruction) -> int:
    return sum(leaf.num_elements for leaf in instr.shape.leaves() if leaf.is_array)


class _Foldability:
    """Whether instructions may be folded; caches the verdict on called computations."""

    def __init__(self):
        self._computations: dict[int, bool] = {}
        self._memo: dict[int, bool] = {}

    def instruction(self, instr: HloInstruction) -> bool:
        if instr.opcode in NEVER_FOLDED or instr.has_side_effect(self._memo):
            return False
        if instr.opcode == "pad" and instr.operands[0].opcode == "broadcast":
            return False
        if not instr.shape.is_static or any(not o.shape.is_static for o in instr.operands):
            return False
        if max([_elements(instr)] + [_elements(o) for o in instr.operands]) > MAX_FOLDED_ELEMENTS:
            return False
        return all(self.computation(c) for c in instr.called_computations())

    def computation(self, comp: HloComputation) -> bool:
        """No rng, side effect, loop or unfoldable op inside (recursively)."""
        verdict = self._computations.get(id(comp))
        if verdict is None:
            self._computations[id(comp)] = False  # cycles are invalid HLO; stop them anyway
            verdict = all(i.opcode in ("parameter", "constant", "tuple", "broadcast", "iota")
                          or self.instruction(i) for i in comp.instructions)
            self._computations[id(comp)] = verdict
        return verdict


def fold_constants(comp: HloComputation, foldable: _Foldability, evaluator) -> bool:
    referenced = control_referenced_names(comp)
    folded = []
    for instr in comp.post_order():
        if not (_has_constant_operand(instr) and all(_is_constant_like(o) for o in instr.operands)):
            continue
        if has_control_dependencies(instr, referenced) or not foldable.instruction(instr):
            continue
        try:
            value = evaluator.evaluate_instruction(instr, [_value(o, evaluator) for o in instr.operands])
        except HloError:
            continue  # unsupported by the evaluator, or a run-time error: keep it for run time
        constant = comp.add("constant", (), shape=instr.shape, literal=_owned(value))
        instr.replace_all_uses_with(constant)
        folded.append(instr)
    remove_dead_roots(comp, folded)
    return bool(folded)


def _value(instr: HloInstruction, evaluator):
    """The value of a constant-like instruction (see `_is_constant_like`)."""
    if instr.opcode == "constant":
        return instr.literal
    return evaluator.evaluate_instruction(instr, [_value(o, evaluator) for o in instr.operands])


def _owned(value):
    """`value` as arrays of its own (an evaluated reshape may be a view of an operand's literal)."""
    if isinstance(value, tuple):
        return tuple(_owned(v) for v in value)
    return np.array(value, copy=True)


@register_hlo_pass
class HloConstantFolding(HloPass):
    """Replaces instructions computed from constants by their value."""

    name = "constant-folding"

    def run(self, module: HloModule) -> bool:
        from hlocc.evaluator import Evaluator

        evaluator = Evaluator(seed=0, max_while_iterations=0)
        foldable = _Foldability()
        fused = fusion_computations(module)
        changed = False
        for comp in module.computations:
            if id(comp) not in fused:
                changed |= fold_constants(comp, foldable, evaluator)
        return changed
