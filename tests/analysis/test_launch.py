"""Launch-grid maps: the seed's GELU map exactly, and the bijection property (every output
element is written exactly once), including partial last blocks and non-default layouts."""

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from hlocc.analysis.indexing_map import Contiguity, contiguity
from hlocc.analysis.launch import LaunchDims, loop_launch_dims, loop_launch_map

SEED_MAP = ("(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512,"
            " (bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575],"
            " vector_index in [0, 3]")


def test_seed_gelu_loop_map():
    launch = loop_launch_dims(6 * 512 * 4096, threads_per_block=128, vector_size=4)
    assert launch == LaunchDims(128, 24576)
    m = loop_launch_map([6, 512, 4096], launch, vector_size=4)
    assert str(m) == SEED_MAP
    assert contiguity(m, 0) == Contiguity(stride=1, alignment=4)


def test_partial_last_block_has_a_constraint():
    m = loop_launch_map([1000], loop_launch_dims(1000, 128, 4), vector_size=4)
    assert str(m) == ("(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index), domain:"
                      " th_x in [0, 127], bl_x in [0, 1], vector_index in [0, 3], bl_x * 128 + th_x in [0, 249]")


def assert_bijective(dims, m):
    pts = m.points()
    out = m.apply(pts)
    n = int(np.prod(dims))
    assert len(out) == n, "every grid point in the domain writes one element"
    for i, size in enumerate(dims):
        assert out[:, i].min() >= 0 and out[:, i].max() < size
    linear = np.ravel_multi_index(tuple(out.T), dims)
    assert np.array_equal(np.sort(linear), np.arange(n)), "each element exactly once"


@settings(max_examples=60, deadline=None)
@given(dims=st.lists(st.integers(1, 9), min_size=1, max_size=3), threads=st.sampled_from([1, 2, 4, 8, 32]),
       vector=st.sampled_from([1, 2, 4]), unroll=st.sampled_from([1, 2, 3]), layout_seed=st.integers(0, 5))
def test_loop_launch_map_is_a_bijection(dims, threads, vector, unroll, layout_seed):
    rank = len(dims)
    layout = list(np.random.default_rng(layout_seed).permutation(rank))
    n = int(np.prod(dims))
    launch = loop_launch_dims(n, threads, vector, unroll)
    m = loop_launch_map(dims, launch, vector, unroll, minor_to_major=layout)
    assert_bijective(dims, m)
    # In the layout's physical order, the written element is exactly the linear grid position.
    pts = m.points()
    out = m.apply(pts)
    physical = [dims[d] for d in reversed(layout)]
    linear = np.ravel_multi_index(tuple(out[:, d] for d in reversed(layout)), physical)
    th, bl = pts[:, 0], pts[:, 1]
    syms = {v.name: pts[:, 2 + i] for i, v in enumerate(m.symbols)}
    expected = ((bl * threads + th) * (unroll * vector) + syms.get("unroll_index", 0) * vector
                + syms.get("vector_index", 0))
    assert np.array_equal(linear, expected)


def test_odd_sizes_bijection():
    for dims, threads, vector, unroll in [([7, 13], 8, 2, 3), ([3, 5, 7], 32, 4, 1), ([97], 4, 4, 2)]:
        launch = loop_launch_dims(int(np.prod(dims)), threads, vector, unroll)
        m = loop_launch_map(dims, launch, vector, unroll)
        assert m.constraints, "a partial last block needs a bounds constraint"
        assert_bijective(dims, m)
