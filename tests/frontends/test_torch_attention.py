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


def test_transformer_encoder_fast_path_matches_eager():
    """nn.TransformerEncoderLayer in eval mode without grad calls one fused kernel,
    `_transformer_encoder_layer_fwd`, which fell back to eager; it is decomposed as the kernel
    computes (frontends/torch/decompositions.py), masks included: a key-padding mask, a causal
    float mask, both (merged to a [B, H, L, L] mask); post-norm with relu, pre-norm with gelu."""
    torch.manual_seed(0)
    post = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True).eval()
    pre = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=True, activation="gelu").eval()
    x = torch.randn(2, 5, 16)
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[0, 3:] = True
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)

    def fn(x, padding, causal):
        return post(x), pre(x, src_key_padding_mask=padding), post(x, causal, src_key_padding_mask=padding)

    with torch.no_grad():
        for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, padding, causal),
                                            fn(x, padding, causal))):
            assert_close(got, want, f"result {k}")
    with torch.no_grad():  # an empty batch: the heads' reshape sized its length by -1, which 0 elements cannot
        got = compiled(lambda x: post(x), backend="interpreter")(torch.randn(0, 5, 16))
    assert got.shape == (0, 5, 16)


def test_native_multi_head_attention_treats_a_float_mask_as_boolean():
    """`_native_multi_head_attention` (MultiheadAttention's fast path) masks where a float mask is
    nonzero, as its kernel's masked softmax does (0.5 masks; the slow path would add it); the
    weights averaged over heads or per head; cross attention."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    params = (8, 2, mha.in_proj_weight, mha.in_proj_bias, mha.out_proj.weight, mha.out_proj.bias)
    x, y = torch.randn(2, 4, 8), torch.randn(2, 4, 8)
    mask = torch.tensor([[0.0, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, float("-inf")]])

    def fn(x, y, mask):
        native = torch._native_multi_head_attention
        return (*native(x, x, x, *params, mask, True, True, 1), native(x, x, x, *params, None, True, False)[1],
                *native(x, y, y, *params, None, True, True))

    with torch.no_grad():
        for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, y, mask), fn(x, y, mask))):
            assert_close(got, want, f"result {k}")


def test_multihead_attention_gradients_match_eager():
    """nn.MultiheadAttention with need_weights=False (what the transformer layers call) reaches
    scaled_dot_product_attention inside F.multi_head_attention_forward, a call dynamo keeps whole:
    traced on the CPU it became `_scaled_dot_product_flash_attention_for_cpu`, whose core-ATen
    decomposition returns the weights where the op's backward reads its logsumexp; the backward
    (run eager) gave gradients off by 10s. aot_autograd now traces attention in its math form."""
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = torch.randn(2, 4, 8)
    fn = lambda x: mha(x, x, x, need_weights=False)[0]  # noqa: E731
    grads = []
    for run in (compiled(fn, backend="interpreter"), fn):
        mha.zero_grad()
        ours = x.clone().requires_grad_()
        (run(ours) * torch.arange(8.0)).sum().backward()
        grads.append([ours.grad] + [p.grad.clone() for p in mha.parameters()])
    for k, (got, want) in enumerate(zip(*grads)):
        assert_close(got, want, f"gradient {k}")
