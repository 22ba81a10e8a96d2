"""The context kernel IR lives in: the dialects it may use, its error type, and parsing and printing
of kernel IR text (xDSL's located messages become `KernelIRError`s). The passes, the pipeline, the
backends and `hlocc opt` share these; this module imports no pass and no driver."""

from __future__ import annotations

from io import StringIO

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.complex import Complex
from xdsl.dialects.func import Func
from xdsl.dialects.gpu import GPU
from xdsl.dialects.llvm import LLVM
from xdsl.dialects.math import Math
from xdsl.dialects.scf import Scf
from xdsl.dialects.tensor import Tensor
from xdsl.dialects.transform import Transform
from xdsl.dialects.vector import Vector
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from hlocc.codegen.ir import XLA
from hlocc.codegen.schedule.interpreter import HLOCC_TRANSFORM
from hlocc.errors import HloError

# gpu is loaded for gpu.thread_id / gpu.block_id in entry functions (seed 000's GELU example); llvm for
# what lower-tensors leaves (llvm.getelementptr, llvm.load/store, llvm.mlir.global), so its output parses;
# complex for complex numbers (the elemental emitter's complex.* ops, expanded by expand-float-ops);
# transform and hlocc's transform ops for matmul schedules (codegen/schedule/).
DIALECTS = (Builtin, Func, Arith, Math, Scf, Tensor, Vector, GPU, LLVM, Complex, XLA, Transform, HLOCC_TRANSFORM)


class KernelIRError(HloError):
    """Kernel IR that does not parse or verify, or a pass pipeline that cannot run."""


def make_context() -> Context:
    """A context with every dialect kernel IR may use."""
    ctx = Context()
    for dialect in DIALECTS:
        ctx.load_dialect(dialect)
    return ctx


def parse_module(text: str, ctx: Context | None = None, filename: str = "<mlir>") -> ModuleOp:
    """Parse and verify kernel IR text (a bare list of ops is wrapped in a module)."""
    ctx = ctx or make_context()
    try:
        module = Parser(ctx, text, filename).parse_module()
        module.verify()
    except (ParseError, DiagnosticException) as e:
        raise KernelIRError(f"{filename}: {e}") from e
    return module


def print_module(module: ModuleOp) -> str:
    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"
