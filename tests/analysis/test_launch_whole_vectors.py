"""`symbolic_loop_grid`'s whole-vector case (analysis/launch.py): a vectored size that is a multiple
of the vector (a speculated `n := 16*n_16`, or a static minor size) has no partial vector, so only
the thread-count room is checked and the chunk count is exact."""

from hlocc.analysis.launch import symbolic_loop_grid
from hlocc.hlo.symbolic import floordiv, symbol

B, N, N16 = symbol("b"), symbol("n"), symbol("n_16")


def test_a_symbolic_row_that_is_a_multiple_of_the_vector_has_whole_vectors():
    grid = symbolic_loop_grid([B, 16 * N16], 64, 16)
    assert grid.whole_vectors and len(grid.room) == 1 and len(grid.inside) == 1
    assert grid.launch.blocks == floordiv(B * N16 + 63, 64)  # n_16 chunks a row, no rounding division
    assert str(grid.map).startswith("(th_x, bl_x)[vector_index] -> ((bl_x * 64 + th_x) floordiv $n_16, "
                                    "((bl_x * 64 + th_x) mod $n_16) * 16 + vector_index)")


def test_a_bare_symbolic_row_keeps_the_partial_vector_checks():
    grid = symbolic_loop_grid([B, N], 64, 16)
    assert not grid.whole_vectors and len(grid.room) == 2 and len(grid.inside) == 2
    assert grid.launch.blocks == floordiv(B * floordiv(N + 15, 16) + 63, 64)


def test_a_linear_grid_is_whole_when_its_element_count_is_a_multiple():
    assert symbolic_loop_grid([B, 128], 64, 16).whole_vectors
    assert not symbolic_loop_grid([B, 127], 64, 16).whole_vectors
