"""A static inference graph whose every step has a native form runs as one native function into
fresh tensors (frontends/torch/results.py `native_sequence`, runtime/native_sequence.py): the MLP's kind of steps
and a bf16 graph against eager, an in-place weight update seen by the next call, every call's
results their own memory, and denormals flushed for the call (or not) with the caller's mode
restored."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, compiled, record_graphs  # noqa: E402


def test_linear_layers_run_natively_and_see_an_in_place_weight_update(monkeypatch):
    """Two linears (BLAS calls) and their bias+activation kernels, the MLP's steps."""
    graphs = record_graphs(monkeypatch)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    x = torch.randn(3, 8)
    run = compiled(model)
    with torch.no_grad():
        results = [run(x) for _ in range(3)]  # the first call takes the arrays path, then native
        assert graphs[0]._native is not None
        for got in results:
            assert_close(got, model(x), "linears")
        assert results[1].data_ptr() != results[2].data_ptr()  # fresh tensors, never reused
        model[2].weight.add_(0.5)  # the same tensor at the same address: no guard fails
        assert_close(run(x), model(x), "linears after an in-place update")


def test_bf16_inputs_run_natively(monkeypatch):
    """A bf16 input's address is its tensor's (its array, numpy having no bf16, a reinterpreted view)."""
    graphs = record_graphs(monkeypatch)
    x, y = torch.randn(4, 8).bfloat16(), torch.randn(8).bfloat16()
    run = compiled(lambda a, b: torch.tanh(a * b + 1))
    with torch.no_grad():
        results = [run(x, y) for _ in range(3)]
    assert graphs[0]._native is not None
    for got in results:
        assert got.dtype == torch.bfloat16
        assert_close(got, torch.tanh(x * y + 1), "bf16")


@pytest.mark.parametrize("flush", [True, False])
def test_native_calls_flush_denormals_and_restore_the_mode(monkeypatch, flush):
    """exp(-100) is a denormal (3.7e-44) in IEEE arithmetic and 0 with flushing."""
    graphs = record_graphs(monkeypatch)
    torch._dynamo.reset()
    run = torch.compile(torch.exp, backend=lambda gm, inputs: compiled.__globals__["ht"].backend(
        gm, inputs, {"strict": True, "flush_denormal": flush}))
    x = torch.full((4,), -100.0)
    with torch.no_grad():
        for _ in range(3):
            got = run(x)
    assert graphs[0]._native is not None
    assert np.float32(1e-39) * np.float32(1.0) != 0  # the caller's mode: not flushed
    assert (got == 0).all() if flush else torch.equal(got, torch.exp(x))
