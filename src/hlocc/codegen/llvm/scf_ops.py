"""Translation of `scf.for` and `scf.if` to LLVM basic blocks and phis."""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import scf

from hlocc.codegen.llvm.types import llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _for(ft: FunctionTranslator, op: scf.ForOp) -> None:
    b = ft.b
    lb, ub, step = ft.v(op.lb), ft.v(op.ub), ft.v(op.step)
    inits = [ft.v(x) for x in op.iter_args]
    pre = b.block
    header = ft.llfn.append_basic_block("for.header")
    body = ft.llfn.append_basic_block("for.body")
    exit_ = ft.llfn.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, "iv")
    iv.add_incoming(lb, pre)
    phis = []
    for init in inits:
        phi = b.phi(init.type)
        phi.add_incoming(init, pre)
        phis.append(phi)
    b.cbranch(b.icmp_signed("<", iv, ub), body, exit_)
    b.position_at_end(body)
    block = op.body.block
    ft.values[block.args[0]] = iv
    for arg, phi in zip(block.args[1:], phis):
        ft.values[arg] = phi
    yielded = ft.block(block)
    latch = b.block
    next_iv = b.add(iv, step)
    iv.add_incoming(next_iv, latch)
    for phi, y in zip(phis, yielded):
        phi.add_incoming(y, latch)
    b.branch(header)
    b.position_at_end(exit_)
    for result, phi in zip(op.results, phis):
        ft.values[result] = phi


def _if(ft: FunctionTranslator, op: scf.IfOp) -> None:
    b = ft.b
    cond = ft.v(op.cond)
    then_bb = ft.llfn.append_basic_block("if.then")
    else_bb = ft.llfn.append_basic_block("if.else")
    merge = ft.llfn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    incoming = []
    for bb, region in ((then_bb, op.true_region), (else_bb, op.false_region)):
        b.position_at_end(bb)
        yielded = ft.block(region.block) if region.blocks else []
        incoming.append((yielded or [], b.block))
        b.branch(merge)
    b.position_at_end(merge)
    for k, result in enumerate(op.results):
        phi = b.phi(llvm_type(result.type))
        for values, bb in incoming:
            phi.add_incoming(values[k], bb)
        ft.values[result] = phi


SCF_HANDLERS = {scf.ForOp: _for, scf.IfOp: _if}
