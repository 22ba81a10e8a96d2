"""The CPU backend: kernels JIT-compiled for the host with llvmlite, blocks run on a thread pool."""

from hlocc.backends.cpu import gemm_tuning as _gemm_tuning  # noqa: E402,F401  (registers the matmul tuner)
