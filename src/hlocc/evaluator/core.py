"""The reference evaluator's driver: walks a computation in post order and applies each opcode's
registered evaluation (see hlo/opcodes.py `register_evaluator`).

Values: an array is a numpy array whose dtype is the shape's storage dtype (ml_dtypes for bf16, f8,
s4, ...) and whose numpy shape equals the HLO dims; a tuple is a Python tuple of values; a token is
`TOKEN`. Layouts are physical hints and do not change values: arrays are always logical.

Sub-computations whose parameters are scalars (reduce/sort/scatter/map/select-and-scatter
computations) may be evaluated on whole arrays of equal shape at once, because every op in them
is elementwise; `Evaluator.call` accepts such arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hlocc.errors import HloError, UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.opcodes import OPCODES


class _Token:
    def __repr__(self) -> str:
        return "token"


TOKEN = _Token()


class EvaluationError(HloError):
    """A run-time failure of evaluation (e.g. a while loop past its trip limit)."""


class Evaluator:
    """Evaluates HLO with numpy. `seed` feeds the stateful `rng` op; `replica_id`/`partition_id`
    are those of the single device hlocc models."""

    def __init__(self, seed: int = 0, max_while_iterations: int = 10_000_000):
        self.rng = np.random.default_rng(seed)
        self.replica_id = 0
        self.partition_id = 0
        self.max_while_iterations = max_while_iterations
        self.rng_state = 0

    def run(self, module: HloModule, args: Sequence[Any]) -> Any:
        return self.call(module.entry, args)

    def call(self, comp: HloComputation, args: Sequence[Any]) -> Any:
        params = comp.parameters
        if len(args) != len(params):
            raise EvaluationError(f"computation '{comp.name}' takes {len(params)} arguments, got {len(args)}")
        env: dict[int, Any] = {}
        for p, a in zip(params, args):
            env[id(p)] = a
        for instr in comp.post_order():
            if instr.opcode == "parameter":
                continue
            env[id(instr)] = self.evaluate_instruction(instr, [env[id(o)] for o in instr.operands])
        return env[id(comp.root)]

    def evaluate_instruction(self, instr: HloInstruction, operands: list[Any]) -> Any:
        info = OPCODES[instr.opcode]
        if info.evaluate is None:
            raise _unsupported(f"the evaluator does not support opcode '{instr.opcode}'", instr)
        try:
            return info.evaluate(instr, operands, self)
        except UnsupportedError as e:
            raise _unsupported(str(e), instr) from None
        except HloError:
            raise
        except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, MemoryError) as e:
            raise EvaluationError(f"evaluating '{instr.name}' ({instr.opcode}): {e}") from e


def _unsupported(message: str, instr: HloInstruction) -> UnsupportedError:
    """One form for every unsupported case: `unsupported: <cause> (instruction 'name')`."""
    if not message.startswith("unsupported"):
        message = "unsupported: " + message
    if f"'{instr.name}'" not in message:
        message += f" (instruction '{instr.name}')"
    return UnsupportedError(message)


def evaluate(module: HloModule, args: Sequence[Any], seed: int = 0) -> Any:
    """Evaluate `module`'s entry computation on numpy `args` (already of the parameter dtypes)."""
    import hlocc.evaluator  # noqa: F401  (registers every op's evaluation)

    return Evaluator(seed).run(module, args)
