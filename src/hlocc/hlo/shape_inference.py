"""Shape inference for every HLO opcode, following XLA's ShapeInference (xla/service/shape_inference.cc)
and the shape checks of HloVerifier: importing this module registers every opcode's shape rule.

Each opcode's rule lives in its registry entry (`OpInfo.shape_rule`, filled by
`register_shape_rule`); the rules are grouped by area in `shape_rules_<area>.py`, which this
module imports (and the `hlocc.hlo` package imports this module, so the registry is full whenever
any HLO module is in use). `hlo.opcodes.infer_shape` applies them. A rule `fn(instr, operand_shapes)`
returns the shape the instruction must have given its operands and attributes, or raises
`HloVerifyError` naming the instruction and the broken rule. Where the result is chosen by the
producer (convert's and dot's element type, broadcast's and reshape's dimensions, custom-call's
whole shape) the rule reads it from the declared shape after checking what the operands allow.
Inferred shapes carry no layout.
"""

from __future__ import annotations

from hlocc.hlo import (  # noqa: F401  (importing registers the shape rules)
    shape_rules_collective,
    shape_rules_control,
    shape_rules_data,
    shape_rules_elementwise,
    shape_rules_indexing,
    shape_rules_linalg,
    shape_rules_reduce,
)
from hlocc.hlo.opcodes import OPCODES

MISSING_RULES = [name for name, info in OPCODES.items() if info.shape_rule is None]
assert not MISSING_RULES, f"opcodes without a shape rule: {MISSING_RULES}"
