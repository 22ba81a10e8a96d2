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


def _covered(grid, binding, vector):
    """The output indices the grid's threads write at `binding` (each (thread, lane) inside)."""
    import numpy as np

    from hlocc.analysis.affine_expr import VarKind, evaluate

    blocks = grid.launch.blocks
    blocks = blocks.evaluate(binding) if hasattr(blocks, "evaluate") else blocks
    th, bl, lane = np.meshgrid(np.arange(grid.launch.threads_per_block), np.arange(blocks), np.arange(vector),
                               indexing="ij")

    def value_of(v):
        return (th, bl)[v.index] if v.kind is VarKind.DIM else lane
    inside = np.ones(th.shape, bool)
    for e in grid.inside:
        inside &= np.broadcast_to(evaluate(e, value_of, binding), th.shape) >= 1
    index = [np.broadcast_to(evaluate(e, value_of, binding), th.shape)[inside] for e in grid.map.results]
    return list(zip(*index))


def test_a_tiled_grid_writes_every_element_once():
    """`tiled_symbolic_grid` (a fusion that transposes its minor dim): tiles of 16 rows x 8 columns
    over [b, r, c] cover every element exactly once, partial tiles in both directions included."""
    grid = symbolic_loop_grid([B, N, symbol("c")], 64, 8, tile_rows=16)
    for binding in ({"b": 2, "n": 37, "c": 19}, {"b": 1, "n": 16, "c": 8}, {"b": 3, "n": 1, "c": 1}):
        got = _covered(grid, binding, 8)
        expected = {(i, j, k) for i in range(binding["b"]) for j in range(binding["n"]) for k in range(binding["c"])}
        assert len(got) == len(expected) and set(got) == expected, binding
