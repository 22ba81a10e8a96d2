"""Values known at compile time (frontends/torch/folding.py) and the denormal mode of a call: the
causal mask that attention's decomposition builds from aranges is one literal, not an iota
computation; a compiled graph flushes denormals to zero for its call and restores the thread's
mode after it."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch.nn import functional as F  # noqa: E402
from torch_helpers import assert_close, ht, record_graphs  # noqa: E402

_graphs = record_graphs


def _compile(fn, **options):
    torch._dynamo.reset()
    return torch.compile(fn, backend=lambda gm, inputs: ht.backend(gm, inputs, {"strict": True, **options}))


def causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_the_causal_mask_is_one_literal_and_attention_matches_eager(monkeypatch):
    graphs = _graphs(monkeypatch)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, 6, 4, generator=g) for _ in range(3))
    with torch.no_grad():
        got = _compile(causal)(q, k, v)
    assert_close(got, causal(q, k, v), "causal attention")
    instructions = graphs[0].module.entry.instructions
    mask = [i for i in instructions if i.opcode == "constant" and i.shape.dims == (6, 6)
            and i.shape.element_type.name == "f32"]
    assert mask, "no f32[6,6] literal for the causal mask"
    np.testing.assert_array_equal(np.isinf(mask[0].literal), ~np.tril(np.ones((6, 6), bool)))
    users = {u.opcode for i in instructions if i.opcode == "iota" for u in i.users}
    assert "subtract" not in users, "the mask is still computed from iotas"


def test_a_value_of_symbolic_size_is_not_folded(monkeypatch):
    graphs = _graphs(monkeypatch)
    run = _compile(lambda x: x + torch.arange(x.shape[0], dtype=x.dtype).unsqueeze(1))
    x = torch.zeros(5, 3)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        got = run(x)
    assert_close(got, torch.arange(5.0).unsqueeze(1).expand(5, 3), "x + arange")
    assert any(i.opcode == "iota" for i in graphs[0].module.entry.instructions)


def _denormals_flushed() -> bool:
    return np.float32(1e-39) * np.float32(1.0) == 0


@pytest.mark.parametrize("flush", [True, False])
def test_a_call_flushes_denormals_and_restores_the_mode(flush):
    """exp(-100) is a denormal (3.7e-44) in IEEE arithmetic and 0 with flushing; the caller's mode
    is the same after the call either way."""
    x = torch.full((4,), -100.0)
    with torch.no_grad():
        got = _compile(torch.exp, flush_denormal=flush)(x)
    assert not _denormals_flushed()
    want = torch.exp(x)
    assert want[0] > 0
    assert (got == 0).all() if flush else torch.equal(got, want)
