"""The input-slices emitter (codegen/emitters/input_slices.py): XLA's (deleted) input_slices corpus on
the CPU target and in SIMT simulation against the evaluator, hand-made cases (overlapping, full,
empty and size-1 windows, non-default layouts, slices of different operands, s4/bf16/pred/f64),
the thread -> element bijections XLA's tests ask for (--bijection_outputs / --bijection_inputs of
every slice), and XLA's GPU launch."""

from __future__ import annotations

import pytest
from _emitter_helpers import assert_bijection, corpus_module, emitters_of, run_and_compare

from hlocc.analysis.hero import EmitterKind, computation_emitter_kind
from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.emitters.input_slices import InputSlicesEmitter
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.hlo.parser import parse_hlo
from hlocc.tools.fusion_to_mlir import fused_computation

CORPUS = ["input_slices__simple.hlo", "input_slices__slice_of_pad.hlo", "input_slices__zero_slice.hlo"]

TARGETS = {"cpu": cpu_target, "simt": gpu_target}


def _shape(dtype: str, dims, layout=None) -> str:
    layout = layout if layout is not None else tuple(range(len(dims) - 1, -1, -1))
    tiling = ":E(4)" if dtype in ("s4", "u4") else ""
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}{tiling}}}"


def slices_fusion(dtype: str, dims, windows, layout=None, operands: int = 1) -> str:
    """`fusion` with `operands` parameters of one shape (`operands` 2: slices alternate between p0
    and negate(p1)), one unit-stride slice per window ((start, limit) per dimension)."""
    shape = _shape(dtype, dims, layout)
    lines = [f"  p{k} = {shape} parameter({k})" for k in range(operands)]
    sources = ["p0"]
    if operands == 2:
        lines.append(f"  n1 = {shape} negate(p1)")
        sources.append("n1")
    roots, shapes = [], []
    for k, window in enumerate(windows):
        out = _shape(dtype, [hi - lo for lo, hi in window], layout)
        spec = ", ".join(f"[{lo}:{hi}]" for lo, hi in window)
        lines.append(f"  s{k} = {out} slice({sources[k % len(sources)]}), slice={{{spec}}}")
        roots.append(f"s{k}")
        shapes.append(out)
    lines.append(f"  ROOT t = ({', '.join(shapes)}) tuple({', '.join(roots)})")
    return "fusion {\n" + "\n".join(lines) + "\n}\n"


CASES = {
    "f32_overlapping_odd": slices_fusion("f32", (5, 37), [((0, 5), (0, 20)), ((1, 4), (13, 37)), ((0, 5), (0, 37))]),
    "bf16_column_major_two_operands": slices_fusion("bf16", (6, 9), [((2, 6), (0, 9)), ((0, 3), (4, 5))],
                                                    layout=(0, 1), operands=2),
    "s4_with_empty_slice": slices_fusion("s4", (3, 17), [((0, 3), (5, 5)), ((1, 2), (3, 16)), ((0, 3), (0, 17))]),
    "pred_size1_dims": slices_fusion("pred", (1, 7, 1), [((0, 1), (0, 1), (0, 1)), ((0, 1), (2, 7), (0, 1))],
                                     layout=(1, 2, 0)),
    "f64_3d_layout": slices_fusion("f64", (4, 3, 5), [((1, 3), (0, 3), (1, 4)), ((0, 4), (2, 3), (0, 5))],
                                   layout=(0, 2, 1), operands=2),
    "s32_same_window_twice": slices_fusion("s32", (10,), [((3, 8),), ((3, 8),)]),
    "u8_output_layouts_differ": """fusion {
  p0 = u8[5,6]{0,1} parameter(0)
  s0 = u8[3,6]{1,0} slice(p0), slice={[1:4],[0:6]}
  s1 = u8[5,2]{0,1} slice(p0), slice={[0:5],[3:5]}
  s2 = u8[1,1]{1,0} slice(p0), slice={[4:5],[5:6]}
  ROOT t = (u8[3,6]{1,0}, u8[5,2]{0,1}, u8[1,1]{1,0}) tuple(s0, s1, s2)
}
""",
}


def _emitter(text: str, target: str) -> InputSlicesEmitter:
    emitter = emitter_for(fused_computation(parse_hlo(text)), TARGETS[target]())
    assert isinstance(emitter, InputSlicesEmitter)
    return emitter


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus(name, target):
    module = corpus_module(name)
    assert computation_emitter_kind(fused_computation(module)) is EmitterKind.INPUT_SLICES
    assert emitters_of(run_and_compare(module, target)) == ["input_slices"]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cases(case, target):
    assert emitters_of(run_and_compare(CASES[case], target)) == ["input_slices"]


def _check_bijections(emitter: InputSlicesEmitter, what: str) -> None:
    for k, (root, shape) in enumerate(zip(emitter.roots, emitter.outputs)):
        output = emitter.thread_id_to_output_indexing(k)
        if shape.num_elements == 0:
            assert output.is_known_empty, f"{what}: empty slice {root.name} has threads"
        else:
            assert_bijection(output, shape, f"{what} output {root.name}")
        assert_bijection(emitter.thread_id_to_input_indexing(k, 0), root.operand(0).shape, f"{what} input {k}")


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_bijection(name, target):
    _check_bijections(emitter_for(fused_computation(corpus_module(name)), TARGETS[target]()), name)


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_case_bijection(case, target):
    _check_bijections(_emitter(CASES[case], target), case)


def test_gpu_launch_is_xlas():
    """XLA's launch over the input shape: one element per thread even for large inputs (no loop
    unrolling), two for 4-bit outputs so that a thread writes whole bytes."""
    large = slices_fusion("f32", (1 << 20,), [((0, 10),), ((5, 1 << 20),)])
    assert _emitter(large, "simt").launch_and_unroll == (LaunchDims(128, 8192), 1)
    assert _emitter(CASES["s4_with_empty_slice"], "simt").launch_and_unroll == (LaunchDims(26, 1), 2)
    assert _emitter(CASES["f32_overlapping_odd"], "simt").launch() == LaunchDims(128, 2)


def test_cpu_launch_is_the_loop_emitters():
    assert _emitter(CASES["f32_overlapping_odd"], "cpu").launch_and_unroll == (LaunchDims(12, 1), 16)


def test_strided_or_unequal_slices_are_loop_fusions():
    strided = slices_fusion("f32", (8,), [((0, 8),), ((0, 4),)]).replace("slice={[0:8]}", "slice={[0:8:2]}") \
        .replace("s0 = f32[8]", "s0 = f32[4]").replace("(f32[8]{0}, f32[4]{0})", "(f32[4]{0}, f32[4]{0})")
    assert computation_emitter_kind(fused_computation(parse_hlo(strided))) is EmitterKind.LOOP
