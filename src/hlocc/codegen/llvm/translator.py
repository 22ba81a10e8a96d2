"""The translator: `LlvmTranslator` (a module's globals and functions), `FunctionTranslator` (one
function's values, dispatching each op to its family's handler in `HANDLERS`), and `translate_module`."""

from __future__ import annotations

from dataclasses import dataclass, field

from llvmlite import ir
from xdsl.dialects import func, gpu, llvm, math, scf
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from hlocc.codegen.ir import TensorMapOp, YieldOp
from hlocc.codegen.llvm.arith_ops import ARITH_HANDLERS
from hlocc.codegen.llvm.block_simulation import needs_block_function, translate_block_function
from hlocc.codegen.llvm.complex_ops import COMPLEX_HANDLERS
from hlocc.codegen.llvm.func_ops import FUNC_HANDLERS
from hlocc.codegen.llvm.gpu_ops import GPU_HANDLERS
from hlocc.codegen.llvm.memory_ops import MEMORY_HANDLERS
from hlocc.codegen.llvm.scf_ops import SCF_HANDLERS
from hlocc.codegen.llvm.tma_ops import TMA_HANDLERS, tensor_map_key
from hlocc.codegen.llvm.types import I64, TranslationError, declare_intrinsic, float_constant, is_float, llvm_type
from hlocc.codegen.llvm.vector_ops import VECTOR_HANDLERS
from hlocc.codegen.llvm.warpgroup_ops import WARPGROUP_HANDLERS

MATH_INTRINSICS = {
    math.AbsFOp: "llvm.fabs", math.SqrtOp: "llvm.sqrt", math.FloorOp: "llvm.floor", math.CeilOp: "llvm.ceil",
    math.RoundEvenOp: "llvm.roundeven", math.RoundOp: "llvm.round", math.TruncOp: "llvm.trunc",
    math.CopySignOp: "llvm.copysign", math.FmaOp: "llvm.fma",
}


# Only with allow_libm: intrinsics that LLVM turns into libm calls on the CPU.
LIBM_INTRINSICS = {
    math.ExpOp: "llvm.exp", math.LogOp: "llvm.log", math.SinOp: "llvm.sin", math.CosOp: "llvm.cos",
    math.PowFOp: "llvm.pow", math.Exp2Op: "llvm.exp2", math.Log2Op: "llvm.log2", math.Log10Op: "llvm.log10",
    math.TanhOp: "llvm.tanh", math.TanOp: "llvm.tan", math.Atan2Op: "llvm.atan2",
}


@dataclass(frozen=True)
class TranslateOptions:
    allow_libm: bool = False
    noalias: bool = True
    fast_math: frozenset[str] = field(default_factory=frozenset)


class FunctionTranslator:
    def __init__(self, translator: LlvmTranslator, fn: func.FuncOp, llfn: ir.Function, extra_args: dict[str, int]):
        self.t = translator
        self.fn = fn
        self.llfn = llfn
        self.values: dict[SSAValue, ir.Value] = {}
        self.extra_args = extra_args
        self.ids = {key: llfn.args[index] for key, index in extra_args.items()}  # thread / block id
        self.shared: dict[Operation, ir.Value] = {}  # xla.shared_memory → the block's buffer
        self.shared_window: ir.Value | None = None  # CPU: the block's shared memory, all buffers in one
        self.shared_window_bytes = 0  # CPU: its size (the simulation's state lies past it: tma_simulation.py)
        entry = llfn.append_basic_block("entry")
        self.b = ir.IRBuilder(entry)

    def v(self, value: SSAValue) -> ir.Value:
        try:
            return self.values[value]
        except KeyError:
            raise TranslationError(f"value {value} used before its definition in @{self.fn.sym_name.data}") from None

    def run(self) -> None:
        block = self.fn.body.block
        for arg, llarg in zip(block.args, self.llfn.args):
            self.values[arg] = llarg
        if self.extra_args and not self.t.gpu and needs_block_function(self.fn):
            translate_block_function(self)
            self.t.block_functions.add(self.fn.sym_name.data)
            return
        self.block(block)

    def block(self, block: Block) -> list[ir.Value] | None:
        """Translate a region's single block; return the terminator's (yield) operands."""
        for op in block.ops:
            if isinstance(op, (scf.YieldOp, YieldOp)):
                return [self.v(x) for x in op.operands]
            self.op(op)
        return None

    # -- ops ------------------------------------------------------------------------------------------
    def op(self, op: Operation) -> None:
        b = self.b
        handler = HANDLERS.get(type(op))
        if handler is not None:
            handler(self, op)
            return
        if type(op) in MATH_INTRINSICS:
            self.intrinsic(op, MATH_INTRINSICS[type(op)])
            return
        if type(op) in LIBM_INTRINSICS and self.t.options.allow_libm:
            self.intrinsic(op, LIBM_INTRINSICS[type(op)])
            return
        del b
        raise TranslationError(f"cannot translate '{op.name}' to LLVM (a lowering pass should have removed it)")

    def set(self, op: Operation, value: ir.Value) -> None:
        self.values[op.results[0]] = value

    def intrinsic(self, op: Operation, name: str) -> None:
        ty = llvm_type(op.results[0].type)
        args = [self.v(x) for x in op.operands]
        fn = declare_intrinsic(self.t.module, name, ty)
        self.set(op, self.b.call(fn, args))


HANDLERS = {**ARITH_HANDLERS, **SCF_HANDLERS, **VECTOR_HANDLERS, **MEMORY_HANDLERS, **COMPLEX_HANDLERS, **GPU_HANDLERS,
            **WARPGROUP_HANDLERS, **TMA_HANDLERS, **FUNC_HANDLERS}
"""The translation of each op type, by family (the `*_ops.py` modules)."""


class LlvmTranslator:
    def __init__(self, name: str = "kernel", options: TranslateOptions | None = None, triple: str | None = None,
                 gpu: bool = False, lane_mask: int = -1):
        """gpu: translate shared memory, barriers, shuffles and atomics for NVPTX (a kernel entry
        then runs once per GPU thread) instead of as a CPU block function. lane_mask: the lanes
        of a warp that take part in shuffles (all 32 unless a block is smaller than a warp)."""
        self.module = ir.Module(name=name)
        self.gpu = gpu
        self.lane_mask = lane_mask
        self.shared_bytes = 0  # shared memory of the GPU kernel
        # GPU: the kernel's shared buffers are slices of one `extern .shared` array sized at launch
        # (more than the 48 KiB a block may have statically), not static arrays of their own
        self.dynamic_shared = False
        # GPU: alignment of each shared buffer; 1024 for kernels whose wgmma descriptors need the
        # 128-byte swizzle's pattern to start at a buffer (codegen/llvm/warpgroup_ops.py)
        self.shared_alignment = 16
        self._dynamic_shared: ir.GlobalVariable | None = None
        if triple:
            self.module.triple = triple
        self.options = options or TranslateOptions()
        self.functions: dict[str, ir.Function] = {}
        self.globals: dict[str, ir.GlobalVariable] = {}
        self.block_functions: set[str] = set()  # entry functions that run a whole block (block_simulation.py)

    def translate(self, module: ModuleOp) -> ir.Module:
        for op in module.ops:
            if isinstance(op, llvm.GlobalOp):
                self._global(op)
        fns = [op for op in module.ops if isinstance(op, func.FuncOp)]
        extra: dict[str, dict[str, int]] = {}
        for fn in fns:
            extra[fn.sym_name.data] = self._declare(fn)
        for fn in fns:
            FunctionTranslator(self, fn, self.functions[fn.sym_name.data], extra[fn.sym_name.data]).run()
        return self.module

    def _declare(self, fn: func.FuncOp) -> dict[str, int]:
        ft = fn.function_type
        args = [llvm_type(t) for t in ft.inputs]
        uses_ids = any(isinstance(o, (gpu.ThreadIdOp, gpu.BlockIdOp)) for o in fn.walk())
        extra = {}
        if uses_ids:
            extra = {"thread": len(args), "block": len(args) + 1}
            args += [I64, I64]
            if self.gpu:  # a TMA kernel's tensor maps: the wrapper's by-value parameters (tma_ops.py)
                maps = sum(isinstance(o, TensorMapOp) for o in fn.walk())
                extra.update({tensor_map_key(k): len(args) + k for k in range(maps)})
                args += [ir.PointerType()] * maps
        outs = [llvm_type(t) for t in ft.outputs]
        ret = ir.VoidType() if not outs else outs[0] if len(outs) == 1 else ir.LiteralStructType(outs)
        llfn = ir.Function(self.module, ir.FunctionType(ret, args), name=fn.sym_name.data)
        private = fn.sym_visibility is not None and fn.sym_visibility.data == "private"
        if private or uses_ids:
            llfn.linkage = "internal"
        if uses_ids:
            llfn.attributes.add("alwaysinline")
        elif "llvm.noinline" in fn.attributes:  # (transforms/outline_math.py NOINLINE)
            llfn.attributes.add("noinline")
        for arg, t in zip(llfn.args, ft.inputs):
            if isinstance(t, llvm.LLVMPointerType) and self.options.noalias:
                arg.add_attribute("noalias")
        self.functions[fn.sym_name.data] = llfn
        return extra

    def _global(self, op: llvm.GlobalOp) -> None:
        ty = llvm_type(op.global_type)
        g = ir.GlobalVariable(self.module, ty, op.sym_name.data)
        g.align = 64
        value = op.value
        if value is None:  # a mutable, zero-initialised global the host reads (check-bounds' record)
            g.initializer = ir.Constant(ty, None)
            self.globals[op.sym_name.data] = g
            return
        g.linkage = "private"
        g.global_constant = True
        elem_t = value.get_element_type()
        elem_ty = llvm_type(elem_t)
        elems = [float_constant(elem_ty, x, elem_t) if is_float(elem_t) else ir.Constant(elem_ty, int(x))
                 for x in value.get_values()]
        g.initializer = ir.Constant(ty, elems)
        self.globals[op.sym_name.data] = g


def translate_module(module: ModuleOp, name: str = "kernel", options: TranslateOptions | None = None,
                     triple: str | None = None) -> ir.Module:
    return LlvmTranslator(name, options, triple).translate(module)
