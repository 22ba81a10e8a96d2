"""The HLO verifier: structural checks of modules and computations plus, for every instruction,
its registry facts (arity, required attributes) and its shape rule (hlo/shape_inference.py), whose
inferred shape must be compatible with the declared one (`Shape.compatible`: equal up to layout,
dynamic dimensions within their bounds). Shape rules also check attribute values (dimension
numbers in range, permutations, tuple indices), element types and the signatures of called
computations.

Errors are `HloVerifyError` whose message names the computation, the instruction and the rule:
`computation 'main': instruction 'add.3': operands of add must have equal dimensions, ...`.
"""

from __future__ import annotations

from hlocc.errors import HloVerifyError
from hlocc.hlo.call_graph import control_predecessor_names
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.opcodes import OPCODES, infer_shape
from hlocc.hlo.shape_rules_common import strip_layout


def verify_module(module: HloModule) -> None:
    """Verify every computation of `module`; the entry computation must exist and belong to it,
    computation names must be unique and called computations must belong to the module."""
    if module.entry is None:
        raise HloVerifyError(f"module '{module.name}' has no entry computation")
    if not any(comp is module.entry for comp in module.computations):
        raise HloVerifyError(f"module '{module.name}': entry computation '{module.entry.name}' is not in the module")
    _check_unique_names(module)
    members = {id(comp) for comp in module.computations}
    for comp in module.computations:
        verify_computation(comp)
        for instr in comp.instructions:
            for callee in instr.called_computations():
                if id(callee) not in members:
                    raise HloVerifyError(f"computation '{comp.name}': instruction '{instr.name}' calls computation "
                                         f"'{callee.name}', which is not in module '{module.name}'")


def _check_unique_names(module: HloModule) -> None:
    """Computation names are unique in the module. (Instruction names may repeat across
    computations in text; XLA's parser renames them.)"""
    seen: set[str] = set()
    for comp in module.computations:
        if comp.name in seen:
            raise HloVerifyError(f"module '{module.name}': computation name '{comp.name}' is used twice")
        seen.add(comp.name)


def verify_computation(comp: HloComputation) -> None:
    """Check the root, the parameter numbering (0..n-1, no gaps or duplicates), unique instruction
    names, that operands and control predecessors belong to `comp`, and every instruction (see
    `verify_instruction`)."""
    members = {id(instr) for instr in comp.instructions}
    if comp.root is None:
        raise HloVerifyError(f"computation '{comp.name}' has no root instruction")
    if id(comp.root) not in members:
        raise HloVerifyError(f"computation '{comp.name}': root '{comp.root.name}' is not an instruction of it")
    _check_parameter_numbers(comp)
    names: set[str] = set()
    for instr in comp.instructions:
        if instr.name in names:
            raise HloVerifyError(f"computation '{comp.name}': instruction name '{instr.name}' is used twice")
        names.add(instr.name)
        for operand in instr.operands:
            if id(operand) not in members:
                raise HloVerifyError(f"computation '{comp.name}': instruction '{instr.name}' uses operand "
                                     f"'{operand.name}' of another computation")
        try:
            verify_instruction(instr)
        except HloVerifyError as e:
            raise HloVerifyError(f"computation '{comp.name}': {e}") from None
    for instr in comp.instructions:
        if "control-predecessors" in instr.attrs:
            for name in control_predecessor_names(instr):
                if name not in names:
                    raise HloVerifyError(f"computation '{comp.name}': instruction '{instr.name}' names control "
                                         f"predecessor '{name}', which is not an instruction of it")


def _check_parameter_numbers(comp: HloComputation) -> None:
    numbers = sorted(p.parameter_number for p in comp.instructions if p.opcode == "parameter")
    for expected, got in enumerate(numbers):
        if got != expected:
            problem = "is duplicated" if got < expected else "is missing"
            number = got if got < expected else expected
            raise HloVerifyError(f"computation '{comp.name}': parameter number {number} {problem} "
                                 f"(parameters must be numbered 0..{len(numbers) - 1})")


def verify_instruction(instr: HloInstruction) -> None:
    """Arity and required attributes from the opcode registry, then the shape rule: the inferred
    shape must be compatible with the declared one."""
    info = OPCODES.get(instr.opcode)
    if info is None:
        raise HloVerifyError(f"instruction '{instr.name}': unknown opcode '{instr.opcode}'")
    if info.arity is not None and len(instr.operands) != info.arity:
        raise HloVerifyError(f"instruction '{instr.name}': {instr.opcode} takes {info.arity} operands, "
                             f"got {len(instr.operands)}")
    for attr in info.required_attrs:
        if attr not in instr.attrs:
            raise HloVerifyError(f"instruction '{instr.name}': {instr.opcode} requires attribute '{attr}'")
    inferred = infer_shape(instr)
    if not inferred.compatible(instr.shape):
        raise HloVerifyError(f"instruction '{instr.name}': declared shape {strip_layout(instr.shape)} is not "
                             f"compatible with the inferred shape {inferred} of {instr.opcode}")
