"""The HLO pass interface shared by every pass under `passes/` (simplification, fusion, ...).

A pass is a small class with a `name` and `run(module) -> bool` (True when it changed the module),
like XLA's HloModulePass. Passes register themselves by name with `register_hlo_pass`, so
`passes/pipeline.py` and `hlocc hlo-opt --passes a,b` can name them.
"""

from __future__ import annotations

from typing import ClassVar

from hlocc.hlo.ir import HloModule


class HloPass:
    """One HLO → HLO rewrite. Subclasses set `name` and implement `run`."""

    name: ClassVar[str] = ""
    # Whether the pass manager puts every computation back in def-before-use order after this
    # pass changed the module (passes/pipeline.py); a pass whose output order matters sets False.
    sort_after: ClassVar[bool] = True

    def run(self, module: HloModule) -> bool:
        raise NotImplementedError(f"pass '{self.name}' does not implement run()")


HLO_PASSES: dict[str, type[HloPass]] = {}


def register_hlo_pass(cls: type[HloPass]) -> type[HloPass]:
    """Make a pass runnable by name (class decorator)."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no pass name")
    if cls.name in HLO_PASSES and HLO_PASSES[cls.name] is not cls:
        raise ValueError(f"HLO pass name '{cls.name}' registered twice")
    HLO_PASSES[cls.name] = cls
    return cls
