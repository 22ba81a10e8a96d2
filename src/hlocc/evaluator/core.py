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

import os
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

    def __init__(self, seed: int = 0, max_while_iterations: int = 10_000_000,
                 max_result_bytes: int | None = None):
        self.rng = np.random.default_rng(seed)
        self.replica_id = 0
        self.partition_id = 0
        self.max_while_iterations = max_while_iterations
        self.max_result_bytes = max_result_bytes if max_result_bytes is not None else _default_result_limit()
        self.rng_state = 0
        self._schedules: dict[int, list] = {}

    def run(self, module: HloModule, args: Sequence[Any]) -> Any:
        """The entry computation's result on `args`, owning its memory: a result that is an
        argument or a view of one (a parameter passed through, reshaped, sliced, transposed or
        bitcast), or of one of the module's constant literals, is copied, as the compiled backends
        and XLA return fresh buffers: the caller may write to its inputs, or to the result, after
        the call. Other results are returned as they are."""
        held = _array_leaves(args)
        held += [a for i in module.all_instructions() if i.opcode == "constant" for a in _array_leaves(i.literal)]
        return _unaliased(self.call(module.entry, args), {id(_memory_owner(a)) for a in held})

    def call(self, comp: HloComputation, args: Sequence[Any]) -> Any:
        params = comp.parameters
        if len(args) != len(params):
            raise EvaluationError(f"computation '{comp.name}' takes {len(params)} arguments, got {len(args)}")
        env: dict[int, Any] = {}
        for p, a in zip(params, args):
            env[id(p)] = a
        for instr, dead in self._schedule(comp):
            env[id(instr)] = self.evaluate_instruction(instr, [env[id(o)] for o in instr.operands])
            for key in dead:  # free values whose last user has run: big modules fit in memory
                del env[key]
        return env[id(comp.root)]

    def _schedule(self, comp: HloComputation) -> list[tuple[HloInstruction, list[int]]]:
        """Post order without parameters, each step with the values that die after it (cached)."""
        schedule = self._schedules.get(id(comp))
        if schedule is None:
            order = comp.post_order()
            last_use: dict[int, int] = {}
            for step, instr in enumerate(order):
                for op in instr.operands:
                    last_use[id(op)] = step
            last_use.pop(id(comp.root), None)
            dead_at: dict[int, list[int]] = {}
            for key, step in last_use.items():
                dead_at.setdefault(step, []).append(key)
            schedule = [(instr, dead_at.get(step, [])) for step, instr in enumerate(order)
                        if instr.opcode != "parameter"]
            self._schedules[id(comp)] = schedule
        return schedule

    def evaluate_instruction(self, instr: HloInstruction, operands: list[Any]) -> Any:
        info = OPCODES[instr.opcode]
        if info.evaluate is None:
            raise _unsupported(f"the evaluator does not support opcode '{instr.opcode}'", instr)
        needed = sum(leaf.byte_size() for leaf in instr.shape.leaves() if leaf.is_array)
        if needed > self.max_result_bytes:
            raise EvaluationError(f"evaluating '{instr.name}' ({instr.opcode}) needs {needed / 2**30:.1f} GiB for its "
                                  f"result, over the evaluator's memory limit of "
                                  f"{self.max_result_bytes / 2**30:.1f} GiB")
        try:
            return info.evaluate(instr, operands, self)
        except UnsupportedError as e:
            raise _unsupported(str(e), instr) from None
        except HloError:
            raise
        except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, MemoryError) as e:
            raise EvaluationError(f"evaluating '{instr.name}' ({instr.opcode}): {e}") from e


def _array_leaves(value: Any) -> list[np.ndarray]:
    """The numpy arrays in `value`, a value or a (nested) sequence of them."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _array_leaves(v)]
    return []


def _memory_owner(array: np.ndarray) -> Any:
    """The object at the end of `array`'s `.base` chain: the array (or foreign buffer) whose
    memory it is. A view shares its memory with another array exactly when they have one owner
    (numpy's views, `as_strided` ones included, keep their owner alive through `.base`)."""
    owner = array
    while getattr(owner, "base", None) is not None:
        owner = owner.base
    return owner


def _unaliased(value: Any, held_owners: set[int]) -> Any:
    """`value` (an array, a token or a nested tuple) with every array whose memory owner is in
    `held_owners` (by id) copied. Comparing owners is one set lookup per result, where
    `np.may_share_memory` against every argument and constant would be a product of the two."""
    if isinstance(value, tuple):
        return tuple(_unaliased(v, held_owners) for v in value)
    if isinstance(value, np.ndarray) and id(_memory_owner(value)) in held_owners:
        return value.copy()
    return value


def _default_result_limit() -> int:
    """Half the machine's physical memory (a single result larger than that cannot be evaluated)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def _unsupported(message: str, instr: HloInstruction) -> UnsupportedError:
    """One form for every unsupported case: `unsupported: <cause> (instruction 'name')`."""
    if not message.startswith("unsupported"):
        message = "unsupported: " + message
    if f"'{instr.name}'" not in message:
        message += f" (instruction '{instr.name}')"
    return UnsupportedError(message)


def evaluate(module: HloModule, args: Sequence[Any], seed: int = 0) -> Any:
    """Evaluate `module`'s entry computation on numpy `args` (already of the parameter dtypes). Every
    op's evaluation is registered: importing this module first runs the `hlocc.evaluator` package,
    which imports the modules that register them."""
    return Evaluator(seed).run(module, args)
