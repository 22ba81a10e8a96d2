"""Graph outputs that are views of a graph input, returned as eager returns them: a view of the
input tensor itself, made at each call by replaying the graph's view ops on it.

Why: an output that aliases an input is rebuilt by aot_autograd after the call
(`gen_alias_from_base`): from its recorded view functions where they have no symbolic inputs,
else from the tensor the backend returned, replaying that tensor's own view function when it has a
`_base`, or `as_strided` with its sizes, strides and storage offset. A fresh contiguous result
therefore gave the wrong elements wherever a view's size or offset is symbolic (`dynamic=True`):
`x.chunk(2, 1)` over [2, 6] came back as the first three elements of the storage twice, `x.narrow(1,
1, n - 1)` from offset 0. The view is also what eager returns (same storage, no copy) when no
aot_autograd sits in between (`compile_exported`).

A pure view chain: every node the output depends on is a graph input (not one baked in as a
constant), an op whose schema returns an alias of its input (`OpOverload.is_view`: slice, narrow,
split, chunk, expand, view, permute, select, ...), a `getitem` of such an op's list, or a
non-tensor value (size arithmetic over the inputs' SymInts: `operator.floordiv`, `sym_size`, ...).
Anything else (a computed tensor anywhere on the way) leaves the output a result of the program.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hlocc.frontends.torch.types import is_tensor


def is_view_node(node: Any) -> bool:
    """Whether an FX call returns an alias of its input: a view op, or an item of a view op's list."""
    target = node.target
    if target is operator.getitem:
        source = node.args[0]
        return getattr(source, "op", "") == "call_function" and bool(getattr(source.target, "is_view", False))
    return bool(getattr(target, "is_view", False))


def input_view(node: Any, inputs: Mapping[Any, int]) -> Callable[[Sequence[Any]], Any] | None:
    """For an FX output value `node` that is a view of a graph input, the function of the graph's
    inputs (`args`, in placeholder order; `inputs`: placeholder node -> its position, the graph
    inputs that are passed at each call) that makes it with eager's view ops; else None. A node of
    `inputs` that is not a placeholder stands for the input it names too: an exported program's new
    value of an input it mutates, which the caller has copied into the input before the replay."""
    if getattr(node, "op", "") not in ("call_function", "placeholder") or not is_tensor(node.meta.get("val")):
        return None
    needed: set[Any] = set()
    pending = [node]
    while pending:
        n = pending.pop()
        if n in needed:
            continue
        needed.add(n)
        if n in inputs:
            continue
        if n.op == "placeholder":
            return None  # (a constant baked into the program)
        if n.op != "call_function":
            return None
        if is_tensor(n.meta.get("val")) and not is_view_node(n):
            return None
        if n.target is operator.getitem and not is_view_node(n):
            return None  # (an item of a computed tuple)
        pending.extend(n.all_input_nodes)
    order = [n for n in node.graph.nodes if n in needed]
    from torch.fx.node import map_arg

    def replay(args: Sequence[Any]) -> Any:
        env: dict[Any, Any] = {}
        for n in order:
            if n in inputs:
                env[n] = args[inputs[n]]
            else:
                env[n] = n.target(*map_arg(n.args, env.__getitem__), **map_arg(n.kwargs, env.__getitem__))
        return env[node]

    return replay


__all__ = ["input_view", "is_view_node"]
