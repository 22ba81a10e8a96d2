"""The reference evaluator: numpy semantics for every HLO op (the `interpreter` backend and the
oracle every other backend is tested against). Importing this package registers each op's
evaluation in the opcode registry."""

from hlocc.evaluator import compute, control, data, elementwise  # noqa: F401  (registration)
from hlocc.evaluator.core import TOKEN, EvaluationError, Evaluator, evaluate

__all__ = ["TOKEN", "EvaluationError", "Evaluator", "evaluate"]
