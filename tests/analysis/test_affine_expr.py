"""Expressions: canonical construction, printing, evaluation, ranges, conversion to xdsl."""

import pytest

from hlocc.analysis.affine_expr import (
    Const,
    IndexingError,
    Sum,
    dim,
    evaluate,
    expr_range,
    replace_vars,
    rt,
    sym,
    to_xdsl,
    variables,
)
from hlocc.analysis.interval import Interval

d0, d1, s0 = dim(0), dim(1), sym(0)


def test_sums_are_canonical_regardless_of_construction_order():
    assert d0 * 4 + d1 + 3 == 3 + d1 + 4 * d0
    assert (d0 + d1) * 2 - d1 * 2 == d0 * 2
    assert d0 - d0 == Const(0)
    assert isinstance(d0 * 3, Sum)
    assert (d0 + 0) is d0 or d0 + 0 == d0


def test_constant_folding_of_div_and_mod():
    assert Const(7) // 2 == Const(3)
    assert Const(-7) // 2 == Const(-4)
    assert Const(-7) % 3 == Const(2)
    assert Const(7).ceildiv(2) == Const(4)
    assert d0 // 1 == d0
    assert d0 % 1 == Const(0)


@pytest.mark.parametrize("bad", [lambda: d0 * d1, lambda: d0 // 0, lambda: d0 % -2, lambda: d0 // d1])
def test_ill_formed_expressions_raise(bad):
    with pytest.raises(IndexingError):
        bad()


@pytest.mark.parametrize("expr, text", [
    (d0 * 8 + d1, "d0 * 8 + d1"),
    ((d1 % 2) * 4 + d0, "(d1 % 2) * 4 + d0".replace("%", "mod")),
    ((d1 // 8) % 512, "(d1 floordiv 8) mod 512"),
    (-d1 + 16, "-d1 + 16"),
    ((d0 - 1) // 2, "(d0 - 1) floordiv 2"),
    (d0 - d1 * 3 - 5, "d0 - d1 * 3 - 5"),
    ((d0 * 2) % 3 + s0, "(d0 * 2) mod 3 + s0"),
    (d0 % 2 + d1, "d0 mod 2 + d1"),
    (d0.ceildiv(4), "d0 ceildiv 4"),
    (-(d0 // 2), "-(d0 floordiv 2)"),
    (rt(1) + 2, "r1 + 2"),
])
def test_printing_uses_mlir_syntax(expr, text):
    assert str(expr) == text


def test_evaluate_uses_floor_semantics():
    e = (d0 - 5) // 3 + (d0 - 5) % 3 + (d0 - 5).ceildiv(3)
    values = {dim(0): 1}
    assert evaluate(e, values.__getitem__) == (-4 // 3) + (-4 % 3) + (-(4 // 3))


def test_expr_range_is_sound_and_exact_for_sums():
    bounds = {d0: Interval(0, 9), d1: Interval(-2, 3)}.__getitem__
    assert expr_range(d0 * 2 - d1 + 1, bounds) == Interval(-2, 21)
    assert expr_range(d0 // 4, bounds) == Interval(0, 2)
    assert expr_range(d0 % 4, bounds) == Interval(0, 3)
    assert expr_range((d0 + 20) % 40, bounds) == Interval(20, 29)


def test_replace_vars_and_variables():
    e = (d0 * 4 + s0) // 2
    assert variables(e) == {d0, s0}
    replaced = replace_vars(e, lambda v: Const(3) if v == s0 else d1)
    assert replaced == (d1 * 4 + 3) // 2
    assert replace_vars(d0 % 4, lambda v: Const(10)) == Const(2)


def test_to_xdsl_keeps_the_value():
    e = (d0 * 4 + s0 + rt(0)) % 6 + d1 // 2
    x = to_xdsl(e, 2, 1)
    for a, b, c, r in [(1, 2, 3, 4), (5, 0, 1, 7)]:
        ours = evaluate(e, {d0: a, d1: b, s0: c, rt(0): r}.__getitem__)
        assert x.eval([a, b], [c, r]) == ours
