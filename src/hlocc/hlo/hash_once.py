"""`hash_once`: an immutable tree node's hash computed at its first use and kept.

A frozen dataclass's generated hash walks the whole tree at every dict or set lookup. Index
expressions (analysis/affine_expr.py) are such trees, and the simplifier and the lowering of
indexing maps look the same nodes up many times: for a symbolic kernel a fifth of its index
arithmetic was hashing. The class (or a base) declares a `_hash` slot; pickling and copying, which
a slotted dataclass does by its fields, leave it unset, so a hash is never carried into a process
whose string hashes differ.
"""

from __future__ import annotations


def hash_once(cls: type) -> type:
    """Make `cls.__hash__` (its current one) compute once per object, into the `_hash` slot."""
    compute = cls.__hash__

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            object.__setattr__(self, "_hash", compute(self))
            return self._hash

    cls.__hash__ = __hash__
    return cls
