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
