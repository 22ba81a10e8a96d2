"""Verifying kernel IR: xDSL's verifier, with each op whose checks read no more than its signature
verified once per signature.

xDSL's `Operation.verify` checks every op's operand and result types, attributes and properties
against its IRDL definition, its traits and its own `verify_`: about 30-100 µs an op in Python, as
much as a kernel pass. A kernel repeats few signatures many times (an unrolled or vectorized loop
is the same `arith.mulf` on the same types hundreds of times), so `verify_ir` checks an op once per
*signature*: its class, operand and result types, properties, attributes and the parent op's class.
That covers what those checks read for an op without regions or successors that is not the last
op of its block (where the terminator rules apply), with no trait that looks further up than the
parent (HasAncestor): the IRDL constraints and traits read the op's types and attributes, and the
`verify_`s of xDSL's and hlocc's dialects read those too, or look a symbol up in the module, which
does not change while it is verified. Every other op, and any op whose signature does not hash, is
verified in full, and every op is still checked for erased operands and parent pointers. The
result is the same as `module.verify()`'s: the first invalid op raises the same exception.
"""

from __future__ import annotations

from xdsl.ir import ErasedSSAValue, Operation
from xdsl.traits import HasAncestor, NoTerminator
from xdsl.utils.exceptions import VerifyException


def verify_ir(op: Operation) -> None:
    """`op.verify()`, with the ops of one signature verified once (module doc)."""
    _verify(op, set())


def _verify(op: Operation, seen: set) -> None:
    for region in op.regions:  # the nested ops first, then the op's own checks, as xDSL does
        for block in region.blocks:
            if block.parent is not region:
                raise ValueError("Parent pointer of block does not refer to containing region")
            if block.first_op is None and len(region.blocks) == 1 and not op.has_trait(NoTerminator):
                raise VerifyException(f"Operation {op.name} contains empty block in single-block region that "
                                      "expects at least a terminator")
            last = block.last_op
            for child in block.ops:
                if child.parent is not block:
                    raise ValueError("Parent pointer of operation does not refer to containing region")
                key = None if child is last else _signature(child, op)
                if key is None:
                    _verify(child, seen)
                elif key not in seen:
                    child.verify(verify_nested_ops=False)
                    seen.add(key)
                else:
                    for operand in child.operands:
                        if isinstance(operand, ErasedSSAValue):
                            raise ValueError("Erased SSA value is used by the operation")
    op.verify(verify_nested_ops=False)


def _signature(op: Operation, parent: Operation) -> tuple | None:
    """What verifying `op` reads (module doc), or None where that is more, or does not hash."""
    if op.regions or op.successors or op.has_trait(HasAncestor):
        return None
    key = (type(op), type(parent), tuple(v.type for v in op.operands), tuple(r.type for r in op.results),
           tuple(op.properties.items()), tuple(op.attributes.items()))
    try:
        hash(key)
    except TypeError:
        return None
    return key
