"""Range-aware simplification: XLA's documented cases, reshape cancellations, and the property
that simplification never changes the set of points (checked by enumeration)."""

import hypothesis.strategies as st
import pytest
from helpers import graph
from hypothesis import given, settings

from hlocc.analysis.affine_expr import dim, sym
from hlocc.analysis.indexing_map import IndexingMap, compose
from hlocc.analysis.indexing_map_text import parse_indexing_map
from hlocc.analysis.linearize import delinearize

P = parse_indexing_map


@pytest.mark.parametrize("text, expected", [
    # The four cases of XLA's docs/indexing.md, "Indexing Map simplification".
    ("(d0, d1) -> (d0 + d1 floordiv 16, d1 mod 16), domain: d0 in [0, 6], d1 in [0, 14]",
     "(d0, d1) -> (d0, d1), domain: d0 in [0, 6], d1 in [0, 14]"),
    ("(d0, d1, d2) -> ((d0 * 100 + d1 * 10 + d2) floordiv 100, ((d0 * 100 + d1 * 10 + d2) mod 100) floordiv 10,"
     " d2 mod 10), domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]",
     "(d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"),
    ("(d0, d1, d2) -> ((d0 * 16 + d1 * 4 + d2) floordiv 8, (d0 * 16 + d1 * 4 + d2) mod 8),"
     " domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]",
     "(d0, d1, d2) -> (d0 * 2 + (d1 * 4 + d2) floordiv 8, (d1 * 4 + d2) mod 8),"
     " domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"),
    ("(d0, d1) -> (-((d0 * -11 - d1 + 109) floordiv 11) + 9), domain: d0 in [0, 9], d1 in [0, 10]",
     "(d0, d1) -> (d0), domain: d0 in [0, 9], d1 in [0, 10]"),
    # The seed's GELU loop map, from the unsimplified delinearisation of the launch grid.
    ("(th_x, bl_x)[vector_index] -> ((bl_x * 512 + th_x * 4 + vector_index) floordiv 2097152,"
     " ((bl_x * 512 + th_x * 4 + vector_index) floordiv 4096) mod 512, (bl_x * 512 + th_x * 4 + vector_index)"
     " mod 4096), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]",
     "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512,"
     " (bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575],"
     " vector_index in [0, 3]"),
    # Mod/div chains.
    ("(d0) -> ((d0 mod 16) floordiv 4, (d0 floordiv 4) floordiv 2, (d0 mod 12) mod 4), domain: d0 in [0, 99]",
     "(d0) -> ((d0 floordiv 4) mod 4, d0 floordiv 8, d0 mod 4), domain: d0 in [0, 99]"),
    ("(d0) -> (d0 ceildiv 4), domain: d0 in [0, 99]", "(d0) -> ((d0 + 3) floordiv 4), domain: d0 in [0, 99]"),
    # Point ranges become constants; unused range variables disappear.
    ("(d0)[s0, s1] -> (d0 + s0 * 4, s0), domain: d0 in [0, 3], s0 in [2, 2], s1 in [0, 7]",
     "(d0) -> (d0 + 8, 2), domain: d0 in [0, 3]"),
])
def test_documented_simplifications(text, expected):
    assert str(P(text).simplify()) == expected


def reshape_map(out_dims, in_dims):
    """Output->input map of a row-major reshape, unsimplified: linearise, then delinearise."""
    linear = 0
    for i, n in enumerate(out_dims):
        linear = linear * n + dim(i)
    return IndexingMap.from_sizes(out_dims, delinearize(linear, in_dims))


@pytest.mark.parametrize("a, b", [
    ([12], [3, 4]), ([3, 4], [12]), ([24], [2, 3, 4]), ([10, 10, 10], [50, 20]), ([4, 8], [2, 4, 4]),
    ([6, 512, 4096], [3072, 4096]), ([2, 3, 4, 5], [120]), ([7, 1, 3], [21]),
])
def test_reshape_and_back_is_identity(a, b):
    there, back = reshape_map(b, a), reshape_map(a, b)
    composed = compose(there, back)
    assert composed.results == tuple(dim(i) for i in range(len(b)))
    assert not composed.constraints and not composed.symbols


def test_reshape_chain_from_xla_docs():
    # p0 = f32[10,10,10]; reshape1 = f32[50,20] reshape(p0); reshape2 = f32[10,10,10] reshape(reshape1)
    chain = compose(reshape_map([10, 10, 10], [50, 20]), reshape_map([50, 20], [10, 10, 10]))
    assert str(chain) == "(d0, d1, d2) -> (d0, d1, d2), domain: d0 in [0, 9], d1 in [0, 9], d2 in [0, 9]"


# -- property: simplification keeps every point ----------------------------------------------------

VARS = [dim(0), dim(1), sym(0)]


@st.composite
def expressions(draw, depth=3):
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from(VARS)) if draw(st.booleans()) else draw(st.integers(-7, 12)) + 0 * dim(0)
    kind = draw(st.sampled_from(["add", "mul", "floordiv", "mod", "ceildiv"]))
    lhs = draw(expressions(depth - 1))
    if kind == "add":
        return lhs + draw(expressions(depth - 1))
    c = draw(st.integers(1, 9) if kind != "mul" else st.integers(-4, 9))
    return {"mul": lambda: lhs * c, "floordiv": lambda: lhs // c, "mod": lambda: lhs % c,
            "ceildiv": lambda: lhs.ceildiv(c)}[kind]()


@settings(max_examples=300, deadline=None)
@given(results=st.lists(expressions(), min_size=1, max_size=3),
       bounds=st.lists(st.tuples(st.integers(-3, 4), st.integers(0, 6)), min_size=3, max_size=3))
def test_simplification_preserves_values(results, bounds):
    sizes = [(lo, lo + n) for lo, n in bounds]
    text_dims = ", ".join(f"{n} in [{lo}, {hi}]" for n, (lo, hi) in zip(["d0", "d1", "s0"], sizes))
    body = ", ".join(str(e) for e in results)
    m = P(f"(d0, d1)[s0] -> ({body}), domain: {text_dims}")
    simplified = m.simplify()
    assert len(simplified.symbols) <= 1
    before = graph(m)
    if simplified.symbols:
        assert graph(simplified) == before
    else:  # s0 was unused and removed: every s0 gives the same result
        after = graph(simplified)
        assert {k[:2]: v for k, v in before.items()} == after


@settings(max_examples=200, deadline=None)
@given(e=expressions(), lo=st.integers(-20, 20), width=st.integers(0, 15), bounds=st.integers(0, 5))
def test_constraint_simplification_keeps_the_domain(e, lo, width, bounds):
    m = P(f"(d0, d1)[s0] -> (d0, d1, s0), domain: d0 in [0, {bounds + 2}], d1 in [-2, {bounds}],"
          f" s0 in [0, 3], {e} in [{lo}, {lo + width}]")
    simplified = m.simplify(replace_point_dims=False)
    before = set(graph(m).values())
    after = set() if simplified.is_known_empty else {r for r in graph(simplified).values()}
    assert before == after
