"""`hlocc opt`: parse kernel MLIR text, run named passes on it, print it (mlir-opt / emitters_opt).

    python -m hlocc.codegen.opt --passes verify FILE.mlir        (FILE '-' or none: stdin)

The IR is verified after parsing and after every pass, as mlir-opt does. Passes live in a registry
keyed by their `name`; transforms register themselves with `register_pass`. Until the lowering
passes exist the registry holds only `verify`. Errors (malformed text, a failing verifier, an
unknown pass) are `KernelIRError`s with xDSL's located message.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from io import StringIO

from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.dialects.gpu import GPU
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

# gpu is loaded for gpu.thread_id / gpu.block_id in entry functions (seed 000's GELU example).
DIALECTS = (Builtin, Func, Arith, Math, Scf, Tensor, Vector, GPU, XLA)


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


def run_opt(text: str, passes: Sequence[str] = (), filename: str = "<mlir>") -> str:
    """Parse `text`, run `passes` in order (verifying after each) and return the printed module."""
    unknown = [p for p in passes if p not in PASSES]
    if unknown:
        raise KernelIRError(f"unknown pass(es) {', '.join(unknown)}; known: {', '.join(sorted(PASSES))}")
    ctx = make_context()
    module = parse_module(text, ctx, filename)
    for name in passes:
        try:
            PASSES[name]().apply(ctx, module)
            module.verify()
        except DiagnosticException as e:
            raise KernelIRError(f"{filename}: after pass '{name}': {e}") from e
    return print_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hlocc opt", description="Run kernel passes on MLIR text.")
    parser.add_argument("file", nargs="?", default="-", help="input .mlir file ('-' for stdin)")
    parser.add_argument("--passes", default="", help="comma-separated pass names, in order")
    parser.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")
    args = parser.parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else open(args.file).read()
    except (OSError, UnicodeDecodeError) as e:
        print(f"hlocc opt: error: cannot read '{args.file}': {e}", file=sys.stderr)
        return 1
    passes = [p.strip() for p in args.passes.split(",") if p.strip()]
    try:
        result = run_opt(text, passes, "<stdin>" if args.file == "-" else args.file)
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
