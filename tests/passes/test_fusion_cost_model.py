"""The fusion cost model (analysis/cost_model.py): per-op counts, utilization inside fusions
(recomputation under broadcasts), and the unfused/fused run-time estimates priority fusion ranks
producers by."""

from __future__ import annotations

import pytest

import hlocc
from hlocc.analysis.cost_model import (
    CostModel,
    MachineModel,
    flops_per_element,
    fusion_utilizations,
    instruction_cost,
    instruction_flops,
    operand_utilization,
)
from hlocc.hlo.symbolic import size_hint

ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def entry(body: str):
    return hlocc.parse_hlo(ADD + "\nENTRY main {\n" + body + "\n}\n").entry


def named(comp, name):
    return next(i for i in comp.instructions if i.name == name)


def test_flops_per_element_prices_transcendentals():
    c = entry("p = f32[16] parameter(0)\n  a = f32[16] add(p, p)\n  e = f32[16] exponential(p)\n"
              "  d = f32[16] divide(p, p)\n  q = s32[16] parameter(1)\n  i = s32[16] divide(q, q)\n"
              "  z = c64[16] parameter(2)\n  ez = c64[16] exponential(z)\n  ROOT t = (f32[16]) tuple(a)")
    assert flops_per_element(named(c, "a")) == 1
    assert flops_per_element(named(c, "e")) == 20
    assert flops_per_element(named(c, "d")) == 8
    assert flops_per_element(named(c, "i")) == 2
    assert flops_per_element(named(c, "ez")) == 80


def test_instruction_flops():
    c = entry("p = f32[64,32] parameter(0)\n  w = f32[32,16] parameter(1)\n"
              "  d = f32[64,16] dot(p, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
              "  z = f32[] constant(0)\n  ROOT r = f32[64] reduce(p, z), dimensions={1}, to_apply=add")
    assert instruction_flops(named(c, "d")) == 2 * 64 * 16 * 32
    assert instruction_flops(named(c, "r")) == 64 * 32


def test_operand_utilization():
    c = entry("p = f32[64] parameter(0)\n  b = f32[64,32] broadcast(p), dimensions={0}\n"
              "  s = f32[16] slice(p), slice={[0:16]}\n  q = f32[64,32] parameter(1)\n"
              "  w = f32[32,16] parameter(2)\n"
              "  d = f32[64,16] dot(q, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
              "  ROOT t = (f32[64,32], f32[16]) tuple(b, s)")
    assert operand_utilization(named(c, "b"), 0) == 32
    assert operand_utilization(named(c, "s"), 0) == 0.25
    assert operand_utilization(named(c, "d"), 0) == 16  # every lhs element meets 16 rhs columns
    assert operand_utilization(named(c, "d"), 1) == 64



def test_ratios_of_sizes_that_are_zero_at_the_size_hint():
    # n - 2*floordiv(n, 2) is 0 at n = 128 (HINT_DEFAULT) though not the constant 0
    c = hlocc.parse_hlo("HloModule m\nENTRY e {\n  x = f32[?n] parameter(0)\n"
                        "  t = f32[?(n-2*floordiv(n,2))] slice(x), slice={[?(2*floordiv(n,2)):?(n)]}\n"
                        "  ROOT b = f32[?(n-2*floordiv(n,2)),8] broadcast(t), dimensions={0}\n}\n").entry
    with size_hint({}):
        assert operand_utilization(named(c, "b"), 0) == 0.0
        assert operand_utilization(named(c, "t"), 0) == 0.0
    with size_hint({"n": 129}):
        assert operand_utilization(named(c, "b"), 0) == 8
        assert operand_utilization(named(c, "t"), 0) == 1 / 129

FUSED = """
fused {
  p = f32[64] parameter(0)
  q = f32[64,32] parameter(1)
  e = f32[64] exponential(p)
  n = f32[64] negate(e)
  b = f32[64,32] broadcast(n), dimensions={0}
  ROOT m = f32[64,32] multiply(b, q)
}

ENTRY main {
  x = f32[64] parameter(0)
  y = f32[64,32] parameter(1)
  ROOT f = f32[64,32] fusion(x, y), kind=kLoop, calls=fused
}
"""


def test_utilization_inside_a_fusion_counts_recomputation_under_a_broadcast():
    module = hlocc.parse_hlo(FUSED)
    fused = module.computation("fused")
    utilization, flops = fusion_utilizations(fused)
    assert utilization[named(fused, "m")] == 1
    assert utilization[named(fused, "e")] == 32  # evaluated once per element of the broadcast
    assert utilization[named(fused, "q")] == 1
    assert flops == 64 * 32 * (1 + 1 + 20)  # multiply, and negate + exp 32 times over
    cost = instruction_cost(module.entry.root)
    assert cost.utilization == [32, 1]
    assert cost.operand_bytes == [64 * 4 * 32, 64 * 32 * 4]


def test_elementwise_users_share_their_reads():
    module = hlocc.parse_hlo("""
fused {
  p = f32[64] parameter(0)
  a = f32[64] exponential(p)
  b = f32[64] log(p)
  ROOT m = f32[64] add(a, b)
}

ENTRY main {
  x = f32[64] parameter(0)
  ROOT f = f32[64] fusion(x), kind=kLoop, calls=fused
}
""")
    utilization, _ = fusion_utilizations(module.computation("fused"))
    assert utilization[named(module.computation("fused"), "p")] == 1


CHAIN = """
ENTRY main {
  x = f32[1024,1024] parameter(0)
  y = f32[1024,1024] parameter(1)
  a = f32[1024,1024] add(x, y)
  ROOT m = f32[1024,1024] multiply(a, x)
}
"""


@pytest.mark.parametrize("machine", [MachineModel.cpu(), MachineModel.gpu()], ids=["cpu", "gpu"])
def test_fusing_an_elementwise_producer_saves_its_write_and_read(machine):
    c = hlocc.parse_hlo(CHAIN).entry
    model = CostModel(machine)
    times = model.estimate_run_times(named(c, "a"), [named(c, "m")])
    assert times.time_fused < times.time_unfused
    # Saved: one launch, writing and reading a (4 MiB each way), less the x read now shared.
    assert times.benefit > machine.launch_overhead


def test_duplicating_into_consumers_is_charged_per_consumer():
    c = entry("x = f32[1024,1024] parameter(0)\n  e = f32[1024,1024] exponential(x)\n"
              "  a = f32[1024,1024] add(e, x)\n  b = f32[1024,1024] multiply(e, x)\n"
              "  n = f32[1024,1024] negate(x)\n  an = f32[1024,1024] add(n, x)\n"
              "  ROOT t = (f32[1024,1024], f32[1024,1024], f32[1024,1024]) tuple(a, b, an)")
    model = CostModel(MachineModel("slow-alu", 1e10, 32 << 20, 2.5, 1e9, 2e-6, 64))
    one = model.fused_run_time(named(c, "e"), named(c, "a"))
    cheap = model.fused_run_time(named(c, "n"), named(c, "an"))
    assert one > cheap  # the consumer now also computes exp, 20 flops an element
    both = model.estimate_run_times(named(c, "e"), [named(c, "a"), named(c, "b")])
    assert both.time_fused == pytest.approx(2 * model.machine.launch_overhead + 2 * one, rel=1e-9)


def test_recomputing_under_a_broadcast_can_cost_more_than_it_saves():
    c = entry("x = f32[4096] parameter(0)\n  e = f32[4096] exponential(x)\n"
              "  b = f32[4096,4096] broadcast(e), dimensions={0}\n  ROOT t = (f32[4096,4096]) tuple(b)")
    model = CostModel(MachineModel.cpu())
    times = model.estimate_run_times(named(c, "e"), [named(c, "b")])
    assert times.time_fused > times.time_unfused


def test_uncoalesced_reads_are_slower():
    c = entry("x = f32[2048,2048] parameter(0)\n  t = f32[2048,2048] transpose(x), dimensions={1,0}\n"
              "  q = f32[2048,2048,1] parameter(1)\n  u = f32[2048,2048,1] transpose(q), dimensions={1,0,2}\n"
              "  ROOT r = (f32[2048,2048]) tuple(t)")
    model = CostModel(MachineModel.gpu())
    assert instruction_cost(named(c, "t")).bad_transpose  # a tiled transpose: the emitter coalesces
    slow = model._read_time(named(c, "x"), 2048 * 2048 * 4, coalesced=False)
    fast = model._read_time(named(c, "x"), 2048 * 2048 * 4, coalesced=True)
    assert slow == pytest.approx(8 * fast)  # 4-byte elements of 32-byte transactions


def test_multi_output_estimate_keeps_the_producer_write():
    c = hlocc.parse_hlo(CHAIN).entry
    model = CostModel(MachineModel.cpu())
    times = model.estimate_multi_output(named(c, "a"), named(c, "m"))
    assert times.time_fused > model.fused_run_time(named(c, "a"), named(c, "m"))
    assert times.time_fused < times.time_unfused


def test_invalidate_forgets_cached_costs():
    c = hlocc.parse_hlo(CHAIN).entry
    model = CostModel()
    first = model.cost(named(c, "m"))
    assert model.cost(named(c, "m")) is first
    model.invalidate(named(c, "m"))
    assert model.cost(named(c, "m")) is not first


THREEFRY_ROUNDS = """
ENTRY main {
  seed = u32[256,256] parameter(0)
  k = u32[] constant(466688986)
  kb = u32[256,256] broadcast(k), dimensions={}
  x0 = u32[256,256] add(seed, kb)
  c13 = u32[] constant(13)
  b13 = u32[256,256] broadcast(c13), dimensions={}
  x1 = u32[256,256] add(x0, seed)
  y1 = u32[256,256] xor(x1, seed)
  x2 = u32[256,256] add(x1, y1)
  s2 = u32[256,256] shift-left(y1, b13)
  y2 = u32[256,256] xor(x2, s2)
  x3 = u32[256,256] add(x2, y2)
  s3 = u32[256,256] shift-left(y2, b13)
  y3 = u32[256,256] xor(x3, s3)
  bits = u32[256,256] xor(x3, y3)
  ROOT f = f32[256,256] bitcast-convert(bits)
}
"""


@pytest.mark.parametrize("text", [THREEFRY_ROUNDS, CHAIN], ids=["threefry_rounds", "chain"])
def test_costs_kept_while_fusing_match_a_fresh_walk_of_each_fusion(text):
    """Priority fusion updates a fusion's cost from its parts' costs (record_fusion); the
    utilization of each operand and the flops must be what a walk of the finished fusion gives:
    a value read at the output's index by both parts is read once, not once per part."""
    from hlocc.analysis.cost_model import CostModel
    from hlocc.passes import priority_fusion

    models = []

    class Recording(CostModel):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            models.append(self)

    module = hlocc.parse_hlo(text)
    original = priority_fusion.CostModel
    priority_fusion.CostModel = Recording
    try:
        assert priority_fusion.PriorityFusion().run(module)
    finally:
        priority_fusion.CostModel = original
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1  # every round in one kernel
    kept, fresh = models[0].cost(fusions[0]), instruction_cost(fusions[0])
    assert kept.utilization == pytest.approx(fresh.utilization)
    assert kept.flops == pytest.approx(fresh.flops)


def _reference_merged_reads(producer, consumer_operands, p, c):
    """merged_reads as one walk, without the consumer's cached table (analysis/fusion_reads.py)."""
    u, via_root, reads = 0.0, False, {}

    def add(op, v, e):
        if op in reads:
            w, f = reads[op]
            reads[op] = (w + v - (1.0 if e and f else 0.0), e or f)
        else:
            reads[op] = (v, e)

    for op, v, e in zip(consumer_operands, c.utilization, c.elementwise):
        if op is producer:
            u, via_root = u + v, via_root or e
        else:
            add(op, v, e)
    for op, v, e in zip(producer.operands, p.utilization, p.elementwise):
        add(op, v * u, via_root and e)
    return u, reads


def test_merged_reads_from_the_cached_table_match_one_walk_also_after_an_operand_changes():
    from hlocc.analysis.fusion_reads import merged_reads

    c = entry("x = f32[64] parameter(0)\n  y = f32[64] parameter(1)\n  b = f32[64,8] parameter(2)\n"
              "  p = f32[64] add(x, y)\n  q = f32[64] multiply(p, x)\n  m = f32[64] maximum(p, p)\n"
              "  s = f32[64] subtract(q, y)\n  ROOT t = (f32[64], f32[64]) tuple(s, m)")
    model = CostModel()
    p, q, m, s = (named(c, n) for n in ("p", "q", "m", "s"))
    for producer, consumer in ((p, q), (p, m), (q, s), (p, q)):  # (p, q) again: from the cache
        got = merged_reads(producer, consumer.operands, model.cost(producer), model.cost(consumer))
        want = _reference_merged_reads(producer, consumer.operands, model.cost(producer), model.cost(consumer))
        assert got == want and list(got[1]) == list(want[1])
    assert merged_reads(p, m.operands, model.cost(p), model.cost(m))[0] == 2.0  # both reads of p
    q.operands[1] = named(c, "y")  # the consumer's operands change under its cost: the table follows
    got = merged_reads(p, q.operands, model.cost(p), model.cost(q))
    assert got == _reference_merged_reads(p, q.operands, model.cost(p), model.cost(q))
