"""Kernels with runtime dims for the data-dependent and windowed ops (issue 15 item 5): dynamic-slice
and gather with their starts clamped against the runtime sizes, scatter skipping the windows that
leave the operand at the runtime size, and reduce-window with a window of a symbolic length (JAX's
cumsum over a symbolic axis), each compiled once and compared bit for bit (sums within the
reassociation tolerance) with the evaluator on the module specialised to each binding;
bounds-checked at sizes 0, 1 and primes."""

from __future__ import annotations

import numpy as np
import pytest
from test_symbolic_kernels import CHECKED, _check

import hlocc
from hlocc.errors import ArgumentError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.specialize import specialize

PRIMES = [1, 2, 3, 7, 17, 37, 101]

# a row picked by a runtime index from a symbolic row count (JAX's x[-1]): the clamp is `b - 1`
LAST_ROW = """HloModule m
ENTRY e {
  p0 = f32[?b,4] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT d = f32[1,4] dynamic-slice(p0, i, j), dynamic_slice_sizes={1,4}
}"""

# rows gathered from a symbolic row count (JAX's x[jnp.array([...])])
TAKE_ROWS = """HloModule m
ENTRY e {
  p0 = f32[?b,4] parameter(0)
  i = s32[3,1] parameter(1)
  ROOT g = f32[3,4] gather(p0, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,4}
}"""

# an embedding lookup over a symbolic sequence (GPT-2's wte[ids]): static table, symbolic indices;
# and a 2-component index vector into a table with a symbolic row count and a window of 2 columns
EMBEDDING = """HloModule m
ENTRY e {
  table = f32[11,8] parameter(0)
  ids = s32[?s] parameter(1)
  ROOT g = f32[?s,8] gather(table, ids), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,8}
}"""
PATCHES = """HloModule m
ENTRY e {
  table = f32[?n,5] parameter(0)
  at = s32[?s,2] parameter(1)
  ROOT g = f32[?s,2] gather(table, at), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,2}
}"""

ADD = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

# JAX's cumsum over a symbolic axis: a window of b rows padded by b - 1 before
CUMSUM = ADD + """ENTRY e {
  p0 = f32[?b,4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[?b,4] reduce-window(p0, z), window={size=?(b)x1 pad=?(b-1)_0x0_0}, to_apply=add
}"""

# a static window over a symbolic dim: strided, padded both sides; and one with base (lhs) and
# window (rhs) dilation, whose positions are checked one by one
STRIDED_MAX = """HloModule m
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  p0 = f32[3,?n] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[3,?(floordiv(n,2)+1)] reduce-window(p0, z), window={size=1x3 stride=1x2 pad=0_0x1_2}, to_apply=max
}"""
DILATED_SUM = ADD + """ENTRY e {
  p0 = f32[?n] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[?(2*n-1)] reduce-window(p0, z), window={size=2 pad=1_1 lhs_dilate=2 rhs_dilate=2}, to_apply=add
}"""


# rows added into a symbolic row count at runtime indices (repeated, out of range): static updates
# keep the static launch; symbolic updates (a segment sum over a symbolic count) take the symbolic
# grid; a window of 2 rows checks `start <= n - 2` at the runtime n; a symbolic window width
SCATTER_STATIC_UPDATES = ADD + """ENTRY e {
  op = f32[?n,4] parameter(0)
  i = s32[3,1] parameter(1)
  u = f32[3,4] parameter(2)
  ROOT s = f32[?n,4] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
SCATTER_SYMBOLIC_UPDATES = SCATTER_STATIC_UPDATES.replace("s32[3,1]", "s32[?k,1]").replace("f32[3,4]", "f32[?k,4]")
SCATTER_TWO_ROWS = ADD + """ENTRY e {
  op = f32[?n,4] parameter(0)
  i = s32[?k,1] parameter(1)
  u = f32[?k,2,4] parameter(2)
  ROOT s = f32[?n,4] scatter(op, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
SCATTER_SYMBOLIC_WINDOW = ADD + """ENTRY e {
  op = f32[8,?m] parameter(0)
  i = s32[?k,1] parameter(1)
  u = f32[?k,?m] parameter(2)
  ROOT s = f32[8,?m] scatter(op, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, unique_indices=true, to_apply=add
}"""


def _index_arguments(module, binding, rng):
    """Arguments with indices spread well past both ends (the clamp, and negative starts)."""
    special = specialize(module, binding)
    args = []
    for p in special.entry.parameters:
        dims = p.shape.dims
        if p.shape.element_type.name == "f32":
            args.append(rng.standard_normal(dims).astype(np.float32))
        else:
            args.append(rng.integers(-3, max(binding.values()) + 4, dims).astype(p.shape.dtype))
    return special, args


@pytest.fixture
def spread_indices(monkeypatch):
    import test_symbolic_kernels

    monkeypatch.setattr(test_symbolic_kernels, "_arguments", _index_arguments)


@pytest.mark.parametrize("text", [LAST_ROW, TAKE_ROWS], ids=["last_row", "take_rows"])
def test_clamped_starts_against_a_symbolic_operand(text, spread_indices):
    _check(text, [{"b": n} for n in PRIMES])
    _check(text, [{"b": n} for n in PRIMES], CHECKED)


def test_embedding_over_a_symbolic_sequence(spread_indices):
    _check(EMBEDDING, [{"s": s} for s in [0, *PRIMES]], CHECKED)


def test_index_vector_into_a_symbolic_table(spread_indices):
    _check(PATCHES, [{"n": n, "s": s} for n, s in [(2, 1), (2, 7), (3, 0), (17, 5), (37, 37)]], CHECKED)


# scans the emitter takes: reverse along a symbolic minor axis (a window padded after), a 1-D
# cumulative max (no other dims: one line), a static cumsum (the static path takes it too)
REVERSE_MINOR = ADD + """ENTRY e {
  p0 = f32[3,?n] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3,?n] reduce-window(p0, z), window={size=1x?(n) pad=0_0x0_?(n-1)}, to_apply=add
}"""
CUMMAX_1D = """HloModule m
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  p0 = f32[?n] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[?n] reduce-window(p0, z), window={size=?(n) pad=?(n-1)_0}, to_apply=max
}"""
STATIC_CUMSUM = ADD + """ENTRY e {
  p0 = f32[37,5] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[37,5] reduce-window(p0, z), window={size=37x1 pad=36_0x0_0}, to_apply=add
}"""


def test_cumsum_window_of_the_runtime_length():
    """A scan: one running sum per column, O(n) (emitters/reduce_window_scan.py)."""
    bindings = [{"b": n} for n in [*PRIMES, 1000]]  # b >= 1: a window of 0 is no HLO
    kernel = _check(CUMSUM, bindings, rtol=1e-5, atol=1e-4)
    assert kernel.emitter == "reduce-window-scan"
    _check(CUMSUM, bindings[:-1], CHECKED, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("text", [REVERSE_MINOR, CUMMAX_1D], ids=["reverse_minor", "cummax_1d"])
def test_more_scans(text):
    kernel = _check(text, [{"n": n} for n in PRIMES], CHECKED, rtol=1e-5, atol=1e-4)
    assert kernel.emitter == "reduce-window-scan"


def test_static_scan():
    from hlocc.backends.cpu.kernel import compile_fusion

    module = parse_hlo(STATIC_CUMSUM)
    kernel = compile_fusion(module.entry, CHECKED)
    x = np.random.default_rng(3).standard_normal((37, 5)).astype(np.float32)
    np.testing.assert_allclose(kernel(x)[0], np.asarray(hlocc.compile(module, "interpreter")(x)), rtol=1e-5, atol=1e-5)
    assert kernel.emitter == "reduce-window-scan"


def test_widened_bf16_scan_is_a_scan_with_a_rounding_epilogue():
    """A bf16 cumsum over a symbolic axis after widen-narrow-reductions is
    convert(reduce-window(convert(x))) in f32: the scan emitter takes it (the elemental
    reduce-window took 1.7 s for bf16[512,4096], 52x the scan) and rounds each running f32 sum to
    bf16 as it stores it. (A static one is XLA's two-level bf16 scan: tests/frontends/test_jax_scans.py.)"""
    import ml_dtypes

    exe = hlocc.compile(CUMSUM.replace("f32", "bf16"), "cpu")
    assert "kernels: 1 (reduce-window-scan 1)" in exe.stats_text()
    for n in (37, 300):
        x = (np.random.default_rng(4).random((n, 4)) * 20).astype(ml_dtypes.bfloat16)
        want = np.cumsum(x.astype(np.float32), axis=0).astype(ml_dtypes.bfloat16)  # f32 running sums, rounded
        np.testing.assert_array_equal(exe(x), want)


def test_which_windows_are_scans():
    from hlocc.codegen.emitters.reduce_window_scan import scan_axis

    def root(text):
        return parse_hlo(text).entry.root

    assert scan_axis(root(CUMSUM)) == (0, False)
    assert scan_axis(root(REVERSE_MINOR)) == (1, True)
    assert scan_axis(root(CUMMAX_1D)) == (0, False)
    assert scan_axis(root(STATIC_CUMSUM)) == (0, False)
    for text in (STRIDED_MAX, DILATED_SUM, STATIC_CUMSUM.replace("pad=36_0", "pad=35_1")):
        assert scan_axis(root(text)) is None


@pytest.mark.parametrize("text", [STRIDED_MAX, DILATED_SUM], ids=["strided_max", "dilated_sum"])
def test_static_windows_over_a_symbolic_dim(text):
    _check(text, [{"n": n} for n in PRIMES], CHECKED)


@pytest.mark.parametrize(("text", "bindings"), [
    (SCATTER_STATIC_UPDATES, [{"n": n} for n in PRIMES]),
    (SCATTER_SYMBOLIC_UPDATES, [{"n": n, "k": k} for n, k in [(1, 1), (2, 5), (7, 0), (37, 17), (0, 3)]]),
    (SCATTER_TWO_ROWS, [{"n": n, "k": k} for n, k in [(2, 5), (7, 1), (37, 17), (3, 0)]]),  # n >= 2: a 2-row window
    (SCATTER_SYMBOLIC_WINDOW, [{"m": m, "k": k} for m, k in [(1, 1), (5, 3), (17, 8), (0, 2)]]),
], ids=["static_updates", "symbolic_updates", "two_rows", "symbolic_window"])
def test_scatter_over_runtime_sizes(text, bindings, spread_indices):
    kernel = _check(text, bindings, CHECKED)
    assert kernel.emitter == "scatter"


def test_the_window_fit_guard_refuses_size_zero():
    """A window of one row fits `f32[?b,4]` only at b >= 1 (the shape rules assume variables >= 1;
    a plan runs size 0): the call-time guard names the instruction and both sizes."""
    from hlocc.hlo.guards import window_fit_guards

    [guard] = window_fit_guards(parse_hlo(LAST_ROW))
    assert str(guard.predicate) == "1 <= b"
    assert not window_fit_guards(parse_hlo(EMBEDDING))  # a static table: nothing to check
    exe = hlocc.compile(LAST_ROW, "cpu", check_bounds=True)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(exe(x, np.int32(5), np.int32(0)), x[1:])  # the start clamped to b - 1
    with pytest.raises(ArgumentError, match=r"dynamic-slice 'd': slice size 0 \(1\) exceeds the operand's "
                                            r"dimension \(b = 0\)"):
        exe(np.zeros((0, 4), np.float32), np.int32(0), np.int32(0))
