"""Fuzzing the parser and verifier: mutated corpus modules and grammar-aware random modules must
parse and verify or fail with hlocc's own errors, never with a Python exception of another type.

The default run checks 20,000 seeded mutants (hlocc.testing.hlo_fuzz, four chunks so xdist spreads
them) of every corpus module under 6 kB (the XLA and JAX corpora and XLA:CPU's optimized dumps in
tests/reliability), plus hypothesis-driven mutants and 300 grammar-aware modules
(hlocc.testing.hlo_grammar); `-m slow` checks 1,000,000 mutants and 5,000 grammar-aware modules.
Every bug found is a regression below, with the message it now gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import INVALID_ALONE, JAX_DIR, XLA_DIR, corpus_files
from hlocc.errors import HloError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.verifier import verify_module
from hlocc.testing.hlo_fuzz import check_text, fuzz
from hlocc.testing.hlo_grammar import hlo_texts

OPTIMIZED = Path(__file__).resolve().parents[1] / "reliability" / "xla_cpu_optimized"
FILES = [p for p in corpus_files(XLA_DIR) if p.name not in INVALID_ALONE and p.stat().st_size < 6000]
TEXTS = [p.read_text() for p in FILES]
SEED_TEXTS = TEXTS + [p.read_text() for d in (JAX_DIR, OPTIMIZED) if d.is_dir() for p in sorted(d.glob("*.hlo"))
                      if p.stat().st_size < 6000]
CHUNK = 5000
PIECES = ["(", ")", "{", "}", ",", "=", "[", "]", "f32", "s32[]", "-1", "999999999999", "nan", "ROOT", "ENTRY",
          "%", "/*", "\"", "<=", "?", "x", "0_0", "dimensions={}", "to_apply=", ":", "\n", "tuple", ""]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_modules_raise_only_hlocc_errors(data):
    if not TEXTS:
        pytest.skip("shared/corpus is absent")
    text = data.draw(st.sampled_from(TEXTS))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(text)))
        kind = data.draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = data.draw(st.sampled_from(PIECES))
        width = data.draw(st.integers(1, 8))
        if kind == "insert":
            text = text[:pos] + piece + text[pos:]
        elif kind == "delete":
            text = text[:pos] + text[pos + width:]
        else:
            text = text[:pos] + piece + text[pos + width:]
    try:
        verify_module(parse_hlo(text))
    except HloError:
        pass


# two chunks by default (~6 s each on two loaded cores); chunks 2 and 3 join the slow million below
@pytest.mark.parametrize("chunk", [0, 1] + [pytest.param(c, marks=pytest.mark.slow) for c in (2, 3)])
def test_corpus_mutants_raise_only_hlocc_errors(chunk):
    if not TEXTS:
        pytest.skip("shared/corpus is absent")
    failures = fuzz(SEED_TEXTS, CHUNK, seed=chunk)
    assert not failures, "\n\n".join(map(str, failures[:3]))


@pytest.mark.slow  # 1,000,000 mutants, about 10 minutes on one core
@pytest.mark.parametrize("chunk", range(4, 204))
def test_a_million_corpus_mutants_raise_only_hlocc_errors(chunk):
    if not TEXTS:
        pytest.skip("shared/corpus is absent")
    failures = fuzz(SEED_TEXTS, CHUNK, seed=chunk)
    assert not failures, "\n\n".join(map(str, failures[:3]))


def _check_generated(text: str) -> None:
    error = check_text(text)
    assert error is None, f"{type(error).__name__}: {error}\n{text}"


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(hlo_texts())
def test_grammar_generated_modules_raise_only_hlocc_errors(text):
    _check_generated(text)


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(hlo_texts())
def test_many_grammar_generated_modules_raise_only_hlocc_errors(text):
    _check_generated(text)


def test_grammar_generator_writes_modules_that_parse():
    """The generator is not all noise: some of its modules parse (so it reaches the verifier)."""
    from hypothesis import find

    text = find(hlo_texts(), _parses, settings=settings(max_examples=500, database=None,
                                                        suppress_health_check=list(HealthCheck)))
    assert "ENTRY e {" in text and parse_hlo(text).entry is not None


def _parses(text: str) -> bool:
    try:
        parse_hlo(text)
    except HloError:
        return False
    return True


# Mutants the fuzzers found raising something other than an HloError, each with the message it
# now gives (the fix named beside it).
REGRESSIONS = [
    # parser: a constant with its shape deleted reached the literal reader with no shape
    # (AttributeError in hlo/literals.py); 72 of 1.07M corpus mutants hit it.
    ("HloModule m\nENTRY e {\n  ROOT c = constant(1)\n}\n", r"constant 'c' has no shape"),
    ("HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  c = constant({1, 2})\n  ROOT a = f32[2] add(p, c)\n}\n",
     r"constant 'c' has no shape"),
    # shape inference: `{{...}}` for an integer-list attribute is kept raw by the parser and reached
    # the broadcast and all-gather rules as a RawAttr (TypeError: no len()); now opcodes.infer_shape_from
    # rejects it.
    ("HloModule m\nENTRY e {\n  p = f32[1,3] parameter(0)\n  ROOT b = f32[2,1,3] broadcast(p), dimensions={{1,2}}\n}\n",
     r"attribute 'dimensions' must be a list of integers, not \{\{1,2\}\}"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT g = f32[4] all-gather(p), dimensions={{0}}\n}\n",
     r"attribute 'dimensions' must be a list of integers"),
    ("HloModule m\nENTRY e {\n  p = f32[1,3] parameter(0)\n  ROOT b = broadcast(p), dimensions={{1,2}}\n}\n",
     r"attribute 'dimensions' must be a list of integers"),
    # literal reader: an integer written with an exponent that overflows a float (`31e999`) became
    # inf and int(inf) raised OverflowError (hlo/literals.py `_integer`); 1 of 1,000,000 slow-run
    # mutants (chunk 129).
    ("HloModule m\nENTRY e {\n  ROOT c = s32[2,1] constant({{1}, {31e999}})\n}\n",
     r"value 31e999 is out of range for s32"),
]


@pytest.mark.parametrize("text, message", REGRESSIONS)
def test_fuzzer_regressions_raise_hlocc_errors(text, message):
    with pytest.raises(HloError, match=message):
        verify_module(parse_hlo(text))
