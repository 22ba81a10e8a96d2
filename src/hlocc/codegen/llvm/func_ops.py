"""Translation of calls (`func.call`, `xla.pure_call`, `llvm.call_intrinsic`) and `func.return`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir
from xdsl.dialects import func, llvm
from xdsl.ir import Operation

from hlocc.codegen.ir import PureCallOp
from hlocc.codegen.llvm.types import llvm_type

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator


def _call(ft: FunctionTranslator, op: Operation) -> None:
    name = op.callee.root_reference.data
    callee = ft.t.functions[name]
    result = ft.b.call(callee, [ft.v(x) for x in op.operands])
    results = list(op.results)
    if len(results) == 1:
        ft.values[results[0]] = result
    else:
        for k, r in enumerate(results):
            ft.values[r] = ft.b.extract_value(result, k)


def _return(ft: FunctionTranslator, op: func.ReturnOp) -> None:
    values = [ft.v(x) for x in op.operands]
    if not values:
        ft.b.ret_void()
    elif len(values) == 1:
        ft.b.ret(values[0])
    else:
        agg = ir.Constant(ft.llfn.function_type.return_type, ir.Undefined)
        for k, v in enumerate(values):
            agg = ft.b.insert_value(agg, v, k)
        ft.b.ret(agg)


def _call_intrinsic(ft: FunctionTranslator, op: llvm.CallIntrinsicOp) -> None:
    """A call of the LLVM intrinsic the op names in full (`llvm.prefetch.p0`), declared from its
    operands' and result's types."""
    args = [ft.v(x) for x in op.args]
    ret = llvm_type(op.ress.type) if op.ress is not None else ir.VoidType()
    name = op.intrin.data
    fn = ft.t.module.globals.get(name)
    if fn is None:
        fn = ir.Function(ft.t.module, ir.FunctionType(ret, [a.type for a in args]), name=name)
    result = ft.b.call(fn, args)
    if op.ress is not None:
        ft.values[op.ress] = result


FUNC_HANDLERS = {func.CallOp: _call, PureCallOp: _call, func.ReturnOp: _return, llvm.CallIntrinsicOp: _call_intrinsic}
