"""CPU tensors ↔ numpy arrays without copies where the memory allows it.

A contiguous CPU tensor and the numpy array of `to_numpy` share memory (`Tensor.numpy()`; bf16,
which numpy lacks, through a view as int16 reinterpreted as ml_dtypes' bfloat16, hlocc's bf16
storage). A non-contiguous tensor is passed as its strided view: hlocc's argument check makes the
one copy it needs. `from_numpy` wraps a result array as a tensor the same way, without a copy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlocc.errors import ArgumentError

_REINTERPRETED = {"bfloat16": ("int16", "bfloat16")}  # torch dtype → (carrier int dtype, ml_dtypes name)


def to_numpy(tensor: Any, name: str = "tensor") -> np.ndarray:
    """The numpy view of a CPU tensor (ArgumentError naming it when it is on another device)."""
    import torch

    if tensor.device.type != "cpu":
        raise ArgumentError(f"{name} is on {tensor.device}; the cpu backend takes CPU tensors")
    if tensor.requires_grad:
        tensor = tensor.detach()
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype in _REINTERPRETED:
        import ml_dtypes

        carrier, target = _REINTERPRETED[dtype]
        return tensor.view(getattr(torch, carrier)).numpy().view(getattr(ml_dtypes, target))
    return tensor.numpy()


def from_numpy(array: np.ndarray) -> Any:
    """The tensor of a result array, sharing its memory."""
    import torch

    array = np.asarray(array)
    if array.dtype.name in ("bfloat16",):
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    if not array.flags.writeable:  # (torch warns on read-only memory; results are the caller's)
        array = array.copy()
    return torch.from_numpy(array)
