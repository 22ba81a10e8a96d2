"""Backends: `cpu` (LLVM JIT for the host) and, later, `cuda`."""
