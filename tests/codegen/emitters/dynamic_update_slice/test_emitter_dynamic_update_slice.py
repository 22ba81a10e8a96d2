"""The in-place dynamic-update-slice emitter (XLA's InPlaceDynamicUpdateSliceFusion): the corpus's
dynamic_update_slice group and random shapes against the evaluator, on the CPU target and in SIMT
simulation of the GPU target; the launch over the update shape; the bijection of the update
indexing (XLA's --bijection_inputs=dus:1); no access out of bounds."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _emitter_helpers import TARGETS, assert_bijection, corpus_module, emitters_of, run_and_compare

from hlocc.analysis.hero import computation_emitter_kind
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.hlo.parser import parse_hlo
from hlocc.tools.fusion_to_mlir import fused_computation

EMITTER = "in_place_dynamic_update_slice"

CORPUS = ["dynamic_update_slice__bitcast.hlo", "dynamic_update_slice__int4.hlo", "dynamic_update_slice__mof.hlo",
          "dynamic_update_slice__operand_subgraph_two_roots.hlo", "dynamic_update_slice__out_of_bounds.hlo",
          "dynamic_update_slice__simple.hlo", "dynamic_update_slice__vectorize_x1_too_small.hlo",
          "dynamic_update_slice__vectorize_x4.hlo"]

BIJECTION = {  # the corpus's --bijection_inputs: hero name, operand
    "dynamic_update_slice__int4.hlo": 1, "dynamic_update_slice__simple.hlo": 1,
    "dynamic_update_slice__vectorize_x1_too_small.hlo": 1, "dynamic_update_slice__vectorize_x4.hlo": 1,
}


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_module_matches_evaluator(name, target):
    kernels = run_and_compare(corpus_module(name), target)
    assert emitters_of(kernels) == [EMITTER]
    assert kernels[0].output_aliases


def _fusion(name: str):
    return fused_computation(corpus_module(name))


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", sorted(BIJECTION))
def test_update_indexing_is_a_bijection(name, target):
    fusion = _fusion(name)
    emitter = emitter_for(fusion, TARGETS[target]())
    update = emitter.dus_ops[0].operand(1).shape
    assert_bijection(emitter.thread_id_to_input_indexing(0, BIJECTION[name]), update, name)


def test_gpu_launch_follows_xla():
    """128 threads per block over the update; unroll 1 below the H100's thread capacity (2048 x 132:
    the corpus's vectorize_x4 vectorizes on XLA's smaller test GPU), 4 above it, 2 for s4 (a
    thread writes whole bytes)."""
    gpu = TARGETS["simt"]()
    cases = {"dynamic_update_slice__simple.hlo": (30, 1, 1), "dynamic_update_slice__vectorize_x1_too_small.hlo":
             (40, 1, 1), "dynamic_update_slice__vectorize_x4.hlo": (128, 1875, 1),
             "dynamic_update_slice__int4.hlo": (128, 3, 2)}
    for name, (threads, blocks, per_thread) in cases.items():
        launch, n = emitter_for(_fusion(name), gpu).launch()
        assert (launch.threads_per_block, launch.blocks, n) == (threads, blocks, per_thread), name
    big = parse_hlo("""
fusion {
  p0 = f32[40,80,300] parameter(0)
  p1 = f32[40,80,300] parameter(1)
  i = s32[] parameter(2)
  ROOT r = f32[40,80,300] dynamic-update-slice(p0, p1, i, i, i)
}""").entry
    launch, n = emitter_for(big, gpu).launch()
    assert (launch.threads_per_block, launch.blocks, n) == (128, 1875, 4)


def test_output_indexing_adds_the_clamped_starts():
    emitter = emitter_for(_fusion("dynamic_update_slice__bitcast.hlo"), TARGETS["simt"]())
    m = emitter.thread_id_to_output_indexing(0)
    assert len(m.results) == 1 and len(m.runtime) == 2  # f32[600] at (row + r0) * 30 + col + r1
    assert [v.bounds.hi for v in m.runtime] == [15, 24]
    points = m.points()
    starts = points[:, -2:]  # rows: thread, block, then the runtime variables (no symbol left)
    written = m.apply(points[(starts == (2, 7)).all(axis=1)])[:, 0]
    assert sorted(written.tolist()) == [(2 + r) * 30 + 7 + c for r in range(5) for c in range(6)]


# -- random shapes ----------------------------------------------------------------------------------------

def dus_module(operand: str, update: str, start_type: str, rank: int, layout: str = "", update_layout: str = "") -> str:
    starts = "".join(f"\n  i{k} = {start_type}[] parameter({2 + k})" for k in range(rank))
    names = "".join(f", i{k}" for k in range(rank))
    return f"""
fusion {{
  p0 = {operand}{layout} parameter(0)
  p1 = {update}{update_layout} parameter(1){starts}
  ROOT r = {operand}{layout} dynamic-update-slice(p0, p1{names})
}}"""


def _values(type_name: str, dims: tuple[int, ...], rng) -> np.ndarray:
    from hlocc.hlo.types import primitive_type

    pt = primitive_type(type_name)
    if pt.is_pred:
        return rng.random(dims) < 0.5
    if pt.is_integer:
        info = np.iinfo(np.int8) if pt.bits < 8 else np.iinfo(pt.dtype)
        lo, hi = (-8, 7) if pt.name == "s4" else ((0, 15) if pt.bits < 8 else (max(info.min, -1000), min(info.max, 1000)))
        return rng.integers(lo, hi, dims, endpoint=True).astype(pt.dtype)
    return rng.standard_normal(dims).astype(pt.dtype)


def _dims(text: str) -> tuple[int, ...]:
    inside = text.split("[")[1].split("]")[0]
    return tuple(int(d) for d in inside.split(",") if d)


RANDOM_CASES = [  # operand, update, start type, starts (out-of-bounds ones clamp), layouts
    ("f32[20,30]", "f32[5,6]", "s32", (-3, 100), "", ""),
    ("bf16[7,1,5]", "bf16[3,1,2]", "s64", (6, 0, 4), "", ""),
    ("s4[9,6]", "s4[2,3]", "s32", (-1, 5), "", ""),
    ("pred[4,4]", "pred[4,1]", "s8", (2, -128), "", ""),
    ("u16[33,17]", "u16[31,9]", "u32", (4294967295, 3), "", ""),
    ("f64[5,3]", "f64[2,2]", "u64", (2**63 + 5, 1), "", ""),
    ("s8[6,5]", "s8[2,3]", "s32", (1, 1), "{0,1}", "{1,0}"),
    ("f32[4,3]", "f32[0,3]", "s32", (2, 0), "", ""),
    ("f32[]", "f32[]", "s32", (), "", ""),
    ("f32[64,300]", "f32[33,257]", "s32", (40, 20), "", ""),
    ("c64[3,4]", "c64[2,2]", "s16", (1, 3), "", ""),
]


def _random_case(operand, update, start_type, starts, seed):
    rng = np.random.default_rng(seed)
    from hlocc.hlo.types import primitive_type

    start_dtype = primitive_type(start_type).dtype
    op_type = operand.split("[")[0]
    return [_values(op_type, _dims(operand), rng), _values(op_type, _dims(update), rng),
            *[np.asarray(s).astype(start_dtype) for s in starts]]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", RANDOM_CASES, ids=lambda c: f"{c[0]}<-{c[1]}@{c[3]}{c[4]}")
def test_random_shapes_match_evaluator(case, target):
    operand, update, start_type, starts, layout, update_layout = case
    text = dus_module(operand, update, start_type, len(starts), layout, update_layout)
    kernels = run_and_compare(text, target, inputs=_random_case(operand, update, start_type, starts, 7))
    assert emitters_of(kernels) == [EMITTER]


def test_size_zero_update_leaves_the_operand():
    fusion = parse_hlo(dus_module("f32[4,3]", "f32[0,3]", "s32", 2)).entry
    kernel = compile_fusion(fusion, TARGETS["cpu"](), use_cache=False)
    assert kernel.emitter == EMITTER and kernel.output_aliases == ((0, 0),)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    (out,) = kernel(x, np.zeros((0, 3), np.float32), np.int32(1), np.int32(0))
    np.testing.assert_array_equal(out, x)


IN_PLACE_CASES = {
    # the update reads the window it overwrites (in place: each element is read by its writer)
    "same_window_read": ("""
fusion {
  p0 = f32[6,10] parameter(0)
  p1 = f32[2,3] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  window = f32[2,3] dynamic-slice(p0, i, j), dynamic_slice_sizes={2,3}
  u = f32[2,3] multiply(window, p1)
  d = f32[6,10] dynamic-update-slice(p0, u, i, j)
  ROOT b = f32[3,20] bitcast(d)
}""", ((0, 0),)),
    # two roots, one behind a bitcast, share a computed update
    "mof_bitcast": ("""
fusion {
  p0 = f32[6,10] parameter(0)
  p1 = f32[2,3] parameter(1)
  p2 = f32[4,10] parameter(2)
  i = s32[] parameter(3)
  j = s32[] parameter(4)
  u = f32[2,3] multiply(p1, p1)
  d0 = f32[6,10] dynamic-update-slice(p0, u, i, j)
  b0 = f32[60] bitcast(d0)
  d1 = f32[4,10] dynamic-update-slice(p2, u, j, i)
  ROOT t = (f32[60], f32[4,10]) tuple(b0, d1)
}""", ((0, 0), (1, 2))),
}


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", sorted(IN_PLACE_CASES))
def test_computed_update_and_bitcast_roots(name, target):
    text, aliases = IN_PLACE_CASES[name]
    module = parse_hlo(text)
    assert computation_emitter_kind(module.entry).value == EMITTER
    rng = np.random.default_rng(3)
    starts = iter([np.int32(5), np.int32(8)])  # both clamp in the first root
    inputs = [rng.standard_normal(p.shape.dims).astype(np.float32) if p.shape.rank else next(starts)
              for p in module.entry.parameters]
    kernels = run_and_compare(text, target, inputs=inputs)
    assert emitters_of(kernels) == [EMITTER]
    assert kernels[0].output_aliases == aliases


def test_kernel_call_starts_from_the_operand():
    """`CompiledKernel.__call__` gives the output the operand's contents first (output_aliases)."""
    fusion = parse_hlo(dus_module("s32[5,4]", "s32[2,2]", "s32", 2)).entry
    kernel = compile_fusion(fusion, TARGETS["cpu"](), use_cache=False)
    x = np.arange(20, dtype=np.int32).reshape(5, 4)
    (out,) = kernel(x, np.full((2, 2), -1, np.int32), np.int32(9), np.int32(-9))
    expected = x.copy()
    expected[3:5, 0:2] = -1
    np.testing.assert_array_equal(out, expected)


# -- no access out of bounds -----------------------------------------------------------------------------

def guarded_child(path: str) -> None:
    """In a child process: run each (module text, inputs) case's kernel with every buffer against a
    guard page (after its end, then before its start), the aliased outputs starting as their
    operands as the runtime makes them; compare with the evaluator. A fault kills the process."""
    from _cpu_helpers import _run_guarded_kernel

    with open(path, "rb") as f:
        cases = pickle.load(f)
    for i, (text, inputs) in enumerate(cases):
        _run_guarded_kernel(compile_fusion(parse_hlo(text).entry, use_cache=False), inputs, i)
    print("all cases ran in bounds", flush=True)


def run_guarded(cases: list[tuple[str, list]], tmp_path: Path, module: str) -> None:
    """`guarded_child` of test module `module` on `cases` in a child process."""
    path = tmp_path / "cases.pkl"
    with open(path, "wb") as f:
        pickle.dump(cases, f)
    paths = [str(Path(__file__).resolve().parent), *sys.path]  # the helpers' folders (tests/conftest.py)
    code = f"import sys; sys.path[:0] = {paths!r}; import {module} as m; m.guarded_child({str(path)!r})"
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (f"exit status {proc.returncode} (-11: a fault, an access out of bounds) after\n"
                                  f"{proc.stdout[-1500:]}\n{proc.stderr[-3000:]}")
    assert "all cases ran in bounds" in proc.stdout


def test_no_access_out_of_bounds(tmp_path):
    cases = []
    for seed, (operand, update, start_type, starts, layout, update_layout) in enumerate(RANDOM_CASES):
        if 0 in _dims(update) or "c64" in operand:
            continue
        text = dus_module(operand, update, start_type, len(starts), layout, update_layout)
        cases.append((text, _random_case(operand, update, start_type, starts, seed)))
    run_guarded(cases, tmp_path, "test_emitter_dynamic_update_slice")
