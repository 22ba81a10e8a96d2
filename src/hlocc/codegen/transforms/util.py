"""Helpers shared by the lowering passes: cloning a block's ops somewhere else, function lookup."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter


def clone_ops(ops: Iterable[Operation], mapping: dict[SSAValue, SSAValue], at: InsertPoint) -> None:
    """Clone `ops` (in order) at `at`, remapping operands through `mapping` (which learns the results)."""
    for op in ops:
        Rewriter.insert_op(op.clone(value_mapper=mapping), at)


def clone_block_body(block: Block, args: Sequence[SSAValue], at: InsertPoint) -> list[SSAValue]:
    """Clone every op of `block` but its terminator at `at`, with the block arguments bound to
    `args`; return the terminator's operands, remapped."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, args))
    ops = list(block.ops)
    clone_ops(ops[:-1], mapping, at)
    return [mapping.get(v, v) for v in ops[-1].operands]


def functions(module: ModuleOp) -> dict[str, func.FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}
