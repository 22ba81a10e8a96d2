"""`outline-math` (the CPU pipeline's, before `expand-float-ops-fma`): a costly math function that a
kernel computes at several places on the same type becomes one private function, called at each
place, so that `expand-float-ops` expands its approximation once per kernel instead of once per use.

Why: a vector sine is ~150 ops after expansion (its exact range reduction in f64 over every lane),
a tanh ~60; a kernel of three sines and a tanh carried 77-260 KB of LLVM IR, and a program of 300
such kernels took 102 s to compile, a third each in our own translation, LLVM's optimization and
its code generation. A call per vector costs a few cycles against the function's hundred-odd
instructions.

What: ops named in OUTLINED (the approximations of expand_float_ops.py, less the cheap ones: exp,
exp2 and rsqrt stay inline, where LLVM schedules them with their neighbours), on f32 or f64 scalars
or vectors, whose (name, operand types, result type, bf16 tag) occurs at least twice in the module.
The function `__hlocc_math.<name>.<type>` holds a copy of the op (its attributes kept) and returns
its result; it is private (internal linkage) and tagged NOINLINE, which the LLVM translator makes
LLVM's `noinline`, so that LLVM optimizes and selects its body once too.

XLA differs: XLA:CPU's and XLA:GPU's emitters expand each use inline. The GPU pipeline keeps that
(NVPTX would compile a call to a device function, but the SIMT simulation runs one function).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp, UnitAttr, VectorType
from xdsl.ir import Block, Operation, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from hlocc.codegen.math.float_builder import F32, F64
from hlocc.codegen.math.float_builder_xdsl import format_of
from hlocc.codegen.transforms.expand_float_ops import BF16_ROUNDED
from hlocc.codegen.transforms.util import walk_ops

OUTLINED = frozenset({
    "math.expm1", "math.log", "math.log2", "math.log10", "math.log1p", "math.powf", "math.sin", "math.cos",
    "math.tan", "math.atan", "math.atan2", "math.tanh", "math.erf", "math.cbrt",
})
"""Math ops outlined where repeated (module doc)."""

OUTLINED_PREFIX = "__hlocc_math."
"""The outlined functions' name prefix."""

NOINLINE = "llvm.noinline"
"""Discardable unit attribute of a func.func that LLVM must not inline (codegen/llvm/translator.py)."""


def _key(op: Operation) -> tuple | None:
    if op.name not in OUTLINED or len(op.results) != 1:
        return None
    result_type = op.results[0].type
    elem = result_type.get_element_type() if isinstance(result_type, VectorType) else result_type
    if format_of(elem) not in (F32, F64):
        return None
    return (op.name, tuple(o.type for o in op.operands), result_type, BF16_ROUNDED in op.attributes)


def _symbol(key: tuple) -> str:
    name, _, result_type, bf16 = key
    text = str(result_type).replace("<", "").replace(">", "").replace("x", "_").replace(" ", "")
    return f"{OUTLINED_PREFIX}{name.removeprefix('math.')}.{text}" + (".bf16" if bf16 else "")


class OutlineMathPass(ModulePass):
    """Repeated costly math ops as calls of one private function each (see the module docstring)."""

    name = "outline-math"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        uses: dict[tuple, list[Operation]] = {}
        for o in walk_ops(op):
            key = _key(o)
            if key is not None:
                uses.setdefault(key, []).append(o)
        for key, ops in uses.items():
            if len(ops) < 2:
                continue
            _, operand_types, result_type, _ = key
            symbol = _symbol(key)
            block = Block(arg_types=operand_types)
            body = ops[0].clone()
            for k, arg in enumerate(block.args):
                body.operands[k] = arg
            block.add_ops([body, func.ReturnOp(body.results[0])])
            outlined = func.FuncOp(symbol, FunctionType.from_lists(list(operand_types), [result_type]),
                                   Region(block), visibility="private")
            outlined.attributes[NOINLINE] = UnitAttr()
            op.body.block.add_op(outlined)
            for use in ops:
                Rewriter.replace_op(use, func.CallOp(symbol, list(use.operands), [result_type]))
