"""The `cuda` backend: fusions compiled to PTX for NVIDIA GPUs (ptx.py)."""
