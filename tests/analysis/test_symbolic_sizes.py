"""Symbolic sizes in index expressions (`$n` atoms, affine_expr) and the symbolic launch grid
(launch.symbolic_loop_grid): the arithmetic builds them from DimExprs, the simplifier removes them
only by exact identities, the map text round-trips, and the grid covers every output element
exactly once at concrete sizes."""

from __future__ import annotations

import itertools

import pytest

from hlocc.analysis.affine_expr import Const, IndexingError, Size, dim, evaluate, floordiv, mod, sym
from hlocc.analysis.indexing_map_text import parse_indexing_map
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import symbolic_loop_grid
from hlocc.analysis.linearize import delinearize, linear_index
from hlocc.analysis.simplifier import simplify_expr
from hlocc.hlo.symbolic import symbol

B, N = symbol("b"), symbol("n")


def _bounds(v):
    return Interval(0, 1000)


@pytest.mark.parametrize("dims", [[128, N], [B, N, 4], [B, 3, N], [N]], ids=["128xn", "bxnx4", "bx3xn", "n"])
def test_delinearize_then_linearize_is_the_identity(dims):
    linear = (dim(1) * 64 + dim(0)) * 16 + sym(0)
    assert simplify_expr(linear_index(dims, delinearize(linear, dims)), _bounds) == linear


def test_size_arithmetic_and_its_values():
    e = dim(0) * (2 * N + 1) + floordiv(dim(1), N) + mod(dim(1), 4 * N)
    values = {"n": 7}
    for d0, d1 in itertools.product(range(5), range(60)):
        got = evaluate(e, lambda v, point=(d0, d1): point[v.index], values)
        assert got == d0 * 15 + d1 // 7 + d1 % 28
    assert simplify_expr(floordiv(dim(0) * N + dim(1) * 2 + 3, N), _bounds) == dim(0) + floordiv(dim(1) * 2 + 3, N)
    assert mod(dim(0) * N, N) == Const(0) and floordiv(dim(0) * N, N) == dim(0)
    assert N - dim(0) == Size(N) - dim(0)  # a DimExpr on the left works too
    with pytest.raises(IndexingError, match="needs a binding"):
        evaluate(dim(0) * N, lambda v: 1)


def test_map_text_round_trips_sizes():
    text = "(d0)[s0] -> (d0 floordiv $(b*n), (d0 * $n) mod $b + s0), domain: d0 in [0, 9], s0 in [0, 3]"
    m = parse_indexing_map(text)
    assert str(parse_indexing_map(str(m))) == str(m)
    assert "$(b*n)" in str(m) and "$n" in str(m)


@pytest.mark.parametrize("dims,layout", [([B, N], None), ([B, 128], None), ([3, N, B], (2, 1, 0)), ([B, N], (0, 1))],
                         ids=["bxn", "bx128", "3xnxb", "bxn_column_major"])
def test_the_grid_covers_every_element_once(dims, layout):
    threads, vector = 4, 8
    grid = symbolic_loop_grid(dims, threads, vector, layout)
    for b, n in [(1, 1), (3, 7), (2, 8), (5, 17)]:
        values = {"b": b, "n": n}
        shape = [d if isinstance(d, int) else d.evaluate(values) for d in dims]
        blocks = max(1, grid.launch.blocks.evaluate(values))
        seen = []
        for bl, th in itertools.product(range(blocks), range(threads)):
            whole = all(evaluate(e, lambda v, ids=(th, bl): ids[v.index], values) >= 0 for e in grid.room)
            for lane in range(vector):
                def var(v, point=(th, bl, lane)):
                    return point[v.index] if v.kind == 0 else point[2]
                inside = all(evaluate(e, var, values) >= 1 for e in grid.inside)
                assert inside or not whole, (b, n, th, bl, lane)
                if inside:
                    seen.append(tuple(evaluate(e, var, values) for e in grid.map.results))
        expected = list(itertools.product(*[range(s) for s in shape]))
        assert sorted(seen) == expected, (b, n)
