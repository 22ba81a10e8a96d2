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
    _Verifier().verify(op)


class _Verifier:
    """One run of `verify_ir`: the signatures verified, and a token per type or attribute object.

    A signature holds tokens, not the types and attributes themselves: hashing a vector type walks
    its parameters (~1.6 µs), and a kernel's ops share few type and attribute objects. Equal
    objects share a token (`canonical`); the entry by id keeps its object alive, so the id is not
    reused during the run. An object that does not hash gives the op no signature."""

    def __init__(self):
        self.seen: set[tuple] = set()
        self.tokens: dict[int, tuple] = {}
        self.canonical: dict = {}

    def verify(self, op: Operation) -> None:
        for region in op.regions:  # the nested ops first, then the op's own checks, as xDSL does
            for block in region.blocks:
                if block.parent is not region:
                    raise ValueError("Parent pointer of block does not refer to containing region")
                if block.first_op is None and len(region.blocks) == 1 and not op.has_trait(NoTerminator):
                    raise VerifyException(f"Operation {op.name} contains empty block in single-block region that "
                                          "expects at least a terminator")
                last = block.last_op
                parent = type(op)
                for child in block.ops:
                    if child.parent is not block:
                        raise ValueError("Parent pointer of operation does not refer to containing region")
                    key = None if child is last else self.signature(child, parent)
                    if key is None:
                        self.verify(child)
                    elif key not in self.seen:
                        child.verify(verify_nested_ops=False)
                        self.seen.add(key)
                    else:
                        for operand in child.operands:
                            if isinstance(operand, ErasedSSAValue):
                                raise ValueError("Erased SSA value is used by the operation")
        op.verify(verify_nested_ops=False)

    def signature(self, op: Operation, parent: type) -> tuple | None:
        """What verifying `op` reads (module doc), or None where that is more, or does not hash."""
        cls = type(op)
        local = _LOCAL.get(cls)
        if local is None:
            local = _LOCAL[cls] = not cls.has_trait(HasAncestor)
        if not local or op.regions or op.successors:
            return None
        token = self.token
        try:
            return (cls, parent, tuple(token(v.type) for v in op.operands), tuple(token(r.type) for r in op.results),
                    tuple((k, token(v)) for k, v in op.properties.items()),
                    tuple((k, token(v)) for k, v in op.attributes.items()))
        except TypeError:
            return None

    def token(self, obj: object) -> int:
        entry = self.tokens.get(id(obj))
        if entry is None:
            entry = self.tokens[id(obj)] = (obj, self.canonical.setdefault(obj, len(self.canonical)))
        return entry[1]


_LOCAL: dict[type, bool] = {}
"""Op class → whether no trait of it looks past the op's parent (HasAncestor), answered once."""
