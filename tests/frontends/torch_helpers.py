"""Shared by the PyTorch frontend tests: compiling with the hlocc backend in strict mode, and the
corpus tolerance policy (hlocc.testing.differential.TOLERANCES) applied to tensors."""

import numpy as np
import torch

import hlocc.torch as ht
from hlocc.comparison import compare_arrays
from hlocc.frontends.torch.tensors import to_numpy
from hlocc.testing.differential import TOLERANCES


def compiled(model, *, dynamic=None, backend="cpu"):
    """`torch.compile` with the hlocc backend, strict (a fallback is an error), on a fresh dynamo."""
    torch._dynamo.reset()
    return torch.compile(model, backend=ht.backend, dynamic=dynamic, options={"strict": True, "backend": backend})


def record_graphs(monkeypatch) -> list:
    """A list that gets every CompiledGraph made from now on (their lowered modules are the IR to check)."""
    graphs = []
    original = ht.CompiledGraph.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        graphs.append(self)

    monkeypatch.setattr(ht.CompiledGraph, "__init__", record)
    return graphs


def assert_close(got, want, what="", scale=1.0):
    """`got` matches eager's `want` under the corpus tolerance of its dtype (scaled by `scale` for
    results that went through a whole model)."""
    want_np = to_numpy(want.detach())
    rtol, atol = TOLERANCES.get(want_np.dtype.name, (0.0, 0.0))
    why = compare_arrays(want_np.astype(np.float64) if want_np.dtype.kind == "f" or want_np.dtype.name == "bfloat16"
                         else want_np, to_numpy(got.detach()), rtol * scale, atol * scale)
    assert why is None, f"{what}: {why}"


__all__ = ["assert_close", "compiled", "ht", "record_graphs"]
