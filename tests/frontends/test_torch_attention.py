"""Attention's softmax (ATen's `_safe_softmax`, kept whole by hlocc.torch.decompositions) is lowered
as one softmax whose all -inf rows give 0, found from the row max the softmax takes anyway: a
fully masked query row matches eager's zeros, and no second reduction over the scores is made."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch.nn import functional as F  # noqa: E402
from torch_helpers import assert_close, compiled, ht  # noqa: E402


def attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def test_a_fully_masked_row_gives_zeros_as_eager():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 4, generator=g) for _ in range(3))
    mask = torch.rand(5, 5, generator=g) > 0.3
    mask[:, 0] = True
    mask[2] = False  # query 2 sees nothing
    want = attention(q, k, v, mask)
    assert torch.all(want[:, :, 2] == 0)
    report = []
    torch._dynamo.reset()
    run = torch.compile(attention, backend=lambda gm, inputs: ht.backend(
        gm, inputs, {"strict": True, "backend": "interpreter", "report": report}))
    assert_close(run(q, k, v, mask), want, "masked attention")
    assert report and all(g["compiled"] for g in report)


def test_attention_softmax_reduces_the_scores_twice(monkeypatch):
    """max and sum: the decomposition's third reduction (an `or` over the masked entries) is gone."""
    graphs = []
    original = ht.CompiledGraph.__init__

    def record(self, *args, **kwargs):
        original(self, *args, **kwargs)
        graphs.append(self)

    q = k = v = torch.randn(1, 2, 4, 8)
    monkeypatch.setattr(ht.CompiledGraph, "__init__", record)
    with torch.no_grad():
        compiled(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                 backend="interpreter")(q, k, v)
    reduces = [i for g in graphs for i in g.module.entry.instructions if i.opcode == "reduce"]
    assert sorted(r.attrs["to_apply"].root.opcode for r in reduces) == ["add", "maximum"]
