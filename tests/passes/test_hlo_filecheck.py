"""Runs every tests/passes/filecheck/*.hlo file: its `// RUN:` line, lit style, like XLA's hlo-opt tests.

Supported RUN lines (one per file):

    // RUN: hlo-opt %s [hlo-opt options] | filecheck %s [filecheck options]
    // RUN: not hlo-opt %s [hlo-opt options] 2>&1 | filecheck %s     (the error message is checked)

`hlo-opt` runs in-process (`hlocc.tools.hlo_opt.main`); its stdout (and stderr with `2>&1`) is piped
into the `filecheck` command. A second test runs each file's passes again and checks that the
module computes the same values before and after, on inputs full of special values (±0.0, ±inf,
NaN, integer extremes): the FileCheck files double as a suite of exactness cases for the rules.
"""

from __future__ import annotations

import contextlib
import io
import pathlib
import shlex
import shutil
import subprocess

import pytest
from passes_helpers import assert_same_results

import hlocc
from hlocc.errors import UnsupportedError
from hlocc.passes.pipeline import run_passes
from hlocc.tools.hlo_opt import main as hlo_opt_main

HERE = pathlib.Path(__file__).parent / "filecheck"
FILES = sorted(HERE.glob("*.hlo"))
FILECHECK = shutil.which("filecheck")


def parse_run_line(path: pathlib.Path) -> tuple[bool, bool, list[str], list[str]]:
    """(expect failure, merge stderr, hlo-opt arguments, filecheck arguments) from the RUN line."""
    lines = [ln.split("RUN:", 1)[1] for ln in path.read_text().splitlines() if ln.strip().startswith("// RUN:")]
    assert len(lines) == 1, f"{path.name}: expected exactly one '// RUN:' line"
    opt_part, _, check_part = lines[0].partition("|")
    merge_stderr = "2>&1" in opt_part
    opt_args = shlex.split(opt_part.replace("2>&1", ""))
    expect_failure = opt_args[:1] == ["not"]
    opt_args = opt_args[1:] if expect_failure else opt_args
    assert opt_args[:2] == ["hlo-opt", "%s"], f"{path.name}: RUN line must start with 'hlo-opt %s'"
    check_args = shlex.split(check_part)
    assert check_args[:2] == ["filecheck", "%s"], f"{path.name}: RUN line must pipe into 'filecheck %s'"
    return expect_failure, merge_stderr, [str(path)] + opt_args[2:], check_args[2:]


def run_hlo_opt(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = hlo_opt_main(args)
    return code, out.getvalue(), err.getvalue()


def test_every_pass_has_a_filecheck_file():
    from hlocc.passes.pipeline import SIMPLIFICATION, FixedPoint

    def names(stages):
        for s in stages:
            yield from (names(s.passes) if isinstance(s, FixedPoint) else [s])

    tested = " ".join(f.read_text() for f in FILES)
    missing = [n for n in names(SIMPLIFICATION) if f"--passes={n}" not in tested and f"--passes={n}," not in tested]
    assert not missing, f"passes without a FileCheck test: {missing}"


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_filecheck(path: pathlib.Path):
    expect_failure, merge_stderr, opt_args, check_args = parse_run_line(path)
    code, out, err = run_hlo_opt(opt_args)
    if expect_failure:
        assert code != 0, f"{path.name}: expected hlo-opt to fail, got:\n{out}"
        assert "Traceback" not in err
    else:
        assert code == 0, f"{path.name}: hlo-opt failed:\n{err}"
    output = out + (err if merge_stderr else "")
    done = subprocess.run([FILECHECK, str(path), *check_args], input=output, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{output}"


def _passes_of(opt_args: list[str]) -> list[str]:
    names = []
    for i, arg in enumerate(opt_args):
        if arg.startswith("--passes="):
            names += arg.split("=", 1)[1].split(",")
        elif arg == "--passes":
            names += opt_args[i + 1].split(",")
        elif arg.startswith("--pipeline="):
            names.append(arg.split("=", 1)[1])
        elif arg == "--pipeline":
            names.append(opt_args[i + 1])
    return [n for n in names if n]


VALUE_FILES = [f for f in FILES if not parse_run_line(f)[0]]


@pytest.mark.parametrize("path", VALUE_FILES, ids=lambda p: p.name)
def test_filecheck_module_keeps_its_values(path: pathlib.Path):
    _, _, opt_args, _ = parse_run_line(path)
    before = hlocc.parse_hlo_file(path)
    after = hlocc.parse_hlo_file(path)
    run_passes(after, _passes_of(opt_args), debug=True)
    symbols = frozenset().union(*(p.shape.symbols for p in before.entry.parameters))
    if symbols:  # a module with symbolic dims: compared at one size of each (3, a size that is not 1)
        from hlocc.hlo.specialize import specialize

        before, after = (specialize(m, {s: 3 for s in symbols}) for m in (before, after))
    try:
        assert_same_results(before, after)
    except UnsupportedError as e:
        pytest.skip(f"the evaluator cannot run this module: {e}")
