"""Shape inference for every HLO opcode, following XLA's ShapeInference (xla/service/shape_inference.cc)
and the shape checks of HloVerifier.

Each opcode's rule lives in its registry entry (`OpInfo.shape_rule`, filled by
`register_shape_rule`); the rules are grouped by area in `shape_rules_<area>.py`, which this
module imports so that importing it registers all of them. A rule `fn(instr, operand_shapes)`
returns the shape the instruction must have given its operands and attributes, or raises
`HloVerifyError` naming the instruction and the broken rule. Where the result is chosen by the
producer (convert's and dot's element type, broadcast's and reshape's dimensions, custom-call's
whole shape) the rule reads it from the declared shape after checking what the operands allow.
Inferred shapes carry no layout.
"""

from __future__ import annotations

from hlocc.errors import HloVerifyError
from hlocc.hlo import (  # noqa: F401  (importing registers the shape rules)
    shape_rules_collective,
    shape_rules_control,
    shape_rules_data,
    shape_rules_elementwise,
    shape_rules_indexing,
    shape_rules_linalg,
    shape_rules_reduce,
)
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.types import Shape


def infer_shape(instr: HloInstruction) -> Shape:
    """The shape `instr` must have, inferred from its operands' declared shapes and its attributes."""
    return infer_shape_from(instr, [op.shape for op in instr.operands])


def infer_shape_from(instr: HloInstruction, operand_shapes: list[Shape]) -> Shape:
    """The shape `instr` would have with operands of `operand_shapes` (e.g. while rewriting)."""
    info = OPCODES.get(instr.opcode)
    if info is None:
        raise HloVerifyError(f"instruction '{instr.name}': unknown opcode '{instr.opcode}'")
    return info.shape_rule(instr, list(operand_shapes))


MISSING_RULES = [name for name, info in OPCODES.items() if info.shape_rule is None]
assert not MISSING_RULES, f"opcodes without a shape rule: {MISSING_RULES}"
