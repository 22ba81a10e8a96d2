"""Runs every tests/passes/fusion_filecheck/*.hlo file: HLO in, fusion passes, HLO out, FileCheck.

Each file has one RUN line, lit style, in the form of XLA's hlo-opt tests:

    // RUN: hlo-opt %s --passes=priority-fusion,multi-output-fusion | filecheck %s [options]

The named passes run in-process (this runner's own minimal `hlo-opt`: parse, verify, run each
pass, verify, print without metadata) and the printed module is piped into the `filecheck`
command. A second test checks that each file's module computes the same values before and after
its passes, so the FileCheck files double as semantic tests of the fusion decisions.
"""

from __future__ import annotations

import pathlib
import shlex
import shutil
import subprocess

import numpy as np
import pytest

import hlocc
from hlocc.cli import flatten, random_inputs
from hlocc.compiler import check_arguments
from hlocc.evaluator import Evaluator
from hlocc.hlo.verifier import verify_module
from hlocc.passes import fusion_wrapper, multi_output_fusion, priority_fusion, rename_fusions, stitch_fusion  # noqa: F401
from hlocc.passes.base import HLO_PASSES
from hlocc.passes.fusible import fusion_violations

HERE = pathlib.Path(__file__).parent / "fusion_filecheck"
FILES = sorted(HERE.glob("*.hlo"))
FILECHECK = shutil.which("filecheck")


def parse_run_line(path: pathlib.Path) -> tuple[list[str], list[str]]:
    """(pass names, filecheck arguments) from the file's RUN line."""
    lines = [ln.split("RUN:", 1)[1] for ln in path.read_text().splitlines() if ln.strip().startswith("// RUN:")]
    assert len(lines) == 1, f"{path.name}: expected exactly one '// RUN:' line"
    opt_part, _, check_part = lines[0].partition("|")
    opt_args = shlex.split(opt_part)
    assert opt_args[:2] == ["hlo-opt", "%s"], f"{path.name}: RUN line must start with 'hlo-opt %s'"
    passes: list[str] = []
    rest = opt_args[2:]
    while rest:
        flag = rest.pop(0)
        if flag.startswith("--passes="):
            passes += flag.split("=", 1)[1].split(",")
        elif flag == "--passes" and rest:
            passes += rest.pop(0).split(",")
        else:
            raise AssertionError(f"{path.name}: unsupported hlo-opt argument {flag!r}")
    check_args = shlex.split(check_part)
    assert check_args[:2] == ["filecheck", "%s"], f"{path.name}: RUN line must pipe into 'filecheck %s'"
    return [p for p in passes if p], check_args[2:]


def run_passes(module: hlocc.HloModule, passes: list[str]) -> None:
    verify_module(module)
    for name in passes:
        assert name in HLO_PASSES, f"unknown pass '{name}'"
        HLO_PASSES[name]().run(module)
        verify_module(module)


def test_there_are_filecheck_files():
    assert any(f.name == "softmax.hlo" for f in FILES)


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fusion_filecheck(path: pathlib.Path):
    passes, check_args = parse_run_line(path)
    module = hlocc.parse_hlo(path.read_text(), str(path))
    run_passes(module, passes)
    output = module.to_string(print_metadata=False)
    done = subprocess.run([FILECHECK, str(path), *check_args], input=output, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{output}"


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fusion_filecheck_module_keeps_its_values(path: pathlib.Path):
    passes, _ = parse_run_line(path)
    module = hlocc.parse_hlo(path.read_text(), str(path))
    args = check_arguments(module, random_inputs(module, seed=3), cast=True)
    before = flatten(Evaluator(seed=1).run(module, args))
    run_passes(module, passes)
    assert fusion_violations(module) == []
    after = flatten(Evaluator(seed=1).run(module, args))
    for a, b in zip(before, after, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
