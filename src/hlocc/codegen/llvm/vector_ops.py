"""Translation of vector.extract, vector.insert and vector.broadcast to LLVM vector instructions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import vector

from hlocc.codegen.llvm.arith_ops import splat
from hlocc.codegen.llvm.types import TranslationError

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _vector_extract(ft: FunctionTranslator, op: vector.ExtractOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.extract_element(ft.v(op.vector), pos))


def _vector_insert(ft: FunctionTranslator, op: vector.InsertOp) -> None:
    pos = _position(ft, op.static_position, op.dynamic_position)
    ft.set(op, ft.b.insert_element(ft.v(op.dest), ft.v(op.source), pos))


def _position(ft: FunctionTranslator, static, dynamic) -> ir.Value:
    values = list(static.get_values())
    if len(values) != 1:
        raise TranslationError("only 1-D vector positions are supported")
    if values[0] >= 0:
        return ir.Constant(ir.IntType(32), values[0])
    return ft.v(dynamic[0])


def _broadcast(ft: FunctionTranslator, op: vector.BroadcastOp) -> None:
    n = op.vector.type.get_shape()[0]
    ft.set(op, splat(ft.b, ft.v(op.source), n))


VECTOR_HANDLERS = {vector.ExtractOp: _vector_extract, vector.InsertOp: _vector_insert, vector.BroadcastOp: _broadcast}
