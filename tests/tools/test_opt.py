"""The mlir-opt style driver: main(argv), the pass registry and its errors."""

from __future__ import annotations

import pytest

from hlocc.tools.opt import PASSES, KernelIRError, main, run_opt

SMALL = """#map = #xla.indexing_map<"(d0) -> (d0 * 2), domain: d0 in [0, 9]">
func.func @f(%d: index) -> index {
  %r = xla.apply_indexing #map(%d)
  func.return %r : index
}
"""


def test_main_prints_the_module(tmp_path, capsys):
    path = tmp_path / "in.mlir"
    path.write_text(SMALL)
    assert main(["--passes", "verify", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == run_opt(SMALL, ["verify"])
    assert 'xla.apply_indexing #xla.indexing_map<"(d0) -> (d0 * 2), domain: d0 in [0, 9]">(%d)' in out


def test_main_writes_output_file_and_reports_errors(tmp_path, capsys):
    good, bad, out = tmp_path / "good.mlir", tmp_path / "bad.mlir", tmp_path / "out.mlir"
    good.write_text(SMALL)
    bad.write_text(SMALL.replace("#map(%d)", "#map(%d, %d)"))
    assert main([str(good), "-o", str(out)]) == 0
    assert out.read_text() == run_opt(SMALL)
    assert main([str(bad)]) == 1
    assert "bad.mlir: 'xla.apply_indexing' operand count 2" in capsys.readouterr().err


def test_unknown_pass_names_the_known_ones():
    assert "verify" in PASSES
    with pytest.raises(KernelIRError, match="unknown pass.*no-such-pass; known: .*verify"):
        run_opt(SMALL, ["no-such-pass"])


def test_parse_error_is_a_kernel_ir_error():
    with pytest.raises(KernelIRError, match="invalid indexing map"):
        run_opt(SMALL.replace("d0 * 2", "d0 * d0 *"))


def test_every_transform_is_registered():
    run_opt(SMALL)  # loads the passes
    for name in ("inline", "lower-xla-loops-to-scf", "flatten-tensors", "vectorize-loads-stores",
                 "vectorize-elementwise", "unroll-loops", "lower-tensors", "lower-xla-to-arith", "cse", "dce"):
        assert name in PASSES


def test_pipeline_and_emit_llvm(tmp_path, capsys):
    path = tmp_path / "in.mlir"
    path.write_text(SMALL)
    assert main(["--pipeline", "cpu", str(path)]) == 0
    assert "arith.muli %d" in capsys.readouterr().out  # lower-xla-to-arith ran
    assert main(["--pipeline", "gpu", "--emit-llvm", str(path)]) == 0
    assert 'define i64 @"f"(i64 %".1")' in capsys.readouterr().out
    with pytest.raises(KernelIRError, match="either --passes or --pipeline"):
        run_opt(SMALL, ["verify"], pipeline="gpu")


def test_split_input_file_keeps_line_numbers():
    two = SMALL + "// -----\n" + SMALL.replace("@f", "@g")
    out = run_opt(two, ["verify"], split_input_file=True)
    first, second = out.split("// -----\n")
    assert "@f" in first and "@g" not in first and "@g" in second
    bad = SMALL + "// -----\n" + SMALL.replace("@f", "@g").replace("#map(%d)", "#map(%d")
    with pytest.raises(KernelIRError, match=r"<mlir>:10:3"):  # the file's line, not the chunk's
        run_opt(bad, split_input_file=True)


def test_module_entry_point_sees_the_passes(tmp_path):
    """`python -m hlocc.tools.opt` runs as __main__ but must use the registry the transforms fill."""
    import subprocess
    import sys

    path = tmp_path / "in.mlir"
    path.write_text(SMALL)
    done = subprocess.run([sys.executable, "-m", "hlocc.tools.opt", "--passes", "lower-xla-to-arith", str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "arith.muli %d" in done.stdout
