"""`lower-xla-to-arith`: `xla.apply_indexing` → index arithmetic (XLA's xla-simplify-affine +
lower-affine, done in one step).

Each result expression is emitted as arith ops on `index` values, sharing common subexpressions
within one op. The map's domain gives every variable's range, so `floordiv` and `mod` of an
expression that is provably non-negative become the cheap unsigned `divui`/`remui`; otherwise the
signed floor forms are used (a pad's `d - lo` can be negative outside the guarded region).
Symbolic sizes (`$b`, products and divisions by them) read the dimension variables with
`xla.symbol_value` (lowered by `lower-symbol-values`); division by a size uses the same forms.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.analysis.affine_expr import (
    CeilDiv,
    Const,
    Expr,
    FloorDiv,
    Mod,
    Size,
    SizeFloorDiv,
    SizeMod,
    SizeProduct,
    Sum,
    Var,
    VarKind,
    expr_range,
)
from hlocc.codegen.ir import ApplyIndexingOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.transforms.util import walk_ops


def lower_apply_indexing(op: ApplyIndexingOp) -> None:
    m = op.map
    operands = list(op.operands_)
    nd, ns = len(m.dims), len(m.symbols)
    b = KernelBuilder(InsertPoint.before(op))
    memo: dict[Expr, SSAValue] = {}
    sizes: dict[object, SSAValue] = {}

    def size(value) -> SSAValue:
        if value not in sizes:
            sizes[value] = size_value(b, value)
        return sizes[value]

    def var_value(v: Var) -> SSAValue:
        if v.kind is VarKind.DIM:
            return operands[v.index]
        if v.kind is VarKind.SYMBOL:
            return operands[nd + v.index]
        return operands[nd + ns + v.index]

    def emit(e: Expr) -> SSAValue:
        if e in memo:
            return memo[e]
        if isinstance(e, Const):
            r = b.index(e.value)
        elif isinstance(e, Var):
            r = var_value(e)
        elif isinstance(e, Sum):
            r = None
            for atom, c in e.terms:
                term = emit(atom)
                if c != 1:
                    term = b.op(arith.MuliOp, term, b.index(c))
                r = term if r is None else b.op(arith.AddiOp, r, term)
            if e.constant or r is None:
                r = b.index(e.constant) if r is None else b.op(arith.AddiOp, r, b.index(e.constant))
        elif isinstance(e, Size):
            r = size(e.value)
        else:
            lhs = emit(e.lhs)
            non_negative = expr_range(e.lhs, m.var_bounds).lo >= 0
            if isinstance(e, SizeProduct):
                r = b.op(arith.MuliOp, lhs, size(e.size))
            elif isinstance(e, (SizeFloorDiv, SizeMod)):  # sizes are positive where this runs
                n = size(e.size)
                if non_negative:
                    r = b.op(arith.DivUIOp if isinstance(e, SizeFloorDiv) else arith.RemUIOp, lhs, n)
                elif isinstance(e, SizeFloorDiv):
                    r = b.op(arith.FloorDivSIOp, lhs, n)
                else:
                    rem = b.op(arith.RemSIOp, lhs, n)
                    r = b.select(b.cmpi("slt", rem, b.index(0)), b.op(arith.AddiOp, rem, n), rem)
            elif isinstance(e, FloorDiv):
                d = b.index(e.divisor)
                r = b.op(arith.DivUIOp if non_negative else arith.FloorDivSIOp, lhs, d)
            elif isinstance(e, CeilDiv):
                d = b.index(e.divisor)
                r = b.op(arith.CeilDivUIOp if non_negative else arith.CeilDivSIOp, lhs, d)
            else:
                assert isinstance(e, Mod)
                mod = b.index(e.modulus)
                if non_negative:
                    r = b.op(arith.RemUIOp, lhs, mod)
                else:
                    rem = b.op(arith.RemSIOp, lhs, mod)
                    negative = b.cmpi("slt", rem, b.index(0))
                    r = b.select(negative, b.op(arith.AddiOp, rem, mod), rem)
        memo[e] = r
        return r

    results = [emit(e) for e in m.results]
    for old, new in zip(op.results, results):
        old.replace_all_uses_with(new)
    Rewriter.erase_op(op)


@dataclass(frozen=True)
class LowerXlaToArithPass(ModulePass):
    name = "lower-xla-to-arith"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for o in walk_ops(op, ApplyIndexingOp):
            lower_apply_indexing(o)
