"""The pass manager: fixed-point groups and their iteration cap, per-pass timing, print-after-all,
debug mode (verification, honest change reports), pipeline names, and hlo-opt's command line."""

from __future__ import annotations

import io

import pytest

import hlocc
from hlocc.passes.base import HLO_PASSES, HloPass, register_hlo_pass
from hlocc.passes.pipeline import (
    PIPELINES,
    SIMPLIFICATION,
    FixedPoint,
    PassManager,
    PassPipelineError,
    expand,
    run_passes,
    simplification_pipeline,
)
from hlocc.tools.hlo_opt import main as hlo_opt_main

TEXT = """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  a = f32[4] exponential(x)
  b = f32[4] exponential(x)
  dead = f32[4] negate(x)
  nn = f32[4] negate(f32[4] negate(a))
  ROOT r = f32[4] add(nn, b)
}
"""


class _CountDown(HloPass):
    """Test pass: reports a change the first `budget` times it runs (changing nothing real)."""

    name = "test-count-down"
    budget = 0
    runs = 0

    def run(self, module) -> bool:
        type(self).runs += 1
        if type(self).budget > 0:
            type(self).budget -= 1
            return True
        return False


class _Liar(HloPass):
    """Test pass: renames the entry's root but claims to change nothing."""

    name = "test-liar"

    def run(self, module) -> bool:
        module.entry.root.name = module.entry.root.name + "_renamed"
        return False


class _Breaker(HloPass):
    """Test pass: gives the root a wrong shape."""

    name = "test-breaker"

    def run(self, module) -> bool:
        root = module.entry.root
        root.shape = hlocc.Shape.array("s32", root.shape.dims)
        return True


@pytest.fixture(autouse=True)
def test_passes():
    for cls in (_CountDown, _Liar, _Breaker):
        register_hlo_pass(cls)
    _CountDown.budget, _CountDown.runs = 0, 0
    yield
    for cls in (_CountDown, _Liar, _Breaker):
        HLO_PASSES.pop(cls.name, None)


def test_fixed_point_repeats_until_no_pass_changes():
    _CountDown.budget = 3
    result = PassManager([FixedPoint("group", ("test-count-down", "dce"))]).run(hlocc.parse_hlo(TEXT))
    assert result.iterations["group"] == 4  # three changing rounds, one quiet round
    assert _CountDown.runs == 4
    assert result.changed and not result.unconverged


def test_fixed_point_stops_at_its_iteration_cap():
    _CountDown.budget = 100
    result = PassManager([FixedPoint("group", ("test-count-down",), max_iterations=5)]).run(hlocc.parse_hlo(TEXT))
    assert result.iterations["group"] == 5
    assert result.unconverged == ["group"]


def test_timings_are_recorded_per_pass_name_and_summed():
    _CountDown.budget = 2
    result = PassManager([FixedPoint("group", ("test-count-down", "cse"))]).run(hlocc.parse_hlo(TEXT))
    assert set(result.timings_ms) == {"test-count-down", "cse"}
    assert all(ms >= 0 for ms in result.timings_ms.values())
    runs = [name for name, _, _ in result.runs]
    # (the quiet third round skips cse: its last run changed nothing and nothing changed since)
    assert runs == ["test-count-down", "cse"] * 2 + ["test-count-down"]
    assert result.timings_ms["cse"] == pytest.approx(sum(ms for n, _, ms in result.runs if n == "cse"))
    assert result.total_ms == pytest.approx(sum(result.timings_ms.values()))


def test_a_pass_that_changed_nothing_waits_for_a_change():
    _CountDown.budget = 1
    stages = ("dce", "dce", "test-count-down", "dce", "cse", "cse",
              FixedPoint("group", ("cse", "dce", "test-count-down")))
    result = PassManager(stages).run(hlocc.parse_hlo(TEXT))
    runs = [(name, changed) for name, changed, _ in result.runs]
    # a second dce finds nothing and is run again only after the count-down's change; in the group
    # cse is skipped (nothing changed since its last run found nothing), dce runs (cse merged since),
    # and the count-down, whose last run changed the module, runs once more
    assert runs == [("dce", True), ("dce", False), ("test-count-down", True), ("dce", False), ("cse", True),
                    ("cse", False), ("dce", False), ("test-count-down", False)]
    assert result.iterations["group"] == 1 and _CountDown.runs == 2


def test_print_after_all_prints_only_passes_that_changed_something():
    stream = io.StringIO()
    result = run_passes(hlocc.parse_hlo(TEXT), ["cse", "tuple-simplifier", "dce"], print_after_all=True,
                        stream=stream)
    text = stream.getvalue()
    assert [changed for _, changed, _ in result.runs] == [True, False, True]
    assert text.count("// -----// HLO after pass") == 2
    assert "HLO after pass 'cse'" in text and "HLO after pass 'dce'" in text
    assert "tuple-simplifier" not in text
    # every dump is a module that parses again
    for chunk in text.split("// -----// HLO after pass")[1:]:
        hlocc.parse_hlo(chunk.split("\n", 1)[1])


def test_print_after_all_names_the_fixed_point_round():
    stream = io.StringIO()
    simplification_pipeline(print_after_all=True, stream=stream).run(hlocc.parse_hlo(TEXT))
    assert "HLO after pass 'algsimp' (simplification iteration 1)" in stream.getvalue()


def test_debug_mode_catches_a_pass_that_hides_a_change():
    with pytest.raises(PassPipelineError, match="'test-liar' reported no change but changed the module"):
        PassManager(["test-liar"], debug=True).run(hlocc.parse_hlo(TEXT))
    PassManager(["test-liar"]).run(hlocc.parse_hlo(TEXT))  # not checked outside debug mode


def test_debug_mode_verifies_after_each_pass():
    with pytest.raises(PassPipelineError, match="after pass 'test-breaker': the module is invalid"):
        PassManager(["test-breaker"], debug=True).run(hlocc.parse_hlo(TEXT))


def test_unknown_pass_is_reported_before_anything_runs():
    with pytest.raises(PassPipelineError, match="unknown pass 'nope'"):
        PassManager(["dce", FixedPoint("g", ("cse", "nope"))])


def test_pipeline_names_expand_to_their_stages():
    assert expand(["dce", "simplify", "cse"]) == ("dce", *SIMPLIFICATION, "cse")
    assert PIPELINES["simplify"] is SIMPLIFICATION


def test_simplification_pipeline_simplifies_and_converges():
    module = hlocc.parse_hlo(TEXT)
    result = simplification_pipeline(debug=True).run(module)
    assert result.changed and not result.unconverged
    entry = module.entry
    assert sorted(i.opcode for i in entry.instructions) == ["add", "exponential", "parameter"]
    assert entry.root.operands[0] is entry.root.operands[1]
    again = simplification_pipeline().run(module)
    assert not again.changed


def test_passes_are_instantiated_once_per_manager():
    manager = PassManager([FixedPoint("g", ("test-count-down",))])
    _CountDown.budget = 2
    manager.run(hlocc.parse_hlo(TEXT))
    assert len(manager._passes) == 1


# -- hlo-opt --------------------------------------------------------------------------------------
def _hlo_opt(args, capsys):
    code = hlo_opt_main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_hlo_opt_runs_passes_and_prints_the_module(tmp_path, capsys):
    path = tmp_path / "m.hlo"
    path.write_text(TEXT)
    code, out, err = _hlo_opt([str(path), "--passes=cse,dce", "--timing"], capsys)
    assert code == 0
    assert "dead" not in out and "b = " not in out
    assert "hlo-opt: cse:" in err and "hlo-opt: dce:" in err
    hlocc.parse_hlo(out)


def test_hlo_opt_writes_an_output_file(tmp_path, capsys):
    path, out_path = tmp_path / "m.hlo", tmp_path / "out.hlo"
    path.write_text(TEXT)
    code, out, _ = _hlo_opt([str(path), "--pipeline", "simplify", "-o", str(out_path)], capsys)
    assert code == 0 and out == ""
    assert "exponential" in out_path.read_text()


@pytest.mark.parametrize("args, message", [
    (["{missing}"], "cannot read"),
    (["{file}", "--passes=bogus"], "unknown pass 'bogus'"),
    (["{bad}"], "bad.hlo:2:1: expected"),
])
def test_hlo_opt_errors_are_one_line(tmp_path, capsys, args, message):
    (tmp_path / "m.hlo").write_text(TEXT)
    (tmp_path / "bad.hlo").write_text("ENTRY main {\n")
    paths = {"file": tmp_path / "m.hlo", "bad": tmp_path / "bad.hlo", "missing": tmp_path / "nope.hlo"}
    code, out, err = _hlo_opt([a.format(**paths) for a in args], capsys)
    assert code == 1 and out == ""
    assert err.startswith("hlo-opt: error: ") and err.count("\n") == 1, err
    assert message in err


def test_hlo_opt_usage_error_returns_argparse_status(capsys):
    assert hlo_opt_main(["--pipeline", "nonexistent"]) == 2
