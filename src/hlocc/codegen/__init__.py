"""Kernel code generation: the `xla` kernel dialect (dialect.py), the mlir-opt style driver
(opt.py), and later the partitioner, emitters, transforms and the LLVM translation."""
