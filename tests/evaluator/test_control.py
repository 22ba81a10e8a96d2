"""Tests of the evaluator's control-flow, async and one-device collective ops (evaluator/control.py)."""

from __future__ import annotations

import numpy as np
import pytest

from hlocc.errors import UnsupportedError
from hlocc.evaluator import TOKEN, EvaluationError, Evaluator
from hlocc.hlo.parser import parse_hlo


def run(body: str, *args, computations: str = "", evaluator: Evaluator | None = None):
    """Evaluate an entry computation given by its body lines on `args`."""
    text = f"HloModule test\n{computations}\nENTRY main {{\n{body}\n}}\n"
    return (evaluator or Evaluator()).run(parse_hlo(text), [np.asarray(a) for a in args])


def assert_same(actual, expected):
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    np.testing.assert_array_equal(actual, expected)


# -- call, fusion, while, conditional ----------------------------------------------------------

def test_call_and_fusion_apply_their_computation():
    comps = """
swap {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  ROOT t = (s32[], f32[2]) tuple(b, a)
}
fused {
  x = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(x), dimensions={1,0}
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = run("""
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  ROOT c = (s32[], f32[2]) call(a, b), to_apply=swap""", np.ones(2, np.float32), np.int32(3), computations=comps)
    assert_same(out[0], np.int32(3))
    assert_same(out[1], np.ones(2, np.float32))
    out = run("""
  x = f32[2,3] parameter(0)
  ROOT f = f32[3,2] fusion(x), kind=kLoop, calls=fused""", x, computations=comps)
    assert_same(out, x.T)


WHILE_COMPS = """
cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  v1 = f32[3] add(v, v)
  ROOT t = (s32[], f32[3]) tuple(i1, v1)
}"""


def test_while_with_tuple_state():
    out = run("""
  i = s32[] parameter(0)
  v = f32[3] parameter(1)
  t = (s32[], f32[3]) tuple(i, v)
  ROOT w = (s32[], f32[3]) while(t), condition=cond, body=body""",
              np.int32(1), np.array([1, 2, 3], np.float32), computations=WHILE_COMPS)
    assert_same(out[0], np.int32(5))
    assert_same(out[1], np.array([16, 32, 48], np.float32))  # 4 doublings


def test_while_that_never_runs_returns_its_operand():
    out = run("""
  i = s32[] parameter(0)
  v = f32[3] parameter(1)
  t = (s32[], f32[3]) tuple(i, v)
  ROOT w = (s32[], f32[3]) while(t), condition=cond, body=body""",
              np.int32(9), np.zeros(3, np.float32), computations=WHILE_COMPS)
    assert_same(out[0], np.int32(9))


def test_while_past_the_iteration_limit_fails():
    comps = """
forever {
  s = f32[] parameter(0)
  ROOT t = pred[] constant(true)
}
same {
  ROOT s = f32[] parameter(0)
}"""
    with pytest.raises(EvaluationError, match="within 10 iterations"):
        run("""
  p = f32[] parameter(0)
  ROOT w = f32[] while(p), condition=forever, body=same""", np.float32(0), computations=comps,
            evaluator=Evaluator(max_while_iterations=10))


def test_conditional_with_pred_selector():
    comps = """
flip {
  x = f32[3] parameter(0)
  ROOT r = f32[3] reverse(x), dimensions={0}
}
keep {
  ROOT x = f32[3] parameter(0)
}"""
    x = np.array([1, 2, 3], np.float32)
    body = """
  c = pred[] parameter(0)
  x = f32[3] parameter(1)
  y = f32[3] parameter(2)
  ROOT r = f32[3] conditional(c, x, y), true_computation=flip, false_computation=keep"""
    assert_same(run(body, np.bool_(True), x, -x, computations=comps), x[::-1])
    assert_same(run(body, np.bool_(False), x, -x, computations=comps), -x)


@pytest.mark.parametrize("index, branch", [(0, 0), (1, 1), (2, 2), (3, 2), (-1, 2), (1000, 2)])
def test_conditional_index_out_of_range_selects_last_branch(index, branch):
    comps = "\n".join(f"""
b{k} {{
  x = s32[] parameter(0)
  ROOT c = s32[] constant({10 * k})
}}""" for k in range(3))
    out = run("""
  i = s32[] parameter(0)
  a = s32[] constant(0)
  ROOT r = s32[] conditional(i, a, a, a), branch_computations={b0, b1, b2}""", np.int32(index), computations=comps)
    assert_same(out, np.int32(10 * branch))


def test_conditional_passes_the_chosen_branch_operand():
    comps = """
first {
  ROOT x = s32[2] parameter(0)
}
second {
  x = s32[3] parameter(0)
  ROOT s = s32[2] slice(x), slice={[1:3]}
}"""
    out = run("""
  i = s32[] parameter(0)
  a = s32[2] parameter(1)
  b = s32[3] parameter(2)
  ROOT r = s32[2] conditional(i, a, b), branch_computations={first, second}""",
              np.int32(1), np.array([7, 8], np.int32), np.array([1, 2, 3], np.int32), computations=comps)
    assert_same(out, np.array([2, 3], np.int32))


# -- ordering ops, ids, async ------------------------------------------------------------------

def test_ordering_ops_and_ids():
    x = np.array([1.5, 2.5], np.float32)
    out = run("""
  x = f32[2] parameter(0)
  tok = token[] after-all()
  dep = f32[2] add-dependency(x, tok)
  bar = (f32[2], token[]) opt-barrier((f32[2], token[]) tuple(dep, tok))
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = ((f32[2], token[]), u32[], u32[]) tuple(bar, r, p)""", x)
    (value, token), replica, partition = out
    assert_same(value, x)
    assert token is TOKEN
    assert_same(replica, np.uint32(0))
    assert_same(partition, np.uint32(0))


def test_copy_start_done():
    x = np.arange(4, dtype=np.float32)
    out = run("""
  x = f32[4] parameter(0)
  cs = (f32[4], f32[4], u32[]) copy-start(x)
  ROOT cd = f32[4] copy-done(cs)""", x)
    assert_same(out, x)


def test_async_start_update_done():
    comps = """
wrapped {
  x = f32[2,3] parameter(0)
  ROOT t = f32[3,2] transpose(x), dimensions={1,0}
}"""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    start = run("""
  x = f32[2,3] parameter(0)
  ROOT s = ((f32[2,3]), f32[3,2], s32[]) async-start(x), calls=wrapped""", x, computations=comps)
    assert_same(start[0][0], x)
    assert_same(start[1], x.T)
    assert_same(start[2], np.int32(0))
    out = run("""
  x = f32[2,3] parameter(0)
  s = ((f32[2,3]), f32[3,2], s32[]) async-start(x), calls=wrapped
  u = ((f32[2,3]), f32[3,2], s32[]) async-update(s)
  ROOT d = f32[3,2] async-done(u)""", x, computations=comps)
    assert_same(out, x.T)


def test_custom_call_and_host_transfer_are_unsupported():
    with pytest.raises(UnsupportedError, match="unsupported custom-call target 'my_kernel' \\(instruction 'cc'\\)"):
        run('''
  x = f32[2] parameter(0)
  ROOT cc = f32[2] custom-call(x), custom_call_target="my_kernel"''', np.zeros(2, np.float32))
    with pytest.raises(UnsupportedError, match="'infeed'.*instruction 'in'"):
        run("""
  tok = token[] after-all()
  ROOT in = (f32[2], token[]) infeed(tok)""")


@pytest.mark.parametrize("target", ["annotate_device_placement", "MoveToHost", "Sharding", "SPMDFullToShardShape",
                                    "xla.sdy.FuncResultSharding"])  # jax.jit(..., out_shardings=...)'s HLO
def test_annotation_custom_calls_return_their_operand(target):
    x = np.array([1.5, -2.0], np.float32)
    out = run(f'''
  x = f32[2] parameter(0)
  ROOT cc = f32[2] custom-call(x), custom_call_target="{target}"''', x)
    assert_same(out, x)
    with pytest.raises(UnsupportedError, match=f"unsupported custom-call target '{target}'"):
        run(f'''
  x = f32[2] parameter(0)
  ROOT cc = f32[1,2] custom-call(x), custom_call_target="{target}"''', x)


# -- collectives on one device -----------------------------------------------------------------

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}"""


def test_all_reduce_over_one_device_is_identity():
    x = np.array([1, 2, 3], np.float32)
    assert_same(run("""
  x = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=add""", x, computations=ADD), x)
    out = run("""
  x = f32[3] parameter(0)
  y = f32[2] parameter(1)
  ROOT r = (f32[3], f32[2]) all-reduce(x, y), replica_groups={{0}}, to_apply=add""",
              x, np.ones(2, np.float32), computations=ADD)
    assert_same(out[0], x)
    assert_same(out[1], np.ones(2, np.float32))
    out = run("""
  x = f32[3] parameter(0)
  s = f32[3] all-reduce-start(x), replica_groups={}, to_apply=add
  ROOT d = f32[3] all-reduce-done(s)""", x, computations=ADD)
    assert_same(out, x)


def test_gather_like_collectives_on_one_device():
    x = np.arange(4, dtype=np.int32)
    for op in ("all-gather(x), dimensions={0}", "all-to-all(x), dimensions={0}",
               "collective-broadcast(x), replica_groups={{0}}"):
        assert_same(run(f"""
  x = s32[4] parameter(0)
  ROOT r = s32[4] {op}""", x), x)
    out = run("""
  x = s32[4] parameter(0)
  s = (s32[4], s32[4]) all-gather-start(x), dimensions={0}
  ROOT d = s32[4] all-gather-done(s)""", x)
    assert_same(out, x)


def test_multi_device_collective_is_unsupported():
    with pytest.raises(UnsupportedError, match="several devices"):
        run("""
  x = s32[4] parameter(0)
  ROOT r = s32[8] all-gather(x), replica_groups={{0,1}}, dimensions={0}""", np.zeros(4, np.int32))


def test_collective_permute_keeps_data_only_for_a_self_pair():
    x = np.array([1, 2], np.float32)
    assert_same(run("""
  x = f32[2] parameter(0)
  ROOT r = f32[2] collective-permute(x), source_target_pairs={{0,0}}""", x), x)
    assert_same(run("""
  x = f32[2] parameter(0)
  ROOT r = f32[2] collective-permute(x), source_target_pairs={{0,1},{1,0}}""", x), np.zeros(2, np.float32))
    out = run("""
  x = f32[2] parameter(0)
  s = (f32[2], f32[2], u32[], u32[]) collective-permute-start(x), source_target_pairs={{1,1},{0,0}}
  ROOT d = f32[2] collective-permute-done(s)""", x)
    assert_same(out, x)


def test_ragged_all_to_all_is_unsupported():
    with pytest.raises(UnsupportedError, match="ragged-all-to-all"):
        run("""
  x = f32[4] parameter(0)
  o = f32[4] parameter(1)
  a = s32[1] parameter(2)
  ROOT r = f32[4] ragged-all-to-all(x, o, a, a, a, a), replica_groups={{0}}""",
            np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(1, np.int32))
