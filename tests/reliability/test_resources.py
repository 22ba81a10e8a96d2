"""Resource errors and unusual argument arrays: a run whose buffers exceed the memory available
fails before allocating, saying how much it needs; arguments that are not C-contiguous (transposed,
strided, reversed) or not aligned to their element size are read correctly."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from hlocc.errors import ResourceError
from hlocc.runtime.executable import check_memory

BIG = """HloModule big
ENTRY e {
  p = f32[] parameter(0)
  ROOT b = f32[200000,200000] broadcast(p), dimensions={}
}"""

EXP = """HloModule m
ENTRY e {
  p = f32[6,4] parameter(0)
  q = f32[6,4]{0,1} parameter(1)
  ROOT n = f32[6,4] add(p, q)
}"""


def test_a_run_needing_more_memory_than_available_fails_before_allocating():
    exe = hlocc.compile(BIG, backend="cpu")
    with pytest.raises(ResourceError, match=r"running 'big' needs 149\.01 GiB for its outputs and temporary buffers, "
                                            r"more than the .* GiB of memory available"):
        exe(np.float32(1))  # 160 GB: without the check numpy's lazy pages would die later, in the kernel


def test_check_memory_compares_with_what_is_available():
    check_memory("m", 1 << 30, available=2 << 30)
    check_memory("m", 1 << 20, available=0)  # small runs are not checked
    with pytest.raises(ResourceError, match=r"needs 2\.00 GiB .* the 1\.00 GiB"):
        check_memory("m", 2 << 30, available=1 << 30)


def _odd_arrays():
    base = np.arange(24, dtype=np.float32).reshape(6, 4) / 7
    raw = np.zeros(24 * 4 + 1, np.uint8)
    misaligned = np.frombuffer(raw[1:].data, dtype=np.float32).reshape(6, 4)
    misaligned[...] = base
    assert misaligned.ctypes.data % 4 and misaligned.flags.c_contiguous
    return {
        "transposed": np.ascontiguousarray(base.T).T,
        "strided": np.repeat(base, 2, axis=1)[:, ::2],
        "negative_strides": np.flip(np.flip(base, 0).copy(), 0),
        "misaligned": misaligned,
    }


@pytest.mark.parametrize("backend", ["cpu", "cuda-sim"])
@pytest.mark.parametrize("kind", sorted(_odd_arrays()))
def test_unusual_argument_arrays_are_read_correctly(backend, kind):
    arg = _odd_arrays()[kind]
    expected = arg.astype(np.float64) * 2
    got = hlocc.compile(EXP, backend=backend)(arg, arg)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
