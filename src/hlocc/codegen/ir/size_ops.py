"""Symbolic sizes in kernels (dynamic shapes): `xla.symbol_value` reads the run-time value of one
dimension variable.

    %b = xla.symbol_value "b" : index

A kernel compiled for symbolic shapes receives the values of its dimension variables (sorted by
name) in an i64 table; `lower-symbol-values` makes every `xla.symbol_value` a load from it, placed
once at the top of the function. Indexing maps refer to sizes as `$b` atoms (analysis/affine_expr),
which `lower-xla-to-arith` computes from `xla.symbol_value`s; `size_value` builds any size (a
polynomial over the variables, with floordiv/mod) the same way.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import ArrayAttr, IndexType, ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, prop_def, result_def, traits_def
from xdsl.traits import Pure

from hlocc.codegen.ir.attributes import INDEX
from hlocc.hlo.symbolic import Dim, DimExpr, lower_bound


@irdl_op_definition
class SymbolValueOp(IRDLOperation):
    """The run-time value of dimension variable `symbol` (an `index`)."""

    name = "xla.symbol_value"

    symbol = prop_def(StringAttr)
    result = result_def(IndexType)

    assembly_format = "$symbol attr-dict `:` type($result)"
    traits = traits_def(Pure())

    def __init__(self, symbol: str):
        super().__init__(result_types=[INDEX], properties={"symbol": StringAttr(symbol)})


SYMBOLS_ATTR = "xla.symbols"
"""Module attribute: the kernel's dimension variables, in table order."""



def kernel_symbols(module: ModuleOp) -> list[str]:
    """The module's table order: its `xla.symbols` attribute, else the variables it reads, sorted."""
    attr = module.attributes.get(SYMBOLS_ATTR)
    if isinstance(attr, ArrayAttr):
        return [s.data for s in attr.data]
    return sorted({o.symbol.data for o in module.walk() if isinstance(o, SymbolValueOp)})


def set_kernel_symbols(module: ModuleOp, symbols: list[str]) -> None:
    module.attributes[SYMBOLS_ATTR] = ArrayAttr([StringAttr(s) for s in symbols])


def size_value(b, size: Dim) -> SSAValue:
    """`size` as an `index` value: `xla.symbol_value`s combined by arith (b: a KernelBuilder)."""
    if not isinstance(size, DimExpr):
        return b.index(int(size))
    total: SSAValue | None = None
    for monomial, c in size.terms:
        term: SSAValue | None = None
        for atom, power in monomial:
            value = _atom_value(b, atom)
            for _ in range(power):
                term = value if term is None else b.add(arith.MuliOp(term, value))
        if term is None:
            term = b.index(c)
        elif c != 1:
            term = b.add(arith.MuliOp(term, b.index(c)))
        total = term if total is None else b.add(arith.AddiOp(total, term))
    return total if total is not None else b.index(0)


def _atom_value(b, atom) -> SSAValue:
    if atom.op == "var":
        return b.add(SymbolValueOp(atom.args[0]))
    lhs, rhs = (size_value(b, x) for x in atom.args)
    if atom.op == "floordiv":
        return b.add(arith.FloorDivSIOp(lhs, rhs))
    low = lower_bound(atom.args[0])
    if low is not None and low >= 0:  # a size's remainder: remsi rounds alike
        return b.add(arith.RemSIOp(lhs, rhs))
    # DimExpr's mod rounds down as Python's does (`mod(-2, b)` = b - 2, JAX's roll); remsi would
    # give -2 and a slice starting before its operand.
    quotient = b.add(arith.FloorDivSIOp(lhs, rhs))
    return b.add(arith.SubiOp(lhs, b.add(arith.MuliOp(quotient, rhs))))
