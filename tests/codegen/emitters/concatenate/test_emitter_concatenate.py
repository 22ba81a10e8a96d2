"""The concatenate emitter (codegen/emitters/concatenate.py): XLA's concatenate corpus on the CPU
target and in SIMT simulation against the evaluator, hand-made cases (odd and size-1 dimensions, an
empty operand, non-default layouts, epilogues with bitcasts and side parameters, s4/bf16/pred/f64/c64),
the thread -> element bijections, and the launch parameters XLA chooses on the GPU."""

from __future__ import annotations

import math

import pytest
from _emitter_helpers import assert_bijection, corpus_module, emitters_of, run_and_compare

from hlocc.analysis.hero import EmitterKind, computation_emitter_kind
from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.emitters.concatenate import ConcatenateEmitter
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.hlo.parser import parse_hlo
from hlocc.tools.fusion_to_mlir import fused_computation

CORPUS = [
    "concatenate__concat_1d.hlo",
    "concatenate__concat_s4.hlo",
    "concatenate__epilogue_bitcast.hlo",
    "concatenate__epilogue_side_param.hlo",
    "concatenate__major_dimension.hlo",
    "concatenate__prologue_epilogue.hlo",
    "concatenate__test_small_dim.hlo",
    "concatenate__vectorization.hlo",
]

TARGETS = {"cpu": cpu_target, "simt": gpu_target}


def _shape(dtype: str, dims, layout=None) -> str:
    layout = layout if layout is not None else tuple(range(len(dims) - 1, -1, -1))
    tiling = ":E(4)" if dtype in ("s4", "u4") else ""
    return f"{dtype}[{','.join(map(str, dims))}]{{{','.join(map(str, layout))}{tiling}}}"


def concat_fusion(dtype: str, operand_dims, axis: int, layout=None, epilogue: str = "",
                  out_layout=None) -> str:
    """`fusion { params; concat; [epilogue] }`. epilogue: '' (the concatenate is the root),
    'negate', 'convert' (to f32), 'side' (add a parameter of the output's shape), or 'bitcast'
    (to the output's dimensions flattened)."""
    out_dims = list(operand_dims[0])
    out_dims[axis] = sum(d[axis] for d in operand_dims)
    lines = [f"  p{k} = {_shape(dtype, d, layout)} parameter({k})" for k, d in enumerate(operand_dims)]
    names = ", ".join(f"p{k}" for k in range(len(operand_dims)))
    concat = f"concatenate({names}), dimensions={{{axis}}}"
    if not epilogue:
        lines.append(f"  ROOT c = {_shape(dtype, out_dims, out_layout or layout)} {concat}")
    else:
        lines.append(f"  c = {_shape(dtype, out_dims, layout)} {concat}")
        if epilogue == "negate":
            lines.append(f"  ROOT r = {_shape(dtype, out_dims, out_layout)} negate(c)")
        elif epilogue == "convert":
            lines.append(f"  ROOT r = {_shape('f32', out_dims, out_layout)} convert(c)")
        elif epilogue == "side":
            side = len(operand_dims)
            lines.append(f"  s = {_shape(dtype, out_dims, layout)} parameter({side})")
            lines.append(f"  ROOT r = {_shape(dtype, out_dims, layout)} add(c, s)")
        elif epilogue == "bitcast":
            physical = [out_dims[d] for d in reversed(layout or range(len(out_dims)))]
            lines.append(f"  ROOT r = {_shape(dtype, [math.prod(physical)])} bitcast(c)")
    return "fusion {\n" + "\n".join(lines) + "\n}\n"


CASES = {
    "f32_odd_minor": concat_fusion("f32", [(3, 5), (3, 1), (3, 7)], 1),
    "f32_major_axis_column_major": concat_fusion("f32", [(5, 3), (2, 3)], 0, layout=(0, 1)),
    "bf16_3d_negate_layout_change": concat_fusion("bf16", [(2, 3, 4), (2, 1, 4), (2, 6, 4)], 1, layout=(1, 0, 2),
                                                  epilogue="negate", out_layout=(2, 1, 0)),
    "s4_empty_operand": concat_fusion("s4", [(3, 5), (3, 0), (3, 7)], 1, layout=(0, 1), epilogue="negate",
                                      out_layout=(1, 0)),
    "pred_convert": concat_fusion("pred", [(4, 1), (4, 2), (4, 3), (4, 1)], 1, epilogue="convert"),
    "f64_size1_dims_bitcast": concat_fusion("f64", [(1, 3, 1), (1, 2, 1)], 1, layout=(1, 2, 0), epilogue="bitcast"),
    "s8_side_parameter": concat_fusion("s8", [(7, 2), (9, 2)], 0, epilogue="side"),
    "c64_negate": concat_fusion("c64", [(3,), (4,)], 0, epilogue="negate"),
    "u16_one_operand_larger_in_other_dims": concat_fusion("u16", [(33, 2), (33, 17)], 1, layout=(0, 1)),
}


def _emitter(text: str, target: str) -> ConcatenateEmitter:
    emitter = emitter_for(fused_computation(parse_hlo(text)), TARGETS[target]())
    assert isinstance(emitter, ConcatenateEmitter)
    return emitter


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus(name, target):
    module = corpus_module(name)
    assert computation_emitter_kind(fused_computation(module)) is EmitterKind.CONCATENATE
    assert emitters_of(run_and_compare(module, target)) == ["concatenate"]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_cases(case, target):
    assert emitters_of(run_and_compare(CASES[case], target)) == ["concatenate"]


def _check_bijections(emitter: ConcatenateEmitter, what: str) -> None:
    assert_bijection(emitter.thread_id_to_output_indexing(0), emitter.output, f"{what} output")
    for k, operand in enumerate(emitter.hero.operands):
        if operand.shape.num_elements:
            assert_bijection(emitter.thread_id_to_input_indexing(0, k), operand.shape, f"{what} operand {k}")


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", [n for n in CORPUS if n != "concatenate__vectorization.hlo"])
def test_corpus_bijection(name, target):
    module = corpus_module(name)
    emitter = emitter_for(fused_computation(module), TARGETS[target]())
    _check_bijections(emitter, name)


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_case_bijection(case, target):
    _check_bijections(_emitter(CASES[case], target), case)


def test_operand_loops_partition_the_output():
    """Each operand's loop writes its part of the output: the per-operand maps are the union's pieces."""
    emitter = _emitter(CASES["f32_odd_minor"], "simt")
    seen = set()
    for k in range(3):
        m = emitter.thread_id_to_output_indexing(0, operand_index=k)
        points = {tuple(p) for p in m.apply(m.points()).tolist()}
        assert all(emitter.offsets[k] <= p[1] < emitter.offsets[k] + emitter.sizes[k] for p in points)
        assert not points & seen
        seen |= points
    assert len(seen) == 3 * 13


def test_gpu_launch_is_xlas():
    """The loop launch of the largest operand: 128 threads, XLA's unroll (here 1) below the
    GPU's thread count; ≥ 2 elements per thread for 4-bit outputs; a divisor of every operand."""
    launch = lambda name: ConcatenateEmitter(fused_computation(corpus_module(name)), gpu_target()).launch_and_unroll  # noqa: E731
    assert launch("concatenate__concat_1d.hlo") == (LaunchDims(128, 4), 1)
    assert launch("concatenate__test_small_dim.hlo") == (LaunchDims(128, 2000), 1)
    assert launch("concatenate__concat_s4.hlo") == (LaunchDims(128, 2), 2)
    assert launch("concatenate__vectorization.hlo") == (LaunchDims(128, 2501), 2)


def test_gpu_unroll_smaller_than_the_grids_loops_over_chunks():
    """XLA sizes the grid by the largest operand's unroll (4 for f32[300000]) but unrolls by its gcd
    with the operand sizes (2): every thread handles two chunks of the grid."""
    text = concat_fusion("f32", [(300000,), (6,)], 0)
    emitter = _emitter(text, "simt")
    assert emitter.launch_and_unroll == (LaunchDims(128, 586), 2)
    assert [v.name for v in emitter.input_map.symbols] == ["chunk", "vector_index"]
    assert emitters_of(run_and_compare(text, "simt")) == ["concatenate"]


def test_cpu_elements_per_thread_divide_each_operand():
    """The CPU's vector of elements per thread, cut to a divisor of each operand's extent."""
    assert _emitter(concat_fusion("f32", [(64,), (32,)], 0), "cpu").launch_and_unroll[1] == 16
    assert _emitter(concat_fusion("f32", [(64,), (36,)], 0), "cpu").launch_and_unroll[1] == 4
    # Concatenated along the major dimension: each operand's extent is 3 rows of 8.
    assert _emitter(concat_fusion("f32", [(3, 8), (5, 8)], 0), "cpu").launch_and_unroll[1] == 8


def test_more_than_four_operands_or_outputs_is_a_loop_fusion():
    five = concat_fusion("f32", [(2,)] * 5, 0)
    assert computation_emitter_kind(fused_computation(parse_hlo(five))) is EmitterKind.LOOP
    assert emitters_of(run_and_compare(five, "cpu")) == ["loop"]
