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

import re

from hlocc.errors import HloVerifyError
from hlocc.hlo.call_graph import control_predecessor_names
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.opcodes import OPCODES, infer_shape
from hlocc.hlo.shape_rules_common import strip_layout


def verify_module(module: HloModule) -> None:
    """Verify every computation of `module`; the entry computation must exist and belong to it,
    computation names must be unique and called computations must belong to the module. An error
    about an instruction of parsed text says where the text defines it (file:line:col, the line and
    a caret)."""
    try:
        _verify_module(module)
    except HloVerifyError as e:
        found = _PLACE.match(str(e))
        where = module.source_location(*found.groups()) if found and module.source_location else None
        if where is None:
            raise
        raise HloVerifyError(str(e), location=where) from None


_PLACE = re.compile(r"computation '([^']*)': instruction '([^']*)'")


def _verify_module(module: HloModule) -> None:
    if module.entry is None:
        raise HloVerifyError(f"module '{module.name}' has no entry computation")
    if not any(comp is module.entry for comp in module.computations):
        raise HloVerifyError(f"module '{module.name}': entry computation '{module.entry.name}' is not in the module")
    _check_unique_names(module)
    _check_acyclic(module)
    _check_entry_layout(module)
    members = {id(comp) for comp in module.computations}
    for comp in module.computations:
        verify_computation(comp)
        for instr in comp.instructions:
            for callee in instr.called_computations():
                if id(callee) not in members:
                    raise HloVerifyError(f"computation '{comp.name}': instruction '{instr.name}' calls computation "
                                         f"'{callee.name}', which is not in module '{module.name}'")


def _check_entry_layout(module: HloModule) -> None:
    """The header's `entry_computation_layout={(params)->result}` names the entry's parameter and
    result shapes (types and static dimensions; its layouts are the caller's business here), as
    XLA's verifier requires."""
    raw = module.header_attrs.get("entry_computation_layout")
    if raw is None:
        return
    from hlocc.errors import HloParseError
    from hlocc.hlo.parser import parse_shape

    text = str(raw).strip().removeprefix("{").removesuffix("}")
    try:
        params_text, result_text = text.split("->")
        params, result = parse_shape(params_text.strip()), parse_shape(result_text.strip())
    except (ValueError, HloParseError):
        raise HloVerifyError(f"module '{module.name}': entry_computation_layout={raw} is not a program shape "
                             "'{(parameter shapes)->result shape}'") from None
    entry = module.entry
    declared = [(f"parameter {i}", d, p.shape) for i, (d, p) in enumerate(zip(params.tuple_shapes, entry.parameters))]
    if len(params.tuple_shapes) != len(entry.parameters):
        raise HloVerifyError(f"module '{module.name}': entry_computation_layout has {len(params.tuple_shapes)} "
                             f"parameters, the entry computation '{entry.name}' {len(entry.parameters)}")
    for what, layout_shape, shape in [*declared, ("the result", result, entry.root.shape)]:
        if layout_shape.is_static and shape.is_static and strip_layout(layout_shape) != strip_layout(shape):
            raise HloVerifyError(f"module '{module.name}': entry_computation_layout gives {what} the shape "
                                 f"{layout_shape.to_string(False)}, the entry computation "
                                 f"{shape.to_string(False)}")


def _check_acyclic(module: HloModule) -> None:
    """No instruction depends on itself through its operands or control predecessors, and no
    computation calls itself, directly or through others (XLA's verifier refuses both; every
    post-order walk of the compiler would loop or recurse without end)."""
    for comp in module.computations:
        cycle = _find_cycle(comp.instructions, _dependencies({i.name: i for i in comp.instructions}))
        if cycle:
            path = " -> ".join(f"'{i.name}'" for i in cycle)
            raise HloVerifyError(f"computation '{comp.name}': instruction '{cycle[0].name}' depends on itself "
                                 f"({path})")
    cycle = _find_cycle(module.computations, lambda c: [callee for i in c.instructions
                                                         for callee in i.called_computations()])
    if cycle:
        path = " -> ".join(f"'{c.name}'" for c in cycle)
        raise HloVerifyError(f"module '{module.name}': computation '{cycle[0].name}' calls itself ({path})")


def _dependencies(by_name: dict[str, HloInstruction]):
    """An instruction's operands and control predecessors (named in its attribute)."""
    return lambda i: [*i.operands, *(by_name[n] for n in control_predecessor_names(i) if n in by_name)]


def _find_cycle(nodes, successors) -> list:
    """A cycle of the graph over `nodes` (first node repeated last), or []: an iterative
    depth-first search (a long chain of instructions is deeper than Python's recursion)."""
    state: dict[int, int] = {}  # id -> 1 on the current path, 2 done
    for start in nodes:
        if id(start) in state:
            continue
        path, stack = [start], [iter(successors(start))]
        state[id(start)] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[id(path.pop())] = 2
                stack.pop()
            elif state.get(id(nxt)) == 1:
                return path[[id(n) for n in path].index(id(nxt)):] + [nxt]
            elif id(nxt) not in state:
                state[id(nxt)] = 1
                path.append(nxt)
                stack.append(iter(successors(nxt)))
    return []


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
