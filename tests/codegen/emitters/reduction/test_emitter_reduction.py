"""The reduction emitter (codegen/emitters/reduction.py) on every reduce_* module of the XLA corpus
and on random shapes: chosen by hero analysis, matching the evaluator on the CPU target (one thread
per output, exact init) and in SIMT simulation (warp shuffles, shared memory across warps,
transposed column tiles), reading each input element and writing each output element once.

Float results differ from the evaluator's sequential sums by the summation order; the tolerance is
XLA's gpu_test_correctness default (1e-4) or the module's own bound from index.tsv. An f16 reducer
rounds every step to f16 in a kernel (as XLA:GPU's emitter does) while the evaluator accumulates in
f32 and rounds once: 64 roundings of sums near 8 differ by up to ~0.06 (F16_ROUNDING).
"""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from _emitter_helpers import assert_bijection, corpus_module, emitters_of, run_and_compare

from corpus import XLA_DIR
from hlocc.analysis.hero import computation_emitter_kind
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.emitters.reduction import ReductionEmitter
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.evaluator.core import evaluate
from hlocc.hlo.parser import parse_hlo
from hlocc.tools.fusion_to_mlir import fused_computation


def _modules() -> dict[str, str]:
    index = XLA_DIR / "index.tsv"
    if not index.is_file():
        return {}
    with index.open() as f:
        return {row["file"]: row["lit_run_tools_and_flags"] for row in csv.DictReader(f, delimiter="\t")
                if row["file"].startswith("reduce")}


MODULES = _modules()


F16_ROUNDING = {"reduce_multirow__f16_v4.hlo": 0.1}


def _bound(flags: str) -> float:
    found = re.search(r"--abs_error_bound=([0-9.e-]+)", flags)
    return max(float(found.group(1)), 1e-4) if found else 1e-4


def _one_target_by_default(names: list[str]) -> list:
    """(name, target): each module on one target by default, alternating along the sorted list, the
    other in the slow set (as the transpose corpus): about half the modules check each target."""
    return [pytest.param(name, target, id=f"{name}-{target}", marks=[] if j == i % 2 else [pytest.mark.slow])
            for i, name in enumerate(names) for j, target in enumerate(["cpu", "simt"])]


@pytest.mark.parametrize("name, target", _one_target_by_default(sorted(MODULES)))
def test_corpus_reduction(name, target):
    module = corpus_module(name)
    bound = F16_ROUNDING.get(name, _bound(MODULES[name]))
    kernels = run_and_compare(module, target, rtol=bound, atol=bound)
    assert emitters_of(kernels) == ["reduction"]


def test_corpus_has_reduction_modules():
    if not MODULES:
        pytest.skip(f"corpus not found at {XLA_DIR}")
    assert len(MODULES) >= 30


REDUCE = """
{reducer} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
fusion {{
  p = {t}[{dims}]{layout} parameter(0)
  z = {t}[] constant({init})
  ROOT r = {t}[{out}] reduce(p, z), dimensions={{{reduced}}}, to_apply={reducer}
}}
"""


def _text(t: str, dims, reduced, op="add", init="0", layout=""):
    out = ",".join(str(d) for k, d in enumerate(dims) if k not in reduced)
    return REDUCE.format(reducer="red", t=t, dims=",".join(map(str, dims)), layout=layout, init=init,
                         out=out, reduced=",".join(map(str, reduced)), op=op)


CASES = [
    ("f32", (7, 1000), (1,), "add", "0", ""),        # row, partial warp tile
    ("f32", (3, 5, 33), (0, 2), "add", "0", ""),     # row with a batch dimension
    ("f32", (300, 70), (0,), "add", "0", ""),        # column, partial tiles
    ("f32", (4, 50, 19), (1,), "maximum", "-inf", ""),  # column between kept dimensions
    ("s32", (9, 4097), (1,), "add", "0", ""),        # integers: exact
    ("f64", (2, 64, 3), (1,), "minimum", "inf", ""),
    ("f32", (33, 1, 17), (2,), "add", "0", "{0,1,2}"),  # a non-default layout
    ("f32", (0, 16), (1,), "add", "0", ""),          # an empty output
    ("f32", (5, 0), (1,), "add", "0", ""),           # nothing to reduce: the init value
    ("f32", (1, 1), (1,), "maximum", "-inf", ""),    # rows of one element (attention at sequence length 1)
    ("f32", (40, 1), (1,), "add", "0", ""),
]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{list(c[1])}r{list(c[2])}{c[3]}{c[5]}")
def test_random_shapes(case, target):
    t, dims, reduced, op, init, layout = case
    text = _text(t, dims, reduced, op, init, layout)
    kernels = run_and_compare(text, target, rtol=1e-4, atol=1e-4)
    # Hero analysis decides: a small reduction stays elemental, as in XLA.
    assert emitters_of(kernels) == [computation_emitter_kind(fused_computation(parse_hlo(text))).value]


def test_cpu_target_applies_a_non_identity_init_once():
    text = _text("f32", (4, 300), (1,), "add", "10")
    kernel = compile_fusion(fused_computation(parse_hlo(text)), cpu_target(), use_cache=False)
    x = np.ones((4, 300), np.float32)
    np.testing.assert_array_equal(kernel(x)[0], np.full(4, 310, np.float32))


@pytest.mark.parametrize("target", [cpu_target, gpu_target], ids=["cpu", "gpu"])
@pytest.mark.parametrize("dims,reduced", [((8, 2048), (1,)), ((17, 19, 127), (2,)), ((300, 70), (0,)),
                                          ((8, 300, 40), (1,)), ((3, 5, 33), (0, 2)), ((12, 8), (1,))])
def test_bijection(dims, reduced, target):
    """Each input element is read by exactly one thread position, each output element written by
    exactly one (XLA's --bijection_inputs=reduce:0 --bijection_outputs=reduce)."""
    computation = fused_computation(parse_hlo(_text("f32", dims, reduced)))
    emitter = ReductionEmitter(computation, target())
    assert_bijection(emitter.thread_id_to_input_indexing(0, 0), dims, "input")
    out = tuple(d for k, d in enumerate(dims) if k not in reduced)
    assert_bijection(emitter.thread_id_to_output_indexing(0), out, "output")


SOFTMAX_SUM = """
add {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] add(a, b)
}}
mx {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] maximum(a, b)
}}
fusion {{
  p = {t}[{rows},{cols}] parameter(0)
  m = {t}[{rows}] parameter(1)
  b = {t}[{rows},{cols}] broadcast(m), dimensions={{0}}
  d = {t}[{rows},{cols}] subtract(p, b)
  e = {t}[{rows},{cols}] exponential(d)
  z = {t}[] constant(0)
  s = {t}[{rows}] reduce(e, z), dimensions={{1}}, to_apply=add
  ninf = {t}[] constant(-inf)
  x = {t}[{rows}] reduce(p, ninf), dimensions={{1}}, to_apply=mx
  ROOT t = ({t}[{rows}], {t}[{rows}], {t}[{rows},{cols}]) tuple(s, x, e)
}}
"""


# f16 on the CPU target compiles for ~30 s (the default run's slowest emitter test): slow; the f16
# case still runs in SIMT simulation, the CPU target's partial accumulators on the f32 cases, and f16
# reductions on the CPU in tests/backends/cpu/test_cpu_reductions.py.
@pytest.mark.parametrize("t, rows, cols, target", [
    pytest.param(t, rows, cols, target, marks=[pytest.mark.slow] if (t, target) == ("f16", "cpu") else [])
    for t, rows, cols in [("f32", 6, 1024), ("f32", 5, 1000), ("f16", 3, 200), ("f32", 4, 40)]
    for target in ["cpu", "simt"]])
def test_row_reductions_with_a_side_output(t, rows, cols, target):
    """Softmax's middle fusion (plus a second reduce): the side output exp(x - max) is written at the
    element the sum reads. On the CPU target it rides the vector of partial accumulators (aligned
    rows, a tail), or the serial loop for rows too short for partials."""
    text = SOFTMAX_SUM.format(t=t, rows=rows, cols=cols)
    assert computation_emitter_kind(fused_computation(parse_hlo(text))).value == "reduction"
    rtol = 2e-2 if t == "f16" else 1e-4  # an f16 sum rounds every add: the order shows
    assert emitters_of(run_and_compare(text, target, rtol=rtol, atol=1e-5)) == ["reduction"]


# s8 over 8192 columns (16 vectors a thread) runs ~35 s: slow; several vectors a thread are checked
# by f32-4096 (4), and s8 by s8-320.
@pytest.mark.parametrize("t, minor, lanes", [("f32", 4096, 256), ("f32", 1152, 128), ("f32", 1024, 128),
                                             ("f16", 256, 64), ("f64", 96, 32), ("f32", 48, 16), ("s8", 320, 64),
                                             pytest.param("s8", 8192, 1024, marks=pytest.mark.slow)])
def test_cpu_column_lanes(t, minor, lanes):
    """A CPU thread of a column reduction accumulates 1024 bytes of adjacent columns in vectors of at
    most 64 lanes (fewer where the columns do not divide, and no more than one vector per thread
    where that would leave fewer than 8 threads: 1024 f32 columns are 8 threads of 128), and the
    result matches the evaluator."""
    text = _text(t, (40, minor), (0,))
    emitter = ReductionEmitter(fused_computation(parse_hlo(text)), cpu_target())
    assert not emitter.tiling.row and emitter.tiling.lanes == lanes
    assert emitter.tiling.groups == max(1, lanes // 64)
    rtol = 1e-2 if t == "f16" else 1e-4  # f16 adds round (the evaluator's sum is more precise)
    assert emitters_of(run_and_compare(text, "cpu", rtol=rtol, atol=1e-2 if t == "f16" else 1e-4)) == ["reduction"]
    assert_bijection(emitter.thread_id_to_input_indexing(0, 0), (40, minor), "input")


ARGMAX = """
HloModule argmax
select_first {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction={direction}
  ne = pred[] compare(a, a), direction=NE
  pick_a = pred[] or(gt, ne)
  v = f32[] select(pick_a, a, b)
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick_ai = pred[] or(pick_a, tie)
  i = s32[] select(pick_ai, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
fused {
  x = f32[{dims}] parameter(0)
  iota = s32[{dims}] iota(), iota_dimension={axis}
  init = f32[] constant({init})
  zero = s32[] constant(0)
  ROOT r = (f32[{out}], s32[{out}]) reduce(x, iota, init, zero), dimensions={{axis}}, to_apply=select_first
}
ENTRY main {
  p = f32[{dims}] parameter(0)
  ROOT f = (f32[{out}], s32[{out}]) fusion(p), kind=kInput, calls=fused
}
"""


# rows of 8 (the failure below) on both targets by default, the other shapes on one target each,
# alternating; `-m slow` runs the rest
ARGMAX_SHAPES = [(5, 8, 1), (5, 16, 1), (3, 100, 1), (3, 1000, 1), (64, 7, 0)]


@pytest.mark.parametrize("rows,cols,axis,target", [
    pytest.param(*shape, target, marks=[] if i == 0 or j == i % 2 else [pytest.mark.slow])
    for i, shape in enumerate(ARGMAX_SHAPES) for j, target in enumerate(["cpu", "simt"])])
def test_argmax_over_rows_with_several_nans_is_the_first_nan(rows, cols, axis, target):
    """JAX's argmax reducer keeps its first operand's NaN, so a serial fold returns the row's first
    NaN (numpy's answer, XLA:CPU's). Partial results (lanes, shuffles, warps) hold interleaved
    subsets of the row; passed to the reducer in lane order they gave a later NaN's index (rows of
    8 with NaNs at 1 and 6 gave 6). They are now combined lower index first."""
    rng = np.random.default_rng(rows * cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    length = x.shape[axis]
    for k in range(x.shape[1 - axis]):  # 2-4 NaNs per row, the last rows none, one, all
        line = x[k] if axis == 1 else x[:, k]
        count = [0, 1, length][k] if k < 3 else int(rng.integers(2, min(length, 4) + 1))
        line[rng.choice(length, count, replace=False)] = np.nan
    for direction, init, want in (("GT", "-inf", np.argmax), ("LT", "inf", np.argmin)):
        dims = f"{rows},{cols}"
        text = ARGMAX.replace("{direction}", direction).replace("{dims}", dims).replace("{axis}", str(axis)) \
            .replace("{init}", init).replace("{out}", str(x.shape[1 - axis])).replace("{{", "{").replace("}}", "}")
        np.testing.assert_array_equal(evaluate(parse_hlo(text), [x])[1], want(x, axis=axis))  # the reference
        run_and_compare(text, target, inputs=[x])
