"""Shared test helpers: enumerate maps on small domains and compare point sets."""

from __future__ import annotations

from hlocc.analysis.indexing_map import IndexingMap


def point_set(m: IndexingMap) -> set[tuple[tuple[int, ...], tuple[int, ...]]]:
    """{(dims, results)} over every point of the domain (symbols and runtime vars projected out)."""
    if m.is_known_empty:
        return set()
    pts = m.points()
    out = m.apply(pts)
    nd = len(m.dims)
    return {(tuple(p[:nd]), tuple(r)) for p, r in zip(pts.tolist(), out.tolist())}


def graph(m: IndexingMap) -> dict[tuple, tuple]:
    """dims+symbols+runtime point -> results, for maps compared variable by variable."""
    pts = m.points()
    return {tuple(p): tuple(r) for p, r in zip(pts.tolist(), m.apply(pts).tolist())}
