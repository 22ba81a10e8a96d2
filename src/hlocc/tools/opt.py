"""`hlocc opt`: parse kernel MLIR text, run passes on it, print it (mlir-opt / emitters_opt).

    hlocc opt --passes inline,lower-xla-loops-to-scf FILE.mlir   (FILE '-' or none: stdin)
    hlocc opt --pipeline gpu|cpu FILE.mlir        the whole KERNEL_PIPELINE / CPU_PIPELINE
    hlocc opt --pipeline cpu --emit-llvm FILE.mlir  then print LLVM IR (codegen/llvm/)
    hlocc opt --split-input-file ...              each `// -----` chunk on its own
    hlocc opt --vector-isa avx2 ...               matmul schedules for that CPU's vector registers
                                                  (avx512+bf16, avx512, avx2, neon, sse; default: the host's)
    (also `python -m hlocc.tools.opt ...`)

The IR is verified after parsing and after every pass, as mlir-opt does. Passes are looked up by
their `name` in `codegen.transforms.PASSES`. Errors (malformed text, a failing verifier, an unknown
pass, IR the LLVM translator cannot take) are `KernelIRError`s with xDSL's located message.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence

from xdsl.utils.exceptions import DiagnosticException

from hlocc.codegen.context import KernelIRError, make_context, parse_module, print_module
from hlocc.codegen.llvm import TranslationError, translate_module
from hlocc.codegen.pipeline import pipeline_for
from hlocc.codegen.schedule import ScheduleError
from hlocc.codegen.target import VECTOR_ISAS, use_vector_isa, vector_isa
from hlocc.codegen.transforms import PASSES
from hlocc.errors import HloError
from hlocc.hlo.parser import read_text_file

__all__ = ["PASSES", "KernelIRError", "arg_parser", "main", "make_context", "parse_module", "print_module", "run_opt",
           "run_opt_args"]

PIPELINES = ("gpu", "cpu")
"""`--pipeline` names: KERNEL_PIPELINE (XLA's GPU order) and CPU_PIPELINE (codegen/pipeline.py)."""


def pipeline_passes(kind: str) -> tuple[str, ...]:
    """The passes `--pipeline kind` runs: those the compiler runs for that target."""
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
        except ScheduleError as e:  # an illegal transform script: the message names the transform op
            raise KernelIRError(f"{filename}: {e}") from None
    if not emit_llvm:
        return print_module(module)
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
    parser.add_argument("--vector-isa", choices=sorted(VECTOR_ISAS),
                        help="the CPU vector registers matmul schedules are checked and lowered for "
                             "(default: the host's; FileCheck tests pin it)")
    parser.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")
    return parser


def run_opt_args(text: str, args: argparse.Namespace, filename: str) -> str:
    """`run_opt` with the options `arg_parser` parsed."""
    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    isa = VECTOR_ISAS[args.vector_isa] if getattr(args, "vector_isa", None) else vector_isa()
    with use_vector_isa(isa):
        return run_opt(text, passes, filename, pipeline=args.pipeline, emit_llvm=args.emit_llvm,
                       split_input_file=args.split_input_file)


def main(argv: Sequence[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    try:
        text = read_text_file(args.file, "a kernel IR text file")
    except HloError as e:
        print(f"hlocc opt: error: {e}", file=sys.stderr)
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
    sys.exit(main())
