"""Bounded fuzzing: mutated corpus modules must fail with hlocc's own errors (or parse), never with
a Python exception of another type."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corpus import INVALID_ALONE, XLA_DIR, corpus_files
from hlocc.errors import HloError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.verifier import verify_module

FILES = [p for p in corpus_files(XLA_DIR) if p.name not in INVALID_ALONE and p.stat().st_size < 6000]
TEXTS = [p.read_text() for p in FILES]
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
