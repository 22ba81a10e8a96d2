"""The corpus tolerance policy of `compare_arrays`: narrow floats from ml_dtypes are floats."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from hlocc.comparison import compare_arrays


def test_bf16_references_are_compared_within_the_tolerance():
    ref = np.array([1.0, 2.0, -3.0], ml_dtypes.bfloat16)
    one_ulp = ref.copy()
    one_ulp.view(np.uint16)[1] += 1  # 2.0 -> 2.015625: within 2e-2 of 2.0
    assert compare_arrays(ref, one_ulp, 2e-2, 2e-2) is None
    assert compare_arrays(ref, one_ulp, 1e-3, 1e-3) == "1 of 3 elements out of tolerance (worst excess 0.0126)"
    nan = ref.copy()
    nan[0] = np.nan
    assert compare_arrays(ref, nan, 1.0, 1.0) == "NaN positions differ"


def test_integers_stay_exact():
    ref = np.array([1, 2, 3], np.int32)
    assert compare_arrays(ref, ref + np.array([0, 1, 0], np.int32), 1.0, 1.0) == "1 of 3 elements differ"
    i4 = np.array([1, -2], ml_dtypes.int4)
    assert compare_arrays(i4, np.array([1, -1], ml_dtypes.int4), 1.0, 1.0) == "1 of 2 elements differ"


def test_complex_parts_are_compared_one_by_one():
    # inf+nanj (an infinite real part times a finite complex) is both NaN and inf to numpy as a whole: the
    # parts are compared on their own, so equal results match and a differing part is named.
    ref = np.array([complex(np.inf, np.nan), 1 + 2j], np.complex64)
    assert compare_arrays(ref, ref.copy(), 1e-5, 1e-6) is None
    assert compare_arrays(ref, np.array([complex(np.nan, np.nan), 1 + 2j], np.complex64), 1e-5, 1e-6) == \
        "real parts: NaN positions differ"
    assert compare_arrays(ref, np.array([complex(np.inf, np.nan), 1 + 2.1j], np.complex64), 1e-5, 1e-6) == \
        "imaginary parts: 1 of 2 elements out of tolerance (worst excess 0.1)"
