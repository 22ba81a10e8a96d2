"""Training through aot_autograd: forward and backward graphs both compiled by hlocc (strict), one
SGD step; gradients and updated parameters against eager's."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, compiled, ht  # noqa: E402

from hlocc.testing import torch_models as tm  # noqa: E402


def _step(model, forward, x):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    loss = forward(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
    return loss.detach(), grads


@pytest.mark.parametrize(("name", "backend"), [("mlp", "cpu"), ("transformer_block", "interpreter"),
                                               pytest.param("transformer_block", "cpu", marks=pytest.mark.slow)])
def test_training_step_matches_eager(name, backend):
    eager = tm.build(name).train()
    ours = copy.deepcopy(eager)
    x = tm.example_input(name)
    ht.reset_stats()
    want_loss, want_grads = _step(eager, eager, x)
    got_loss, got_grads = _step(ours, compiled(ours, backend=backend), x)
    assert ht.stats() == {"compiles": 2}  # the forward and the backward graph
    # gradients sum over the batch: a few ulps more than one op's tolerance
    assert_close(got_loss, want_loss, "loss")
    for (pname, _), got, want in zip(eager.named_parameters(), got_grads, want_grads):
        assert_close(got, want, f"grad of {pname}", scale=10)
    for (pname, want), got in zip(eager.named_parameters(), ours.parameters()):
        assert_close(got, want, f"updated {pname}", scale=10)
