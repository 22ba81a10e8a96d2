"""The sort emitter (codegen/emitters/sort.py, codegen/llvm/sort_rows.py): sort, topk and
custom-call "TopK" compiled into CPU kernels, checked bit for bit against the evaluator on random
and adversarial rows (ties for stability, NaN, -0.0/+0.0, inf, integer extremes), every dtype
family, several operands, custom comparators, any sort dimension and layout, and the lengths where
the merge sort changes shape (0, 1, 2, one run, several runs, scratch on the heap); in the
bounds-checked mode too, where a row loop that leaves its buffer is reported."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np
import pytest

import hlocc
import hlocc.codegen.llvm.sort_rows as sort_rows
from hlocc.backends.cpu.kernel import compile_fusion, compile_kernel_module
from hlocc.codegen.emitters.registry import emit_fusion
from hlocc.codegen.emitters.sort import sort_spec
from hlocc.codegen.llvm import TranslateOptions
from hlocc.codegen.llvm.sort_rows import RADIX_MIN, RUN, SELECT_MAX, STACK_BYTES, add_sort_rows
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.codegen.transforms.check_bounds import BoundsCheckError
from hlocc.errors import UnsupportedError
from hlocc.evaluator.core import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.executable import one_op_fusion
from hlocc.runtime.thunks import WhileThunk

CHECKED = replace(cpu_target(), check_bounds=True)

# JAX's float comparator (jnp.sort, argsort): -0.0 and NaN canonicalised, then TOTALORDER.
JAX_LT = """
  p0 = {t}[] parameter(0)
  p1 = {t}[] parameter(1)
  nan = {t}[] constant(nan)
  zero = {t}[] constant(0)
  n0 = pred[] compare(p0, p0), direction=NE
  z0 = pred[] compare(p0, zero), direction=EQ
  c0 = {t}[] select(n0, nan, {t}[] select(z0, zero, p0))
  n1 = pred[] compare(p1, p1), direction=NE
  z1 = pred[] compare(p1, zero), direction=EQ
  c1 = {t}[] select(n1, nan, {t}[] select(z1, zero, p1))
  ROOT lt = pred[] compare(c0, c1), direction=LT, type=TOTALORDER"""


def _module(shapes: list[str], result: str, dim: int, body: str, extra_params: str = "") -> str:
    params = "\n".join(f"  a{k} = {s} parameter({k})" for k, s in enumerate(shapes))
    args = ", ".join(f"a{k}" for k in range(len(shapes)))
    return (f"HloModule m\ncmp {{\n{body}\n{extra_params}}}\nENTRY e {{\n{params}\n"
            f"  ROOT s = {result} sort({args}), dimensions={{{dim}}}, is_stable=true, to_apply=cmp\n}}")


def _instr(text: str):
    return parse_hlo(text).entry.root


def _check(text: str, *inputs_list, target=None, options=None, merge: bool = False) -> None:
    """Compile the entry's root (a sort/topk) into a sort kernel (`merge`: the merge sort even where
    the radix sort would run) and compare every output, as bits, with the evaluator's on each list
    of inputs."""
    instr = _instr(text)
    with pytest.MonkeyPatch.context() as patch:
        if merge:
            patch.setattr(sort_rows, "RADIX_MIN", 2**62)
        kernel = compile_fusion(one_op_fusion(instr), target or cpu_target(), use_cache=False,
                                translate_options=options)
    assert kernel.emitter == "sort"
    for inputs in inputs_list:
        want = Evaluator(0).evaluate_instruction(instr, list(inputs))
        want = list(want) if isinstance(want, tuple) else [want]
        got = kernel(*inputs)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.shape == w.shape and g.dtype == w.dtype, k
            np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8),
                                          np.ascontiguousarray(w).view(np.uint8), err_msg=f"output {k}")


SPECIAL_F32 = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan, 1.0, 1.0, -1.0, 0.0, -0.0], np.float32)


def _floats(rng, rows: int, n: int, dtype=np.float32) -> np.ndarray:
    """Random rows with many ties and, where there is room, every special value."""
    x = rng.integers(-4, 4, (rows, n)).astype(np.float32) / 2
    if n:
        x[:, :min(n, SPECIAL_F32.size)] = SPECIAL_F32[:min(n, SPECIAL_F32.size)]
        x = rng.permuted(x, axis=1)
    return x.astype(dtype)


def _iota(rows: int, n: int) -> np.ndarray:
    return np.broadcast_to(np.arange(n, dtype=np.int32), (rows, n)).copy()


@pytest.mark.parametrize("n, merge", [(0, True), (1, True), (2, True), (RUN + 1, True), (1000, True),
                                      (RADIX_MIN, False), (1000, False)])
def test_jax_argsort_of_floats_at_every_merge_and_radix_shape(n, merge):
    text = _module([f"f32[3,{n}]", f"s32[3,{n}]"], f"(f32[3,{n}], s32[3,{n}])", 1, JAX_LT.format(t="f32"),
                   "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n")
    rng = np.random.default_rng(n)
    _check(text, [_floats(rng, 3, n), _iota(3, n)], [np.sort(_floats(rng, 3, n), axis=1), _iota(3, n)],
           [-np.sort(_floats(rng, 3, n), axis=1), _iota(3, n)], merge=merge)


@pytest.mark.parametrize("merge", [True, False], ids=["merge", "radix"])
@pytest.mark.parametrize("t, dtype, compare", [
    ("bf16", ml_dtypes.bfloat16, "type=TOTALORDER"),
    ("f16", np.float16, "type=TOTALORDER"),
    ("u8", np.uint8, ""),
    ("s64", np.int64, ""),
    ("pred", np.bool_, ""),
])
def test_keys_of_every_dtype_family_in_their_natural_or_total_order(t, dtype, compare, merge):
    body = f"  p0 = {t}[] parameter(0)\n  p1 = {t}[] parameter(1)\n  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n" \
           f"  ROOT lt = pred[] compare(p0, p1), direction=LT{', ' + compare if compare else ''}"
    text = _module([f"{t}[4,37]", "s32[4,37]"], f"({t}[4,37], s32[4,37])", 1, body)
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        keys = rng.integers(-3, 3, (4, 37)).astype(dtype)
        keys[:, :4] = [info.min, info.max, info.min, 0]
        keys = rng.permuted(keys, axis=1)
    elif dtype == np.bool_:
        keys = rng.integers(0, 2, (4, 37)).astype(bool)
    else:
        keys = _floats(rng, 4, 37, dtype)
    _check(text, [keys, _iota(4, 37)], merge=merge)


@pytest.mark.parametrize("merge", [True, False], ids=["merge", "radix"])
def test_descending_comparator_with_a_float_payload(merge):
    body = ("  p0 = s32[] parameter(0)\n  p1 = s32[] parameter(1)\n  x = f32[] parameter(2)\n  y = f32[] parameter(3)\n"
            "  ROOT gt = pred[] compare(p0, p1), direction=GT")
    text = _module(["s32[2,50]", "f32[2,50]"], "(s32[2,50], f32[2,50])", 1, body)
    rng = np.random.default_rng(1)
    _check(text, [rng.integers(-5, 5, (2, 50)).astype(np.int32), _floats(rng, 2, 50)], merge=merge)


def test_comparator_on_the_second_operand_and_lexicographic_keys():
    second = ("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  p = s32[] parameter(2)\n  q = s32[] parameter(3)\n"
              "  ROOT lt = pred[] compare(p, q), direction=LT")
    lexicographic = ("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  p = s32[] parameter(2)\n"
                     "  q = s32[] parameter(3)\n  lt0 = pred[] compare(p, q), direction=LT\n"
                     "  eq0 = pred[] compare(p, q), direction=EQ\n"
                     "  lt1 = pred[] compare(a, b), direction=GT, type=TOTALORDER\n"
                     "  tie = pred[] and(eq0, lt1)\n  ROOT lt = pred[] or(lt0, tie)")
    rng = np.random.default_rng(2)
    inputs = [_floats(rng, 3, 40), rng.integers(0, 3, (3, 40)).astype(np.int32)]
    for body in (second, lexicographic):
        _check(_module(["f32[3,40]", "s32[3,40]"], "(f32[3,40], s32[3,40])", 1, body), inputs)


@pytest.mark.parametrize("layout", ["{2,1,0}", "{0,2,1}"])
def test_sort_along_dim_0_of_a_3d_array_in_any_layout(layout):
    body = ("  p0 = f32[] parameter(0)\n  p1 = f32[] parameter(1)\n  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
            "  ROOT lt = pred[] compare(p0, p1), direction=LT, type=TOTALORDER")
    text = _module([f"f32[37,3,4]{layout}", f"s32[37,3,4]{layout}"], f"(f32[37,3,4]{layout}, s32[37,3,4]{layout})",
                   0, body)
    rng = np.random.default_rng(3)
    keys = _floats(rng, 12, 37).T.reshape(37, 3, 4)
    _check(text, [keys, np.broadcast_to(np.arange(37, dtype=np.int32)[:, None, None], (37, 3, 4)).copy()])


@pytest.mark.parametrize("rows, merge", [(8, True), (64, False)], ids=["merge", "radix"])
def test_long_rows_sort_on_the_heap_over_the_thread_pool(rows, merge):
    n = STACK_BYTES // 4  # two position arrays of n: past the stack's share, on the heap
    text = _module([f"f32[{rows},{n}]"], f"f32[{rows},{n}]", 1, JAX_LT.format(t="f32"))
    _check(text, [_floats(np.random.default_rng(4), rows, n)], merge=merge)  # 64 rows: 1M elements, the pool


@pytest.mark.parametrize("k, n", [(7, 40), (SELECT_MAX, 200), (SELECT_MAX + 1, 100)],
                         ids=["selection", "selection_or_sort", "radix"])
@pytest.mark.parametrize("largest", [True, False])
def test_topk_largest_and_smallest(largest, k, n):
    text = (f"HloModule m\nENTRY e {{\n  x = f32[4,{n}] parameter(0)\n"
            f"  ROOT t = (f32[4,{k}], s32[4,{k}]) topk(x), k={k}, largest={str(largest).lower()}\n}}")
    x = _floats(np.random.default_rng(5), 4, n)
    # every element enters (past SELECT_MOVES: sorted instead) / none after the first k, or the reverse
    x[2], x[3] = np.sort(x[2]), -np.sort(x[3])
    _check(text, [x])


def test_an_output_sharing_an_operand_buffer_is_staged():
    """With noalias=False (an output in an operand's bytes) every read of a row comes before its
    first write: run in place, the result is the evaluator's."""
    text = _module(["f32[2,40]", "s32[2,40]"], "(f32[2,40], s32[2,40])", 1, JAX_LT.format(t="f32"),
                   "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n")
    instr = _instr(text)
    kernel = compile_fusion(one_op_fusion(instr), cpu_target(), use_cache=False,
                            translate_options=TranslateOptions(noalias=False))
    keys, iota = _floats(np.random.default_rng(6), 2, 40), _iota(2, 40)
    want = Evaluator(0).evaluate_instruction(instr, [keys, iota])
    a, b = keys.copy(), iota.copy()
    kernel.run([a, b, b.view(np.float32), a.view(np.int32)])  # output 0 in b's bytes, output 1 in a's
    np.testing.assert_array_equal(b.view(np.float32).view(np.uint32), want[0].view(np.uint32))
    np.testing.assert_array_equal(a.view(np.int32), want[1])


def test_checked_kernels_give_the_results_and_report_a_row_outside_its_buffer():
    text = _module(["f32[3,40]", "s32[3,40]"], "(f32[3,40], s32[3,40])", 1, JAX_LT.format(t="f32"),
                   "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n")
    rng = np.random.default_rng(8)
    inputs = [_floats(rng, 3, 40), _iota(3, 40)]
    _check(text, inputs, target=CHECKED)
    fusion = one_op_fusion(_instr(text))
    kernel = emit_fusion(fusion, CHECKED, "main", {})
    spec = sort_spec(fusion)
    wrong = replace(spec, operands=(replace(spec.operands[0], stride=2), spec.operands[1]))  # reads past the row
    kernel = replace(kernel, llvm_entry=lambda module, noalias, checked: add_sort_rows(
        module, "main", wrong, noalias=noalias, check_bounds=checked))
    compiled = compile_kernel_module(kernel, CHECKED, [p.shape for p in fusion.parameters],
                                     [s for s in fusion.root.shape.tuple_shapes])
    with pytest.raises(BoundsCheckError, match=r"kernel 'main' accessed parameter 0 \(f32\[3,40\]\) at element "
                                               r"1\d\d, outside \[0, 120\)"):
        compiled(*inputs)


def test_what_the_kernel_does_not_compile_is_named():
    """...and stays a library call, whose reason `--stats` lists."""
    text = _module(["c64[4]"], "c64[4]", 0, "  a = c64[] parameter(0)\n  b = c64[] parameter(1)\n"
                                            "  ra = f32[] real(a)\n  rb = f32[] real(b)\n"
                                            "  ROOT lt = pred[] compare(ra, rb), direction=LT")
    with pytest.raises(UnsupportedError, match="c64 elements"):
        emit_fusion(one_op_fusion(_instr(text)), cpu_target(), "main", {})
    stats = hlocc.compile(text, backend="cpu").runner.stats
    assert stats.library_calls == {"sort": 1} and "s (sort): sort kernel: c64 elements" in stats.to_string()
    with pytest.raises(UnsupportedError, match="no sort kernel for the gpu target"):
        emit_fusion(one_op_fusion(_instr(_module(["f32[4]"], "f32[4]", 0, JAX_LT.format(t="f32")))), gpu_target(),
                    "main", {})


@pytest.mark.parametrize("dim, shape, target", [(1, "[?b,?n]", cpu_target()), (0, "[?n,3]", CHECKED)],
                         ids=["rows_and_length", "length_checked"])
def test_runtime_dims_sort_every_binding_with_one_kernel(dim, shape, target):
    """A symbolic sort compiles once (its sizes read from the table of the variables' values): at
    lengths on either side of RADIX_MIN it is the evaluator's sort at those sizes."""
    text = _module([f"f32{shape}", f"s32{shape}"], f"(f32{shape}, s32{shape})", dim, JAX_LT.format(t="f32"),
                   "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n")
    kernel = compile_fusion(one_op_fusion(_instr(text)), target, use_cache=False)
    assert kernel.symbols == (("b", "n") if dim else ("n",))
    rng = np.random.default_rng(9)
    for rows, n in [(3, 5), (2, RADIX_MIN + 7), (4, 1), (1, 100)]:
        static = (rows, n) if dim else (n, 3)
        keys, payload = _floats(rng, *static), rng.integers(0, 100, static).astype(np.int32)
        instr = _instr(text.replace(shape, f"[{static[0]},{static[1]}]"))
        want = Evaluator(0).evaluate_instruction(instr, [keys, payload])
        for g, w in zip(kernel(keys, payload), want):
            np.testing.assert_array_equal(np.ascontiguousarray(g).view(np.uint8), w.view(np.uint8))


LOOP = """HloModule m
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT, type=TOTALORDER
}
cond {
  s = (s32[], f32[4,40]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,40]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,40] get-tuple-element(s), index=1
  j = s32[] add(i, s32[] constant(1))
  y = f32[4,40] sort(x), dimensions={1}, to_apply=cmp
  h = f32[4,40] broadcast(f32[] constant(0.5)), dimensions={}
  z = f32[4,40] subtract(y, h)
  ROOT t = (s32[], f32[4,40]) tuple(j, z)
}
ENTRY e {
  x = f32[4,40] parameter(0)
  t = (s32[], f32[4,40]) tuple(s32[] constant(0), x)
  w = (s32[], f32[4,40]) while(t), condition=cond, body=body
  ROOT r = f32[4,40] get-tuple-element(w), index=1
}"""


def test_a_loop_around_a_sort_runs_as_native_code():
    """The sort kernel runs in the calling thread, so a while loop of it and other kernels is one
    native function (runtime/native_loop.py)."""
    x = _floats(np.random.default_rng(10), 4, 40)
    exe = hlocc.compile(LOOP, backend="cpu")
    np.testing.assert_array_equal(exe(x), hlocc.compile(LOOP, backend="interpreter")(x))
    assert exe.runner.stats.kernels_by_emitter["sort"] == 1
    assert [t.native is not None for t in exe.runner.program.walk() if isinstance(t, WhileThunk)] == [True]


@pytest.mark.parametrize("n", [RUN + 4, 100], ids=["merge", "radix"])
def test_float_compare_orders_rows_without_nan_and_permutes_rows_with_one(n):
    """A FLOAT compare (-0.0 == +0.0) is radix sorted like TOTALORDER once -0.0 is +0.0; with a NaN
    it is no order (the merge sort's answer is one of many): the row is still a permutation."""
    body = ("  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n"
            "  ROOT lt = pred[] compare(a, b), direction=LT")
    text = _module([f"f32[4,{n}]", f"s32[4,{n}]"], f"(f32[4,{n}], s32[4,{n}])", 1, body)
    x = np.random.default_rng(11).integers(-3, 3, (4, n)).astype(np.float32)
    x[0, :4] = [-0.0, 0.0, -0.0, np.inf]
    x[1, :2] = [-np.inf, -0.0]
    x[2, 5], x[3, :2] = np.nan, [np.nan, -np.nan]
    instr = _instr(text)
    values, order = compile_fusion(one_op_fusion(instr), cpu_target(), use_cache=False)(x, _iota(4, n))
    want = Evaluator(0).evaluate_instruction(instr, [x, _iota(4, n)])
    np.testing.assert_array_equal(order[:2], want[1][:2])
    np.testing.assert_array_equal(np.sort(order, axis=1), _iota(4, n))
    np.testing.assert_array_equal(values.view(np.uint32), np.take_along_axis(x, order, 1).view(np.uint32))


# JAX's lax.sort(..., num_keys=3) comparator (here with the middle key descending): or(lt_0,
# and(eq_0, or(lt_1, and(eq_1, lt_2)))), float keys canonicalised and compared in total order.
THREE_KEYS = """  a = f32[] parameter(0)
  b = f32[] parameter(1)
  p = s32[] parameter(2)
  q = s32[] parameter(3)
  u = bf16[] parameter(4)
  v = bf16[] parameter(5)
  i = s32[] parameter(6)
  j = s32[] parameter(7)
  nan = f32[] constant(nan)
  zero = f32[] constant(0)
  na = pred[] compare(a, a), direction=NE
  za = pred[] compare(a, zero), direction=EQ
  ca = f32[] select(na, nan, f32[] select(za, zero, a))
  nb = pred[] compare(b, b), direction=NE
  zb = pred[] compare(b, zero), direction=EQ
  cb = f32[] select(nb, nan, f32[] select(zb, zero, b))
  lt0 = pred[] compare(ca, cb), direction=LT, type=TOTALORDER
  eq0 = pred[] compare(ca, cb), direction=EQ, type=TOTALORDER
  gt1 = pred[] compare(p, q), direction=GT
  eq1 = pred[] compare(p, q), direction=EQ
  lt2 = pred[] compare(u, v), direction=LT, type=TOTALORDER
  tie1 = pred[] and(eq1, lt2)
  k1 = pred[] or(gt1, tie1)
  tie0 = pred[] and(eq0, k1)
  ROOT lt = pred[] or(lt0, tie0)"""


@pytest.mark.parametrize("merge", [True, False], ids=["merge", "radix"])
def test_lexicographic_keys_with_a_descending_one(merge):
    n = 60
    text = _module([f"f32[3,{n}]", f"s32[3,{n}]", f"bf16[3,{n}]", f"s32[3,{n}]"],
                   f"(f32[3,{n}], s32[3,{n}], bf16[3,{n}], s32[3,{n}])", 1, THREE_KEYS)
    rng = np.random.default_rng(12)
    _check(text, [_floats(rng, 3, n), rng.integers(-2, 2, (3, n)).astype(np.int32), _floats(rng, 3, n, ml_dtypes.bfloat16),
                  _iota(3, n)], merge=merge)
