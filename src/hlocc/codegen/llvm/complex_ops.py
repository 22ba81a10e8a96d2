"""Translation of complex.create/re/im to LLVM struct insertvalue/extractvalue (`complex<fN>` is the
struct `{fN, fN}`, real part first)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import complex as complex_dialect
from xdsl.ir import Operation

from hlocc.codegen.llvm.types import llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _complex_create(ft: FunctionTranslator, op: complex_dialect.CreateOp) -> None:
    agg = ir.Constant(llvm_type(op.complex.type), ir.Undefined)
    agg = ft.b.insert_value(agg, ft.v(op.real), 0)
    ft.set(op, ft.b.insert_value(agg, ft.v(op.imaginary), 1))


def _complex_part(index: int):
    def handle(ft: FunctionTranslator, op: Operation) -> None:
        ft.set(op, ft.b.extract_value(ft.v(op.complex), index))
    return handle


COMPLEX_HANDLERS = {
    complex_dialect.CreateOp: _complex_create, complex_dialect.ReOp: _complex_part(0),
    complex_dialect.ImOp: _complex_part(1),
}
