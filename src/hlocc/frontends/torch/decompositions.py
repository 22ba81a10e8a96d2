"""Decompositions of PyTorch's fused inference kernels into ATen ops the table lowers, added to the
core-ATen decompositions that aot_autograd and `run_decompositions` apply (`hlocc.torch.decompositions`).

`nn.TransformerEncoderLayer` in eval mode without grad calls `aten._transformer_encoder_layer_fwd`
(its "fast path"), one opaque CPU kernel with no decomposition of PyTorch's, and that kernel calls
`aten._native_multi_head_attention` (nn.MultiheadAttention's fast path, which dynamo does not take
itself, but a graph may call). They are written here in torch ops, following the kernels
(aten/src/ATen/native/transformers/transformer.cpp and attention.cpp), not the modules' slow path,
where the two differ:

- q is (x Wq + bq) / sqrt(head_dim), k and v are unscaled; softmax(q kᵀ) v per head;
- a mask is a boolean "masked out" mask (`masked_softmax`): a float mask (what the modules pass, 0
  or -inf) counts where it is nonzero, so a float mask of other values masks rather than adds; a
  row masked everywhere is NaN (the kernel's softmax of nothing), where the slow path gives NaN too
  (sdpa's `_safe_softmax` gives 0 only for attention called directly);
- mask_type 0 is a [L, S] mask, 1 a [B, S] key-padding mask, 2 a mask of the scores' shape;
- need_weights=False returns an empty tensor for the weights (the kernel's undefined tensor, the
  size PyTorch's meta function gives it).

Writing them as decompositions rather than table rules keeps one lowering of layer_norm, linear,
gelu and softmax for both paths, and lets them run through the same passes (the projections
become library gemms).
"""

from __future__ import annotations

import math
from typing import Any


def native_multi_head_attention(query, key, value, embed_dim: int, num_head: int, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights: bool = True, average_attn_weights: bool = True,
                                mask_type: int | None = None):
    """`aten._native_multi_head_attention` (module doc): (output [B, T, D], weights)."""
    import torch
    import torch.nn.functional as F

    batch, length, _ = query.shape
    head = embed_dim // num_head
    if query is key and key is value:  # (the kernel's self-attention case: one projection)
        q, k, v = F.linear(query, qkv_weight, qkv_bias).chunk(3, dim=-1)
    else:
        weights, biases = qkv_weight.chunk(3, dim=0), qkv_bias.chunk(3, dim=0)
        q, k, v = (F.linear(x, w, b) for x, w, b in zip((query, key, value), weights, biases))
    q = q * (1.0 / math.sqrt(head))

    def heads(x):
        return x.reshape(batch, -1, num_head, head).transpose(1, 2)

    q, k, v = heads(q), heads(k), heads(v)
    scores = torch.matmul(q, k.transpose(-2, -1))
    if mask is not None:
        masked = mask if mask.dtype == torch.bool else mask != 0
        if masked.dim() == 2 and mask_type == 1:
            masked = masked[:, None, None, :]
        scores = scores.masked_fill(masked, float("-inf"))
    attention = torch.softmax(scores, dim=-1)
    context = torch.matmul(attention, v).transpose(1, 2).reshape(batch, length, embed_dim)
    output = F.linear(context, proj_weight, proj_bias)
    if not need_weights:
        return output, query.new_empty((0,))
    if average_attn_weights:
        attention = attention.sum(dim=1) / num_head
    return output, attention


def transformer_encoder_layer(src, embed_dim: int, num_heads: int, qkv_weight, qkv_bias, proj_weight, proj_bias,
                              use_gelu: bool, norm_first: bool, eps: float, norm_weight_1, norm_bias_1, norm_weight_2,
                              norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                              mask_type: int | None = None):
    """`aten._transformer_encoder_layer_fwd`: self-attention and the feed-forward block (linear,
    exact gelu or relu, linear), each added to its input, with layer norms after each (before,
    with norm_first), as the kernel computes them; no dropout (it is an inference kernel)."""
    import torch.nn.functional as F

    def norm(x, weight, bias):
        return F.layer_norm(x, (embed_dim,), weight, bias, eps)

    x = norm(src, norm_weight_1, norm_bias_1) if norm_first else src
    x = native_multi_head_attention(x, x, x, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, mask,
                                    False, True, mask_type)[0] + src
    if not norm_first:
        x = norm(x, norm_weight_1, norm_bias_1)
    residual = x
    if norm_first:
        x = norm(x, norm_weight_2, norm_bias_2)
    hidden = F.linear(x, ffn_weight_1, ffn_bias_1)
    hidden = F.gelu(hidden) if use_gelu else F.relu(hidden)
    x = F.linear(hidden, ffn_weight_2, ffn_bias_2) + residual
    return norm(x, norm_weight_2, norm_bias_2) if not norm_first else x


def fused_decompositions() -> dict[Any, Any]:
    """The decompositions of this module, keyed by their ATen ops."""
    import torch

    aten = torch.ops.aten
    return {aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer,
            aten._native_multi_head_attention.default: native_multi_head_attention}
