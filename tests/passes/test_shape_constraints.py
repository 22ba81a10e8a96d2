"""The `shape-constraints` pass: its FileCheck files (tests/passes/shape_constraints/*.hlo, run like
tests/passes/filecheck) and its behaviour on static modules and imported JAX programs."""

import pathlib
import shutil
import subprocess

import pytest
from test_hlo_filecheck import parse_run_line, run_hlo_opt

import hlocc
from hlocc.passes.pipeline import run_passes

FILES = sorted((pathlib.Path(__file__).parent / "shape_constraints").glob("*.hlo"))
FILECHECK = shutil.which("filecheck")


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_filecheck(path):
    _, _, opt_args, check_args = parse_run_line(path)
    code, out, err = run_hlo_opt(opt_args)
    assert code == 0, f"{path.name}: hlo-opt failed:\n{err}"
    done = subprocess.run([FILECHECK, str(path), *check_args], input=out, text=True, capture_output=True)
    assert done.returncode == 0, f"FileCheck failed on {path.name}:\n{done.stderr}\n--- input ---\n{out}"


def test_static_module_is_unchanged():
    text = "HloModule m\n\nENTRY e {\n  p = f32[4,3] parameter(0)\n  ROOT r = f32[4,3] add(p, p)\n}\n"
    module = hlocc.parse_hlo(text)
    assert not run_passes(module, ["shape-constraints"]).changed
    assert module.to_string() == text


def test_classes_canonicalize_to_named_symbols():
    module = hlocc.parse_hlo((FILES[0].parent / "softmax.hlo").read_text())
    run_passes(module, ["shape-constraints"])
    symbols = frozenset().union(*(i.shape.symbols for c in module.computations for i in c.instructions))
    assert symbols == {"d0"}
    assert not [i for i in module.entry.instructions if i.name == "same"]
