"""Fusion-level indexing (composition along every path, distinct maps kept) on XLA's docs examples
and corpus fusions, and input->output maps."""

from pathlib import Path

import pytest

from hlocc.analysis.affine_expr import IndexingError, dim
from hlocc.analysis.indexing_analysis import (
    fusion_output_to_input,
    fusion_parameter_maps,
    fusion_roots,
    input_to_output,
    transpose_input_to_output,
)
from hlocc.hlo.parser import parse_hlo

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "xla"


def strings(maps):
    return sorted(str(m) for m in maps)


def by_name(analysis):
    return {instr.name: strings(maps) for instr, maps in analysis.items()}


def test_one_input_two_maps():
    module = parse_hlo("f {\n p0 = f32[10,10] parameter(0)\n t = f32[10,10] transpose(p0), dimensions={1,0}\n"
                       " ROOT a = f32[10,10] add(p0, t)\n}\n")
    [p0_maps] = fusion_parameter_maps(module.entry)
    assert strings(p0_maps) == ["(d0, d1) -> (d0, d1), domain: d0 in [0, 9], d1 in [0, 9]",
                                "(d0, d1) -> (d1, d0), domain: d0 in [0, 9], d1 in [0, 9]"]


def test_equal_maps_reached_differently_are_deduplicated():
    module = parse_hlo("""f {
  p0 = f32[20,10,50] parameter(0)
  lhs_transpose_1 = f32[10,20,50] transpose(p0), dimensions={1,0,2}
  lhs_e = f32[10,20,50] exponential(lhs_transpose_1)
  lhs_transpose_2 = f32[10,50,20] transpose(lhs_e), dimensions={0,2,1}
  rhs_transpose_1 = f32[50,10,20] transpose(p0), dimensions={2,1,0}
  rhs_log = f32[50,10,20] exponential(rhs_transpose_1)
  rhs_transpose_2 = f32[10,50,20] transpose(rhs_log), dimensions={1,0,2}
  ROOT output = f32[10,50,20] add(lhs_transpose_2, rhs_transpose_2)
}
""")
    [p0_maps] = fusion_parameter_maps(module.entry)
    assert strings(p0_maps) == ["(d0, d1, d2) -> (d2, d0, d1), domain: d0 in [0, 9], d1 in [0, 49], d2 in [0, 19]"]


def test_reshape_chain_cancels_in_a_fusion():
    module = parse_hlo("f {\n p0 = f32[10,10,10] parameter(0)\n r1 = f32[50,20] reshape(p0)\n"
                       " ROOT r2 = f32[10,10,10] reshape(r1)\n}\n")
    analysis = by_name(fusion_output_to_input(module.entry))
    assert analysis["p0"] == ["(d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"]
    assert analysis["r1"] == ["(d0, d1, d2) -> (d0 * 5 + d1 floordiv 2, (d1 mod 2) * 10 + d2),"
                              " domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"]


def test_undefined_maps_propagate():
    module = parse_hlo("lt {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
                       " ROOT r = pred[] compare(a, b), direction=LT\n}\n"
                       "f {\n p = f32[8] parameter(0)\n e = f32[8] exponential(p)\n"
                       " s = f32[8] sort(e), dimensions={0}, to_apply=lt\n ROOT n = f32[8] negate(s)\n}\n")
    analysis = fusion_output_to_input(module.computation("f"))
    assert {i.name: maps for i, maps in analysis.items() if None in maps}.keys() == {"e", "p"}


def corpus_fusion(name):
    path = CORPUS / f"{name}.hlo"
    if not path.is_file():
        pytest.skip(f"corpus file {path} not found (shared/ is not beside this checkout)")
    return parse_hlo(path.read_text()).computation("fusion")


CORPUS_CASES = {
    "transpose__epilogue": ("abs", {
        "transpose": ["(d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 19], d1 in [0, 169], d2 in [0, 159]"],
        "p0": ["(d0, d1, d2) -> (d0, d2, d1), domain: d0 in [0, 19], d1 in [0, 169], d2 in [0, 159]"],
    }),
    "transpose__fused_transpose_102": ("transpose", {
        "p0": ["(d0, d1, d2) -> (d1, d0, d2), domain: d0 in [0, 169], d1 in [0, 159], d2 in [0, 2]"],
    }),
    "transpose__mixed_indexing": ("a1", {
        "t1": ["(d0, d1, d2, d3) -> (d0 * 4 + d1, d2, d3), domain: d0 in [0, 5], d1 in [0, 3], d2 in [0, 1],"
               " d3 in [0, 23]"],
        "p0": ["(d0, d1, d2, d3) -> (d3, d2, d0 * 4 + d1), domain: d0 in [0, 5], d1 in [0, 3], d2 in [0, 1],"
               " d3 in [0, 23]"],
        "p1": ["(d0, d1, d2, d3) -> (), domain: d0 in [0, 5], d1 in [0, 3], d2 in [0, 1], d3 in [0, 23]"],
    }),
    "reduce_row__epilogue": ("log", {
        "reduce": ["(d0) -> (d0), domain: d0 in [0, 7]"],
        "param_0": ["(d0)[s0] -> (d0, s0), domain: d0 in [0, 7], s0 in [0, 2047]"],
        "param_1": ["(d0) -> (), domain: d0 in [0, 7]"],
    }),
    "reduce_column__odd_sizes": ("reduce", {
        "param_0": ["(d0, d1)[s0] -> (d0, s0, d1), domain: d0 in [0, 12], d1 in [0, 320], s0 in [0, 1050]"],
        "param_1": ["(d0, d1) -> (), domain: d0 in [0, 12], d1 in [0, 320]"],
    }),
    "loop__two_users": ("atan2", {
        name: ["(d0) -> (d0), domain: d0 in [0, 1]"] for name in ["mul", "div", "add", "sub", "p0", "p1"]
    }),
}


@pytest.mark.parametrize("name", sorted(CORPUS_CASES))
def test_corpus_fusion_maps(name):
    comp = corpus_fusion(name)
    start_name, expected = CORPUS_CASES[name]
    [start] = [r for r in fusion_roots(comp) if r.name == start_name]
    analysis = by_name(fusion_output_to_input(comp, start))
    for instr, maps in expected.items():
        assert analysis[instr] == maps, instr


def test_corpus_multi_root_fusion_needs_a_start():
    comp = corpus_fusion("transpose__mixed_indexing")
    with pytest.raises(IndexingError, match="roots"):
        fusion_output_to_input(comp)
    second = fusion_roots(comp)[1]
    analysis = by_name(fusion_output_to_input(comp, second))
    assert analysis["p0"] == ["(d0, d1, d2) -> (d2, d1, d0), domain: d0 in [0, 23], d1 in [0, 1], d2 in [0, 23]"]


def test_input_to_output_maps():
    module = parse_hlo("f {\n p = f32[3,12288,6,128] parameter(0)\n"
                       " t = f32[3,6,128,12288] transpose(p), dimensions={0,2,3,1}\n"
                       " b = f32[10,3,6,128,12288] broadcast(t), dimensions={1,2,3,4}\n"
                       " r = f32[8] parameter(1)\n s = f32[2,4] reshape(r)\n"
                       " ROOT e = f32[10,3,6,128,12288] exponential(b)\n}\n")
    p, t, b, r, s, e = module.entry.instructions
    assert str(transpose_input_to_output(t)) == ("(d0, d1, d2, d3) -> (d0, d2, d3, d1), domain: d0 in [0, 2],"
                                                 " d1 in [0, 12287], d2 in [0, 5], d3 in [0, 127]")
    assert input_to_output(t) == transpose_input_to_output(t)
    assert str(input_to_output(b)).startswith("(d0, d1, d2, d3)[s0] -> (s0, d0, d1, d2, d3)")
    assert str(input_to_output(s)) == "(d0) -> (d0 floordiv 4, d0 mod 4), domain: d0 in [0, 7]"
    assert input_to_output(e).results == tuple(dim(i) for i in range(5))
