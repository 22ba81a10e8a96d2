"""`lower-symbol-values`: `xla.symbol_value "b"` → a load from the kernel's table of dimension
variables (dynamic shapes; codegen/ir/size_ops.py).

The table is one more pointer argument, appended to every function that reads a size (and to the
functions calling those, which pass theirs on) and to every public function (the kernel's entry: its
block loop always passes the table of a symbolic kernel). Variable k of the module's `xla.symbols`
list (sorted names, set by the emitter) is the table's i64 entry k. Each function loads each value
it needs once, at its top, so the loads are plain SSA values to LLVM (no aliasing question inside
loops). Runs after `lower-tensors` (the table is an `!llvm.ptr`, as the buffers are then).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import arith, func, llvm
from xdsl.dialects.builtin import FunctionType, IndexType, ModuleOp, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from hlocc.codegen.context import KernelIRError
from hlocc.codegen.ir import PureCallOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.size_ops import SYMBOLS_ATTR, SymbolValueOp, kernel_symbols
from hlocc.codegen.transforms.util import functions, walk_ops

PTR = llvm.LLVMPointerType()

def _calls(f: func.FuncOp) -> list[PureCallOp]:
    return walk_ops(f, PureCallOp)


@dataclass(frozen=True)
class LowerSymbolValuesPass(ModulePass):
    name = "lower-symbol-values"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        fns = functions(op)
        need = {n for n, f in fns.items() if walk_ops(f, SymbolValueOp)}
        if not need and SYMBOLS_ATTR not in op.attributes:
            return
        changed = True
        while changed:  # callers of a function that needs the table pass theirs on
            changed = False
            for n, f in fns.items():
                if n not in need and any(c.callee.root_reference.data in need for c in _calls(f)):
                    need.add(n)
                    changed = True
        need |= {n for n, f in fns.items() if f.sym_visibility is None or f.sym_visibility.data != "private"}
        order = {s: k for k, s in enumerate(kernel_symbols(op))}
        for n in need:
            f = fns[n]
            if f.body.blocks.first is None:
                continue
            _lower_function(f, order, need)


def _lower_function(f: func.FuncOp, order: dict[str, int], need: set[str]) -> None:
    entry = f.body.blocks.first
    table = entry.insert_arg(PTR, len(entry.args))
    table.name_hint = "dims"
    ft = f.function_type
    f.function_type = FunctionType.from_lists([*ft.inputs, PTR], list(ft.outputs))
    reads = walk_ops(f, SymbolValueOp)
    b = KernelBuilder(InsertPoint.at_start(entry))
    loaded: dict[str, SSAValue] = {}
    for name in sorted({o.symbol.data for o in reads}, key=lambda s: order.get(s, -1)):
        if name not in order:
            raise KernelIRError(f"'xla.symbol_value \"{name}\"' in @{f.sym_name.data}: '{name}' is not a "
                                f"dimension variable of the kernel ({', '.join(order) or 'none'})")
        p = b.add(llvm.GEPOp(table, [order[name]], i64, inbounds=True))
        loaded[name] = b.add(arith.IndexCastOp(b.add(llvm.LoadOp(p, i64)), IndexType()))
        loaded[name].name_hint = name
    for o in reads:
        o.result.replace_all_uses_with(loaded[o.symbol.data])
        Rewriter.erase_op(o)
    for call in _calls(f):
        if call.callee.root_reference.data in need:
            new = PureCallOp(call.callee, [*call.operands_, table], [r.type for r in call.results_])
            new.attributes |= call.attributes
            Rewriter.replace_op(call, new)
