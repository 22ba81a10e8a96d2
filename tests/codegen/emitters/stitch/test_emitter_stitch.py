"""The stitch fusion (passes/stitch_fusion.py) and its emitter (codegen/emitters/stitch.py): softmax,
layernorm and RMSnorm in f32 and bf16 become ONE stitch kernel that matches the evaluator at row
lengths around the vector width (16 f32 lanes) and the sizes of the benchmarks; what cannot be
stitched (rows past the L2 budget, a reduced length of 1) keeps the unstitched plan and its values.
The JAX corpus cases against XLA:CPU's outputs run in tests/backends/cpu/test_cpu_programs.py;
test_corpus_cases_are_stitched checks here that they now compile into one stitch kernel."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, require
from hlocc.analysis.cost_model import stitch_fits, stitch_min_row
from hlocc.cli import flatten, random_inputs
from hlocc.comparison import compare_arrays
from hlocc.compiler import check_arguments
from hlocc.evaluator.core import evaluate
from hlocc.hlo.parser import parse_hlo, parse_hlo_file
from hlocc.hlo.symbolic import parse_dim_expr
from hlocc.passes.pipeline import DISABLE_ENV, PassManager, PassPipelineError, cpu_pipeline

_REDUCERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
"""

_BODIES = {
    "softmax": """
  x = {t}[{r},{n}] parameter(0)
  xf = f32[{r},{n}] convert(x)
  ninf = f32[] constant(-inf)
  mx = f32[{r}] reduce(xf, ninf), dimensions={{1}}, to_apply=max
  bmx = f32[{r},{n}] broadcast(mx), dimensions={{0}}
  sub = f32[{r},{n}] subtract(xf, bmx)
  e = f32[{r},{n}] exponential(sub)
  zero = f32[] constant(0)
  s = f32[{r}] reduce(e, zero), dimensions={{1}}, to_apply=add
  bs = f32[{r},{n}] broadcast(s), dimensions={{0}}
  d = f32[{r},{n}] divide(e, bs)
  ROOT out = {t}[{r},{n}] convert(d)""",
    "layernorm": """
  x = {t}[{r},{n}] parameter(0)
  g = {t}[{n}] parameter(1)
  b = {t}[{n}] parameter(2)
  xf = f32[{r},{n}] convert(x)
  zero = f32[] constant(0)
  sum = f32[{r}] reduce(xf, zero), dimensions={{1}}, to_apply=add
  inv = f32[] constant({inv})
  binv = f32[{r}] broadcast(inv), dimensions={{}}
  mean = f32[{r}] multiply(sum, binv)
  bmean = f32[{r},{n}] broadcast(mean), dimensions={{0}}
  c = f32[{r},{n}] subtract(xf, bmean)
  c2 = f32[{r},{n}] multiply(c, c)
  ss = f32[{r}] reduce(c2, zero), dimensions={{1}}, to_apply=add
  var = f32[{r}] multiply(ss, binv)
  eps = f32[] constant(1e-05)
  beps = f32[{r}] broadcast(eps), dimensions={{}}
  ve = f32[{r}] add(var, beps)
  rs = f32[{r}] rsqrt(ve)
  brs = f32[{r},{n}] broadcast(rs), dimensions={{0}}
  nrm = f32[{r},{n}] multiply(c, brs)
  gf = f32[{n}] convert(g)
  bg = f32[{r},{n}] broadcast(gf), dimensions={{1}}
  bf = f32[{n}] convert(b)
  bb = f32[{r},{n}] broadcast(bf), dimensions={{1}}
  y = f32[{r},{n}] multiply(nrm, bg)
  z = f32[{r},{n}] add(y, bb)
  ROOT out = {t}[{r},{n}] convert(z)""",
    "rmsnorm": """
  x = {t}[{r},{n}] parameter(0)
  w = {t}[{n}] parameter(1)
  xf = f32[{r},{n}] convert(x)
  sq = f32[{r},{n}] multiply(xf, xf)
  zero = f32[] constant(0)
  ss = f32[{r}] reduce(sq, zero), dimensions={{1}}, to_apply=add
  inv = f32[] constant({inv})
  binv = f32[{r}] broadcast(inv), dimensions={{}}
  ms = f32[{r}] multiply(ss, binv)
  eps = f32[] constant(1e-06)
  beps = f32[{r}] broadcast(eps), dimensions={{}}
  me = f32[{r}] add(ms, beps)
  rs = f32[{r}] rsqrt(me)
  brs = f32[{r},{n}] broadcast(rs), dimensions={{0}}
  nrm = f32[{r},{n}] multiply(xf, brs)
  wf = f32[{n}] convert(w)
  bw = f32[{r},{n}] broadcast(wf), dimensions={{1}}
  y = f32[{r},{n}] multiply(nrm, bw)
  ROOT out = {t}[{r},{n}] convert(y)""",
}


def program(kind: str, dtype: str, rows: int, n: int) -> str:
    """HLO text of a `kind` over the rows of {dtype}[rows, n], statistics in f32 (as jax.nn writes them)."""
    body = _BODIES[kind].format(t=dtype, r=rows, n=n, inv=repr(1.0 / n))
    return f"HloModule {kind}\n{_REDUCERS}\nENTRY main {{{body}\n}}\n"


def check(text: str, *, stitched: bool, seed: int = 0, check_bounds: bool = False):
    """Compile `text` for the cpu backend; outputs match the evaluator; one stitch kernel (or none).
    `check_bounds`: every load and store is checked against its buffer (the overlapped tail's, the
    next-row prefetch's addresses)."""
    module = parse_hlo(text)
    inputs = check_arguments(module, random_inputs(module, seed), cast=True)
    ref = flatten(evaluate(module, inputs))
    exe = hlocc.compile(module, "cpu", check_bounds=check_bounds)
    got = flatten(exe(*inputs))
    bf16 = "bf16" in text
    for r, g in zip(ref, got, strict=True):
        problem = compare_arrays(r, g, rtol=1e-2 if bf16 else 2e-5, atol=1e-2 if bf16 else 1e-6)
        assert problem is None, problem
    stats = exe.runner.stats
    if stitched:
        assert stats.kernels == 1 and stats.kernels_by_emitter["stitch"] == 1, stats.to_string()
    else:
        assert stats.kernels_by_emitter["stitch"] == 0, stats.to_string()
    return stats


_SLOW = pytest.mark.slow  # ~10 s each on a loaded 2-core machine (compilation)


@pytest.mark.parametrize("kind,dtype,rows,n", [
    ("softmax", "f32", 3, 127),  # a chunk loop and a tail
    ("softmax", "f32", 5, 33),  # two vectors and one element: the shortest row with a tail stitched
    ("softmax", "f32", 5, 17),  # one vector and one element: stitched, one chunk and an overlapped tail
    ("rmsnorm", "bf16", 6, 33),  # bf16 in and out, f32 statistics
    ("softmax", "f32", 3, 1025),  # 4 KiB rows and more: the last pass prefetches the next row; a 1-element tail
    ("layernorm", "bf16", 2, 2047),  # bf16 rows just short of 4 KiB (no prefetch); a 31-element tail of 32 lanes
    pytest.param("softmax", "f32", 1, 15, marks=_SLOW),  # shorter than one vector: not stitched; one row
    pytest.param("layernorm", "f32", 4, 32, marks=_SLOW),  # exactly two vectors
    pytest.param("layernorm", "bf16", 3, 130, marks=_SLOW),
    pytest.param("softmax", "bf16", 2, 64, marks=_SLOW),
])
def test_stitched_matches_the_evaluator(kind, dtype, rows, n):
    check(program(kind, dtype, rows, n), stitched=n >= stitch_min_row(32), check_bounds=n > 1000)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_stitched_matches_the_evaluator_at_benchmark_rows(kind, dtype):
    check(program(kind, dtype, 70, 4096), stitched=True, seed=1)  # 70 rows: a partial last block


def test_a_row_of_one_element_is_not_stitched():
    """Reducing a dimension of size 1 is no row reduction: the plan stays as it was, and right."""
    check(program("softmax", "f32", 4, 1), stitched=False)


def _fused(text: str):
    module = parse_hlo(text)
    PassManager(cpu_pipeline().optimization).run(module)
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def test_rows_past_the_l2_budget_keep_the_multi_kernel_plan():
    """A million f32 columns (4 MiB a row) do not fit half of L2: three fusions, none stitched."""
    fusions = _fused(program("softmax", "f32", 2, 1 << 20))
    assert len(fusions) == 3 and all(f.attrs["kind"] != "kCustom" for f in fusions)
    fusions = _fused(program("softmax", "f32", 2, 4096))
    assert [f.attrs["kind"] for f in fusions] == ["kCustom"] and fusions[0].name == "stitch_divide_fusion"


def test_stitch_fits():
    assert stitch_fits(4096, "f32", "cpu")
    assert stitch_fits(1 << 17, "f32", "cpu") and not stitch_fits((1 << 17) + 1, "f32", "cpu")
    assert not stitch_fits(4096, "f32", "cpu", live_rows=64)
    assert not stitch_fits(parse_dim_expr("n"), "f32", "cpu")  # a symbolic row length: never at compile time
    assert stitch_fits(12 * 1024, "f32", "gpu") and not stitch_fits(12 * 1024 + 1, "f32", "gpu")
    # Rows shorter than one vector of f32 statistics (16 elements; 8 of f64) run faster unstitched.
    assert stitch_fits(16, "f32", "cpu") and not stitch_fits(15, "f32", "cpu")
    assert stitch_fits(16, "bf16", "cpu") and not stitch_fits(15, "bf16", "cpu")
    assert stitch_fits(8, "f64", "cpu") and not stitch_fits(7, "f64", "cpu")
    assert stitch_fits(16, "f32", "gpu")


def test_the_pass_can_be_disabled(monkeypatch):
    """$HLOCC_DISABLE_HLO_PASSES=stitch-fusion: the unstitched plan (how the benchmark compares)."""
    monkeypatch.setenv(DISABLE_ENV, "stitch-fusion")
    stats = check(program("softmax", "f32", 3, 127), stitched=False)
    assert stats.kernels == 3
    # Compiled from text, the program caches key the plan by the switch too.
    text = program("softmax", "f32", 3, 127)
    assert hlocc.compile(text, "cpu").runner.stats.kernels == 3
    monkeypatch.delenv(DISABLE_ENV)
    assert hlocc.compile(text, "cpu").runner.stats.kernels == 1
    monkeypatch.setenv(DISABLE_ENV, "no-such-pass")
    with pytest.raises(PassPipelineError, match="unknown pass 'no-such-pass'"):
        _fused(program("softmax", "f32", 3, 127))


@pytest.mark.parametrize("name", ["softmax_logsoftmax_f32", "layernorm_bf16", "rmsnorm_f32"])
def test_corpus_cases_are_stitched(name):
    require(JAX_DIR)
    fusions = _fused((JAX_DIR / f"{name}.hlo").read_text())
    assert [f.attrs["kind"] for f in fusions] == ["kCustom"], [f.name for f in fusions]
    assert parse_hlo_file(JAX_DIR / f"{name}.hlo") is not None


def _symbolic(text: str, rows: str, n: str) -> str:
    """`text` (a program over f32[R,N] with R and N numbers) with the rows and the row length as written."""
    return text.replace("[4096,", f"[{rows},").replace(",4096]", f",{n}]").replace("[4096]", f"[{rows}]")


@pytest.fixture(scope="module")
def symbolic_rows_softmax():
    """A softmax over f32[?b, 4096] (a runtime row count, a static row length), compiled once."""
    text = _symbolic(program("softmax", "f32", 4096, 4096), "?b", "4096")
    return hlocc.compile(parse_hlo(text), "cpu")


@pytest.mark.parametrize("rows", [1, 3, 70])  # one row; a partial block; several blocks and a partial one
def test_a_symbolic_row_count_is_stitched_once_for_every_size(symbolic_rows_softmax, rows):
    exe = symbolic_rows_softmax
    x = np.random.default_rng(rows).standard_normal((rows, 4096), dtype=np.float32) * 3
    ref = flatten(evaluate(parse_hlo(program("softmax", "f32", rows, 4096)), [x]))[0]  # the static module
    problem = compare_arrays(ref, flatten(exe(x))[0], rtol=2e-5, atol=1e-6)
    assert problem is None, problem
    plan = exe.program  # the one plan for every size (runtime/dynamic_program.py)
    assert plan is not None and plan.symbolic_kernels == 1 and not plan.deferred
    assert plan.stats.kernels_by_emitter["stitch"] >= 1, plan.stats.to_string()


def test_a_symbolic_row_length_is_not_stitched():
    """f32[?b, ?n]: whether a row fits is known only per call (runtime speculation's to decide with
    `stitch_fits`): the unstitched plan."""
    module = parse_hlo(_symbolic(program("softmax", "f32", 4096, 4096), "?b", "?n"))
    PassManager(cpu_pipeline().optimization, hint={"b": 128, "n": 128}).run(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert fusions and all(f.attrs["kind"] != "kCustom" for f in fusions)


# -- the GPU form ----------------------------------------------------------------------------------

@pytest.mark.parametrize("kind,dtype,rows,n", [
    ("softmax", "f32", 12, 127),  # a warp per row, 4 steps, the last past the row; 2 blocks of 6 rows
    ("layernorm", "f32", 2, 1000),  # a warp per row, 32 steps
    ("rmsnorm", "bf16", 2, 33),  # a warp per row, the second step with a single element
    ("layernorm", "f32", 2, 1500),  # a block per row: 512 threads, 3 steps, 16 warps through shared memory
])
def test_gpu_form_in_simulation_matches_the_evaluator(kind, dtype, rows, n):
    """The cuda pipeline stitches too (`stitch-fusion-gpu`); cuda-sim runs the warp-per-row and the
    block-per-row kernels."""
    module = parse_hlo(program(kind, dtype, rows, n))
    inputs = check_arguments(module, random_inputs(module, 0), cast=True)
    ref = flatten(evaluate(module, inputs))
    exe = hlocc.compile(module, "cuda-sim")
    bf16 = dtype == "bf16"
    for r, g in zip(ref, flatten(exe(*inputs)), strict=True):
        problem = compare_arrays(r, g, rtol=1e-2 if bf16 else 2e-5, atol=1e-2 if bf16 else 1e-6)
        assert problem is None, problem
    assert exe.runner.stats.kernels_by_emitter == {"stitch": 1}, exe.runner.stats.to_string()


@pytest.mark.parametrize("kind,n,barrier", [("softmax", 4096, True), ("layernorm", 4096, True),
                                            ("softmax", 1024, False)])
def test_gpu_form_is_accepted_by_ptxas(kind, n, barrier):
    from hlocc.backends.cuda.ptx import compile_ptx, find_ptxas, validate_ptx
    from hlocc.passes.pipeline import BACKEND_PIPELINES

    ptxas = find_ptxas()
    if ptxas is None:
        pytest.skip("no ptxas: install the CUDA toolkit or the test extra")
    module = parse_hlo(program(kind, "f32", 64, n))
    PassManager(BACKEND_PIPELINES["cuda"].optimization).run(module)
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    kernel = compile_ptx(fusion.attrs["calls"], "sm_90")
    # a block per row of 4096 meets at a barrier; a warp per row of 1024 needs none
    assert kernel.emitter == "stitch" and "shfl.sync.bfly" in kernel.ptx and ("bar.sync" in kernel.ptx) == barrier
    validate_ptx(kernel.ptx, "sm_90", ptxas)


def test_an_output_that_may_overwrite_an_input_buffers_nothing():
    """x reaches the output only through elementwise ops, so buffer assignment may give the output
    x's dying buffer: the kernel must not park exp in the output row that the last pass reads x from."""
    text = f"""HloModule gated_softmax
{_REDUCERS}
ENTRY main {{
  z = f32[4,64] parameter(0)
  x = f32[4,64] parameter(1)
  ninf = f32[] constant(-inf)
  mx = f32[4] reduce(z, ninf), dimensions={{1}}, to_apply=max
  bmx = f32[4,64] broadcast(mx), dimensions={{0}}
  e = f32[4,64] exponential(f32[4,64] subtract(z, bmx))
  zero = f32[] constant(0)
  s = f32[4] reduce(e, zero), dimensions={{1}}, to_apply=add
  bs = f32[4,64] broadcast(s), dimensions={{0}}
  ROOT out = f32[4,64] multiply(x, f32[4,64] divide(e, bs))
}}
"""
    check(text, stitched=True)
    from hlocc.codegen.emitters.stitch import StitchEmitter
    from hlocc.codegen.target import cpu_target

    (fusion,) = _fused(text)
    emitter = StitchEmitter(fusion.attrs["calls"], cpu_target())
    assert not emitter._outputs_private()


@pytest.mark.parametrize("n", [100, 127, 1025])  # 3 chains (6 chunks), 3 (7: one left over), 4 (64 + a tail)
def test_a_max_over_several_chains_sees_every_element(n):
    """The max stage folds its chunks into several vectors of partials and combines the lanes by a
    tree (reduce_partials.order_free); softmax hides a wrong max (it cancels), so the max is an
    output here: the row's largest element is planted in each chunk in turn (each chain, the chunk
    left over, the overlapped tail, lane 0 and 15), and one row holds a NaN."""
    positions = sorted({0, 15, 16, 17, 33, 50, 16 * (n // 16) - 1, n - 16, n - 1} | set(range(16 * 6, n, 16)))
    positions = [p for p in positions if p < n]
    rows = len(positions) + 1
    text = f"""HloModule softmax_and_max
{_REDUCERS}
ENTRY main {{
  x = f32[{rows},{n}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[{rows}] reduce(x, ninf), dimensions={{1}}, to_apply=max
  bmx = f32[{rows},{n}] broadcast(mx), dimensions={{0}}
  e = f32[{rows},{n}] exponential(f32[{rows},{n}] subtract(x, bmx))
  zero = f32[] constant(0)
  s = f32[{rows}] reduce(e, zero), dimensions={{1}}, to_apply=add
  bs = f32[{rows},{n}] broadcast(s), dimensions={{0}}
  ROOT out = (f32[{rows},{n}], f32[{rows}]) tuple(f32[{rows},{n}] divide(e, bs), mx)
}}
"""
    x = np.random.default_rng(n).standard_normal((rows, n)).astype(np.float32)
    for row, p in enumerate(positions):
        x[row, p] = 10.0 + row
    x[-1, n // 2] = np.nan
    module = parse_hlo(text)
    ref = flatten(evaluate(module, [x]))
    exe = hlocc.compile(module, "cpu", check_bounds=True)
    got = flatten(exe(x))
    np.testing.assert_array_equal(got[1], ref[1])
    np.testing.assert_array_equal(got[1][:-1], [10.0 + r for r in range(rows - 1)])
    assert compare_arrays(ref[0], got[0], rtol=2e-5, atol=1e-6) is None
    assert exe.runner.stats.kernels_by_emitter["stitch"] == 1, exe.runner.stats.to_string()
