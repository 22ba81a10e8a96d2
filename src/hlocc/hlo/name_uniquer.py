"""Unique names for instructions and computations (XLA's NameUniquer), the one rule every part of
hlocc names new HLO with: `HloModule.unique_name`, `HloComputation.unique_name` and the fusion
passes' builders.

`unique(base)` is `base` when free, else `stem.N` with N free: new names from `fusion` are
`fusion`, `fusion.1`, `fusion.2`, .... A taken `base` with a numeric suffix (`add.3`) has two
policies, chosen per uniquer: the IR's (`after_suffix=True`: N above the suffix, so clones of
`add.3` are `add.4`, ...) and the fusion builders' (`after_suffix=False`: the lowest free N of the
stem, as XLA's NameUniquer numbers with one id generator per stem, so `add.1`, ...). Per stem the
uniquer remembers where the search starts, so that making many names with one stem stays linear;
`release(name)` makes a name free again and lets its number be reused.
"""

from __future__ import annotations

from collections.abc import Iterable


class NameUniquer:
    """A set of taken names and the next number to try per stem (module doc)."""

    def __init__(self, taken: Iterable[str] = (), *, after_suffix: bool = True):
        self._taken: set[str] = set(taken)
        self._next: dict[str, int] = {}
        self.after_suffix = after_suffix

    def __contains__(self, name: str) -> bool:
        return name in self._taken

    def reserve(self, name: str) -> None:
        """Record a name taken outside `unique`."""
        self._taken.add(name)

    def release(self, name: str) -> None:
        """Make `name` available again (an instruction is being renamed)."""
        self._taken.discard(name)
        stem, dot, suffix = name.rpartition(".")
        if dot and suffix.isdigit() and self._next.get(stem, 0) > int(suffix):
            self._next[stem] = int(suffix)

    def unique(self, base: str) -> str:
        """A fresh name derived from `base`, taken from now on."""
        if base not in self._taken:
            self._taken.add(base)
            return base
        stem, dot, suffix = base.rpartition(".")
        if dot and suffix.isdigit():
            n = int(suffix) + 1 if self.after_suffix else 1
        else:
            stem, n = base, 1
        n = max(n, self._next.get(stem, 0))
        while f"{stem}.{n}" in self._taken:
            n += 1
        self._next[stem] = n + 1
        name = f"{stem}.{n}"
        self._taken.add(name)
        return name
