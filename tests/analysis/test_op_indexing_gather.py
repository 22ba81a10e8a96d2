"""Gather's output->input maps for general dimension numbers, against the reference evaluator (the
bit-per-element check of test_op_indexing.py): runtime variable k, fixed to the clamped component k
of the index vector the output element's batch position picks, must give exactly the operand
elements the evaluator read."""

import numpy as np
import pytest
from test_op_indexing import run_and_check

from hlocc.analysis.affine_expr import dim, rt


def clamped_starts(indices: np.ndarray, operand: list[int], offset_dims, start_index_map, index_vector_dim,
                   slice_sizes):
    """runtime(out_index) for run_and_check: the clamped index vector at the batch position."""
    def runtime(index):
        batch = [i for d, i in enumerate(index) if d not in offset_dims]
        if index_vector_dim == indices.ndim:
            vector = [indices[tuple(batch)]]
        else:
            vector = [indices[tuple(batch[:index_vector_dim] + [k] + batch[index_vector_dim:])]
                      for k in range(len(start_index_map))]
        return tuple(min(max(int(v), 0), operand[d] - slice_sizes[d]) for v, d in zip(vector, start_index_map))
    return runtime


CASES = {
    # The index vector in the middle, start_index_map permuted, offset dims between batch dims.
    "vector_dim_in_the_middle": ([3, 5], [2, 2, 3], "u64[2,2,3,2]", [1, 3], [], [1, 0], 1, [2, 2], ""),
    # An implicit index vector, a collapsed dim (embedding lookup).
    "implicit_vector": ([6, 4], [2, 3], "u64[2,3,4]", [2], [0], [0], 2, [1, 4], ""),
    # A batching dim: operand dim 0 follows indices dim 1; one dim collapsed, one a window.
    "batching": ([2, 3, 4], [4, 2], "u64[4,2,3]", [2], [1], [1], 2, [1, 1, 3],
                 ", operand_batching_dims={0}, start_indices_batching_dims={1}"),
    # The index vector first, a window dim that is not indexed.
    "vector_dim_first": ([4, 3, 2], [2, 3], "u64[3,2,3,1]", [1, 2, 3], [], [0, 2], 0, [2, 3, 1], ""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_general_gather(name):
    operand, indices_dims, out, offset_dims, collapsed, start_index_map, vector_dim, sizes, extra = CASES[name]
    rng = np.random.default_rng(len(name))
    indices = rng.integers(-3, 7, indices_dims).astype(np.int32)
    text = (f"p = u64[{','.join(map(str, operand))}] parameter(0)\n"
            f"idx = s32[{','.join(map(str, indices_dims))}] parameter(1)\n"
            f"ROOT g = {out} gather(p, idx), offset_dims={{{','.join(map(str, offset_dims))}}}, "
            f"collapsed_slice_dims={{{','.join(map(str, collapsed))}}}, "
            f"start_index_map={{{','.join(map(str, start_index_map))}}}, index_vector_dim={vector_dim}, "
            f"slice_sizes={{{','.join(map(str, sizes))}}}{extra}")
    runtime = clamped_starts(indices, operand, offset_dims, start_index_map, vector_dim, sizes)
    maps = run_and_check(text, {0: operand}, {1: indices}, runtime=runtime)
    assert [v.source[1] for v in maps[0].runtime] == [1] * len(start_index_map)


def test_permuted_start_index_map_map():
    maps = run_and_check("p = u64[6,5] parameter(0)\nidx = s32[2,2] parameter(1)\n"
                         "ROOT g = u64[2,3,2] gather(p, idx), offset_dims={1,2}, collapsed_slice_dims={},"
                         " start_index_map={1,0}, index_vector_dim=1, slice_sizes={3,2}",
                         {0: [6, 5]}, {1: np.array([[9, -1], [2, 1]], np.int32)},
                         runtime=lambda index: ((3, 0), (2, 1))[index[0]])
    assert maps[0].results == (dim(1) + rt(1), dim(2) + rt(0))
    assert [(v.bounds.lo, v.bounds.hi) for v in maps[0].runtime] == [(0, 3), (0, 3)]
    assert str(maps[1]) == "(d0, d1, d2)[s0] -> (d0, s0), domain: d0 in [0, 1], d1 in [0, 2], d2 in [0, 1], s0 in [0, 1]"
