"""Random valid HLO programs (hlocc.testing.programs) run on cpu and cuda-sim against the
interpreter under the per-type tolerance policy (hlocc.testing.differential). The default run
checks 125 programs in three seeded (derandomized) batches (two against the interpreter, one in
bounds-checked mode); `-m slow` checks 10,000. A failure
prints the module and its input seed; `hlocc reduce` shrinks it to a regression for
test_found_bugs.py."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.verifier import verify_module
from hlocc.testing.differential import differential
from hlocc.testing.programs import FAMILIES, inputs, programs

BACKENDS = ("cpu", "cuda-sim")


def check_program(program, seed: int) -> None:
    verify_module(parse_hlo(program.text))  # valid by construction: a rejection is a bug too
    outcomes = [o for o in differential(program.text, inputs(program, seed), BACKENDS) if o.kind != "unsupported"]
    assert not outcomes, "\n".join(map(str, outcomes)) + f"\ninput seed {seed}\n{program.text}"


def _batch(count: int):
    return settings(max_examples=count, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink])


@pytest.mark.parametrize("batch", range(2))
def test_random_programs_match_the_interpreter(batch):
    @_batch(45)  # 90 programs by default; the slow set runs 10,000
    @given(programs(), st.integers(batch * 1000, batch * 1000 + 999))
    def run(program, seed):
        check_program(program, seed)

    run()


@pytest.mark.slow  # 10,000 programs: about an hour on one core
@pytest.mark.parametrize("batch", range(2, 103))
def test_many_random_programs_match_the_interpreter(batch):
    @_batch(100)
    @given(programs(max_ops=8), st.integers(batch * 1000, batch * 1000 + 999))
    def run(program, seed):
        check_program(program, seed)

    run()


def test_random_programs_in_bounds_checked_mode():
    """35 programs on cpu with every kernel access checked (a BoundsCheckError is a crash here)."""

    @_batch(35)
    @given(programs(), st.integers(5000, 5999))
    def run(program, seed):
        outcomes = [o for o in differential(program.text, inputs(program, seed), ("cpu",), check_bounds=True)
                    if o.kind != "unsupported"]
        assert not outcomes, "\n".join(map(str, outcomes)) + f"\ninput seed {seed}\n{program.text}"

    run()


FAMILY_OPS = {"unary": "negate abs exponential log sqrt not popcnt", "binary": "add subtract multiply and or xor",
              "select": "select clamp", "slice": "slice", "gather-scatter": "gather scatter",
              "dynamic-slice": "dynamic-slice dynamic-update-slice"}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_generates_valid_programs(family):
    """Each family alone, 20 programs: all verify, and the family's own op occurs (a family whose
    programs shape inference rejects, or that always falls back, would go unnoticed)."""
    seen: set[str] = set()

    @settings(max_examples=20, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(programs(families=(family,), max_ops=2))
    def run(program):
        verify_module(parse_hlo(program.text))
        seen.update(program.ops)

    run()
    assert seen & set(FAMILY_OPS.get(family, family).split()), seen
