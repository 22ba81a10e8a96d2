"""exp on the CPU: each vector takes expand-float-ops-fma's fast form (exponent-field scaling) when
all its lanes allow it, else the clamped form. A lane's result must not depend on its neighbours,
so the compiled kernel is compared bit for bit with the numpy emulation of the same expansion,
which takes each lane's own path, on vectors that mix normal lanes with lanes near and past the
fast form's edges (subnormal and zero results, overflow, inf, NaN)."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.codegen.math import approx_exp_log
from hlocc.codegen.math.float_builder import F32
from hlocc.codegen.math.float_builder_numpy import evaluate
from hlocc.codegen.target import cpu_target
from hlocc.hlo.parser import parse_hlo

N = 4099  # not a multiple of any vector width: the tail is scalar code

EDGES = np.float32([
    np.nan, np.inf, -np.inf, -1e30, 1e30, -104.5, -103.0, -100.0, -90.0, -87.5, -87.336, -87.0, -86.99,
    88.37, 88.38, 88.72, 88.73, 89.5, 0.0, -0.0, 1e-30, -1e-30,
])


def _inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    x = rng.uniform(-80, 80, N).astype(np.float32)
    x[::37] = np.resize(EDGES, x[::37].shape)  # one edge lane among normal ones, vector by vector
    x[-3:] = EDGES[:3]  # and in the scalar tail
    return x


@pytest.fixture(scope="module")
def exp_kernel():
    if not cpu_target().has_fma:
        pytest.skip("the host has no FMA: the cpu pipeline expands exp with expand-float-ops")
    return hlocc.compile(parse_hlo(f"HloModule m\n\nENTRY main {{\n  p = f32[{N}] parameter(0)\n"
                                   f"  ROOT e = f32[{N}] exponential(p)\n}}\n"), "cpu")


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return (got.view(np.int32) == want.view(np.int32)) | (np.isnan(got) & np.isnan(want))


@pytest.mark.parametrize("shift", [0, 1, 5], ids=["aligned", "shift1", "shift5"])
def test_exp_lanes_do_not_depend_on_their_vector(exp_kernel, shift):
    x = np.roll(_inputs(), shift)
    got = np.asarray(exp_kernel(x))
    want = evaluate(approx_exp_log.exp_fma, F32, x)
    same = _same_bits(got, want)
    bad = np.flatnonzero(~same)
    assert not len(bad), f"exp({x[bad[0]]!r}) at {bad[0]}: {got[bad[0]]!r}, per-lane expansion {want[bad[0]]!r}"


def test_exp_edges_are_right(exp_kernel):
    got = np.asarray(exp_kernel(_inputs()))[::37][:len(EDGES)]
    with np.errstate(over="ignore"):
        ref = np.exp(EDGES.astype(np.float64))
        ref32 = ref.astype(np.float32)
    finite = np.isfinite(ref32) & (ref32 != 0)
    ulps = np.abs(got[finite].astype(np.float64) - ref[finite]) / np.spacing(ref32[finite]).astype(np.float64)
    assert ulps.max() <= 1.0, f"{EDGES[finite][ulps.argmax()]!r}: {ulps.max():.2f} ulp"
    assert _same_bits(got[~finite], ref32[~finite]).all(), (EDGES[~finite], got[~finite])
