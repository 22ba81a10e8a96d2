"""Dot dimension numbers as a value, and the canonical dot form the library calls expect.

A dot contracts `lhs_contracting` with `rhs_contracting` (pairwise) over the batch dimensions;
its result has the batch dims (in `lhs_batch` order), then lhs's free dims, then rhs's, each in
increasing order (xla/hlo docs, DotGeneral). The canonical form (what XLA's DotDecomposer
produces, and what a BLAS/cuBLAS gemm takes without copies) is

    lhs [batch..., m, k] or [batch..., k, m],  rhs [batch..., k, n] or [batch..., n, k]

with the batch dims leading and in order on both sides and exactly one contracting and one free
dimension per operand; which of the last two is contracting tells the gemm whether to transpose.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.hlo.ir import HloInstruction

_ATTRS = ("lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims", "rhs_batch_dims")


@dataclass(frozen=True)
class DotDims:
    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...]
    rhs_batch: tuple[int, ...]

    @staticmethod
    def of(dot: HloInstruction) -> DotDims:
        return DotDims(*(tuple(dot.attrs.get(name, ())) for name in _ATTRS))

    def attrs(self) -> dict[str, tuple[int, ...]]:
        """The dimension-number attributes in XLA's print order (empty batch dims omitted)."""
        items = (("lhs_batch_dims", self.lhs_batch), ("lhs_contracting_dims", self.lhs_contracting),
                 ("rhs_batch_dims", self.rhs_batch), ("rhs_contracting_dims", self.rhs_contracting))
        return {name: v for name, v in items if v or "contracting" in name}

    def contracting(self, side: int) -> tuple[int, ...]:
        return self.rhs_contracting if side else self.lhs_contracting

    def batch(self, side: int) -> tuple[int, ...]:
        return self.rhs_batch if side else self.lhs_batch

    def free(self, side: int, rank: int) -> tuple[int, ...]:
        """The operand's dims that are neither contracting nor batch, in increasing order."""
        used = set(self.contracting(side)) | set(self.batch(side))
        return tuple(d for d in range(rank) if d not in used)

    def with_side(self, side: int, contracting: tuple[int, ...], batch: tuple[int, ...]) -> DotDims:
        if side:
            return DotDims(self.lhs_contracting, contracting, self.lhs_batch, batch)
        return DotDims(contracting, self.rhs_contracting, batch, self.rhs_batch)


def is_canonical(dims: DotDims, lhs_rank: int, rhs_rank: int) -> bool:
    """Whether a dot with `dims` over operands of these ranks is in canonical form."""
    nb = len(dims.lhs_batch)
    leading = tuple(range(nb))
    if dims.lhs_batch != leading or dims.rhs_batch != leading or lhs_rank != nb + 2 or rhs_rank != nb + 2:
        return False
    return len(dims.lhs_contracting) == 1 and len(dims.rhs_contracting) == 1


def is_canonical_dot(dot: HloInstruction) -> bool:
    return is_canonical(DotDims.of(dot), dot.operands[0].shape.rank, dot.operands[1].shape.rank)


def dot_attrs(dot: HloInstruction, dims: DotDims) -> dict:
    """`dot`'s attributes with its dimension numbers replaced by `dims` (precision etc. kept)."""
    attrs = {k: v for k, v in dot.attrs.items() if k not in _ATTRS}
    return {**dims.attrs(), **attrs}
