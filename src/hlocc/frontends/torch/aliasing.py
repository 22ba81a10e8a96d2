"""Inputs of an exported program that share memory, one of them written: found per call, cheaply.

`torch.export` functionalizes a program as if its inputs were distinct tensors: `a.add_(1); return
a * b` becomes `a' = a + 1; out = a' * b`, with `a'` copied into `a` after the call. Called with the
same tensor for `a` and `b`, eager reads `b` after the write (4 for ones), the functional program
before it (2). A program that writes an input or a buffer therefore checks, at each call, whether
a written tensor shares its storage with another input (one `untyped_storage().data_ptr()` per user
tensor: ~0.15 µs each; a program that writes nothing checks nothing). Where one does, the call runs
the exported module through `torch.compile` with the hlocc backend instead: dynamo gives the same
tensor passed twice one graph input, and aot_autograd rebuilds overlapping views from one base
(as_strided, ops_strided.py), so the aliasing is part of the graph it compiles. Sharing a storage
without overlapping (`x[0]`, `x[1]`) takes that path too: slower, never wrong.

A state tensor passed as an argument (a buffer the program writes, or `params="arguments"`) is
compared by the storage it had at compile time: it is updated in place, not moved (a `.data =`
assignment to a parameter is not seen).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


class AliasedWrites:
    """The per-call check of one exported program (module doc). `written`: the user inputs (their
    numbers among the flat user inputs) the program writes; `state`: the state tensors passed as
    arguments, `written_state` those it writes; `variant()` makes the callable that runs an
    aliased call (made at the first such call)."""

    def __init__(self, written: Sequence[int], state: Sequence[Any], written_state: Sequence[Any],
                 variant: Callable[[], Callable]):
        self.written = tuple(written)
        self._state = frozenset(_storage(t) for t in state)
        self._written_state = frozenset(_storage(t) for t in written_state)
        self._make_variant = variant
        self._variant: Callable | None = None

    @staticmethod
    def of(written: Sequence[int], state: Sequence[Any], written_state: Sequence[Any],
           variant: Callable[[], Callable]) -> AliasedWrites | None:
        """The check, or None where the program writes no input and no buffer (nothing to check)."""
        if not written and not written_state:
            return None
        return AliasedWrites(written, state, written_state, variant)

    def found(self, users: Sequence[Any]) -> bool:
        """Whether, in this call's flat user inputs, a written tensor shares memory with another input."""
        storages = [_storage(t) if hasattr(t, "untyped_storage") else None for t in users]
        for k in self.written:
            mine = storages[k]
            if mine in self._state or any(s == mine for j, s in enumerate(storages) if j != k):
                return True
        return bool(self._written_state) and any(s in self._written_state for s in storages)

    def variant(self) -> Callable:
        if self._variant is None:
            self._variant = self._make_variant()
        return self._variant


def _storage(tensor: Any) -> int:
    return tensor.untyped_storage().data_ptr()
