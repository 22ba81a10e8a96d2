"""How hlocc's dynamo backend has PyTorch trace a graph: the forms of three ops that the table
lowers (`traced_forms`), and which graphs the inference fast path may not export
(`mutates_attributes`)."""

from __future__ import annotations

from typing import Any


def traced_forms():
    """A context in which aot_autograd traces (forward and backward) the forms of three ops that the
    table lowers, not the CPU kernels' or PyTorch's (`contextlib.ExitStack`):

    - scaled_dot_product_attention picks its math form: what `attention_as_math`
      (frontends/torch/decompositions.py) does for the calls dynamo's graph shows, for those it does not
      (inside `F.multi_head_attention_forward`, which dynamo keeps as one call: nn.MultiheadAttention and the
      transformer layers in training). Otherwise the CPU picks `_scaled_dot_product_flash_attention_for_cpu`,
      whose core-ATen decomposition returns the attention weights where the op returns the logsumexp, and the
      op's backward, computed from it, gave wrong gradients (a training step of nn.TransformerEncoderLayer:
      gradients off by 10s).
    - mkldnn off: the core-ATen decomposition of an LSTM in inference is then the time steps in
      ATen (`one_layer_lstm`) instead of `mkldnn_rnn_layer`, one opaque oneDNN kernel per layer.
      (Only tracing sees the flag: the graphs run hlocc's code.)
    - multilabel_margin_loss_forward stays one op through autograd, so that hlocc's decompositions of
      it and of its backward op apply (frontends/torch/decompositions.py). PyTorch registers its
      own decomposition as the op's Python kernel at the Autograd key, which the tracer's Python
      dispatcher runs before any table, and that one is wrong where a row's labels end before
      its last position (F.multilabel_margin_loss gave twice eager's loss)."""
    import contextlib

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    @contextlib.contextmanager
    def mkldnn_off():  # (the flag alone: torch.backends.mkldnn.flags() sets others too, and warns)
        enabled = torch._C._get_mkldnn_enabled()
        torch._C._set_mkldnn_enabled(False)
        try:
            yield
        finally:
            torch._C._set_mkldnn_enabled(enabled)

    @contextlib.contextmanager
    def without_python_kernel(op, key):
        kernel = op.py_kernels.pop(key, None)
        op._dispatch_cache.clear()
        try:
            yield
        finally:
            if kernel is not None:
                op.py_kernels[key] = kernel
            op._dispatch_cache.clear()

    stack = contextlib.ExitStack()
    stack.enter_context(sdpa_kernel([SDPBackend.MATH]))
    stack.enter_context(mkldnn_off())
    stack.enter_context(without_python_kernel(torch.ops.aten.multilabel_margin_loss_forward.default,
                                              torch._C.DispatchKey.Autograd))
    return stack


def mutates_attributes(graph_module: Any) -> bool:
    """Whether a dynamo graph holds tensors as attributes (`get_attr`: an optimizer's parameters and
    state) and has an in-place op: the export traces attributes as the real tensors, so it would
    apply the update once while tracing (a compiled `opt.step` moved the weights twice on the call
    that compiled it). aot_module_simplified lifts them to inputs and takes such a graph."""
    nodes = graph_module.graph.nodes
    if not any(n.op == "get_attr" for n in nodes):
        return False
    for n in nodes:
        name = n.target if isinstance(n.target, str) else getattr(n.target, "__name__", "")
        if n.op in ("call_method", "call_function") and name.endswith("_") and not name.endswith("__"):
            return True
    return False
