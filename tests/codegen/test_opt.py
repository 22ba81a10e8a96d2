"""The mlir-opt style driver: main(argv), the pass registry and its errors."""

from __future__ import annotations

import pytest

from hlocc.codegen.opt import PASSES, KernelIRError, main, run_opt

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
