"""A Linear over a rank > 2 input (ops_shape `_product_unflattened`): its decomposition's
`view(addmm(b, view(x, [M, K]), w), [..., N])` is lowered as one dot of x itself, contracting its
last dimension, with the bias added at x's rank: no reshape around the product."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, ht, record_graphs  # noqa: E402


def _lowered(model, x, monkeypatch):
    graphs = record_graphs(monkeypatch)
    torch._dynamo.reset()
    with torch.no_grad():
        got = torch.compile(model, backend=lambda gm, inputs: ht.backend(gm, inputs, {"strict": True}))(x)
        assert_close(got, model(x), "linear")
    return graphs[0].module.entry.instructions


def _live(root):
    seen, stack = {}, [root]
    while stack:
        i = stack.pop()
        if id(i) not in seen:
            seen[id(i)] = i
            stack.extend(i.operands)
    return list(seen.values())


@pytest.mark.parametrize("bias", [True, False])
def test_a_linear_over_a_rank_3_input_is_one_dot_of_it(bias, monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5, bias=bias), torch.nn.ReLU()).eval()
    instructions = _lowered(model, torch.randn(2, 4, 6), monkeypatch)
    dots = [i for i in _live(instructions[-1]) if i.opcode == "dot"]  # (the dead dot is left to HLO's dce)
    assert len(dots) == 1
    dot = dots[0]
    assert dot.shape.dims == (2, 4, 5) and dot.attrs["lhs_contracting_dims"] == (2,)
    assert dot.operands[0].opcode == "parameter" and dot.operands[0].shape.dims == (2, 4, 6)
    (user,) = dot.users
    if bias:
        add = user
        assert add.opcode == "add" and add.operands[0].opcode == "broadcast"
        assert add.operands[0].attrs["dimensions"] == (2,)
    else:
        assert user.opcode != "reshape"


def test_a_rank_2_linear_keeps_its_product(monkeypatch):
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 5).eval()
    instructions = _lowered(model, torch.randn(3, 6), monkeypatch)
    (dot,) = [i for i in instructions if i.opcode == "dot"]
    assert dot.attrs["lhs_contracting_dims"] == (1,) and dot.shape.dims == (3, 5)
