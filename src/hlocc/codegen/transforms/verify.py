"""`verify`: checks the module (every op's verifier) and changes nothing (mlir-opt's -verify-each
as a pass of its own, for `hlocc opt --passes verify`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Checks the module (every op's verifier); changes nothing."""

    name = "verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.verify()
