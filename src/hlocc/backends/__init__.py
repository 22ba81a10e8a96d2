"""Backends: `cpu` (kernels JIT-compiled for the host with llvmlite) and `cuda` (PTX kernels on an
NVIDIA GPU through the CUDA driver, or on the SimulatedDevice). Each backend's `executable.py`
compiles a whole module with the runtime (runtime/executable.py), giving it the backend's HLO
pipeline from passes/pipeline.py `BACKEND_PIPELINES` and a kernel compiler."""
