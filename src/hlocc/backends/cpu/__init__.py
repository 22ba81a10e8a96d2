"""The CPU backend: kernels JIT-compiled for the host with llvmlite, blocks run on a thread pool."""
