"""Small PyTorch models for hlocc's PyTorch frontend tests and `benchmarks/torch_models.py`: the
model families of issue 19 (MLP, CNN, pre-norm transformer block, embedding text classifier, GPT-2
and BERT from `transformers` in small random configs), each with a seeded example input.

Imports torch (the `[torch]` extra); `transformers` only for the GPT-2/BERT builders.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F


class MLP(nn.Module):
    def __init__(self, d_in: int = 64, hidden: int = 128, d_out: int = 10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    """Conv2d, BatchNorm (use in eval), ReLU, MaxPool, AdaptiveAvgPool, Linear."""

    def __init__(self, channels: int = 3, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.head = nn.Linear(32, classes)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


class TransformerBlock(nn.Module):
    """A pre-norm block: x + attn(ln(x)) with causal scaled-dot-product attention, then x + mlp(ln(x))."""

    def __init__(self, d_model: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.ln2(x))


class TextClassifier(nn.Module):
    """Embedding, a masked mean over the sequence (padding id 0), a small MLP head: no LSTM."""

    def __init__(self, vocab: int = 1000, dim: int = 64, classes: int = 4):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, classes))

    def forward(self, tokens):
        mask = (tokens != 0).unsqueeze(-1).to(self.embed.weight.dtype)
        pooled = (self.embed(tokens) * mask).sum(1) / mask.sum(1).clamp_min(1.0)
        return F.log_softmax(self.head(pooled), dim=-1)


def gpt2(layers: int = 2, dim: int = 64, heads: int = 4, vocab: int = 512) -> nn.Module:
    """GPT-2 from `transformers` in a small random config (no download)."""
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(n_layer=layers, n_embd=dim, n_head=heads, vocab_size=vocab, n_positions=128,
                        attn_implementation="sdpa")
    return _plain_output(GPT2Model(config))


def bert(layers: int = 2, dim: int = 64, heads: int = 4, vocab: int = 512) -> nn.Module:
    """BERT from `transformers` in a small random config (no download)."""
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=layers, hidden_size=dim, num_attention_heads=heads,
                        intermediate_size=4 * dim, vocab_size=vocab, max_position_embeddings=128,
                        attn_implementation="sdpa")
    return _plain_output(BertModel(config, add_pooling_layer=False))


class _LastHiddenState(nn.Module):
    """A `transformers` model returning its last hidden state as a tensor (not a ModelOutput)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state \
            if hasattr(self.model.config, "n_layer") else self.model(input_ids=input_ids).last_hidden_state


def _plain_output(model: nn.Module) -> nn.Module:
    return _LastHiddenState(model)


def example_input(name: str, batch: int = 4, seq: int = 16, generator_seed: int = 0) -> torch.Tensor:
    """A seeded input for model `name` with `batch` rows (and `seq` tokens/positions)."""
    g = torch.Generator().manual_seed(generator_seed)
    if name == "mlp":
        return torch.randn(batch, 64, generator=g)
    if name == "cnn":
        return torch.randn(batch, 3, 16, 16, generator=g)
    if name == "transformer_block":
        return torch.randn(batch, seq, 64, generator=g)
    if name == "text_classifier":
        return torch.randint(0, 1000, (batch, seq), generator=g)
    return torch.randint(0, 512, (batch, seq), generator=g)  # gpt2, bert


MODELS: dict[str, Callable[[], nn.Module]] = {
    "mlp": MLP, "cnn": CNN, "transformer_block": TransformerBlock, "text_classifier": TextClassifier,
    "gpt2": gpt2, "bert": bert,
}


def build(name: str, seed: int = 0) -> nn.Module:
    """Model `name` with seeded random weights, in eval mode."""
    torch.manual_seed(seed)
    return MODELS[name]().eval()
