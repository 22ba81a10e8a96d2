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

Below them, ops that have an autograd formula of their own and no decomposition of PyTorch's
(nn.Bilinear's `_trilinear`, torch.cdist and pdist, weight_norm's backward): aot_autograd differentiates them
by their formula, so their backward ops need decompositions too.
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

    def heads(x):  # (x's own length: a key's may differ from the query's; -1 cannot size an empty batch)
        return x.reshape(batch, x.shape[1], num_head, head).transpose(1, 2)

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


# -- ops with an autograd formula of their own and no decomposition of PyTorch's ------------------
# (aot_autograd differentiates them by that formula, so their backward op appears as well.)
def trilinear(i1, i2, i3, expand1, expand2, expand3, sumdim, unroll_dim: int = 1):
    """`aten._trilinear` (nn.Bilinear, and its own backward): each input unsqueezed at its expand
    dims, the product summed over `sumdim`."""
    def expanded(t, dims):
        for d in sorted(dims):
            t = t.unsqueeze(d)
        return t
    product = expanded(i1, expand1) * expanded(i2, expand2) * expanded(i3, expand3)
    return product.sum(list(sumdim)) if len(sumdim) else product


def weight_norm_backward(grad_w, saved_v, saved_g, saved_norms, dim: int):
    """`aten._weight_norm_interface_backward` (weight_norm's training): w = g · v / ‖v‖, the norm
    over every dim but `dim`: dg = Σ(dw · v) / ‖v‖, dv = g / ‖v‖ · (dw - v · dg / ‖v‖)."""
    other = [d for d in range(saved_v.dim()) if d != dim % saved_v.dim()]
    grad_g = (grad_w * saved_v).sum(other, keepdim=True) / saved_norms
    grad_v = (saved_g / saved_norms) * (grad_w - saved_v * (grad_g / saved_norms))
    return grad_v, grad_g.reshape(saved_g.shape)


def cdist_forward(x1, x2, p: float, compute_mode=None):
    """`aten._cdist_forward` (torch.cdist): the p-norm of every difference x1[i] - x2[j], computed
    from the differences for every p (PyTorch's CPU kernel takes p=2 through a matrix product
    above 25 rows, x² + y² - 2xy, which rounds differently)."""
    import torch

    diff = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
    if p == 0:
        return (diff != 0).to(x1.dtype).sum(-1)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return (diff * diff).sum(-1).sqrt()
    if p == float("inf"):
        return diff.amax(-1)
    return torch.pow(torch.pow(diff, p).sum(-1), 1.0 / p)


def cdist_backward(grad, x1, x2, p: float, cdist):
    """`aten._cdist_backward`: the gradient of x1 (x2's is this with the arguments swapped): each
    pair's `_norm_gradient`, summed over x2's rows."""
    import torch

    if p == 0:
        return torch.zeros_like(x1)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    return _norm_gradient(diff, cdist.unsqueeze(-1), grad.unsqueeze(-1), p).sum(-2)


def pdist_forward(x, p: float = 2.0):
    """`aten._pdist_forward` (torch.pdist, F.pdist): the p-norms of x[i] - x[j] for i < j, in
    row-major order of the pairs."""
    import torch

    first, second = torch.triu_indices(x.shape[0], x.shape[0], 1, device=x.device)
    diff = (x[first] - x[second]).abs()
    if p == 0:
        return (diff != 0).to(x.dtype).sum(-1)
    if p == float("inf"):
        return diff.amax(-1)
    if p == 1:
        return diff.sum(-1)
    if p == 2:
        return (diff * diff).sum(-1).sqrt()
    return torch.pow(torch.pow(diff, p).sum(-1), 1.0 / p)


def pdist_backward(grad, x, p: float, pdist):
    """`aten._pdist_backward`: each pair's `_norm_gradient` added to its first row and subtracted
    from its second."""
    import torch

    if p == 0:
        return torch.zeros_like(x)
    first, second = torch.triu_indices(x.shape[0], x.shape[0], 1, device=x.device)
    term = _norm_gradient(x[first] - x[second], pdist.unsqueeze(-1), grad.unsqueeze(-1), p)
    return torch.zeros_like(x).index_add(0, first, term).index_add(0, second, -term)


def _multilabel_terms(x, target):
    """multilabel_margin_loss's pieces over a batch [N, C]: each row's targets are the labels before
    its first -1 (`valid`, [N, C] by position), `is_target` [N, C] by class, and the hinge
    1 - x[y] + x[c] [N, positions, C], counted only at a valid position and a class that is not a
    target (`counted`)."""
    import torch

    n, c = x.shape
    position = torch.arange(c, device=x.device)
    first_end = torch.where(target == -1, position, c).amin(1, keepdim=True)
    valid = position < first_end
    label = torch.where(valid, target, 0)
    is_target = ((label.unsqueeze(2) == position) & valid.unsqueeze(2)).any(1)
    hinge = 1 - x.gather(1, label).unsqueeze(2) + x.unsqueeze(1)
    counted = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    return label, valid, is_target, hinge, counted


def multilabel_margin_loss_forward(x, target, reduction: int):
    """`aten.multilabel_margin_loss_forward`: PyTorch's own decomposition sums the hinge at every
    position of a row's target list, also those past its first -1 (read as label 0), so it is wrong
    wherever a row ends early; this one counts the positions before the -1 only."""
    import torch

    batched = x.dim() == 2
    x2, t2 = (x, target) if batched else (x.reshape(1, -1), target.reshape(1, -1))
    _, _, is_target, hinge, counted = _multilabel_terms(x2, t2)
    loss = torch.where(counted, hinge.clamp_min(0), 0).sum((1, 2)) / x2.shape[1]
    if reduction == 1:
        loss = loss.mean()
    elif reduction == 2:
        loss = loss.sum()
    elif not batched:
        loss = loss.reshape(())
    return loss, is_target.to(x.dtype).reshape(target.shape)


def multilabel_margin_loss_backward(grad, x, target, reduction: int, is_target):
    """`aten.multilabel_margin_loss_backward` (PyTorch has no decomposition): each counted hinge
    above 0 adds g / C to its class and subtracts it from its target's class."""
    import torch

    batched = x.dim() == 2
    x2, t2 = (x, target) if batched else (x.reshape(1, -1), target.reshape(1, -1))
    label, valid, _, hinge, counted = _multilabel_terms(x2, t2)
    active = (counted & (hinge > 0)).to(x.dtype)
    per_label = torch.where(valid, active.sum(2), 0)
    grad_x = active.sum(1) - torch.zeros_like(x2).scatter_add(1, label, per_label)
    scale = grad.reshape(-1, 1) if reduction == 0 and batched else grad.reshape(1, 1)
    if reduction == 1:
        scale = scale / x2.shape[0]
    return (grad_x * scale / x2.shape[1]).reshape(x.shape)


def _norm_gradient(diff, dist, g, p: float):
    """g · d(‖diff‖_p)/d(diff) as ATen's distance kernels take it per p: 0 where a distance is 0,
    sign(d) for p=1, d / dist for p=2, sign(d) at the coordinates reaching the max for p=inf, else
    d·|d|^(p-2) / dist^(p-1) (for p < 2: sign(d)·|d|^(p-1) / dist^(p-1), 0 where d = 0 and p < 1)."""
    import torch

    zero = torch.zeros_like(diff)
    if p == 1:
        term = torch.sign(diff) * g
    elif p == 2:
        term = torch.where(dist == 0, zero, g * diff / dist)
    elif p == float("inf"):
        term = g * torch.sign(diff) * (diff.abs() == dist).to(diff.dtype)
    elif p < 2:
        vanishes = (dist == 0) | ((diff == 0) & (p < 1))
        term = torch.where(vanishes, zero, torch.sign(diff) * diff.abs().pow(p - 1) * g / dist.pow(p - 1))
    else:
        term = torch.where(dist == 0, zero, diff * diff.abs().pow(p - 2) * g / dist.pow(p - 1))
    return term


def _source_index(coordinate, size: int, padding_mode: int, align_corners: bool):
    """grid_sample's source coordinate in pixels of a normalized one, with ATen's padding modes
    (`grid_sampler_compute_source_index`): border clips to [0, size - 1], reflection reflects about
    the edges (of the pixel centers with align_corners, else of the pixels' outer edges) and clips."""
    import torch

    if align_corners:
        x = (coordinate + 1) / 2 * (size - 1)
    else:
        x = ((coordinate + 1) * size - 1) / 2
    if padding_mode == 2:  # reflection
        low, high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if low == high:
            x = torch.zeros_like(x)
        else:
            start, span = low / 2, (high - low) / 2
            distance = (x - start).abs()
            extra = torch.fmod(distance, span)
            flips = torch.floor(distance / span)
            x = torch.where(torch.fmod(flips, 2) == 0, extra + start, span - extra + start)
    if padding_mode in (1, 2):
        x = x.clamp(0, size - 1)
    return x


def grid_sampler_2d_backward(grad_output, input, grid, interpolation_mode: int, padding_mode: int,
                             align_corners: bool, output_mask):
    """`aten.grid_sampler_2d_backward` of nearest sampling (F.grid_sample keeps the op there:
    `_grid_sample_math` below): each output's gradient added to the pixel it copied, where
    that is inside the input (zeros padding); the grid's gradient is 0. Other modes are declined
    (NotImplemented: the op stays, and runs eager)."""
    import torch

    if interpolation_mode != 1:
        return NotImplemented
    batch, channels, height, width = input.shape
    x = torch.round(_source_index(grid[..., 0], width, padding_mode, align_corners))
    y = torch.round(_source_index(grid[..., 1], height, padding_mode, align_corners))
    inside = (x >= 0) & (x <= width - 1) & (y >= 0) & (y <= height - 1)
    pixel = y.clamp(0, height - 1).long() * width + x.clamp(0, width - 1).long()
    shares = (grad_output * inside.unsqueeze(1).to(grad_output.dtype)).reshape(batch, channels, -1)
    grad_input = torch.zeros(batch, channels, height * width, dtype=input.dtype, device=input.device).scatter_add(
        2, pixel.reshape(batch, 1, -1).expand(batch, channels, -1), shares).reshape(input.shape)
    return (grad_input if output_mask[0] else None), torch.zeros_like(grid)


def fused_decompositions() -> dict[Any, Any]:
    """The decompositions of this module, keyed by their ATen ops, and PyTorch's own of
    grid_sampler_2d (not a core-ATen one; its backward has none: nearest's is here)."""
    import torch
    from torch._decomp import decomposition_table

    aten = torch.ops.aten
    table = {aten._transformer_encoder_layer_fwd.default: transformer_encoder_layer,
             aten._native_multi_head_attention.default: native_multi_head_attention,
             aten._trilinear.default: trilinear,
             aten._weight_norm_interface_backward.default: weight_norm_backward,
             aten._cdist_forward.default: cdist_forward, aten._cdist_backward.default: cdist_backward,
             aten._pdist_forward.default: pdist_forward, aten._pdist_backward.default: pdist_backward,
             aten.multilabel_margin_loss_forward.default: multilabel_margin_loss_forward,
             aten.multilabel_margin_loss_backward.default: multilabel_margin_loss_backward,
             aten.grid_sampler_2d_backward.default: grid_sampler_2d_backward}
    if aten.grid_sampler_2d.default in decomposition_table:
        table[aten.grid_sampler_2d.default] = decomposition_table[aten.grid_sampler_2d.default]
    return table


# -- what the dynamo backend traces with (hlocc.torch) ---------------------------------------------
def decompositions() -> dict:
    """PyTorch's core-ATen decompositions (the table lowers what they leave), less the ones of
    ops the table lowers better: `_safe_softmax` (attention's softmax, whose decomposition finds
    the all -inf rows with a reduction of its own); plus hlocc's of the fused transformer
    inference kernels, which PyTorch has none of (`fused_decompositions`)."""
    import torch
    from torch._decomp import core_aten_decompositions

    table = dict(core_aten_decompositions())
    table.pop(torch.ops.aten._safe_softmax.default, None)
    table.update(fused_decompositions())
    return table


def _sdpa_math(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """scaled_dot_product_attention through ATen's math form (which takes a boolean mask only as
    the additive −inf mask the public op turns it into first)."""
    import torch

    if attn_mask is not None and attn_mask.dtype == torch.bool:
        attn_mask = torch.zeros(attn_mask.shape, dtype=q.dtype).masked_fill(~attn_mask, float("-inf"))
    return torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask, dropout_p, is_causal, None,
                                                             scale=scale, enable_gqa=enable_gqa)[0]


_GRID_MODES = {"bilinear": 0, "bicubic": 2}
_GRID_PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}


def _grid_sample_math(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """F.grid_sample of a 4-D input through PyTorch's own decomposition of grid_sampler_2d (ATen
    ops: coordinates, clipping or reflection, gathers and weights), so that aot_autograd
    differentiates those ops: grid_sampler_2d_backward has no decomposition of PyTorch's and ran
    eager. Other inputs (5-D) and mode="nearest" call F.grid_sample itself: nearest's rounding
    cuts the grid off autograd's graph, whose gradient would then be None where PyTorch's backward
    gives zeros (hlocc decomposes nearest's backward op instead: frontends/torch/decompositions.py)."""
    import torch
    from torch._decomp.decompositions import grid_sampler_2d

    if input.dim() != 4 or mode not in ("bilinear", "bicubic") or padding_mode not in _GRID_PADDINGS:
        return torch.nn.functional.grid_sample(input, grid, mode, padding_mode, align_corners)
    return grid_sampler_2d(input, grid, _GRID_MODES[mode], _GRID_PADDINGS[padding_mode], bool(align_corners))


def attention_as_math(graph_module: Any) -> None:
    """Calls of scaled_dot_product_attention become its math form (matmuls, softmax) before
    aot_autograd traces them: the fused CPU kernel's backward is one opaque op, its math form's
    backward plain ATen ops (the table lowers both directions). F.grid_sample likewise becomes
    PyTorch's decomposition of it (`_grid_sample_math`)."""
    import torch

    targets = {torch._C._nn.scaled_dot_product_attention: _sdpa_math,
               torch.nn.functional.scaled_dot_product_attention: _sdpa_math,
               torch.nn.functional.grid_sample: _grid_sample_math}
    changed = False
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target in targets:
            node.target = targets[node.target]
            changed = True
    if changed:
        graph_module.recompile()
