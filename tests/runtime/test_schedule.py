"""Sequential schedules: every algorithm gives a topological order of every sequential computation,
the list scheduler lowers the live-byte peak where post-order holds a dead-end value, and the
default takes the better of the two."""


import pytest

import hlocc
from hlocc.errors import HloError
from hlocc.runtime.dataflow import HloDataflow
from hlocc.runtime.schedule import HloSchedule, estimate_peak_bytes, schedule_module

# x is read by `a` and, much later in post-order, by `n`: post-order keeps x alive while it builds
# the big temporaries b and b2; the list scheduler runs n (which frees x) first.
HOLDS_X = """HloModule holds_x
max {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT m = f32[] maximum(l, r)
}
ENTRY e {
  p = f32[1024] parameter(0)
  z = f32[] constant(0)
  x = f32[1024] exponential(p)
  a = f32[] reduce(x, z), dimensions={0}, to_apply=max
  b = f32[1024] log(p)
  b2 = f32[1024] sine(b)
  c = f32[] reduce(b2, z), dimensions={0}, to_apply=max
  n = f32[1024] negate(x)
  d = f32[] reduce(n, z), dimensions={0}, to_apply=max
  ROOT t = (f32[], f32[], f32[]) tuple(a, c, d)
}
"""

WHILE = """HloModule w
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[8] get-tuple-element(s), index=1
  ROOT t = (s32[], f32[8]) tuple(s32[] add(i, s32[] constant(1)), f32[8] negate(x))
}
fused {
  q = f32[8] parameter(0)
  ROOT r = f32[8] abs(q)
}
ENTRY e {
  p = f32[8] parameter(0)
  f = f32[8] fusion(p), kind=kLoop, calls=fused
  w = (s32[], f32[8]) while((s32[], f32[8]) tuple(s32[] constant(0), f)), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}
"""


def assert_topological(comp, sequence):
    position = {id(instr): i for i, instr in enumerate(sequence)}
    assert sorted(position.values()) == list(range(len(comp.instructions)))
    for instr in comp.instructions:
        for op in instr.operands:
            assert position[id(op)] < position[id(instr)], f"{instr.name} before its operand {op.name}"


@pytest.mark.parametrize("algorithm", ["default", "list", "post-order", "module-order"])
def test_every_algorithm_is_topological_for_every_sequential_computation(algorithm):
    module = hlocc.parse_hlo(WHILE)
    schedule = schedule_module(module, algorithm)
    schedule.verify()
    names = {c.name for c in schedule.computations}
    assert names == {"e", "cond", "body"}, "fused computations are not scheduled"
    for comp in schedule.computations:
        assert_topological(comp, schedule.sequence(comp))


def test_list_scheduler_frees_the_shared_value_early():
    module = hlocc.parse_hlo(HOLDS_X)
    dataflow = HloDataflow(module)
    entry = module.entry
    post = schedule_module(module, "post-order", dataflow=dataflow).sequence(entry)
    listed = schedule_module(module, "list", dataflow=dataflow).sequence(entry)
    assert_topological(entry, listed)
    # post-order: x, b and b2 live at once (3 x 4 KiB); list: x and n, then b and b2 (2 x 4 KiB).
    assert estimate_peak_bytes(entry, post, dataflow) == 3 * 4096
    assert estimate_peak_bytes(entry, listed, dataflow) == 2 * 4096
    names = [i.name for i in listed]
    assert names.index("d") < names.index("b")
    default = schedule_module(module, dataflow=dataflow)
    assert default.algorithms[entry] == "list"
    assert default.sequence(entry) == listed


def test_control_predecessors_are_honoured():
    module = hlocc.parse_hlo("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] exponential(p), control-predecessors={a}
  ROOT t = (f32[4], f32[4]) tuple(b, a)
}""")
    for algorithm in ("post-order", "list", "default"):
        names = [i.name for i in schedule_module(module, algorithm).sequence(module.entry)]
        assert names.index("a") < names.index("b"), algorithm


def test_module_order_is_checked():
    text = """HloModule m, is_scheduled=true
ENTRY e {
  p = f32[4] parameter(0)
  b = f32[4] exponential(a)
  a = f32[4] negate(p)
  ROOT t = (f32[4], f32[4]) tuple(b, a)
}"""
    module = hlocc.parse_hlo(text)
    with pytest.raises(HloError, match="runs 'b' before its predecessor 'a'"):
        schedule_module(module, "module-order")


def test_verify_names_the_problem():
    module = hlocc.parse_hlo(WHILE)
    schedule = schedule_module(module)
    body = module.computation("body")
    broken = HloSchedule(module, {**schedule.sequences, body: schedule.sequence(body)[:-1]})
    with pytest.raises(HloError, match="schedule of 'body' misses 't'"):
        broken.verify()
    with pytest.raises(HloError, match="unknown scheduling algorithm 'dfs'"):
        schedule_module(module, "dfs")


def test_schedule_text_lists_each_computation():
    text = schedule_module(hlocc.parse_hlo(WHILE), "post-order").to_string()
    lines = text.splitlines()
    assert lines[0] == "e (post-order):" and "  p" in lines and "body (post-order):" in lines
    assert lines.index("  f") < lines.index("  w") < lines.index("  r")


def chain_module(n: int) -> str:
    lines = ["HloModule long", "ENTRY e {", "  v0 = f32[64] parameter(0)"]
    for i in range(1, n):
        op = "negate" if i % 3 else "add"
        args = f"v{i - 1}" if op == "negate" else f"v{i - 1}, v{max(0, i - 7)}"
        lines.append(f"  v{i} = f32[64] {op}({args})")
    lines[-1] = lines[-1].replace(f"  v{n - 1} =", f"  ROOT v{n - 1} =")
    return "\n".join(lines + ["}"])


def test_list_scheduler_handles_a_long_chain():
    # No timing threshold (speed is benchmarked, not unit-tested); a quadratic scheduler would make
    # this 16000-instruction case take minutes, which the suite's time budget shows.
    module = hlocc.parse_hlo(chain_module(16000))
    schedule = schedule_module(module, "list")
    schedule.verify()
    assert len(schedule.sequence(module.entry)) == 16000
