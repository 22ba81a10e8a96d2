"""Symbolic sizes from PyTorch (dynamic=True, mark_dynamic, torch.export.Dim) as hlocc symbolic
dimensions: one dynamo graph and one hlocc compile serve every size; range constraints become
guards whose failure names the size and its range."""

import re

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, ht  # noqa: E402

import hlocc.torch  # noqa: E402
from hlocc.errors import ArgumentError  # noqa: E402
from hlocc.testing import torch_models as tm  # noqa: E402

SIZES = list(range(2, 12))  # ten sizes (PyTorch specializes 0 and 1)


def _counting_compile(model, backend, dynamic=True):
    """The model compiled with a backend that counts dynamo's compilations and records each graph."""
    torch._dynamo.reset()
    ht.reset_stats()
    calls, report = [], []

    def counted(gm, inputs):
        calls.append(gm)
        return ht.backend(gm, inputs, {"strict": True, "backend": backend, "report": report})
    return torch.compile(model, backend=counted, dynamic=dynamic), calls, report


# transformer_block's batch is slow-marked (its sequence case covers the model; ~6 s on two cores)
@pytest.mark.parametrize(("name", "axis"), [("mlp", "batch"), ("cnn", "batch"),
                                            pytest.param("transformer_block", "batch", marks=pytest.mark.slow),
                                            ("transformer_block", "seq"), ("text_classifier", "seq")])
def test_ten_sizes_compile_once(name, axis):
    """The batch or sequence axis marked dynamic (`mark_dynamic`), ten sizes."""
    model = tm.build(name)
    f, calls, report = _counting_compile(model, "interpreter", dynamic=None)
    with torch.no_grad():
        for size in SIZES:
            x = tm.example_input(name, **{axis: size})
            torch._dynamo.mark_dynamic(x, 0 if axis == "batch" else 1)
            assert_close(f(x), model(x), f"{name} {axis}={size}")
    assert len(calls) == 1, "dynamo recompiled"
    assert ht.stats() == {"compiles": 1}
    assert report[0]["symbols"], "the compiled module has no symbolic dimension"
    assert any(">= 2" in g for g in report[0]["guards"])  # PyTorch's range for a dynamic size


def test_dynamic_batch_on_cpu():
    model = tm.build("mlp")
    f, calls, report = _counting_compile(model, "cpu", dynamic=None)
    with torch.no_grad():
        for size in (2, 5):
            x = tm.example_input("mlp", batch=size)
            torch._dynamo.mark_dynamic(x, 0)
            assert_close(f(x), model(x), f"batch={size}")
    assert len(calls) == 1 and ht.stats() == {"compiles": 1}


# GPT-2 and BERT (two layers) over ten sequence lengths on the interpreter: ~30 s each on two cores.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_transformers_models_ten_sequence_lengths_compile_once(name):
    pytest.importorskip("transformers", reason="GPT-2/BERT come from the transformers package")
    test_ten_sizes_compile_once(name, "seq")


def test_dynamic_true_makes_every_size_symbolic():
    """dynamic=True: batch and sequence both symbolic, one hlocc compile; nothing compiles after the
    first call (on which dynamo may call the backend twice: it restarts its analysis when a size it
    made symbolic gets specialized, e.g. a width split into heads)."""
    model = tm.build("text_classifier")
    f, calls, report = _counting_compile(model, "interpreter", dynamic=True)
    with torch.no_grad():
        for i, (batch, seq) in enumerate(((2, 5), (3, 16), (6, 9))):
            x = tm.example_input("text_classifier", batch=batch, seq=seq)
            assert_close(f(x), model(x), f"batch={batch} seq={seq}")
            if i == 0:
                first = len(calls)
    assert len(calls) == first and ht.stats() == {"compiles": 1}
    assert len(report[-1]["symbols"]) == 2


def test_a_fixed_slice_of_a_symbolic_size_compiles_once():
    """dynamic=True makes the 6 symbolic: `x[:, :2]` and topk's first 2 hold by PyTorch's guard
    (s >= 2), which HLO's slice rule cannot prove for every s: they are gathers, not a fallback."""
    fn = lambda x: (x[:, :2] * 2, x.narrow(0, 1, 2), torch.topk(x, 2, dim=1).values)  # noqa: E731
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True, "backend": "interpreter"})
    for batch, width in ((3, 6), (4, 5), (7, 9)):
        x = torch.randn(batch, width)
        for got, want in zip(f(x), fn(x)):
            assert_close(got, want, f"{batch}x{width}")
    assert ht.stats() == {"compiles": 1}


@pytest.mark.parametrize(("name", "backend"), [("chunk_stack", "interpreter"), ("pixel_shuffle", "interpreter"),
                                             ("max_pool_indices", "cpu")])
def test_sizes_pytorch_knows_divisible_lower_in_strict_mode(name, backend):
    """PyTorch's guards know a size even (chunk then stack: `s - floordiv(s + 1, 2)` equals
    `floordiv(s + 1, 2)`), a multiple of 4 (pixel_shuffle), or write a window count as
    `floordiv(s, 2)` where the pooling rule writes `floordiv(s - 2, 2) + 1`: the size is
    `2*s_over_2` (types.divisibility) and the counts one expression, one compile for every size."""
    fn, make = {
        "chunk_stack": (lambda x: torch.stack(x.chunk(2, dim=1), 0) * 2, lambda n: torch.randn(3, 2 * n)),
        "pixel_shuffle": (lambda x: torch.nn.functional.pixel_shuffle(x, 2), lambda n: torch.randn(2, 8, n, n + 1)),
        "max_pool_indices": (lambda x: torch.nn.functional.max_pool2d(x, 3, stride=2, padding=1, return_indices=True),
                             lambda n: torch.randn(2, 3, n + 2, 2 * n + 1)),
    }[name]
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True, "backend": backend})
    for n in (3, 4, 7):
        x = make(n)
        got, want = f(x), fn(x)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            assert torch.equal(g, w), f"{name} at {list(x.shape)}"
    assert ht.stats() == {"compiles": 1}


@pytest.mark.parametrize(("mode", "scale", "align"), [("bilinear", 1.5, False), ("nearest", 0.5, None),
                                                    pytest.param("bicubic", 0.75, True, marks=pytest.mark.slow)])
def test_interpolate_by_a_scale_factor_compiles_once(mode, scale, align):
    """The output size is `trunc(scale * float(s))`: with a dyadic scale the floor division
    `s + floordiv(s, 2)`, exactly PyTorch's double product; any other scale is a clear refusal."""
    fn = lambda x: torch.nn.functional.interpolate(x, scale_factor=scale, mode=mode, align_corners=align)  # noqa: E731
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True, "backend": "cpu"})
    for n in (5, 8, 13):
        x = torch.randn(2, 3, n, n + 2)
        assert_close(f(x), fn(x), f"{mode} x{scale} at {n}", scale=4)  # (the blend rounds differently)
    assert ht.stats() == {"compiles": 1}


def test_a_scale_that_would_round_is_refused_by_name():
    import sympy
    from torch.utils._sympy.functions import ToFloat, TruncToInt

    from hlocc.frontends.torch.types import to_dim

    s = sympy.Symbol("s0", integer=True, positive=True)
    assert str(to_dim(TruncToInt(1.5 * ToFloat(s)))) == "floordiv(s0, 2) + s0"  # floor(3*s0/2)
    with pytest.raises(hlocc.HloError, match=r"scales a size by 1.3, which is not a dyadic fraction"):
        to_dim(TruncToInt(1.3 * ToFloat(s)))


def test_a_conv_net_with_max_pool_trains_over_symbolic_image_sizes():
    """The weight gradient of a convolution over a symbolic image is a convolution whose window is
    the output's size (symbolic: the shape rule passes it, a guard checks it per call, the library
    call binds it), and max pooling's backward reads the forward's indices."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.MaxPool2d(2), torch.nn.Flatten())
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(model, backend=ht.backend, dynamic=True, options={"strict": True, "backend": "cpu"})
    for n in (7, 8, 11):
        x = torch.randn(2, 3, n, n, requires_grad=True)
        f(x).square().sum().backward()
        got = x.grad, model[0].weight.grad
        x.grad = None
        model.zero_grad()
        model(x).square().sum().backward()
        assert_close(got[0], x.grad, f"input gradient at {n}")
        assert_close(got[1], model[0].weight.grad, f"weight gradient at {n}")
        model.zero_grad()
    assert ht.stats()["compiles"] == 2  # the forward and the backward graph, once each



def test_a_resnet_stem_over_symbolic_images_compiles_once():
    """Conv 7x7 stride 2 pad 3, then max-pool 3x3 stride 2 pad 1: PyTorch's shape environment
    writes the pool's size floordiv(s + 3, 4), hlocc's shape rules floordiv(floordiv(s + 1, 2) + 1, 2);
    the symbolic algebra makes them one expression (the verifier refused the module, and the graph
    ran eager)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 7, 2, 3), torch.nn.MaxPool2d(3, 2, 1)).eval()
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(model, backend=ht.backend, dynamic=True, options={"strict": True, "backend": "interpreter"})
    with torch.no_grad():
        for n in (13, 16, 18):
            x = torch.randn(2, 3, n, n)
            assert_close(f(x), model(x), f"image {n}")
    assert ht.stats() == {"compiles": 1}

def test_sizes_as_data_lower_in_strict_mode():
    """dynamic=True: a size's expression used as data (roll's shift `mod(s - 1, s)`) and a float of a
    size (attention's scale `(1 / sqrt(float(d))) ** 0.5`, as torch's MultiheadAttention computes it
    under dynamic=True) are computed in the module from the inputs' sizes: strict mode (no eager
    fallback)."""
    import math

    programs = [(lambda x: (torch.cat([x.flip(1), x.roll(1, 0)], 1).topk(2, dim=1).values, x.roll(-3, 1)),
                 [(3, 9), (5, 4), (8, 11)]),
                (lambda x: (x * (1.0 / math.sqrt(x.shape[-1])) ** 0.5).softmax(-1) + x.shape[0] / x.shape[1]
                 + (x.shape[0] / 3) % 1.0 - (x.shape[2] / 4) // 1.0,
                 [(2, 2, 16), (2, 3, 5), (3, 7, 9)])]
    for fn, shapes in programs:
        torch._dynamo.reset()
        ht.reset_stats()
        f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True, "backend": "interpreter"})
        with torch.no_grad():
            for shape in shapes:
                x = torch.randn(*shape)
                want, got = fn(x), f(x)
                for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                    assert_close(g, w, f"{shape}")


def _exported(name="mlp", lo=2, hi=32):
    model = tm.build(name)
    x = tm.example_input(name, batch=4)
    batch = torch.export.Dim("batch", min=lo, max=hi)
    return model, torch.export.export(model, (x,), dynamic_shapes={"x": {0: batch}})


# the transformer block (attention through torch.export) is slow-marked: ~7 s on two cores
@pytest.mark.parametrize(("name", "params"), [("mlp", "constants"), ("mlp", "arguments"),
                                              pytest.param("transformer_block", "constants", marks=pytest.mark.slow)])
def test_exported_program_with_a_dim(name, params):
    model, ep = _exported(name)
    run = hlocc.torch.compile_exported(ep, backend="interpreter", params=params)
    assert sum(p.shape.is_symbolic for p in run.module.entry.parameters) == 1  # x's batch; weights static
    with torch.no_grad():
        for size in (2, 7, 32):
            x = tm.example_input(name, batch=size)
            assert_close(run(x), model(x), f"batch={size}")
    constants = [i for i in run.module.entry.instructions if i.opcode == "constant" and i.shape.rank > 0]
    assert bool(constants) == (params == "constants")


def test_exported_range_is_a_guard():
    _, ep = _exported(lo=2, hi=8)
    run = hlocc.torch.compile_exported(ep, backend="interpreter")
    assert any(re.match(r"s\d+ >= 2 and s\d+ <= 8", str(g)) for g in run.module.guards), run.module.guards
    # PyTorch names the Dim's symbol (s0, s77, ...); the message names it and the Dim's range
    with pytest.raises(ArgumentError, match=r"size s\d+ = 9 is outside its range \[2, 8\]"):
        run(tm.example_input("mlp", batch=9))


def test_exported_input_errors_name_the_input():
    _, ep = _exported()
    run = hlocc.torch.compile_exported(ep, backend="interpreter")
    x = tm.example_input("mlp", batch=4)
    with pytest.raises(ArgumentError, match=r"input 'x': expected dtype f32 \(float32\), got torch.float64"):
        run(x.double())
    with pytest.raises(ArgumentError, match=r"input 'x': expected shape f32\[\?s\d+,64\], got \[4, 32\]"):
        run(x[..., :32])


def test_a_graph_returning_only_sizes_binds_them():
    """`x.resize_(x.numel())` under dynamic=True: the graph before the resize returns only sizes,
    which were bound through an executable that was never made (AttributeError; stress tester)."""
    def f(x):
        x.resize_(x.numel())
        return x * 2

    torch._dynamo.reset()
    g = torch.compile(f, backend=ht.backend, dynamic=True)
    for shape in ((3, 4), (5, 2)):
        x = torch.randn(shape)
        y, want = x.clone(), f(x.clone())
        got = g(y)
        assert got.shape == want.shape and torch.equal(got, want) and y.shape == (x.numel(),)


def test_exported_inputs_are_matched_by_name_and_constants_checked():
    """An exported program's inputs are taken by its input spec, as `ep.module()` takes them: keyword
    arguments and dict entries in another order than at export were swapped (silently wrong), an int
    input other than its export value was ignored, and an extra argument too (stress tester)."""
    class Inputs(torch.nn.Module):
        def forward(self, x, d, k: int, *, y, z):
            return x * k + y - z * 10 + d["a"] - d["b"]

    x, y, z = torch.ones(3), torch.full((3,), 5.0), torch.zeros(3)
    d = {"a": torch.full((3,), 2.0), "b": torch.ones(3)}
    ep = torch.export.export(Inputs(), (x, d, 3), {"y": y, "z": z})
    run = hlocc.torch.compile_exported(ep, backend="interpreter")
    want = ep.module()(x, d, 3, y=y, z=z)
    assert torch.equal(run(x, d, 3, y=y, z=z), want)
    assert torch.equal(run(x, {"b": d["b"], "a": d["a"]}, 3, z=z, y=y), want)
    with pytest.raises(ArgumentError, match="input 'k' was 3 at export, and the program is specialized to it; got 4"):
        run(x, d, 4, y=y, z=z)
    with pytest.raises(ArgumentError, match=r"do not match the exported program's inputs; missing: \[1\]\['z'\]"):
        run(x, d, 3, y=y)
    with pytest.raises(ArgumentError, match=r"unexpected: \[0\]\[3\]"):
        run(x, d, 3, x, y=y, z=z)


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name, forward", [
    ("the_mutated_input", lambda x: x.add_(1)),
    ("a_view_of_it", lambda x: x.add_(1)[1:]),
    ("a_view_of_an_input", lambda x: (x * 2, x.t())),
])
def test_an_exported_output_aliasing_an_input_is_eagers(name, forward, dynamic):
    """An exported program's output that is an input it mutates, a view of its new value or a view
    of an input is that input or eager's view of it, as ep.module() returns: it was a copy, so a
    write to it did not reach the input (stress tester)."""
    class Program(torch.nn.Module):
        def forward(self, x):
            return forward(x)

    shapes = ({0: torch.export.Dim("b", min=3, max=64)},) if dynamic else None
    ep = torch.export.export(Program(), (torch.zeros(3, 4),), dynamic_shapes=shapes)
    run = hlocc.torch.compile_exported(ep, backend="interpreter")
    for rows in ((3, 5) if dynamic else (3,)):
        x, eager_x = torch.zeros(rows, 4), torch.zeros(rows, 4)
        got, want = run(x), ep.module()(eager_x)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert torch.equal(g, w) and g.stride() == w.stride(), (name, rows)
            g.fill_(7)
            w.fill_(7)
        assert torch.equal(x, eager_x), (name, rows, x, eager_x)


def test_a_float_of_a_size_saved_for_backward_is_returned_as_a_number():
    """cross_entropy's label smoothing saves `0.1 / float(s)` for the backward: the forward graph
    returns it as a Python number, as aot_autograd requires (a 0-d tensor was an AssertionError)."""
    fn = lambda x: torch.nn.functional.cross_entropy(  # noqa: E731
        x, torch.zeros(x.shape[0], dtype=torch.long), label_smoothing=0.1)
    torch._dynamo.reset()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"backend": "interpreter"})
    for n in (3, 5):
        x = torch.randn(n, 4, requires_grad=True)
        assert_close(f(x), fn(x), f"loss at {n}")


def test_float_attributes_read_by_item_compile_once_in_inference():
    """Under dynamic=True dynamo passes a module's float attributes (a scale, an eps) as 0-d tensor
    inputs read by .item() (`aten._local_scalar_dense`), which had no lowering: every such
    inference graph (GPT-2's, Llama's) ran eager."""
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.scale, self.eps = torch.nn.Linear(8, 8), 0.125, 1e-3

        def forward(self, x):
            y = self.lin(x) * self.scale
            return y / (y.abs().mean(-1, keepdim=True) + self.eps)

    torch.manual_seed(0)
    model = Scaled().eval()
    f, calls, _ = _counting_compile(model, "cpu", dynamic=True)
    with torch.no_grad():
        for size in (3, 7, 10):
            x = torch.randn(size, 8)
            assert_close(f(x), model(x), f"batch={size}")
    assert len(calls) == 1 and ht.stats() == {"compiles": 1}


@pytest.mark.parametrize("name, fn", [
    ("view_expand", lambda x: x.view(x.shape[0], -1, 1).expand(-1, -1, 3)),
    ("view_expand_4d", lambda x: x.view(x.shape[0], 1, 1, -1).expand(-1, 2, x.shape[1], -1)),
    ("sum_and_view_expand", lambda x: (x.sum(), x.view(x.shape[0], -1, 1).expand(-1, -1, 2))),
    ("computed_expand", lambda x: (x + 1).unsqueeze(-1).expand(-1, -1, 3)),
])
def test_an_expanded_output_keeps_eagers_zero_strides(name, fn):
    """An output aliasing an input through views of symbolic sizes is rebuilt by aot_autograd from
    the strides hlocc returns: a contiguous result made it read past the input's storage
    (RuntimeError: setStorage ... out of bounds). Expanded outputs come back with stride 0."""
    torch._dynamo.reset()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True})
    for n in (4, 5, 7):
        x = torch.randn(n, 6)
        got, want = f(x), fn(x)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            assert_close(g, w, f"{name} at {n}")
            assert g.stride() == w.stride(), (name, n, g.stride(), w.stride())


@pytest.mark.parametrize("name, fn", [
    ("chunk", lambda x: x.chunk(2, 1)),
    ("narrow", lambda x: x.narrow(1, 1, x.shape[1] - 1)),
    ("slice_from_half", lambda x: x[:, x.shape[1] // 2:]),
    ("split_rows", lambda x: x.split(x.shape[0] // 2, 0)),
    ("expand_of_slice", lambda x: x[:, :1].expand(-1, x.shape[1])),
    ("view_and_compute", lambda x: (x[:, 1:x.shape[1] - 1], x.sum(1))),
])
def test_an_output_viewing_an_input_is_eagers_view(name, fn):
    """An output that is a view of an input with a symbolic size or offset is eager's view of the
    input (frontends/torch/views.py): aot_autograd rebuilt it from the fresh result's strides and
    offset 0, so x.chunk(2, 1) over [2, 6] gave the first three storage elements twice and
    x.narrow(1, 1, n - 1) started at element 0 (found by the stress tester)."""
    torch._dynamo.reset()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True})
    for rows, cols in ((2, 6), (4, 9), (6, 5)):
        x = torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols)
        got, want = f(x), fn(x)
        for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
            assert torch.equal(g, w), (name, rows, cols, g, w)
            assert (g.stride(), g.storage_offset()) == (w.stride(), w.storage_offset()), (name, rows, cols)
            if w.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
                assert g.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()  # a view, as eager's


@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("name, fn", [
    ("output_and_its_slice", lambda x: (lambda y: (y, y[1:]))(x * 2)),
    ("slice_then_output", lambda x: (lambda y: (y[:, 1], y))(x + 1)),
    ("same_output_twice", lambda x: (lambda y: (y, y))(x * 2 + 1)),
    ("a_result_and_its_chunks", lambda x: (lambda y: (y, *y.chunk(2, 0)))(x * 3)),
])
def test_outputs_viewing_each_other_share_storage_as_in_eager(name, fn, dynamic):
    """An output that is a view of another output (through an intermediate) is eager's view of that
    output's tensor: they were separate tensors on the inference path, so a write to one did not
    show in the other (stress tester). Checked by writing the first output."""
    torch._dynamo.reset()
    f = torch.compile(fn, backend=ht.backend, dynamic=dynamic, options={"strict": True})
    for rows in (4, 6):
        x = torch.randn(rows, 4)
        got, want = f(x), fn(x)
        for g, w in zip(got, want):
            assert torch.equal(g, w) and g.stride() == w.stride(), (name, rows)
        got[0].add_(100)
        want[0].add_(100)
        for g, w in zip(got, want):
            assert torch.equal(g, w), (name, rows, "after writing the first output")


@pytest.mark.parametrize("name, fn", [
    ("scale", lambda x, y: x * y.shape[0]),
    ("float_of_sizes", lambda x, y: x / (y.shape[0] * 2.0) + y.shape[1]),
    ("with_a_tensor_of_y", lambda x, y: (x * y.shape[0], y.sum())),
])
def test_a_size_passed_as_a_number_is_a_parameter(name, fn):
    """A size the graph uses as data where dynamo passes it as a SymInt and no tensor input has it
    (`x * y.shape[0]`, y not an input of the graph) is an s32[] parameter given the int at each
    call: it ran eager with a fallback warning (strict: an error), and a size saved for backward
    reads it too (found by the stress tester)."""
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(fn, backend=ht.backend, dynamic=True, options={"strict": True})
    counts = []
    for n, m in [(4, 3), (6, 5), (9, 2), (7, 4)]:
        x, y = torch.randn(n, requires_grad=True), torch.randn(m, 3)
        eager_x = x.detach().clone().requires_grad_(True)
        got, want = f(x, y), fn(eager_x, y)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want):
            assert_close(g, w, f"{name} at {n}, {m}")
        got[0].sum().backward()
        want[0].sum().backward()
        assert_close(x.grad, eager_x.grad, f"{name}'s gradient at {n}, {m}")
        counts.append(ht.stats()["compiles"])
    assert counts[1] == counts[-1], counts  # (after dynamo's first recompile, none per size)


@pytest.mark.parametrize("output_size", [(2, 2), (3, 5), 7])
def test_adaptive_average_pooling_over_symbolic_images_trains_and_compiles_once(output_size):
    """ATen's adaptive windows over a runtime size (a [m, n] membership from floor(i·n/m) and
    ceil((i+1)·n/m)), forward and backward: it was refused for an output larger than 1, images
    smaller than the output included (overlapping windows of one position)."""
    torch.manual_seed(0)
    model = torch.nn.AdaptiveAvgPool2d(output_size)
    torch._dynamo.reset()
    ht.reset_stats()
    f = torch.compile(model, backend=ht.backend, dynamic=True, options={"strict": True})
    for h, w in [(9, 7), (8, 11), (13, 10), (5, 6)]:  # (not square first: duck sizing would guard h == w)
        x = torch.randn(2, 3, h, w, requires_grad=True)
        got, want = f(x), model(x)
        assert_close(got, want, f"pool at {h}x{w}")
        (got_grad,), (want_grad,) = (torch.autograd.grad(y.square().sum(), x) for y in (got, want))
        assert_close(got_grad, want_grad, f"gradient at {h}x{w}")
    assert ht.stats()["compiles"] == 2  # the forward and the backward graph, once each


@pytest.mark.parametrize("name, fn, index", [
    ("index_put", lambda x, i: x.index_put((i,), torch.ones(4), accumulate=True), torch.tensor([0, 0, 1])),
    ("index_add", lambda x, i: x.index_add(0, i, torch.ones(i.shape[0], 4)), torch.tensor([0, 2, 2])),
])
def test_a_static_value_broadcast_into_a_symbolic_dim_is_guarded(name, fn, index):
    """index_put(accumulate=True) / index_add of values with a static size into a symbolic dimension:
    PyTorch adds no guard that the two are equal, and the broadcast failed HLO's verifier (the
    graph ran eager). A module guard checks them at each call: an error naming the op and both sizes
    where they differ, as eager raises one."""
    compiled, calls, report = _counting_compile(fn, "cpu")
    for n in (4, 4):
        x = torch.randn(3, n)
        assert_close(compiled(x, index), fn(x, index), name)
    assert len(calls) == 1 and report[0]["compiled"] and any("cannot be broadcast" in g for g in report[0]["guards"])
    x = torch.randn(3, 6)
    with pytest.raises(RuntimeError):
        fn(x, index)
    with pytest.raises(ArgumentError, match=r"aten.index_put.default.*size 4 cannot be broadcast to size 6"):
        compiled(x, index)
