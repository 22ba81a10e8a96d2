"""Tensors of an FX graph known at compile time: the values that depend on no graph input, computed
once by PyTorch itself while lowering (Inductor folds such subgraphs before it generates code;
XLA's HloConstantFolding has the same aim on HLO).

What PyTorch's decompositions build from sizes alone is the case that matters: the causal mask of
`scaled_dot_product_attention(is_causal=True)` is `arange`s, a subtraction, a comparison and a
`where` of 0 and -inf; lowered op by op it is an s64 iota computation that every kernel reading the
scores recomputes per element (on the transformer block it cost more than the softmax it masks).
Known, it is one small f32 literal.

A node is known when it is deterministic (random ops are refused before; not `empty`), its result is one tensor of
static sizes with at most MAX_KNOWN_ELEMENTS elements, and every tensor argument is known (a
factory such as `arange` or `full` has none). Its value is the op run on the known arguments, on
the CPU, outside any fake or tracing mode. The lowering emits a literal for a known node that
reads known tensors and is not larger than the largest of them: a factory or a broadcast of a
known value is lowered as written (a broadcast of a scalar costs less than its literal).
"""

from __future__ import annotations

from typing import Any

MAX_KNOWN_ELEMENTS = 1 << 16
_NEVER_KNOWN = ("empty",)  # (random ops never get here: the table refuses them first)


def _is_node(value: Any) -> bool:
    return type(value).__name__ == "Node"


def _flat(args: Any):
    for a in args:
        if isinstance(a, (list, tuple)):
            yield from _flat(a)
        else:
            yield a


def _static_numel(val: Any) -> int | None:
    """The element count of a FakeTensor of static sizes, else None."""
    if not (hasattr(val, "shape") and hasattr(val, "dtype")):
        return None
    count = 1
    for d in val.shape:
        if not isinstance(d, int):
            return None
        count *= d
    return count


class KnownValues:
    """The known tensors of one graph being lowered (node → torch.Tensor)."""

    def __init__(self):
        self.values: dict[Any, Any] = {}

    def evaluate(self, node: Any, name: str) -> Any:
        """Node's value when it is known (module doc), else None; remembered for its users."""
        if any(word in name for word in _NEVER_KNOWN):
            return None
        numel = _static_numel(node.meta.get("val"))
        if numel is None or numel > MAX_KNOWN_ELEMENTS:
            return None
        args = list(_flat([*node.args, *node.kwargs.values()]))
        if any(_is_node(a) and a not in self.values for a in args) or any(hasattr(a, "node") for a in args):
            return None  # an input's value, or a symbolic size
        value = self._run(node)
        if value is not None:
            self.values[node] = value
        return value

    def should_emit(self, node: Any, value: Any) -> bool:
        """Whether a known node is emitted as a literal: it reads known tensors (it is not a
        factory) and is no larger than the largest of them."""
        inputs = [self.values[a].numel() for a in _flat([*node.args, *node.kwargs.values()])
                  if _is_node(a) and hasattr(self.values[a], "numel")]
        return bool(inputs) and value.numel() <= max(inputs)

    def literal(self, value: Any) -> Any:
        """A known tensor's numpy array (a copy: the literal's own memory)."""
        from torch.utils._python_dispatch import _disable_current_modes

        from hlocc.frontends.torch.tensors import to_numpy

        with _disable_current_modes():
            return to_numpy(value).copy()

    def _run(self, node: Any) -> Any:
        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        def real(value: Any) -> Any:
            if isinstance(value, (list, tuple)):
                return type(value)(real(v) for v in value)
            return self.values[value] if _is_node(value) else value

        try:
            with _disable_current_modes(), torch.no_grad():
                value = node.target(*real(list(node.args)), **{k: real(v) for k, v in node.kwargs.items()})
        except Exception:  # (an op PyTorch cannot run outside its graph: lowered as written)
            return None
        want = node.meta["val"]
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu" or value.dtype != want.dtype \
                or tuple(value.shape) != tuple(want.shape):
            return None
        return value
