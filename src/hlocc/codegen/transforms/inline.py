"""`inline`: inline `xla.pure_call`s of subgraph functions (XLA's inliner with the xla dialect's
rules, seed 000 "Inliner"): a function called from one place is inlined; one called from several
places is inlined when it is tiny (at most `MAX_OPS_TO_DUPLICATE` ops) or when all its copies
together stay within `MAX_DUPLICATED_SIZE`, otherwise the calls stay (code size: XLA keeps every
such call; *differs from XLA* in the second rule, for the CPU's vectorization). Callees are inlined before
their callers, and private functions that nothing refers to any more (no call, no combiner of an
`xla.shuffle_reduce`) are erased.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, SymbolRefAttr
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.ir import PureCallOp
from hlocc.codegen.transforms.unroll_loops import body_size
from hlocc.codegen.transforms.util import clone_block_body, functions, move_block_body, walk_ops

MAX_OPS_TO_DUPLICATE = 8
MAX_DUPLICATED_SIZE = 512
"""A function called from several places is inlined at each when all its copies together stay this
small (`unroll_loops.body_size`: a math op weighs as its expansion). Its calls evaluate it at
different indices (calls at one index are one call after CSE), so inlining duplicates code, never
work, and lets each copy be vectorized: a value read at a forward and a reversed index was a call
per lane, which kept the lane loop scalar and unrolled a sine per lane (the HLO stress test's
300-step program: 100-120 KB of LLVM IR per kernel, 0.35 s to compile each)."""


def _calls(op) -> list[PureCallOp]:
    return walk_ops(op, PureCallOp)


def _function_of(op) -> str | None:
    """The name of the function that holds `op`."""
    parent = op.parent_op()
    while parent is not None and not isinstance(parent, func.FuncOp):
        parent = parent.parent_op()
    return None if parent is None else parent.sym_name.data


def _symbol_refs(op) -> Counter:
    """How many times each symbol is referred to under `op` (callees, shuffle_reduce combiners, ...)."""
    return Counter(attr.root_reference.data for o in walk_ops(op)
                   for attr in (*o.properties.values(), *o.attributes.values()) if isinstance(attr, SymbolRefAttr))


@dataclass(frozen=True)
class InlinePass(ModulePass):
    name = "inline"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fns = functions(op)
        refs = _symbol_refs(op)  # kept current as calls are inlined (one walk, not one per round)
        counts = Counter(c.callee.root_reference.data for c in _calls(op))

        def inlinable(name: str) -> bool:
            body = fns[name].body.block
            if counts[name] == 1 or len(body.ops) - 1 <= MAX_OPS_TO_DUPLICATE:
                return True
            # (the op count bounds the weighted size from below: most functions stop here, unwalked)
            return counts[name] * len(body.ops) <= MAX_DUPLICATED_SIZE and \
                counts[name] * body_size(body) <= MAX_DUPLICATED_SIZE

        def private(name: str) -> bool:
            visibility = fns[name].sym_visibility
            return visibility is not None and visibility.data == "private"

        inner: dict[str, list[PureCallOp]] = {}  # the calls in a function, until a call in it is inlined

        def calls_in(name: str) -> list[PureCallOp]:
            found = inner.get(name)
            if found is None:
                found = inner[name] = _calls(fns[name])
            return found

        changed = True
        while changed:
            changed = False
            # Callees come after their callers in the module (the partitioner's order): visiting the
            # calls backwards inlines a chain of calls in one round, not one round (a walk of the
            # whole module) per link.
            for call in reversed(_calls(op)):
                name = call.callee.root_reference.data
                callee = fns.get(name)
                if callee is None or not inlinable(name) or any(
                        inlinable(c.callee.root_reference.data) for c in calls_in(name)):
                    continue
                inner.pop(_function_of(call), None)  # its calls change now
                body = callee.body.block
                if refs[name] == 1 and private(name):  # this call is its only use: it dies below
                    results = move_block_body(body, list(call.operands), InsertPoint.before(call))
                else:
                    refs.update(_symbol_refs(body))
                    results = clone_block_body(body, list(call.operands), InsertPoint.before(call))
                for old, new in zip(call.results, results):
                    old.replace_all_uses_with(new)
                Rewriter.erase_op(call)
                counts[name] -= 1
                refs[name] -= 1
                changed = True
        erased = True
        while erased:  # a function only its dead callers referred to is dead too
            dead = [fn for name, fn in fns.items() if private(name) and refs[name] <= 0]
            for fn in dead:
                del fns[fn.sym_name.data]
                refs.subtract(_symbol_refs(fn))
                Rewriter.erase_op(fn)
            erased = bool(dead)
