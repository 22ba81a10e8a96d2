"""Training through aot_autograd: forward and backward graphs both compiled by hlocc (strict), one
SGD step; gradients and updated parameters against eager's; convolution's backward on its own."""

import copy

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, compiled, ht  # noqa: E402

from hlocc.testing import torch_models as tm  # noqa: E402


def _step(model, forward, x):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    loss = forward(x).square().mean()
    loss.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    optimizer.step()
    return loss.detach(), grads


@pytest.mark.parametrize(("name", "backend"), [("mlp", "cpu"), ("transformer_block", "interpreter"), ("cnn", "interpreter"),
                                               pytest.param("transformer_block", "cpu", marks=pytest.mark.slow),
                                               pytest.param("cnn", "cpu", marks=pytest.mark.slow)])
def test_training_step_matches_eager(name, backend):
    eager = tm.build(name).train()
    ours = copy.deepcopy(eager)
    x = tm.example_input(name)
    ht.reset_stats()
    want_loss, want_grads = _step(eager, eager, x)
    got_loss, got_grads = _step(ours, compiled(ours, backend=backend), x)
    assert ht.stats() == {"compiles": 2}  # the forward and the backward graph
    # gradients sum over the batch: a few ulps more than one op's tolerance
    assert_close(got_loss, want_loss, "loss")
    for (pname, _), got, want in zip(eager.named_parameters(), got_grads, want_grads):
        assert_close(got, want, f"grad of {pname}", scale=10)
    for (pname, want), got in zip(eager.named_parameters(), ours.parameters()):
        assert_close(got, want, f"updated {pname}", scale=10)
    for (bname, want), got in zip(eager.named_buffers(), ours.buffers()):  # BatchNorm's running statistics
        if want.is_floating_point():
            assert_close(got, want, f"buffer {bname}", scale=10)
        else:
            assert torch.equal(got, want), bname


@pytest.mark.parametrize(("stride", "padding", "dilation", "size"), [(2, 0, 1, 8), (2, 1, 2, 9), (3, 1, 1, 10)])
def test_convolution_backward_matches_eager(stride, padding, dilation, size):
    """Input, weight and bias gradients of Conv2d (size 8, stride 2: the forward drops the last row,
    which the weight gradient must crop)."""
    torch.manual_seed(0)
    eager = torch.nn.Conv2d(2, 3, 3, stride=stride, padding=padding, dilation=dilation)
    ours = copy.deepcopy(eager)
    x = torch.randn(2, 2, size, size)
    x_eager, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    eager(x_eager).square().sum().backward()
    compiled(ours, backend="interpreter")(x_ours).square().sum().backward()
    assert_close(x_ours.grad, x_eager.grad, "input grad")
    assert_close(ours.weight.grad, eager.weight.grad, "weight grad", scale=10)
    assert_close(ours.bias.grad, eager.bias.grad, "bias grad", scale=10)


# depthwise (grouped, as grouped_1d in 2-D) and the plain 2-D transposed convolution (transposed_grouped
# without groups) are slow: 5-6 s each on two loaded cores, and the other three cover their paths.
@pytest.mark.parametrize("make, shape", [
    pytest.param(lambda: torch.nn.Conv2d(4, 4, 3, groups=4, padding=1), (2, 4, 7, 7), id="depthwise",
                 marks=pytest.mark.slow),
    pytest.param(lambda: torch.nn.Conv1d(6, 9, 3, groups=3, dilation=2, padding=2, stride=2), (2, 6, 12),
                 id="grouped_1d"),
    pytest.param(lambda: torch.nn.ConvTranspose2d(3, 2, 3, stride=2), (2, 3, 5, 5), id="transposed",
                 marks=pytest.mark.slow),
    pytest.param(lambda: torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                 (2, 4, 5, 6), id="transposed_grouped"),
    pytest.param(lambda: torch.nn.ConvTranspose1d(3, 2, 4, stride=3, dilation=2), (2, 3, 7), id="transposed_1d"),
])
def test_grouped_and_transposed_convolutions_train_as_eager(make, shape):
    """Their backward (and a grouped transposed convolution's forward) was not lowered: a
    MobileNet's or a decoder's backward graph ran eager."""
    torch.manual_seed(0)
    eager = make()
    ours = copy.deepcopy(eager)
    x = torch.randn(*shape)
    x_eager, x_ours = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = eager(x_eager)
    got = compiled(ours, backend="cpu")(x_ours)
    assert_close(got, want, "output")
    want.square().sum().backward()
    got.square().sum().backward()
    assert_close(x_ours.grad, x_eager.grad, "input grad")
    assert_close(ours.weight.grad, eager.weight.grad, "weight grad", scale=10)
    assert_close(ours.bias.grad, eager.bias.grad, "bias grad", scale=10)


@pytest.mark.parametrize("ceil_mode", [False, True])
@pytest.mark.parametrize("args", [(2,), (3, 2, 1), (2, 2, 0, 2)])
def test_max_pool_indices_match_eager(args, ceil_mode):
    """ATen's indices: the first maximum in window order (the ties below), never a padding position."""
    x = torch.randn(2, 3, 7, 7)
    x[0, 0, 0, :2] = 5.0
    x[1, 2] = -torch.inf
    def fn(x):
        return torch.nn.functional.max_pool2d_with_indices(x, *args, ceil_mode=ceil_mode)
    (values, indices), (want_values, want_indices) = compiled(fn, backend="interpreter")(x), fn(x)
    assert torch.equal(values, want_values) and torch.equal(indices, want_indices)


def test_backward_inside_the_compiled_step():
    """loss.backward() inside the compiled function: dynamo breaks the graph there and resumes in a
    frame where it is still on, so the lazily compiled backward graph used to be compiled and run
    with dynamo tracing hlocc's own Python ('Executable' object has no attribute 'bind')."""
    torch.manual_seed(0)
    eager = torch.nn.Linear(6, 3)
    ours = copy.deepcopy(eager)
    x, target = torch.randn(5, 6), torch.tensor([0, 2, 1, 1, 0])

    def step(model):
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        return loss

    ht.reset_stats()
    want = step(eager)
    got = compiled(lambda: step(ours))()
    assert ht.stats() == {"compiles": 2}  # the forward and the backward graph, nothing of hlocc's own
    assert_close(got, want, "loss")
    for (pname, p), q in zip(eager.named_parameters(), ours.parameters()):
        assert_close(q.grad, p.grad, f"grad of {pname}", scale=10)


@pytest.mark.parametrize("optimizer", ["sgd_momentum", "adam"])
def test_a_compiled_optimizer_step_moves_the_weights_once(optimizer):
    """`torch.compile(opt.step)`: dynamo's graph holds the parameters and the optimizer state as
    attributes and updates them in place. Exported for the inference fast path, the trace applied
    the update to the real state once more on the call that compiled (SGD's momentum buffer was
    multiplied by 0.9 twice, Adam's weights lagged); such a graph takes aot_autograd's path."""
    make = {"sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
            "adam": lambda ps: torch.optim.Adam(ps, lr=0.1)}[optimizer]
    torch._dynamo.reset()
    eager, mine = torch.zeros(4, requires_grad=True), torch.zeros(4, requires_grad=True)
    eager_opt, my_opt = make([eager]), make([mine])
    step = torch.compile(my_opt.step, backend=ht.backend, options={"backend": "interpreter", "strict": True})
    for i in range(3):
        eager.grad, mine.grad = torch.full((4,), 1.0 + i), torch.full((4,), 1.0 + i)
        eager_opt.step()
        step()
        assert_close(mine, eager, f"{optimizer} step {i}")


def test_abs_of_unsigned_is_the_value():
    """HLO's abs takes signed types: u8's abs is its operand (it built invalid HLO and ran eager)."""
    fn = lambda x: x.abs() + 1  # noqa: E731
    torch._dynamo.reset()
    x = torch.tensor([0, 7, 200, 255], dtype=torch.uint8)
    got = torch.compile(fn, backend=ht.backend, options={"backend": "interpreter", "strict": True})(x)
    assert torch.equal(got, fn(x))


@pytest.mark.parametrize("params", ["constants", "arguments"])
def test_an_exported_program_updates_its_buffers_and_the_callers_tensors(params):
    """torch.export's USER_INPUT_MUTATION (`acc.add_(x)`) is written back to the caller's tensor, and a
    buffer the program updates is an argument even with params="constants" (baked in, every call
    read its first value)."""
    import hlocc.torch

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("count", torch.zeros(()))

        def forward(self, x, acc):
            acc.add_(x)
            self.count.add_(1)
            return x * self.count

    x = torch.ones(3)
    run = hlocc.torch.compile_exported(torch.export.export(Counting(), (x, torch.zeros(3))), params=params,
                                       backend="interpreter")
    acc = torch.zeros(3)
    for i in range(1, 4):
        assert run(x, acc).tolist() == [float(i)] * 3
        assert acc.tolist() == [float(i)] * 3


def test_sign_of_nan_and_abs_of_a_complex_view_as_eager():
    """PyTorch's sign(NaN) is 0 (HLO's is NaN); |view_as_complex(a)| is real without converting the
    complex operand to its real type first (an invalid convert, the graph ran eager)."""
    fn = lambda x: (torch.sign(x[:, 0]), torch.view_as_complex(x).abs())  # noqa: E731
    torch._dynamo.reset()
    x = torch.tensor([[float("nan"), 1.0], [-2.0, 3.0], [0.5, -4.0]])
    got = torch.compile(fn, backend=ht.backend, options={"backend": "interpreter", "strict": True})(x)
    for g, w in zip(got, fn(x)):
        assert_close(g, w, "sign / abs")


def test_an_exported_program_called_with_aliased_inputs_one_written_reads_the_write():
    """`a.add_(1); return a * b` called as run(a, a): the functional program read `b` before the
    write (2 for ones, eager 4). A call whose written input shares memory with another input (the same
    tensor, overlapping views, the model's own buffer) runs the exported module through dynamo with
    the hlocc backend, where the aliasing is in the graph; other calls keep the compiled program."""
    import warnings

    class WriteThenRead(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(3))

        def forward(self, a, b):
            a.add_(1)
            self.total.add_(b)
            return a * b

    def check(make):
        """hlocc's call against eager's on the inputs `make(the model's buffer)` gives: result, the
        inputs after the call and the buffer."""
        run = hlocc.torch.compile_exported(torch.export.export(WriteThenRead(), (torch.ones(3), torch.ones(3))),
                                           backend="interpreter")
        eager = WriteThenRead()
        mine, theirs = make(run.state["total"]), make(eager.total)
        assert torch.equal(run(*mine), eager(*theirs))
        for got, want in [*zip(mine, theirs), (run.state["total"], eager.total)]:
            assert torch.equal(got, want)
        return run

    import hlocc.torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(lambda total: (lambda a: (a, a))(torch.ones(3)))  # the same tensor twice
        check(lambda total: (lambda base: (base[1:], base[:3]))(torch.arange(4.0)))  # overlapping views
        check(lambda total: (torch.ones(3), total))  # the buffer the program writes, read as `b`
        run = check(lambda total: (torch.ones(3), torch.full((3,), 2.0)))
    assert run.aliasing is not None and run.aliasing._variant is None  # (no aliasing: the compiled program)
