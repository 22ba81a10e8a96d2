"""`hlocc opt`: parse kernel MLIR text, run passes on it, print it (mlir-opt / emitters_opt).

    python -m hlocc.codegen.opt --passes inline,lower-xla-loops-to-scf FILE.mlir   (FILE '-' or none: stdin)
    python -m hlocc.codegen.opt --pipeline gpu|cpu FILE.mlir        the whole KERNEL_PIPELINE / CPU_PIPELINE
    python -m hlocc.codegen.opt --pipeline cpu --emit-llvm FILE.mlir  then print LLVM IR (to_llvm.py)
    python -m hlocc.codegen.opt --split-input-file ...              each `// -----` chunk on its own

The IR is verified after parsing and after every pass, as mlir-opt does. Passes live in a registry
keyed by their `name`; transforms register themselves with `register_pass` when their module is
imported, and `load_passes` imports them all (lazily: the transforms import this module). Errors
(malformed text, a failing verifier, an unknown pass, IR the LLVM translator cannot take) are
`KernelIRError`s with xDSL's located message.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
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
from xdsl.dialects.vector import Vector
from xdsl.parser import Parser
from xdsl.passes import ModulePass
from xdsl.printer import Printer
from xdsl.utils.exceptions import DiagnosticException, ParseError

from hlocc.codegen.dialect import XLA
from hlocc.errors import HloError

# gpu is loaded for gpu.thread_id / gpu.block_id in entry functions (seed 000's GELU example); llvm for
# what lower-tensors leaves (llvm.getelementptr, llvm.load/store, llvm.mlir.global), so its output parses;
# complex for complex numbers (the elemental emitter's complex.* ops, expanded by expand-float-ops).
DIALECTS = (Builtin, Func, Arith, Math, Scf, Tensor, Vector, GPU, LLVM, Complex, XLA)


class KernelIRError(HloError):
    """Kernel IR that does not parse or verify, or a pass pipeline that cannot run."""


def make_context() -> Context:
    """A context with every dialect kernel IR may use."""
    ctx = Context()
    for dialect in DIALECTS:
        ctx.load_dialect(dialect)
    return ctx


@dataclass(frozen=True)
class VerifyPass(ModulePass):
    """Checks the module (every op's verifier); changes nothing."""

    name = "verify"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        op.verify()


PASSES: dict[str, type[ModulePass]] = {}


def register_pass(cls: type[ModulePass]) -> type[ModulePass]:
    """Make a pass runnable by name (usable as a class decorator)."""
    if cls.name in PASSES and PASSES[cls.name] is not cls:
        raise ValueError(f"pass name '{cls.name}' registered twice")
    PASSES[cls.name] = cls
    return cls


register_pass(VerifyPass)

PIPELINES = ("gpu", "cpu")
"""`--pipeline` names: KERNEL_PIPELINE (XLA's GPU order) and CPU_PIPELINE (codegen/pipeline.py)."""


def load_passes() -> None:
    """Register every pass: the pipeline module (which also registers xDSL's canonicalize, cse, dce)
    and every module under codegen/transforms, so a pass is runnable by name before it is in a
    pipeline. Imported here, not at the top, because those modules import this one."""
    import hlocc.codegen.pipeline  # noqa: F401
    import hlocc.codegen.transforms as transforms

    for info in pkgutil.iter_modules(transforms.__path__, transforms.__name__ + "."):
        importlib.import_module(info.name)


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


def pipeline_passes(kind: str) -> tuple[str, ...]:
    """The passes `--pipeline kind` runs: those the compiler runs for that target."""
    load_passes()
    from hlocc.codegen.pipeline import pipeline_for

    if kind not in PIPELINES:
        raise KernelIRError(f"unknown pipeline '{kind}'; known: {', '.join(PIPELINES)}")
    return pipeline_for(kind)


SPLIT_MARKER = re.compile(r"^// -----.*$", re.MULTILINE)


def split_input(text: str) -> list[str]:
    """The `// -----` chunks of `text` (mlir-opt's --split-input-file), each preceded by as many
    newlines as there are lines before it, so that error locations keep the file's line numbers."""
    chunks, start = [], 0
    for marker in [*SPLIT_MARKER.finditer(text), None]:
        end = marker.start() if marker else len(text)
        chunks.append("\n" * text.count("\n", 0, start) + text[start:end])
        start = marker.end() if marker else end
    return chunks


def run_opt(text: str, passes: Sequence[str] = (), filename: str = "<mlir>", *, pipeline: str | None = None,
            emit_llvm: bool = False, split_input_file: bool = False) -> str:
    """Parse `text`, run `passes` (or the whole `pipeline`, 'gpu' or 'cpu') in order, verifying after
    each, and return the printed module, or its LLVM IR with `emit_llvm`. With `split_input_file`
    every `// -----` chunk is a module of its own and the outputs are joined with `// -----`."""
    load_passes()
    if pipeline is not None and passes:
        raise KernelIRError("give either --passes or --pipeline, not both")
    names = pipeline_passes(pipeline) if pipeline is not None else tuple(passes)
    unknown = [p for p in names if p not in PASSES]
    if unknown:
        raise KernelIRError(f"unknown pass(es) {', '.join(unknown)}; known: {', '.join(sorted(PASSES))}")
    chunks = split_input(text) if split_input_file else [text]
    outputs = [_run_one(chunk, names, filename, emit_llvm) for chunk in chunks]
    return "// -----\n".join(outputs)


def _run_one(text: str, passes: Sequence[str], filename: str, emit_llvm: bool) -> str:
    ctx = make_context()
    module = parse_module(text, ctx, filename)
    for name in passes:
        try:
            PASSES[name]().apply(ctx, module)
            module.verify()
        except DiagnosticException as e:
            raise KernelIRError(f"{filename}: after pass '{name}': {e}") from e
    if not emit_llvm:
        return print_module(module)
    from hlocc.codegen.to_llvm import TranslationError, translate_module

    try:
        return str(translate_module(module))
    except TranslationError as e:
        raise KernelIRError(f"{filename}: --emit-llvm: {e}") from e


def arg_parser() -> argparse.ArgumentParser:
    """`hlocc opt`'s arguments (also what a FileCheck test's RUN line may give `hlocc-opt`)."""
    parser = argparse.ArgumentParser(prog="hlocc opt", description="Run kernel passes on MLIR text.")
    parser.add_argument("file", nargs="?", default="-", help="input .mlir file ('-' for stdin)")
    parser.add_argument("--passes", default="", help="comma-separated pass names, in order")
    parser.add_argument("--pipeline", choices=PIPELINES, help="run the whole kernel pipeline for this target")
    parser.add_argument("--emit-llvm", action="store_true", help="print the LLVM IR of the result instead of MLIR")
    parser.add_argument("--split-input-file", action="store_true", help="process each '// -----' chunk on its own")
    parser.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")
    return parser


def run_opt_args(text: str, args: argparse.Namespace, filename: str) -> str:
    """`run_opt` with the options `arg_parser` parsed."""
    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    return run_opt(text, passes, filename, pipeline=args.pipeline, emit_llvm=args.emit_llvm,
                   split_input_file=args.split_input_file)


def main(argv: Sequence[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file).read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"hlocc opt: error: cannot read '{args.file}': {e}", file=sys.stderr)
        return 1
    try:
        result = run_opt_args(text, args, "<stdin>" if args.file == "-" else args.file)
    except KernelIRError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(result)
    else:
        with open(args.output, "w") as f:
            f.write(result)
    return 0


if __name__ == "__main__":
    # Run the imported module's main: the transforms register their passes in `hlocc.codegen.opt.PASSES`,
    # not in this `__main__` copy of the module.
    from hlocc.codegen.opt import main as _main

    sys.exit(_main())
