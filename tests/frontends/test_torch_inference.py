"""Graphs that need no autograd (hlocc.torch `_inference_graph`): dynamo calls the compiled graph
directly, without aot_autograd's runtime wrapper, and its inputs go through tensors.GuardedInputs
(an unchanged weight is the view made at the last call). Graphs whose export would change the
calling convention (an input mutated, an output aliasing an input) keep aot_autograd's wrapper."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close  # noqa: E402

import hlocc.torch as ht  # noqa: E402
from hlocc.errors import ArgumentError  # noqa: E402


def _compile(fn):
    """`fn` compiled by hlocc (strict), and the list of callables the backend gave dynamo."""
    torch._dynamo.reset()
    returned = []

    def backend(gm, inputs):
        returned.append(ht.backend(gm, inputs, {"strict": True}))
        return returned[-1]

    return torch.compile(fn, backend=backend), returned


@pytest.fixture(scope="module")
def linear():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 3)).eval()


def test_an_inference_graph_is_called_directly_and_sees_weight_updates(linear):
    """Under no_grad the backend returns the compiled graph itself; an in-place weight update is seen
    through the kept view, and `.data =` (other memory, same layout: no recompile) makes a new one."""
    compiled, returned = _compile(linear)
    x = torch.randn(4, 6)
    with torch.no_grad():
        assert_close(compiled(x), linear(x))
        assert isinstance(returned[0].graph, ht.CompiledGraph)
        assert returned[0].graph._addresses is not None  # (the inputs' addresses, from the second call)
        assert_close(compiled(x), linear(x))  # (the second call takes the snapshot)
        linear[0].weight.mul_(2.0)
        assert_close(compiled(x), linear(x))
        linear[2].weight.data = torch.randn(3, 5)
        assert_close(compiled(x), linear(x))
        assert_close(compiled(x + 1), linear(x + 1))
    assert len(returned) == 1


def test_a_direct_call_with_a_wrong_input_is_an_error_naming_it(linear, monkeypatch):
    """Without dynamo's guards in front (a direct call), an input that breaks them takes the checked path."""
    compiled, returned = _compile(linear)
    x = torch.randn(4, 6)
    with torch.no_grad():
        compiled(x)
        graph = returned[0].graph
        seen = []
        arrays, addresses = graph._arrays, graph._addresses
        monkeypatch.setattr(graph, "_arrays", lambda args: seen.append(list(args)) or arrays(args))
        monkeypatch.setattr(graph, "_addresses", lambda args: seen.append(list(args)) or addresses(args))
        compiled(x)
        args = [a.double() if a is x else a for a in seen[0]]
        with pytest.raises(ArgumentError, match=r"expected dtype f32 \(float32\), got torch.float64"):
            graph(args)


def test_an_input_mutation_keeps_the_aot_autograd_wrapper():
    def bump(x, y):
        y.add_(1.0)
        return x * y

    compiled, returned = _compile(bump)
    x, y = torch.randn(3), torch.zeros(3)
    with torch.no_grad():
        got = compiled(x, y)
    np.testing.assert_allclose(y.numpy(), np.ones(3))  # the mutation written back
    assert_close(got, x)
    assert not isinstance(getattr(returned[0], "graph", None), ht.CompiledGraph)


def test_an_input_mutation_with_a_constant_is_lowered():
    """`x[:, 0] = 0.0` lifts the 0.0 as a tensor constant, which the lowering reads while
    aot_autograd's FakeTensorMode is active (it refused the real tensor: AssertionError)."""
    def clear(x):
        x[:, 0] = 0.0
        return x * 2

    compiled, _ = _compile(clear)
    x = torch.randn(3, 4)
    want = clear(x.clone())
    got = compiled(x)
    assert_close(got, want)
    assert torch.equal(x[:, 0], torch.zeros(3))  # the mutation written back


def test_an_output_aliasing_an_input_keeps_the_aot_autograd_wrapper():
    def view_and_sum(x):
        return x.view(-1), x + 1.0

    compiled, returned = _compile(view_and_sum)
    x = torch.randn(2, 3)
    with torch.no_grad():
        flat, plus = compiled(x)
    assert flat.data_ptr() == x.data_ptr()  # a view of the input, as eager's
    assert_close(plus, x + 1.0)
    assert not isinstance(getattr(returned[0], "graph", None), ht.CompiledGraph)


def test_a_type_conversion_in_an_inference_graph_is_lowered():
    """`.to(dtype)` leaves `aten._assert_tensor_metadata` in the exported graph: no value, no fallback."""
    compiled, _ = _compile(lambda t: (t != 0).to(torch.float32).sum(-1))
    tokens = torch.tensor([[1, 0, 3], [0, 0, 2]])
    with torch.no_grad():
        assert_close(compiled(tokens), torch.tensor([2.0, 1.0]))


@pytest.mark.parametrize("fn", [lambda x: x.clone(), lambda x: (x.clone(), x.clone(), x.sum()),
                                lambda x: x.detach().clone(), lambda x: x.to(copy=True)],
                         ids=["clone", "two_clones", "detach_clone", "to_copy"])
def test_a_clone_is_a_tensor_of_its_own(fn):
    """x.clone() lowers to the input itself, and the graph returned the caller's tensor: mutating
    the "copy" changed the input (`labels = input_ids.clone()` then masked in place)."""
    compiled, _ = _compile(fn)
    x = torch.zeros(4)
    with torch.no_grad():
        got = compiled(x)
    clones = [t for t in (got if isinstance(got, tuple) else (got,)) if t.shape == x.shape]
    assert len({t.data_ptr() for t in clones} | {x.data_ptr()}) == len(clones) + 1
    for t in clones:
        t.add_(1)
    assert x.tolist() == [0.0] * 4 and all(t.tolist() == [1.0] * 4 for t in clones)


OUT_OF_RANGE = {
    "embedding": (lambda w, i: torch.nn.functional.embedding(i, w), "index out of range in self"),
    "index": (lambda x, i: x[i], "index out of range for dimension 0 of size 5"),
    "index_select": (lambda x, i: x.index_select(0, i), "index out of range for dimension 0 of size 5"),
    "gather": (lambda x, i: x.gather(0, i), "index out of range for dimension 0 of size 5"),
    "cross_entropy": (lambda x, i: torch.nn.functional.cross_entropy(x.view(1, 5).expand(3, 5), i),
                      "index out of range for dimension 1 of size 5"),
}


@pytest.mark.parametrize("op", sorted(OUT_OF_RANGE))
def test_an_index_out_of_range_raises_as_eager_does(op):
    """The gathers clamped an index out of range to an answer (an embedding of a token beyond the
    vocabulary, a class target beyond the classes) where eager raises."""
    fn, message = OUT_OF_RANGE[op]
    compiled, _ = _compile(fn)
    x = torch.arange(10.0).view(5, 2)[:, 0].contiguous() if op != "embedding" else torch.arange(10.0).view(5, 2)
    with torch.no_grad():
        for good in ([4, 0, 3], [-5, -1, 2]) if op == "index" else ([4, 0, 3],):  # (x[i] wraps a negative i)
            index = torch.tensor(good)
            assert_close(compiled(x, index), fn(x, index))
        for bad in ([1, 5, 2], [-6, 0, 0]) if op == "index" else ([1, 5, 2], [0, -1, 0]):
            with pytest.raises(RuntimeError, match=message):
                compiled(x, torch.tensor(bad))
        assert_close(compiled(x, torch.tensor([2, 1, 0])), fn(x, torch.tensor([2, 1, 0])))  # (and again after)


def test_overlapping_views_of_one_tensor_one_mutated_are_lowered():
    """Inputs that are overlapping views of one tensor, one mutated: aot_autograd passes their base
    and rebuilds them by as_strided / as_strided_scatter, which ran eager. The read of `y` sees the
    write through `x`, as in eager."""
    def bump(x, y):
        x.add_(1)
        return y * 2

    b = torch.randn(3, 4)
    mine = b.clone()
    compiled, returned = _compile(bump)
    got = compiled(mine, mine[1:])
    assert_close(got, bump(b, b[1:]))
    assert torch.equal(mine, b)
    # under dynamic=True the rebuilt view's size is a SymInt input alone: a fallback naming it, not a crash
    torch._dynamo.reset()
    strict = torch.compile(bump, backend=ht.backend, dynamic=True, options={"strict": True})
    mine = b.clone()
    with pytest.raises(Exception, match="no tensor input has them as a size"):
        strict(mine, mine[1:])
