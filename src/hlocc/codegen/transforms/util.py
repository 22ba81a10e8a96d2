"""Helpers shared by the lowering passes: walking the IR into a list, cloning a block's ops somewhere
else, function lookup, and facts about `scf.for` loops (constant trip count, loop-invariant values),
building loops and ifs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from xdsl.dialects import arith, func, scf
from xdsl.dialects.builtin import IndexType, IntegerAttr, ModuleOp, UnitAttr
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir.builder import KernelBuilder

KEEP_ROLLED = "xla.keep_rolled"
"""The unit attribute of an `scf.for` that unroll-loops must not unroll (the schedule unrolls it)."""


def walk_ops(root: Operation | Block, classes: type | tuple[type, ...] | None = None) -> list[Operation]:
    """`[o for o in root.walk() if isinstance(o, classes)]` (every op without `classes`): the ops
    nested in `root` (an op, which comes first, or a block), in the same pre-order, found in one
    recursive pass over the blocks' op lists. xDSL's `walk` is a generator per op, region and
    block, each op passed up through every enclosing one; the kernel passes walk the module about
    25 times, and on the 6800-op probe's kernels this takes half the time of those walks (and
    `isinstance` against an op class, an ABC, is answered once per class). For lists only: ops
    the caller adds or erases afterwards are not seen (as with a list of `walk()`)."""
    out: list[Operation] = []
    append = out.append
    matches: dict[type, bool] = {}

    def visit_block(block: Block) -> None:
        op = block.first_op
        while op is not None:
            visit(op)
            op = op.next_op

    def visit(op: Operation) -> None:
        if classes is None:
            append(op)
        else:
            hit = matches.get(type(op))
            if hit is None:
                hit = matches[type(op)] = isinstance(op, classes)
            if hit:
                append(op)
        for region in op.regions:
            block = region.first_block
            while block is not None:
                visit_block(block)
                block = block.next_block

    if isinstance(root, Block):
        visit_block(root)
    else:
        visit(root)
    return out


def clone_ops(ops: Iterable[Operation], mapping: dict[SSAValue, SSAValue], at: InsertPoint) -> None:
    """Clone `ops` (in order) at `at`, remapping operands through `mapping` (which learns the results).
    An op without regions is cloned by `clone_without_regions`, which is `clone`'s result for it
    without `clone`'s second walk setting the operands again (most of unroll-loops' time)."""
    for op in ops:
        if op.regions:
            Rewriter.insert_op(op.clone(value_mapper=mapping), at)
        else:
            Rewriter.insert_op(op.clone_without_regions(mapping), at)


def clone_block_body(block: Block, args: Sequence[SSAValue], at: InsertPoint) -> list[SSAValue]:
    """Clone every op of `block` but its terminator at `at`, with the block arguments bound to
    `args`; return the terminator's operands, remapped."""
    mapping: dict[SSAValue, SSAValue] = dict(zip(block.args, args))
    ops = list(block.ops)
    clone_ops(ops[:-1], mapping, at)
    return [mapping.get(v, v) for v in ops[-1].operands]


def if_then(b: KernelBuilder, cond: SSAValue | None, then: Callable[[KernelBuilder], list[SSAValue]],
            otherwise: list[SSAValue]) -> list[SSAValue]:
    """`scf.if cond { then() } else { otherwise }` (just `then()` when there is no condition)."""
    if cond is None:
        return then(b)
    then_block, else_block = Block(), Block()
    then_b = KernelBuilder(then_block)
    then_b.insert(scf.YieldOp(*then(then_b)))
    KernelBuilder(else_block).insert(scf.YieldOp(*otherwise))
    return list(b.insert(scf.IfOp(cond, [v.type for v in otherwise], Region(then_block), Region(else_block))).results)


def move_block_body(block: Block, args: Sequence[SSAValue], at: InsertPoint) -> list[SSAValue]:
    """`clone_block_body`'s result without copying: move every op of `block` but its terminator to
    `at`, the block arguments replaced by `args`; return the terminator's operands. For a block
    used once and erased next (a lowered loop's body, a callee inlined at its only call), where a
    copy cost time linear in the body again."""
    for arg, value in zip(block.args, args):
        arg.replace_all_uses_with(value)
    ops = list(block.ops)
    for op in ops[:-1]:
        op.detach()
    Rewriter.insert_op(ops[:-1], at)
    return list(ops[-1].operands)


def functions(module: ModuleOp) -> dict[str, func.FuncOp]:
    return {op.sym_name.data: op for op in module.ops if isinstance(op, func.FuncOp)}


def trip_count(loop: scf.ForOp) -> int | None:
    """The constant trip count of `scf.for 0 to N step 1`; None for any other loop."""
    bounds = []
    for v in (loop.lb, loop.ub, loop.step):
        if not (isinstance(v.owner, arith.ConstantOp) and isinstance(v.owner.value, IntegerAttr)):
            return None
        bounds.append(v.owner.value.value.data)
    lb, ub, step = bounds
    return ub - lb if lb == 0 and step == 1 else None


def defined_outside(value: SSAValue, loop: Operation) -> bool:
    """Whether `value` is defined outside `loop` (not in any region nested in it)."""
    owner = value.owner
    op = owner.parent_op() if isinstance(owner, Block) else owner
    while op is not None:
        if op is loop:
            return False
        op = op.parent_op()
    return True


LoopBody = Callable[[KernelBuilder, SSAValue, list[SSAValue]], list[SSAValue]]


def for_loop(b: KernelBuilder, lo: SSAValue | int, hi: SSAValue | int, inits: list[SSAValue], body: LoopBody,
             name: str = "", step: int = 1, keep_rolled: bool = False) -> list[SSAValue]:
    """`scf.for iv = lo to hi step step iter_args(inits)`, its body built by `body(builder, iv, args)`
    (`keep_rolled`: marked so that unroll-loops leaves it)."""
    types = [v.type for v in inits]
    block = Block(arg_types=[IndexType(), *types])
    if name:
        block.args[0].name_hint = name
    inner = KernelBuilder(block)
    inner.insert(scf.YieldOp(*body(inner, block.args[0], list(block.args[1:]))))
    lo = b.index(lo) if isinstance(lo, int) else lo
    hi = b.index(hi) if isinstance(hi, int) else hi
    loop = b.insert(scf.ForOp(lo, hi, b.index(step), inits, block))
    if keep_rolled:
        loop.attributes[KEEP_ROLLED] = UnitAttr()
    return list(loop.results)
