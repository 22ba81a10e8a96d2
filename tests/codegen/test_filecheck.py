"""Runs every tests/codegen/filecheck/*.mlir file: its `// RUN:` line, lit style.

Supported RUN lines (one per file):

    // RUN: hlocc-opt %s [--passes a,b] | filecheck %s [filecheck options]
    // RUN: not hlocc-opt %s [--passes a,b] | filecheck %s      (the error message is checked)

`hlocc-opt` runs in-process (`run_opt`), its output is piped into the `filecheck` command.
"""

from __future__ import annotations

import pathlib
import shlex
import shutil
import subprocess

import pytest

from hlocc.codegen.opt import KernelIRError, run_opt

HERE = pathlib.Path(__file__).parent / "filecheck"
FILES = sorted(HERE.glob("*.mlir"))
FILECHECK = shutil.which("filecheck")


def parse_run_line(path: pathlib.Path) -> tuple[bool, list[str], list[str]]:
    """(expect failure, passes, filecheck arguments) from the file's RUN line."""
    lines = [ln.split("RUN:", 1)[1] for ln in path.read_text().splitlines() if ln.strip().startswith("// RUN:")]
    assert len(lines) == 1, f"{path.name}: expected exactly one '// RUN:' line"
    opt_part, _, check_part = lines[0].replace("2>&1", "").partition("|")
    opt_args = shlex.split(opt_part)
    expect_failure = opt_args[:1] == ["not"]
    opt_args = opt_args[1:] if expect_failure else opt_args
    assert opt_args[:2] == ["hlocc-opt", "%s"], f"{path.name}: RUN line must start with 'hlocc-opt %s'"
    passes: list[str] = []
    rest = opt_args[2:]
    while rest:
        flag = rest.pop(0)
        if flag.startswith("--passes="):
            passes += flag.split("=", 1)[1].split(",")
        elif flag == "--passes" and rest:
            passes += rest.pop(0).split(",")
        else:
            raise AssertionError(f"{path.name}: unsupported hlocc-opt argument {flag!r}")
    check_args = shlex.split(check_part)
    assert check_args[:2] == ["filecheck", "%s"], f"{path.name}: RUN line must pipe into 'filecheck %s'"
    return expect_failure, [p for p in passes if p], check_args[2:]


def test_there_are_filecheck_files():
    assert any(f.name == "gelu_loop.mlir" for f in FILES)


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_filecheck(path: pathlib.Path):
    expect_failure, passes, check_args = parse_run_line(path)
    try:
        output = run_opt(path.read_text(), passes, str(path))
        assert not expect_failure, f"{path.name}: expected an error, got:\n{output}"
    except KernelIRError as e:
        if not expect_failure:
            raise
        output = str(e)
    done = subprocess.run([FILECHECK, str(path), *check_args], input=output, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{output}"
