"""Mutation fuzzing of HLO text: any exception of parse + verify other than an HloError is a bug.

`mutate(text, rng)` applies 1-4 random edits chosen to reach the parser's and verifier's corners:
a character span deleted, a grammar piece inserted or put in place of a span (brackets, types,
keywords, attribute names and values, huge and negative numbers), a number token replaced, an
element type swapped, a line deleted, duplicated or two lines swapped. `fuzz(texts, count, seed)`
checks `count` mutants and returns the ones that raised something else, with the exception
(XLA checks its parser the same way: hlo_parser_test's malformed inputs and its fuzzers)."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hlocc.errors import HloError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.verifier import verify_module

PIECES = ("(", ")", "{", "}", "[", "]", ",", "=", ":", "->", "%", "/*", "*/", "\"", "\n", "<=", "?", "x", "_",
          "0_0", "1x1", "f32", "s32[]", "pred[]", "(f32[], s32[])", "f32[2,3]{1,0}", "bf16[0]", "token[]",
          "-1", "0", "2", "999999999999", "-9223372036854775809", "1e999", "nan", "inf", "-0", "0x7f",
          "ROOT", "ENTRY", "HloModule m", "parameter(0)", "constant(1)", "tuple()", "dimensions={}",
          "dimensions={0,0}", "to_apply=", "calls=", "index=7", "slice={[0:9:0]}", "padding=0_0_-1",
          "window={size=0}", "dim_labels=b01f_01io->b01f", "direction=XX", "k=-1", "sharding={", "{...}",
          "metadata={op_name=\"x\"}", "")
_NUMBER = re.compile(r"-?\d+")
_TYPES = ("pred", "s4", "s8", "s16", "s32", "s64", "u8", "u32", "u64", "f16", "bf16", "f32", "f64", "c64",
          "f8e4m3fn", "token")
_TYPE_RE = re.compile(r"\b(?:pred|[suf]\d+|bf16|c64|c128|f8e\w+|token)\b")
_NUMBERS = ("0", "1", "-1", "3", "65536", "2147483648", "99999999999999999999", "-2")


def mutate(text: str, rng: random.Random) -> str:
    """`text` with 1-4 random edits (module doc)."""
    for _ in range(rng.randint(1, 4)):
        kind = rng.randrange(9)
        pos = rng.randint(0, len(text))
        if kind == 0:
            text = text[:pos] + text[pos + rng.randint(1, 12):]
        elif kind in (1, 2):
            text = text[:pos] + rng.choice(PIECES) + text[pos + (rng.randint(1, 6) if kind == 2 else 0):]
        elif kind == 3:
            matches = list(_NUMBER.finditer(text))
            if matches:
                m = rng.choice(matches)
                text = text[:m.start()] + rng.choice(_NUMBERS) + text[m.end():]
        elif kind == 4:
            matches = list(_TYPE_RE.finditer(text))
            if matches:
                m = rng.choice(matches)
                text = text[:m.start()] + rng.choice(_TYPES) + text[m.end():]
        else:
            lines = text.split("\n")
            i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
            if kind == 5:
                del lines[i]
            elif kind == 6:
                lines.insert(j, lines[i])
            elif kind == 7:
                lines[i], lines[j] = lines[j], lines[i]
            else:
                lines[i] = lines[i][:rng.randint(0, len(lines[i]))]
            text = "\n".join(lines)
    return text


def check_text(text: str) -> BaseException | None:
    """Parse and verify `text`; the exception when it is not an HloError, else None."""
    try:
        verify_module(parse_hlo(text))
    except HloError:
        return None
    except Exception as e:  # noqa: BLE001  (the point: anything else is a bug)
        return e
    return None


@dataclass(frozen=True)
class Failure:
    mutant: str
    error: BaseException

    def __str__(self) -> str:
        return f"{type(self.error).__name__}: {self.error}\n--- mutant ---\n{self.mutant}"


def fuzz(texts: Sequence[str], count: int, seed: int = 0) -> list[Failure]:
    """Check `count` mutants of `texts` (seeded: the same seed gives the same mutants)."""
    rng = random.Random(seed)
    failures = []
    for _ in range(count):
        mutant = mutate(rng.choice(texts), rng)
        error = check_text(mutant)
        if error is not None:
            failures.append(Failure(mutant, error))
    return failures


__all__ = ["PIECES", "Failure", "check_text", "fuzz", "mutate"]
