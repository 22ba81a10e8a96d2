"""`hlo-opt`: run HLO passes on an HLO text file and print the result (XLA's hlo-opt).

    hlo-opt FILE.hlo --passes=algsimp,cse,dce       the named passes, in order
    hlo-opt FILE.hlo --pipeline simplify            a named pipeline (passes/pipeline.py)
    hlo-opt FILE.hlo --passes=dce --print-after-all the module after every pass that changed it
    hlo-opt FILE.hlo --timing                       milliseconds per pass, on stderr

FILE '-' (or none) reads stdin. The input is verified; with --verify-each (the default) so is
the module after every pass, and a pass that claims "no change" must not have changed the text.
A user error (unreadable or malformed input, an invalid module, an unknown pass) prints one line,
`hlo-opt: error: <file:line:col: cause>`, and exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hlocc.errors import HloError, HloParseError, HloVerifyError
from hlocc.hlo.parser import parse_hlo, read_text_file
from hlocc.hlo.verifier import verify_module
from hlocc.passes.pipeline import PIPELINES, run_passes


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hlo-opt", description="Run HLO passes on an HLO module and print it.")
    parser.add_argument("file", nargs="?", default="-", help="HLO text file ('-' for stdin)")
    parser.add_argument("--passes", default="", help="comma-separated pass names, run in order")
    parser.add_argument("--pipeline", choices=sorted(PIPELINES), help="run a named pipeline (after --passes)")
    parser.add_argument("--print-after-all", action="store_true",
                        help="print the module after every pass that changed it")
    parser.add_argument("--timing", action="store_true", help="print milliseconds per pass to stderr")
    parser.add_argument("--no-verify-each", action="store_true",
                        help="verify only the input and the result, not after every pass")
    parser.add_argument("--no-metadata", action="store_true", help="omit metadata={...} from the output")
    parser.add_argument("-o", "--output", default="-", help="output file ('-' for stdout)")
    return parser


def error_line(error: HloError) -> str:
    """The error as one line; a parse error keeps its file:line:col and cause."""
    if isinstance(error, HloParseError):
        return f"{error.filename}:{error.line}:{error.column}: {error.reason}"
    if isinstance(error, HloVerifyError) and error.location is not None:
        where = error.location
        return f"{where.filename}:{where.line}:{where.column}: {error.reason}"
    return " ".join(str(error).split("\n"))


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _argument_parser().parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse already reported
        return int(e.code or 0)
    try:
        return _run(args)
    except HloError as e:
        print(f"hlo-opt: error: {error_line(e)}", file=sys.stderr)
        return 1


def _run(args) -> int:
    filename = "<stdin>" if args.file == "-" else args.file
    text = read_text_file(args.file)
    module = parse_hlo(text, filename)
    verify_module(module)
    names = [p.strip() for p in args.passes.split(",") if p.strip()] + ([args.pipeline] if args.pipeline else [])
    result = run_passes(module, names, print_after_all=args.print_after_all, stream=sys.stdout,
                        debug=not args.no_verify_each)
    verify_module(module)
    if args.timing:
        for name, ms in result.timings_ms.items():
            print(f"hlo-opt: {name}: {ms:.3f} ms", file=sys.stderr)
        for group in result.unconverged:
            print(f"hlo-opt: warning: fixed-point group '{group}' did not converge", file=sys.stderr)
    output = module.to_string(print_metadata=not args.no_metadata)
    if args.output == "-":
        sys.stdout.write(output)
    else:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(output)
        except OSError as e:
            raise HloError(f"cannot write '{args.output}': {e.strerror}") from None
    return 0


if __name__ == "__main__":
    sys.exit(main())
