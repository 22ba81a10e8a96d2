"""The passes stay about linear in the module size (DESIGN.md: compile time is a feature). Each
test builds a module of tens of thousands of instructions shaped to trip a quadratic walk — a long
chain, thousands of users of one value, thousands of duplicates merging into one — and only
checks that the pass finishes with the right result; a quadratic pass would time the suite out."""

from __future__ import annotations

import hlocc
from hlocc.passes.pipeline import run_passes

N = 20_000


def chain(n: int, dead_every: int = 0) -> str:
    """x → negate → negate → ... (n ops), with a dead exponential every `dead_every` ops."""
    lines = ["HloModule chain", "ENTRY main {", "  v0 = f32[8] parameter(0)"]
    for i in range(1, n + 1):
        lines.append(f"  v{i} = f32[8] negate(v{i - 1})")
        if dead_every and i % dead_every == 0:
            lines.append(f"  dead{i} = f32[8] exponential(v{i})")
    lines.append(f"  ROOT out = f32[8] add(v{n}, v0)")
    lines.append("}")
    return "\n".join(lines)


def duplicates(n: int) -> str:
    """n identical broadcasts of one constant, each used once: CSE merges them into one value with
    n users, and DCE then removes n instructions that all use the same operands."""
    lines = ["HloModule dups", "ENTRY main {", "  x = f32[8] parameter(0)", "  c = f32[] constant(2)",
             "  acc0 = f32[8] add(x, x)"]
    for i in range(1, n + 1):
        lines.append(f"  b{i} = f32[8] broadcast(c), dimensions={{}}")
        lines.append(f"  acc{i} = f32[8] multiply(acc{i - 1}, b{i})")
    lines.append(f"  ROOT out = f32[8] add(acc{n}, x)")
    lines.append("}")
    return "\n".join(lines)


def test_dce_on_a_long_chain():
    module = hlocc.parse_hlo(chain(N, dead_every=2))
    assert run_passes(module, ["dce"]).changed
    assert len(module.entry.instructions) == N + 2


def test_cse_merges_thousands_of_duplicates_into_one_value():
    module = hlocc.parse_hlo(duplicates(N // 2))
    assert run_passes(module, ["cse"]).changed
    broadcasts = [i for i in module.entry.instructions if i.opcode == "broadcast"]
    assert len(broadcasts) == 1 and len(broadcasts[0].users) == N // 2


def test_algsimp_removes_a_long_chain_of_double_negations():
    module = hlocc.parse_hlo(chain(N))
    assert run_passes(module, ["algsimp"]).changed
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "add"]


def test_simplification_pipeline_on_a_long_chain():
    module = hlocc.parse_hlo(chain(N // 2, dead_every=3))
    result = run_passes(module, ["simplify"])
    assert not result.unconverged
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "add"]


def threefry_like(streams: int, rounds: int) -> str:
    """`streams` independent chains of `rounds` mixing rounds (the shape of the XLA corpus's
    16800-op `loop__large_loop_slow_compile_time` probe, a threefry RNG): each round's two values
    both feed the next, so fusion makes multi-output fusions and duplicates shared producers."""
    lines = ["HloModule threefry_like", "ENTRY main {", "  seed = u32[64] parameter(0)"]
    roots = []
    for s in range(streams):
        lines.append(f"  k{s} = u32[] constant({s * 7919 + 1})")
        lines.append(f"  kb{s} = u32[64] broadcast(k{s}), dimensions={{}}")
        lines.append(f"  x{s}_0 = u32[64] add(seed, kb{s})")
        lines.append(f"  y{s}_0 = u32[64] xor(seed, kb{s})")
        for r in range(rounds):
            a, b = f"x{s}_{r}", f"y{s}_{r}"
            lines += [f"  c{s}_{r} = u32[] constant({(r * 5) % 31 + 1})",
                      f"  cb{s}_{r} = u32[64] broadcast(c{s}_{r}), dimensions={{}}",
                      f"  sl{s}_{r} = u32[64] shift-left({b}, cb{s}_{r})",
                      f"  x{s}_{r + 1} = u32[64] add({a}, {b})",
                      f"  y{s}_{r + 1} = u32[64] xor(sl{s}_{r}, x{s}_{r + 1})"]
        roots.append(f"y{s}_{rounds}")
    shape = ", ".join(["u32[64]"] * streams)
    lines.append(f"  ROOT out = ({shape}) tuple({', '.join(roots)})")
    lines.append("}")
    return "\n".join(lines)


def test_the_hlo_pipeline_does_work_proportional_to_the_module(monkeypatch):
    """Work, not time: instructions the whole default HLO pipeline creates and fusion priorities it
    computes, per input instruction, stay the same when the module grows 4× (a pass that re-walks
    a fusion, the module or a user list per step grows with it)."""
    from hlocc.hlo.ir import HloInstruction
    from hlocc.passes.priority_fusion import _ComputationFusion

    counts = {"created": 0, "priorities": 0}
    init, priority = HloInstruction.__init__, _ComputationFusion.priority

    def counting_init(self, *args, **kwargs):
        counts["created"] += 1
        init(self, *args, **kwargs)

    def counting_priority(self, producer):
        counts["priorities"] += 1
        return priority(self, producer)

    per_op = []
    for streams in (4, 16):
        module = hlocc.parse_hlo(threefry_like(streams, 12))
        ops = len(module.entry.instructions)
        monkeypatch.setattr(HloInstruction, "__init__", counting_init)
        monkeypatch.setattr(_ComputationFusion, "priority", counting_priority)
        counts.update(created=0, priorities=0)
        assert run_passes(module, ["default"]).changed
        monkeypatch.undo()
        assert any(i.opcode == "fusion" for i in module.entry.instructions)
        per_op.append((counts["created"] / ops, counts["priorities"] / ops))
    (small_created, small_priorities), (large_created, large_priorities) = per_op
    assert large_created <= 1.1 * small_created, per_op
    assert large_priorities <= 1.1 * small_priorities, per_op
