"""Traits of the `xla` dialect's ops. `xla.yield` checks its parent by trait rather than by class, so
the module declaring it needs not import the ops it terminates (`loop`, `atomic_rmw`,
`atomic_update`), which live in other modules."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Operation
from xdsl.traits import OpTrait
from xdsl.utils.exceptions import VerifyException

YIELD_PARENT_NAMES = ("xla.loop", "xla.atomic_rmw", "xla.atomic_update", "xla.matmul")
"""The ops with the `YieldParent` trait, for the error message (xDSL's HasParent wording)."""


@dataclass(frozen=True)
class YieldParent(OpTrait):
    """An op whose region ends with `xla.yield`."""


@dataclass(frozen=True)
class HasYieldParent(OpTrait):
    """The op's parent (when it has one) carries `YieldParent`."""

    def verify(self, op: Operation) -> None:
        parent = op.parent_op()
        if parent is None or parent.has_trait(YieldParent):
            return
        names = ", ".join(f"'{name}'" for name in YIELD_PARENT_NAMES)
        raise VerifyException(f"'{op.name}' expects parent op to be one of {names}")
