"""Fixtures the runtime tests share."""

import os

import pytest

from hlocc.runtime import blas, library


@pytest.fixture(scope="module")
def mkl():
    """The BLAS of torch's libtorch_cpu (MKL's sgemm_) bound for the module's tests, unbound after."""
    torch = pytest.importorskip("torch")
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    if not (os.path.exists(path) and blas.use_library(path)):
        pytest.skip("this torch build has no libtorch_cpu with sgemm_")
    library._GEMM_CALLS.clear()  # calls planned before were planned without it
    yield
    blas.use_library(None)
    library._GEMM_CALLS.clear()
