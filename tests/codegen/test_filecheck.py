"""Runs every FileCheck file of the kernel code generator: its `// RUN:` line, lit style. The files sit
beside the tests of what they check (tests/codegen/<ir|transforms|llvm|pipeline|emitters/<kind>>/,
tests/backends/cuda/ptx_*.hlo); this driver finds them recursively.

Supported RUN lines (one per file), and for the *.hlo files (emitter tests, as XLA's):

    // RUN: fusion-to-mlir %s [--target gpu|cpu] [--passes a,b] | filecheck %s [filecheck options]


    // RUN: hlocc-opt %s [hlocc opt arguments] | filecheck %s [filecheck options]
    // RUN: not hlocc-opt %s [hlocc opt arguments] 2>&1 | filecheck %s      (the error message is checked)

`hlocc opt arguments` are those of the command line (`hlocc.tools.opt.arg_parser`): `--passes a,b`,
`--pipeline gpu|cpu`, `--emit-llvm`, `--split-input-file`. `hlocc-opt` runs in-process (`run_opt_args`),
its output is piped into the `filecheck` command.
"""

from __future__ import annotations

import argparse
import pathlib
import shlex
import shutil
import subprocess

import pytest

from hlocc.tools.opt import KernelIRError, arg_parser, run_opt_args

TESTS = pathlib.Path(__file__).resolve().parents[1]
FILES = sorted((TESTS / "codegen").rglob("*.mlir"))
# tests/passes/ has *.hlo FileCheck files too (hlo-opt, its own driver): only fusion-to-mlir ones here.
HLO_FILES = sorted(p for folder in ("codegen", "backends") for p in (TESTS / folder).rglob("*.hlo")
                   if "RUN: fusion-to-mlir" in p.read_text())
FILECHECK = shutil.which("filecheck")


def parse_run_line(path: pathlib.Path) -> tuple[bool, argparse.Namespace, list[str]]:
    """(expect failure, hlocc opt arguments, filecheck arguments) from the file's RUN line."""
    lines = [ln.split("RUN:", 1)[1] for ln in path.read_text().splitlines() if ln.strip().startswith("// RUN:")]
    assert len(lines) == 1, f"{path.name}: expected exactly one '// RUN:' line"
    opt_part, _, check_part = lines[0].replace("2>&1", "").partition("|")
    opt_args = shlex.split(opt_part)
    expect_failure = opt_args[:1] == ["not"]
    opt_args = opt_args[1:] if expect_failure else opt_args
    assert opt_args[:2] == ["hlocc-opt", "%s"], f"{path.name}: RUN line must start with 'hlocc-opt %s'"
    parser = arg_parser()
    parser.exit_on_error = False
    try:
        args, unknown = parser.parse_known_args([str(path), *opt_args[2:]])
    except argparse.ArgumentError as e:
        raise AssertionError(f"{path.name}: bad hlocc-opt arguments: {e}") from None
    assert not unknown, f"{path.name}: unsupported hlocc-opt argument(s) {unknown}"
    assert args.output == "-", f"{path.name}: hlocc-opt must write to its standard output"
    check_args = shlex.split(check_part)
    assert check_args[:2] == ["filecheck", "%s"], f"{path.name}: RUN line must pipe into 'filecheck %s'"
    return expect_failure, args, check_args[2:]


def test_there_are_filecheck_files():
    assert any(f.name == "gelu_loop.mlir" for f in FILES)
    assert len(FILES) >= 31 and len(HLO_FILES) >= 23, (len(FILES), len(HLO_FILES))


def test_run_line_takes_the_command_line_arguments(tmp_path):
    path = tmp_path / "t.mlir"
    path.write_text("// RUN: hlocc-opt %s --pipeline cpu --emit-llvm --split-input-file | filecheck %s --strict-whitespace\n")
    expect_failure, args, check_args = parse_run_line(path)
    assert not expect_failure and check_args == ["--strict-whitespace"]
    assert (args.pipeline, args.emit_llvm, args.split_input_file, args.passes) == ("cpu", True, True, "")
    path.write_text("// RUN: not hlocc-opt %s --passes=inline,unroll-loops 2>&1 | filecheck %s\n")
    expect_failure, args, _ = parse_run_line(path)
    assert expect_failure and args.passes == "inline,unroll-loops"
    path.write_text("// RUN: hlocc-opt %s --no-such-flag | filecheck %s\n")
    with pytest.raises(AssertionError, match="unsupported hlocc-opt argument"):
        parse_run_line(path)


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_filecheck(path: pathlib.Path):
    expect_failure, args, check_args = parse_run_line(path)
    try:
        output = run_opt_args(path.read_text(), args, str(path))
        assert not expect_failure, f"{path.name}: expected an error, got:\n{output}"
    except KernelIRError as e:
        if not expect_failure:
            raise
        output = str(e)
    done = subprocess.run([FILECHECK, str(path), *check_args], input=output, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{output}"


def _hlo_run_line(path: pathlib.Path) -> tuple[list[str], list[str]]:
    lines = [ln.split("RUN:", 1)[1] for ln in path.read_text().splitlines() if ln.strip().startswith("// RUN:")]
    assert len(lines) == 1, f"{path.name}: expected exactly one '// RUN:' line"
    tool_part, _, check_part = lines[0].partition("|")
    tool_args, check_args = shlex.split(tool_part), shlex.split(check_part)
    assert tool_args[:2] == ["fusion-to-mlir", "%s"], f"{path.name}: RUN line must start with 'fusion-to-mlir %s'"
    assert check_args[:2] == ["filecheck", "%s"], f"{path.name}: RUN line must pipe into 'filecheck %s'"
    return tool_args[2:], check_args[2:]


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", HLO_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_emitter_filecheck(path: pathlib.Path):
    from hlocc.tools.fusion_to_mlir import arg_parser, fusion_to_mlir

    tool_args, check_args = _hlo_run_line(path)
    args = arg_parser().parse_args([str(path), *tool_args])
    output = fusion_to_mlir(path.read_text(), args.target, [p for p in args.passes.split(",") if p], str(path),
                            args.emit, args.arch, args.speculate)
    done = subprocess.run([FILECHECK, str(path), *check_args], input=output, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{output}"
