"""The thunk runtime's fallbacks and execution: sort and top-k as sort kernels, host thunks (rng), the thunk
dump (FileCheck), split multi-output fusions, and an executable run again and from two threads."""

from __future__ import annotations

import shutil
import subprocess
import threading

import numpy as np
import pytest
from _thunk_helpers import (  # noqa: F401  (poisoned_memory: an autouse fixture)
    BOTH_PIPELINES,
    POISON,
    assert_close,
    assert_exact,
    check_exact,
    host_opcodes,
    leaves,
    poisoned_memory,
    random_array,
    run_both,
    thunk_kinds,
)

import hlocc

# -- host fallbacks --------------------------------------------------------------------------------

SORT_AND_TOPK = """HloModule sort_topk
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[3,10] parameter(0)
  n = f32[3,10] negate(x)
  iota = s32[3,10] iota(), iota_dimension=1
  sorted = (f32[3,10], s32[3,10]) sort(n, iota), dimensions={1}, is_stable=true, to_apply=less
  values = f32[3,10] get-tuple-element(sorted), index=0
  order = s32[3,10] get-tuple-element(sorted), index=1
  top = (f32[3,4], s32[3,4]) topk(x), k=4, largest=true
  tv = f32[3,4] get-tuple-element(top), index=0
  ti = s32[3,4] get-tuple-element(top), index=1
  e = f32[3,4] exponential(tv)
  ROOT t = (f32[3,10], s32[3,10], f32[3,4], s32[3,4]) tuple(values, order, e, ti)
}"""


@BOTH_PIPELINES
def test_sort_and_topk_are_sort_kernels(hlo_passes):
    x = np.random.default_rng(31).integers(-5, 5, (3, 10)).astype(np.float32)  # ties: stability matters
    exe, got, ref = run_both(SORT_AND_TOPK, x, hlo_passes=hlo_passes)
    assert_exact(got[:2], ref[:2])
    assert_exact(got[3], ref[3])
    assert_close(got[2], ref[2], rtol=1e-6)
    np.testing.assert_array_equal(got[0], np.sort(-x, axis=1, kind="stable"))
    np.testing.assert_array_equal(got[1], np.argsort(-x, axis=1, kind="stable"))
    assert host_opcodes(exe) == [], exe.runner.stats.to_string()
    stats = exe.runner.stats
    assert not stats.library_calls and stats.kernels_by_emitter["sort"] == 2, stats.to_string()


RNG_MODULE = """HloModule rng
ENTRY e {
  lo = f32[] parameter(0)
  hi = f32[] constant(3)
  r = f32[64] rng(lo, hi), distribution=rng_uniform
  ROOT s = f32[64] add(r, r)
}"""


def test_rng_runs_on_the_host_with_the_executables_seed():
    exe, got, ref = run_both(RNG_MODULE, np.float32(2))
    assert_exact(got, ref)
    assert host_opcodes(exe) == ["rng"]
    assert (got >= 4).all() and (got < 6).all() and len(np.unique(got)) > 32
    assert_exact(exe(np.float32(2)), got)  # each run starts from the seed


def test_two_rngs_and_an_rng_bit_generator_match_the_interpreter():
    text = """HloModule rngs
ENTRY e {
  lo = f32[] parameter(0)
  state = u64[2] parameter(1)
  hi = f32[] constant(3)
  r = f32[8] rng(lo, hi), distribution=rng_uniform
  s = f32[4] rng(lo, hi), distribution=rng_normal
  n = f32[4] negate(s)
  b = (u64[2], u32[8]) rng-bit-generator(state), algorithm=rng_philox
  ROOT t = (f32[4], f32[8], (u64[2], u32[8])) tuple(n, r, b)
}"""
    exe, got = check_exact(text, np.float32(2), np.array([1, 2], np.uint64))
    assert host_opcodes(exe) == ["rng", "rng", "rng-bit-generator"]
    assert_exact(exe(np.float32(2), np.array([1, 2], np.uint64)), got)


SCATTER = """HloModule scatter
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused_scatter {
  p = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  u = f32[4,3] parameter(2)
  n = f32[4,3] negate(u)
  ROOT s = f32[5,3] scatter(p, i, n), update_window_dims={1}, inserted_window_dims={0},
    scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}
ENTRY e {
  p = f32[5,3] parameter(0)
  i = s32[4] parameter(1)
  u = f32[4,3] parameter(2)
  ROOT f = f32[5,3] fusion(p, i, u), kind=kInput, calls=fused_scatter
}"""


@BOTH_PIPELINES
def test_scatter_fusion_runs_as_a_kernel(hlo_passes):
    p = np.arange(15, dtype=np.float32).reshape(5, 3)
    i = np.array([1, 4, 1, 7], np.int32)  # a repeated and an out-of-bounds index
    u = np.arange(12, dtype=np.float32).reshape(4, 3)
    exe, got = check_exact(SCATTER, p, i, u, hlo_passes=hlo_passes)
    expected = p.copy()
    expected[1] -= u[0] + u[2]
    expected[4] -= u[1]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(p, np.arange(15, dtype=np.float32).reshape(5, 3))
    assert host_opcodes(exe) == [], exe.runner.stats.to_string()


SORT_LOOP = """HloModule sort_loop
less {
  a = KEY[] parameter(0)
  b = KEY[] parameter(1)
  ROOT gt = pred[] compare(GT_LHS, GT_RHS), direction=GT
}
cond {
  s = (s32[], s32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[6]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = s32[6] get-tuple-element(s), index=1
  SORTED
  ib = s32[6] broadcast(i), dimensions={}
  iota = s32[6] iota(), iota_dimension=0
  m = s32[6] multiply(iota, ib)
  y = s32[6] add(sorted, m)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], s32[6]) tuple(i2, y)
}
ENTRY e {
  x = s32[6] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[6]) tuple(zero, x)
  w = (s32[], s32[6]) while(t), condition=cond, body=body
  ROOT r = s32[6] get-tuple-element(w), index=1
}"""


def test_sort_kernel_inside_a_loop():
    text = (SORT_LOOP.replace("KEY", "s32").replace("GT_LHS", "a").replace("GT_RHS", "b")
            .replace("SORTED", "sorted = s32[6] sort(x), dimensions={0}, to_apply=less"))
    exe, _ = check_exact(text, np.array([3, -1, 4, 1, -5, 9], np.int32))
    assert host_opcodes(exe) == [] and exe.runner.stats.kernels_by_emitter["sort"] == 1


def test_library_call_inside_a_loop():
    """A sort of complex numbers (no sort kernel for them) is a library call, here inside a loop."""
    text = (SORT_LOOP.replace("KEY", "c64").replace("GT_LHS", "f32[] real(a)").replace("GT_RHS", "f32[] real(b)")
            .replace("SORTED", "c = c64[6] convert(x)\n  sc = c64[6] sort(c), dimensions={0}, to_apply=less\n"
                               "  sorted = s32[6] convert(f32[6] real(sc))"))
    exe, _ = check_exact(text, np.array([3, -1, 4, 1, -5, 9], np.int32))
    assert host_opcodes(exe) == [] and exe.runner.stats.library_calls["sort"] == 1


def test_fusion_with_a_tuple_operand_runs_on_the_host():
    text = """HloModule tuple_operand
fused {
  p = (s32[4], s32[4]) parameter(0)
  a = s32[4] get-tuple-element(p), index=0
  b = s32[4] get-tuple-element(p), index=1
  ROOT s = s32[4] subtract(a, b)
}
ENTRY e {
  x = s32[4] parameter(0)
  y = s32[4] parameter(1)
  t = (s32[4], s32[4]) tuple(x, y)
  ROOT f = s32[4] fusion(t), kind=kLoop, calls=fused
}"""
    x = np.array([1, 2, 3, 4], np.int32)
    exe, got = check_exact(text, x, 5 * x, hlo_passes=False)
    np.testing.assert_array_equal(got, -4 * x)
    assert host_opcodes(exe) == ["fusion"] and "tuple-shaped operand" in exe.runner.stats.host_ops[0][2]


# -- the thunk dump --------------------------------------------------------------------------------

DUMP_MODULE = """HloModule dump
cond {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8,4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[8,4] sine(x)
  ROOT t = (s32[], f32[8,4]) tuple(i2, x2)
}
ENTRY e {
  x = f32[8,4] parameter(0)
  m = f32[8,8] parameter(1)
  zero = s32[] constant(0)
  t = (s32[], f32[8,4]) tuple(zero, x)
  w = (s32[], f32[8,4]) while(t), condition=cond, body=body
  y = f32[8,4] get-tuple-element(w), index=1
  ROOT d = f32[8,4] dot(m, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""

# The loop state is copied into the arena once; both body kernels update it in place, so an
# iteration ends with no copy; the gemm reads the final state where the loop left it.
DUMP_CHECKS = r"""
CHECK:      copy (before w): {allocation {{[0-9]+}}, offset 0, size 4} -> {allocation [[ARENA:[0-9]+]], offset [[I:[0-9]+]], size 4}
CHECK-NEXT: copy (before w): {allocation 0, offset 0, size 128} -> {allocation [[ARENA]], offset [[X:[0-9]+]], size 128}
CHECK-NEXT: while w: condition
CHECK-NEXT:   kernel {{.*}} (loop emitter): s32[]@{allocation [[ARENA]], offset [[I]], size 4}, pred[]@{allocation [[ARENA]], offset [[P:[0-9]+]], size 1}
CHECK-NEXT:   predicate pred[]@{allocation [[ARENA]], offset [[P]], size 1}
CHECK-NEXT: body
CHECK-DAG:    kernel {{.*}} (loop emitter): f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128}, f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128}
CHECK-DAG:    kernel {{.*}} (loop emitter): s32[]@{allocation [[ARENA]], offset [[I]], size 4}, s32[]@{allocation [[ARENA]], offset [[I]], size 4}
CHECK-NOT:  copy
CHECK:      gemm d: f32[8,8]@{allocation 1, offset 0, size 256}, f32[8,4]@{allocation [[ARENA]], offset [[X]], size 128} -> f32[8,4]@{allocation {{[0-9]+}}, offset 0, size 128}
CHECK-NOT:  {{.}}
"""


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
def test_thunk_dump_filecheck(tmp_path):
    exe = hlocc.compile(DUMP_MODULE, backend="cpu", gemm="library")  # the dump shows a library call
    dump = exe.runner.to_string()
    checks = tmp_path / "thunks.checks"
    checks.write_text(DUMP_CHECKS)
    proc = subprocess.run(["filecheck", str(checks)], input=dump, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + "\n" + dump
    x = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    m = np.random.default_rng(45).standard_normal((8, 8)).astype(np.float32)
    _, got, ref = run_both(DUMP_MODULE, x, m)
    assert_close(got, ref, rtol=1e-6, atol=1e-6)


# -- multi-output fusions --------------------------------------------------------------------------

MULTI_OUTPUT = """HloModule multi
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
fused {
  p = f32[16,10] parameter(0)
  q = f32[16] parameter(1)
  e = f32[16,10] add(p, p)
  zero = f32[] constant(0)
  r = f32[16] reduce(e, zero), dimensions={1}, to_apply=add
  s = f32[16] subtract(r, q)
  ROOT t = (f32[16,10], f32[16], f32[16]) tuple(e, s, q)
}
ENTRY e {
  p = f32[16,10] parameter(0)
  q = f32[16] parameter(1)
  ROOT f = (f32[16,10], f32[16], f32[16]) fusion(p, q), kind=kLoop, calls=fused
}"""


def test_multi_output_fusion_with_different_output_sizes_is_split():
    rng = np.random.default_rng(41)
    p = rng.integers(-8, 8, (16, 10)).astype(np.float32)  # sums of small integers: exact in any order
    q = rng.integers(-8, 8, 16).astype(np.float32)
    exe, (e, s, qq) = check_exact(MULTI_OUTPUT, p, q, hlo_passes=False)
    np.testing.assert_array_equal(e, 2 * p)
    np.testing.assert_array_equal(s, 2 * p.sum(axis=1) - q)
    np.testing.assert_array_equal(qq, q)
    assert exe.runner.stats.kernels == 2 and not exe.runner.stats.host_ops, exe.runner.stats.to_string()
    assert [t.instr_name for t in exe.runner.program.walk() if t.kind == "kernel"] == ["f.part0", "f.part1"]


def test_multi_output_fusion_with_equal_output_sizes_is_one_kernel():
    text = """HloModule multi_same
fused {
  p = f32[4,6] parameter(0)
  n = f32[4,6] negate(p)
  t = f32[6,4] transpose(p), dimensions={1,0}
  c = s32[24] convert(reshape(p))
  ROOT r = (f32[4,6], f32[6,4]) tuple(n, t)
}
ENTRY e {
  p = f32[4,6] parameter(0)
  ROOT f = (f32[4,6], f32[6,4]) fusion(p), kind=kLoop, calls=fused
}"""
    text = text.replace("  c = s32[24] convert(reshape(p))\n", "")
    p = np.arange(24, dtype=np.float32).reshape(4, 6)
    exe, (n, t) = check_exact(text, p, hlo_passes=False)
    np.testing.assert_array_equal(t, p.T)
    assert exe.runner.stats.kernels == 1


ARGMAX = """HloModule argmax
argmax {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  take = pred[] or(gt, tie)
  m = f32[] select(take, a, b)
  k = s32[] select(take, i, j)
  ROOT r = (f32[], s32[]) tuple(m, k)
}
ENTRY e {
  x = f32[4,6] parameter(0)
  io = s32[4,6] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  r = (f32[4], s32[4]) reduce(x, io, ninf, zero), dimensions={1}, to_apply=argmax
  v = f32[4] get-tuple-element(r), index=0
  k = s32[4] get-tuple-element(r), index=1
  d = f32[] dot(v, v), lhs_contracting_dims={0}, rhs_contracting_dims={0}
  ROOT t = (f32[4], s32[4], f32[]) tuple(v, k, d)
}"""


@BOTH_PIPELINES
def test_variadic_reduce_is_one_kernel_with_two_outputs(hlo_passes):
    x = np.random.default_rng(43).integers(-3, 3, (4, 6)).astype(np.float32)  # ties: the lower index wins
    exe, got = check_exact(ARGMAX, x, hlo_passes=hlo_passes)
    np.testing.assert_array_equal(got[1], np.argmax(x, axis=1))
    assert not exe.runner.stats.host_ops


# -- running an executable again and concurrently --------------------------------------------------

CONCURRENT = """HloModule concurrent
cond {
  s = (s32[], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(4)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4,4] get-tuple-element(s), index=1
  d = f32[4,4] dot(x, x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h = f32[] constant(0.25)
  hb = f32[4,4] broadcast(h), dimensions={}
  y = f32[4,4] multiply(d, hb)
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  ROOT t = (s32[], f32[4,4]) tuple(i2, y)
}
ENTRY e {
  x = f32[4,4] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], f32[4,4]) tuple(zero, x)
  w = (s32[], f32[4,4]) while(t), condition=cond, body=body
  r = f32[4,4] get-tuple-element(w), index=1
  ROOT n = f32[4,4] negate(r)
}"""


def concurrent_inputs(k: int) -> np.ndarray:
    return np.random.default_rng(50 + k).integers(-2, 3, (4, 4)).astype(np.float32)


def test_an_executable_runs_twice_with_fresh_memory():
    exe = hlocc.compile(CONCURRENT, backend="cpu")
    reference = hlocc.compile(CONCURRENT, backend="interpreter")
    first = exe(concurrent_inputs(0))
    second = exe(concurrent_inputs(1))
    again = exe(concurrent_inputs(0))
    assert_close(first, reference(concurrent_inputs(0)), rtol=1e-6)
    assert_close(second, reference(concurrent_inputs(1)), rtol=1e-6)
    assert_exact(again, first)
    assert not np.shares_memory(first, again)


def test_an_executable_runs_from_two_threads_at_once():
    exe = hlocc.compile(CONCURRENT, backend="cpu")
    reference = hlocc.compile(CONCURRENT, backend="interpreter")
    expected = [reference(concurrent_inputs(k)) for k in range(2)]
    start = threading.Barrier(2)
    results: dict[int, list] = {0: [], 1: []}
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            start.wait()
            for _ in range(30):
                results[k].append(exe(concurrent_inputs(k)))
        except BaseException as e:  # noqa: BLE001  (reported by the main thread)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in range(2):
        assert len(results[k]) == 30
        for got in results[k]:
            assert_close(got, expected[k], rtol=1e-6)
            assert_exact(got, results[k][0])


LARGE = """HloModule large
ENTRY e {
  x = f32[256,256] parameter(0)
  y = f32[256,256] parameter(1)
  s = f32[256,256] add(x, y)
  t = f32[256,256] transpose(s), dimensions={1,0}
  m = f32[256,256] multiply(t, y)
  d = f32[256,256] dot(s, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = (f32[256,256], f32[256,256]) tuple(m, d)
}"""


def test_large_launches_from_two_threads_at_once():
    """Kernels of 65536 elements run their blocks on the shared thread pool; two runs at once
    share that pool and must still not share memory."""
    exe = hlocc.compile(LARGE, backend="cpu")
    assert exe.runner.stats.kernels >= 1 and exe.runner.stats.library_calls["gemm"] == 1
    inputs = [tuple(np.random.default_rng(60 + 2 * k + j).integers(-3, 4, (256, 256)).astype(np.float32)
                    for j in range(2)) for k in range(2)]
    reference = hlocc.compile(LARGE, backend="interpreter")
    expected = [reference(*args) for args in inputs]
    results: dict[int, list] = {0: [], 1: []}
    start = threading.Barrier(2)

    def work(k: int) -> None:
        start.wait()
        for _ in range(5):
            results[k].append(exe(*inputs[k]))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        assert len(results[k]) == 5
        for got in results[k]:
            assert_exact(got[0], expected[k][0])
            assert_close(got[1], expected[k][1], rtol=1e-6, atol=1e-3)  # integer sums: exact up to rounding order
