"""Inclusive integer intervals, the bounds of indexing-map variables and expressions.

An `Interval(lo, hi)` is the set {lo, lo+1, ..., hi}; it is empty when lo > hi. The arithmetic
below is interval arithmetic: the result contains every value the operation can produce from values
in the operands (it may contain more, never less). Division and modulus are by positive constants
with floor semantics (Python's `//` and `%`, which are MLIR's `floordiv` and `mod`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Interval:
    lo: int
    hi: int

    @property
    def is_empty(self) -> bool:
        return self.lo > self.hi

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi

    @property
    def size(self) -> int:
        """Number of integers in the interval (0 when empty)."""
        return max(0, self.hi - self.lo + 1)

    def contains(self, other: Interval | int) -> bool:
        """Whether every value of `other` (an interval or one integer) lies in this interval."""
        if isinstance(other, int):
            return self.lo <= other <= self.hi
        return other.is_empty or (self.lo <= other.lo and other.hi <= self.hi)

    def intersect(self, other: Interval) -> Interval:
        return Interval(max(self.lo, other.lo), min(self.hi, other.hi))

    def disjoint(self, other: Interval) -> bool:
        return self.intersect(other).is_empty

    def __add__(self, other: Interval | int) -> Interval:
        if isinstance(other, int):
            return Interval(self.lo + other, self.hi + other)
        return Interval(self.lo + other.lo, self.hi + other.hi)

    def scale(self, factor: int) -> Interval:
        """{x * factor}; a negative factor swaps the ends."""
        a, b = self.lo * factor, self.hi * factor
        return Interval(min(a, b), max(a, b))

    def floordiv(self, divisor: int) -> Interval:
        """{x floordiv divisor} for a positive divisor."""
        return Interval(self.lo // divisor, self.hi // divisor)

    def mod(self, modulus: int) -> Interval:
        """{x mod modulus} for a positive modulus: exact when the interval does not wrap."""
        if self.lo // modulus == self.hi // modulus:
            return Interval(self.lo % modulus, self.hi % modulus)
        return Interval(0, modulus - 1)

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"
