"""IndexingMap: text round trip, compose, concat, substitute, rescale, unused variables, emptiness,
bounds and the contiguity query."""

import pytest
from helpers import point_set

from hlocc.analysis.affine_expr import Const, IndexingError, dim, rt, sym
from hlocc.analysis.indexing_map import (
    Contiguity,
    IndexingMap,
    Variable,
    compose,
    concat_results,
    contiguity,
)
from hlocc.analysis.indexing_map_text import map_to_text, parse_indexing_map
from hlocc.analysis.interval import Interval

P = parse_indexing_map

ROUND_TRIP = [
    "() -> ()",
    "(d0, d1) -> (d0 mod 2 + d1), domain: d0 in [0, 3], d1 in [-4, 4]",
    "(d0, d1)[s0, s1, s2] -> (s2, d0 + d1, s1, s0), domain: d0 in [0, 3], d1 in [0, 4], s0 in [0, 1],"
    " s1 in [0, 1], s2 in [0, 3]",
    "(d0, d1)[s0, s1, s2]{r0} -> (s2, d0 + d1, s1, s0, r0), domain: d0 in [0, 3], d1 in [0, 4], s0 in [0, 1],"
    " s1 in [0, 1], s2 in [0, 3], r0 in [0, 100], (r0 + 1) mod 5 in [1, 1], d0 mod 4 in [0, 0],"
    " d1 + s0 in [0, 45]",
    "(bl_x) -> (bl_x floordiv 100663296), domain: bl_x in [0, 2415919103]",
    # Terms print in canonical order (XLA's test has the last term second).
    "(d0, d1)[s0, s1] -> ((d0 + d0 mod 3) floordiv 3 + (d0 + s0) mod 3 + s0 + (s0 * 2) mod 3),"
    " domain: d0 in [0, 9], d1 in [0, 19], s0 in [0, 29], s1 in [0, 39]",
    "(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512,"
    " (bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575],"
    " vector_index in [0, 3]",
    "(d0){r0} -> (r0 - d0 - 7, d0 ceildiv 3), domain: d0 in [0, 9], r0 in [-5, 5]",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_print_parse_round_trip(text):
    m = P(text)
    assert map_to_text(m) == text
    assert P(map_to_text(m, multiline=True)) == m


def test_parse_accepts_xla_multiline_form_and_rt_names():
    m = P("""(d0, d1){rt0} -> (d0 + rt0, d1),
             domain:
             d0 in [0, 0],
             d1 in [0, 1],
             rt0 in [0, 226]""")
    assert m.results == (dim(0) + rt(0), dim(1))
    assert m.runtime == (Variable(Interval(0, 226)),)


def test_known_empty_prints_and_parses():
    m = P("(d0) -> (d0), domain: d0 in [1, 0]")
    assert m.is_known_empty and str(m) == "KNOWN EMPTY"
    assert P("KNOWN EMPTY").is_known_empty


@pytest.mark.parametrize("text, where", [
    ("(d0) -> (d0 * d0), domain: d0 in [0, 3]", "1:15"),
    ("(d0) -> (d1), domain: d0 in [0, 3]", "1:10"),
    ("(d0) -> (d0), domain: d0 in [0 3]", "1:32"),
    ("(d0) -> (d0)", "no bounds given for d0"),
    ("(d0) -> (d0 floordiv 0), domain: d0 in [0, 3]", "positive"),
])
def test_parse_errors_say_where_and_why(text, where):
    with pytest.raises(IndexingError, match=where):
        P(text)


def test_compose_substitutes_and_keeps_both_domains():
    # out[d0, d1] = pad(...)[d0 - 1] style: first is a slice, second a reverse.
    first = P("(d0, d1) -> (d0 * 2 + 1, d1), domain: d0 in [0, 3], d1 in [0, 5]")
    second = P("(d0, d1)[s0] -> (-d0 + 9, d1 + s0), domain: d0 in [0, 9], d1 in [0, 9], s0 in [0, 4]")
    composed = compose(first, second)
    # d1 + s0 in [0, 9] always holds for d1 <= 5, s0 <= 4, so the constraint is dropped.
    assert str(composed) == "(d0, d1)[s0] -> (d0 * -2 + 8, d1 + s0), domain: d0 in [0, 3], d1 in [0, 5], s0 in [0, 4]"
    window = P("(d0)[s0] -> (d0 + s0), domain: d0 in [0, 9], s0 in [0, 4], d0 + s0 in [0, 9]")
    strided = compose(P("(d0) -> (d0 * 2), domain: d0 in [0, 4]"), window)
    assert str(strided) == ("(d0)[s0] -> (d0 * 2 + s0), domain: d0 in [0, 4], s0 in [0, 4],"
                            " d0 * 2 + s0 in [0, 9]")


def test_compose_orders_symbols_and_runtime_vars_like_xla():
    first = P("(d0)[s0]{r0} -> (d0 + s0 + r0), domain: d0 in [0, 3], s0 in [0, 1], r0 in [0, 2]")
    second = P("(d0)[s0]{r0} -> (d0 * 10 + s0 * 100 + r0 * 1000), domain: d0 in [0, 99], s0 in [0, 5],"
               " r0 in [0, 7]")
    composed = compose(first, second)
    assert composed.symbols == (Variable(Interval(0, 5)), Variable(Interval(0, 1)))
    assert composed.runtime == (Variable(Interval(0, 7)), Variable(Interval(0, 2)))
    assert composed.results == (sym(0) * 100 + dim(0) * 10 + sym(1) * 10 + rt(0) * 1000 + rt(1) * 10,)


def test_compose_restricts_to_the_inner_domain():
    first = P("(d0) -> (d0 - 3), domain: d0 in [0, 9]")
    second = P("(d0) -> (d0), domain: d0 in [0, 4]")
    assert str(compose(first, second)) == "(d0) -> (d0 - 3), domain: d0 in [3, 7]"
    assert compose(first, P("(d0) -> (d0), domain: d0 in [20, 30]")).is_known_empty


def test_concat_results_appends_symbols():
    a = P("(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 1]")
    b = P("(d0)[s0] -> (s0), domain: d0 in [0, 3], s0 in [0, 7], d0 + s0 in [0, 5]")
    c = concat_results(a, b)
    assert str(c) == ("(d0)[s0, s1] -> (d0 + s0, s1), domain: d0 in [0, 3], s0 in [0, 1], s1 in [0, 7],"
                      " d0 + s1 in [0, 5]")
    with pytest.raises(IndexingError):
        concat_results(a, P("(d0) -> (d0), domain: d0 in [0, 4]"))


def test_substitute_replaces_variables():
    m = P("(d0, d1) -> (d0 + d1), domain: d0 in [0, 3], d1 in [0, 3]")
    fixed = m.substitute(lambda v: Const(2) if v == dim(1) else v)
    assert fixed.results == (dim(0) + 2,)


def test_rescale_symbols():
    m = P("(d0)[s0] -> (d0 + s0), domain: d0 in [0, 3], s0 in [0, 20], s0 mod 4 in [2, 2]")
    rescaled = m.simplify()
    assert str(rescaled) == "(d0)[s0] -> (s0 * 4 + d0 + 2), domain: d0 in [0, 3], s0 in [0, 4]"
    assert point_set(rescaled) == point_set(m)


def test_remove_unused_vars():
    m = P("(d0, d1, d2)[s0, s1]{r0, r1} -> (d2 + s1 + r1), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 3],"
          " s0 in [0, 4], s1 in [0, 5], r0 in [0, 6], r1 in [0, 7]")
    assert str(m.remove_unused_symbols()) == (
        "(d0, d1, d2)[s0]{r0, r1} -> (d2 + s0 + r1), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 3],"
        " s0 in [0, 5], r0 in [0, 6], r1 in [0, 7]")
    no_dims, kept = m.remove_unused_dims()
    assert kept == [2] and no_dims.results == (dim(0) + sym(1) + rt(1),)
    no_rt, kept_rt = m.remove_unused_runtime()
    assert kept_rt == [1] and no_rt.results == (dim(2) + sym(1) + rt(0),)


@pytest.mark.parametrize("text, empty", [
    ("(d0) -> (d0), domain: d0 in [0, 3], d0 * 2 in [3, 3]", True),
    ("(d0)[s0] -> (d0), domain: d0 in [0, 3], s0 in [0, 3], d0 + s0 in [6, 9]", False),
    ("(d0)[s0] -> (d0), domain: d0 in [0, 3], s0 in [0, 3], d0 + s0 in [7, 9]", True),
    ("(d0) -> (d0), domain: d0 in [0, 9], d0 mod 4 in [5, 6]", True),
])
def test_is_known_empty(text, empty):
    assert P(text).simplify().is_known_empty is empty


def test_constraint_normalisation():
    m = P("(d0, d1) -> (d0, d1), domain: d0 in [0, 99], d1 in [0, 9], d0 * 4 + 8 in [0, 40],"
          " d0 floordiv 2 + 0 in [1, 3], -d1 in [-5, 0]")
    assert str(m.simplify()) == "(d0, d1) -> (d0, d1), domain: d0 in [2, 7], d1 in [0, 5]"
    launch = P("(th, bl)[v] -> (bl * 512 + th * 4 + v), domain: th in [0, 127], bl in [0, 9], v in [0, 3],"
               " bl * 512 + th * 4 + v in [0, 4999]")
    assert str(launch.simplify()).endswith("bl * 128 + th in [0, 1249]")


def test_expr_range_over_the_domain():
    m = P("(d0)[s0] -> (d0), domain: d0 in [2, 5], s0 in [-1, 1]")
    assert m.expr_range(dim(0) * 3 - sym(0)) == Interval(5, 16)
    assert m.result_ranges() == [Interval(2, 5)]


@pytest.mark.parametrize("text, symbol, result, expected", [
    ("(th_x, bl_x)[v] -> (bl_x floordiv 8, (bl_x mod 8) * 512 + th_x * 4 + v), domain: th_x in [0, 127],"
     " bl_x in [0, 99], v in [0, 3]", 0, -1, Contiguity(1, 4)),
    ("(d0)[s0, s1] -> (d0 * 6 + s0 * 2 + s1), domain: d0 in [0, 9], s0 in [0, 2], s1 in [0, 1]", 0, 0,
     Contiguity(2, 1)),
    ("(d0)[s0] -> (d0 * 8 + 16), domain: d0 in [0, 9], s0 in [0, 3]", 0, 0, Contiguity(0, 8)),
    ("(d0)[s0] -> (s0 + 3), domain: d0 in [0, 9], s0 in [0, 3]", 0, 0, Contiguity(1, 3)),
    ("(d0)[s0] -> (s0), domain: d0 in [0, 9], s0 in [0, 3]", 0, 0, Contiguity(1, 0)),
    ("(d0)[s0] -> (s0, d0 + s0 * 4), domain: d0 in [0, 9], s0 in [0, 3]", 0, 1, None),
    ("(d0)[s0] -> ((d0 * 4 + s0) mod 6), domain: d0 in [0, 9], s0 in [0, 3]", 0, 0, None),
    ("(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 9], s0 in [0, 3], d0 * 4 + s0 in [0, 30]", 0, 0, None),
])
def test_contiguity(text, symbol, result, expected):
    assert contiguity(P(text), symbol, result) == expected


def test_points_and_apply_enumerate_the_domain():
    m = P("(d0)[s0] -> (d0 * 2 + s0), domain: d0 in [0, 2], s0 in [0, 1], d0 + s0 in [1, 2]")
    assert point_set(m) == {((0,), (1,)), ((1,), (2,)), ((1,), (3,)), ((2,), (4,))}
    assert IndexingMap.identity([2, 3]).points().shape == (6, 2)
