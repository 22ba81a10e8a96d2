"""Single ATen ops found missing or wrong by a differential hunt over small PyTorch programs (each
against eager, strict: a fallback to eager fails the test)."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")
F = torch.nn.functional

from torch_helpers import assert_close, compiled  # noqa: E402


def _elementwise(a, b):
    """Ops whose ATen overload is `.default` (minimum, maximum, atan2: the table once listed them as
    .Tensor/.Scalar only) or that had no rule (trunc, exp2, hypot, elu, leaky_relu, var_mean)."""
    var, mean = torch.var_mean(a, dim=-1, correction=0)
    return (torch.minimum(a, b), torch.maximum(a, b), torch.atan2(a, b), torch.hypot(a, b), torch.trunc(a * 3),
            torch.exp2(a), F.elu(a, 0.7), F.leaky_relu(a, 0.2), var, mean)


def test_elementwise_ops_match_eager():
    torch.manual_seed(0)
    a, b = torch.randn(3, 5) * 2, torch.randn(3, 5)
    a[0, 0], b[1, 1] = float("nan"), float("nan")  # minimum/maximum propagate NaN, as PyTorch's do
    for i, (got, want) in enumerate(zip(compiled(_elementwise, backend="interpreter")(a, b), _elementwise(a, b))):
        assert_close(got, want, f"result {i}")


def test_argmax_of_a_row_with_nan_is_the_first_nan():
    """PyTorch's max/argmax treat NaN as the largest value; the first index equal to the row's max
    found no NaN (NaN != NaN) and gave the sentinel 2**62."""
    x = torch.tensor([[1.0, float("nan"), 3.0, float("nan")], [0.0, 1.0, 2.0, -1.0]])
    fn = lambda x: (torch.argmax(x, 1), torch.argmin(x, 1), torch.max(x, 1, keepdim=True))  # noqa: E731
    got, want = compiled(fn)(x), fn(x)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]), (got, want)
    assert_close(got[2].values, want[2].values, "values")
    assert torch.equal(got[2].indices, want[2].indices)


@pytest.mark.parametrize("ord", [2, 1, 0, 3, float("inf"), -float("inf")])
def test_vector_norm_matches_eager(ord):
    """linalg.vector_norm (torch.norm, F.normalize) has no core-ATen decomposition: it fell back."""
    x = torch.randn(3, 4, 5)
    x[0, 0, 0] = 0.0
    fn = lambda x: torch.linalg.vector_norm(x, ord=ord, dim=(0, 2), keepdim=ord == 1)  # noqa: E731
    assert_close(compiled(fn, backend="interpreter")(x), fn(x), f"ord={ord}")


@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_matches_eager(include_self):
    """scatter_reduce.two fell back; without include_self a position that gets an update starts from
    the reduction's identity, one that gets none keeps its value; mean counts the values summed."""
    torch.manual_seed(0)
    x, src = torch.randn(3, 5), torch.randn(2, 5)
    index = torch.tensor([[0, 1, 2, 0, 1], [2, 2, 1, 0, 0]])

    def fn(x, index, src):
        return [x.scatter_reduce(0, index, src, reduce=r, include_self=include_self)
                for r in ("sum", "prod", "mean", "amax", "amin")]

    for r, got, want in zip(("sum", "prod", "mean", "amax", "amin"), compiled(fn, backend="interpreter")(x, index, src),
                            fn(x, index, src)):
        assert_close(got, want, r)


def test_shifts_match_eager():
    x = torch.tensor([-100, -7, -1, 0, 1, 5, 99, 64])
    shift = torch.tensor([0, 1, 2, 3, 5, 7, 1, 2])
    fn = lambda x, s, u: ((x << s) ^ (x >> 1), torch.bitwise_right_shift(x.int(), s.int()), u >> 2)  # noqa: E731
    u = torch.tensor([255, 128, 7, 0], dtype=torch.uint8)
    for got, want in zip(compiled(fn, backend="interpreter")(x, shift, u), fn(x, shift, u)):
        assert torch.equal(got, want), (got, want)


@pytest.mark.parametrize("dynamic", [False, True])
def test_unfold_matches_eager(dynamic):
    """Tensor.unfold (sliding windows as a new last dimension) fell back to eager; under dynamic=True
    over a symbolic dimension, with a step of 1."""
    fn = lambda x: (x.unfold(0, 3, 2) * 2, x.unfold(-1, 1, 1) + 1, x.unfold(1, 2, 1).sum(-1))  # noqa: E731
    f = compiled(fn, dynamic=dynamic, backend="interpreter")
    for shape in ([(7, 4), (3, 2)] if not dynamic else [(3, 5), (6, 9), (9, 4)]):
        x = torch.randn(*shape)
        for got, want in zip(f(x), fn(x)):
            assert torch.equal(got, want), shape


def test_diagonal_and_its_gradient_match_eager():
    """diagonal (einsum "ii->i", torch.diag, trace) and diagonal_scatter (its backward) fell back."""
    torch.manual_seed(0)
    x = torch.randn(3, 2, 4)
    fn = lambda x: torch.diagonal(x, 1, dim1=2, dim2=0).exp() + torch.diagonal(x, -1, 0, 2).sum()  # noqa: E731
    ours = x.clone().requires_grad_()
    got = compiled(fn, backend="interpreter")(ours)
    want = fn(x.requires_grad_())
    assert_close(got, want, "diagonal")
    got.sum().backward()
    want.sum().backward()
    assert_close(ours.grad, x.grad, "gradient")


def test_sort_and_topk_match_eager():
    """sort and topk fell back to eager. NaN sorts last ascending and first descending, -0.0 ties
    with +0.0 and equal values keep their order (a stable sort), as in PyTorch."""
    nan, inf = float("nan"), float("inf")
    x = torch.tensor([[1.0, nan, -0.0, 0.0, -2.0, inf, 1.0], [3.0, -inf, 0.0, -0.0, 2.0, 3.0, -1.0]])
    ints = torch.tensor([[2, 0, 1, 2, 0, 1, 2], [1, 1, 0, 0, 2, 2, 1]])

    def fn(x, ints):
        return (*torch.sort(x, stable=True), *torch.sort(x, stable=True, descending=True),
                *torch.sort(ints, dim=0, stable=True, descending=True), *torch.sort(ints, stable=True),
                *torch.topk(x[:, 2:], 2), *torch.topk(x, 1, dim=0, largest=False))

    for i, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, ints), fn(x, ints))):
        assert torch.equal(got, want) or (got.dtype.is_floating_point and torch.allclose(got, want, equal_nan=True)), (
            i, got, want)


def test_bool_arithmetic_is_logical():
    """bool + bool is PyTorch's logical or (True + True is True: HLO's pred add gave False), * its and."""
    a, b = torch.tensor([True, True, False, False]), torch.tensor([True, False, True, False])
    fn = lambda a, b: (a + b, a * b, a + True, torch.maximum(a, b))  # noqa: E731
    for got, want in zip(compiled(fn, backend="interpreter")(a, b), fn(a, b)):
        assert torch.equal(got, want), (got, want)


def test_round_decimals_and_view_as_dtype_match_eager():
    torch.manual_seed(0)
    x = torch.randn(8) * 100
    fn = lambda x: (torch.round(x, decimals=2), torch.round(x, decimals=-1), x.view(torch.int32) & 0xFF)  # noqa: E731
    got = compiled(fn, backend="interpreter")(x)
    want = fn(x)
    assert_close(got[0], want[0], "decimals=2")
    assert_close(got[1], want[1], "decimals=-1")
    assert torch.equal(got[2], want[2]), (got[2], want[2])


def test_copysign_takes_the_sign_bit():
    """copysign fell back; -0.0 and a negative NaN give their sign, as PyTorch's (the bit, not b < 0)."""
    a = torch.tensor([1.0, -2.0, 3.0, -0.0, 5.0, float("inf")])
    b = torch.tensor([-0.0, 1.0, -1.0, 2.0, float("nan"), -3.0])
    fn = lambda a, b: (torch.copysign(a, b), torch.copysign(a, -b))  # noqa: E731
    for got, want in zip(compiled(fn, backend="interpreter")(a, b), fn(a, b)):
        assert torch.equal(torch.signbit(got), torch.signbit(want)) and torch.equal(got.abs(), want.abs()), (got, want)


def test_cummax_cummin_take_the_last_tie_and_the_last_nan():
    """cummax/cummin fell back. ATen's kernel takes an element that is NaN or >= (<=) the running
    extremum: ties and NaNs give the last index, a NaN sticks, and the value is the element taken
    (-0.0 after 0.0)."""
    nan = float("nan")
    x = torch.tensor([[1.0, 3.0, 3.0, nan, 2.0, nan, 5.0], [0.0, -0.0, 0.0, -1.0, -1.0, 2.0, -3.0]])
    ints = torch.tensor([[3, 1, 3, 2, 5, 5, 0]])
    fn = lambda x, i: (*torch.cummax(x, 1), *torch.cummin(x, -1), *torch.cummax(i, 1), *torch.cummin(x, 0))  # noqa: E731
    for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, ints), fn(x, ints))):
        assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num()), (k, got, want)
        assert torch.equal(got.signbit(), want.signbit()), (k, got, want)


def test_scans_of_an_empty_dimension():
    """cumsum/cumprod/cummax/logcumsumexp along a dimension of size 0: the scan's window had size 0,
    which HLO refuses (a compile error, strict mode)."""
    x = torch.randn(3, 0)
    fn = lambda x: (torch.cumsum(x, 1), torch.cumprod(x, 1), *torch.cummax(x, 1), torch.logcumsumexp(x, 1))  # noqa: E731
    for got, want in zip(compiled(fn, backend="interpreter")(x), fn(x)):
        assert got.shape == want.shape and got.dtype == want.dtype, (got, want)


def test_logcumsumexp_matches_eager():
    """logcumsumexp fell back: a scan by ATen's log-add-exp, so an element far below a later one
    keeps its value (-1000: a shift by the row max underflowed it) and equal infinities stay."""
    inf = float("inf")
    x = torch.tensor([[-1000.0, 0.0, 3.0, inf, 1.0], [-inf, -inf, 1.0, float("nan"), 2.0]])
    fn = lambda x: (torch.logcumsumexp(x, 1), torch.logcumsumexp(x[:, :3], 0), torch.logcumsumexp(x.half(), 1))  # noqa: E731
    for got, want in zip(compiled(fn, backend="interpreter")(x), fn(x)):
        assert_close(got, want, str(want.dtype))


def test_searchsorted_and_bucketize_follow_the_binary_search():
    """searchsorted/bucketize fell back. Lowered as ATen's binary search: NaN in the boundaries
    (torch.sort puts it last) and NaN values give its answers, which a count of the boundaries
    below each value does not (5.0 right= against [.., 5, nan]); per-row boundaries, a sorter,
    a Python scalar, out_int32 and mixed dtypes (compared in the promoted type)."""
    nan = float("nan")
    seq = torch.tensor([-1.0, 0.0, 0.0, 2.0, 2.0, 5.0, nan])
    vals = torch.tensor([[-2.0, 0.0, 1.0, 2.0, 5.0, 6.0, nan]])
    rows = torch.tensor([[[0, 1, 1, 3], [2, 2, 2, 4]]])
    unsorted = torch.tensor([3.0, 1.0, 2.0, 0.0])

    def fn(seq, vals, rows, unsorted):
        return (torch.searchsorted(seq, vals), torch.searchsorted(seq, vals, right=True),
                torch.searchsorted(seq, vals, side="right", out_int32=True), torch.searchsorted(rows, vals[:, 1:5].expand(1, 2, 4)),
                torch.searchsorted(unsorted, vals, sorter=torch.argsort(unsorted)), torch.searchsorted(seq, 2.0),
                torch.bucketize(vals, seq[:6]), torch.bucketize(rows, seq[:6], right=True, out_int32=True))

    for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(seq, vals, rows, unsorted),
                                        fn(seq, vals, rows, unsorted))):
        assert torch.equal(got, want), (k, got, want)


def test_adaptive_pooling_with_uneven_windows_matches_eager():
    """Adaptive pooling fell back where the input size is not a multiple of the output's (and
    adaptive max pooling always). Windows overlap and differ in size; max pooling's indices are
    the first maximum in the window's row-major order or its last NaN; the backward of both."""
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 11)
    x[0, 0, 1, 2], x[0, 0, 1, 5], x[1, 2] = float("nan"), float("nan"), 1.0
    x3 = torch.randn(1, 2, 5, 4, 6)
    fn = lambda x, x3: (F.adaptive_avg_pool2d(x, (3, 5)), *F.adaptive_max_pool2d(x, (3, 4), return_indices=True),  # noqa: E731
                        F.adaptive_avg_pool2d(x, (9, 13)), *F.adaptive_max_pool3d(x3, (3, 3, 4), return_indices=True))
    for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, x3), fn(x, x3))):
        assert torch.equal(got, want) if k in (2, 5) else torch.allclose(got, want, equal_nan=True), (k, got, want)


@pytest.mark.slow
def test_adaptive_pooling_gradients_match_eager():
    loss = lambda x: F.adaptive_avg_pool2d(x, (3, 5)).sin().sum() + F.adaptive_max_pool2d(x, (3, 4)).sum()  # noqa: E731
    x = torch.randn(2, 3, 7, 11)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(loss)(ours).backward()
    loss(theirs).backward()
    assert_close(ours.grad, theirs.grad, "gradient")


def test_one_hot_raises_on_a_class_out_of_range_as_eager():
    """F.one_hot's range checks (`_assert_async`) fell back to eager; they are results of the
    program, and the compiled graph raises eager's RuntimeError after a call where one fails."""
    f = compiled(lambda i: F.one_hot(i, 4) * 2, backend="interpreter")
    assert torch.equal(f(torch.tensor([0, 3, 1])), F.one_hot(torch.tensor([0, 3, 1]), 4) * 2)
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        f(torch.tensor([0, 4, 1]))
    with pytest.raises(RuntimeError, match="non-negative"):
        f(torch.tensor([0, -1, 1]))


def test_average_pooling_gradients_match_eager():
    """avg_pool2d/3d_backward have no core-ATen decomposition: CNN training with average pooling
    ran its backward eager (avg_pool3d, local_response_norm's, its forward too). Padding, strides,
    ceil_mode with and without the padding counted, a divisor."""
    torch.manual_seed(0)
    x2, x3 = torch.randn(2, 3, 7, 8), torch.randn(1, 2, 5, 7, 6)

    def loss(x2, x3):
        return (F.avg_pool2d(x2, 3, 2, 1, ceil_mode=True, count_include_pad=False).sin().sum()
                + F.avg_pool2d(x2, (2, 3), (1, 2), (1, 0), divisor_override=4).cos().sum()
                + F.avg_pool3d(x3, (2, 3, 2), (1, 2, 2), (1, 0, 1), ceil_mode=True).sin().sum())

    grads = []
    for run in (compiled(loss, backend="interpreter"), loss):
        ours = [x2.clone().requires_grad_(), x3.clone().requires_grad_()]
        run(*ours).backward()
        grads.append([t.grad for t in ours])
    for k, (got, want) in enumerate(zip(*grads)):
        assert_close(got, want, f"gradient {k}")


def test_rrelu_in_eval_and_triplet_loss_match_eager():
    """rrelu outside training (leaky_relu with the mean slope) and its backward, and the
    empty_permuted in triplet_margin_loss's graph, fell back."""
    torch.manual_seed(0)
    a, b = torch.randn(4, 5), torch.randn(4, 5)
    fn = lambda a, b: (F.rrelu(a, 0.1, 0.3) * b).sum() + F.triplet_margin_loss(a, b, a.flip(0))  # noqa: E731
    ours = a.clone().requires_grad_()
    got = compiled(fn, backend="interpreter")(ours, b)
    want = fn(a.requires_grad_(), b)
    got.backward()
    want.backward()
    assert_close(got, want, "loss")
    assert_close(ours.grad, a.grad, "gradient")


def test_embedding_bag_and_its_gradients_match_eager():
    """nn.EmbeddingBag (`_embedding_bag` and its backward) fell back: sum, mean and max bags with
    an empty bag and a padding index, per-sample weights (and their gradient), include_last_offset."""
    torch.manual_seed(0)
    weight, weights = torch.randn(10, 3), torch.rand(8)
    index, offsets = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3, 3, 6])

    def fn(weight, weights):
        return (F.embedding_bag(index, weight, offsets, mode="mean", padding_idx=2),
                F.embedding_bag(index, weight, offsets, mode="max", padding_idx=2),
                F.embedding_bag(index, weight, offsets, mode="sum", per_sample_weights=weights),
                # (the last offset is the index count: eager's backward leaves the gradient of an index
                # past the last offset uninitialised, a different value on every run)
                F.embedding_bag(index, weight, torch.tensor([0, 3, 3, 6, 8]), mode="sum", include_last_offset=True))

    grads = []
    for run in (compiled(fn, backend="interpreter"), fn):
        ours = [weight.clone().requires_grad_(), weights.clone().requires_grad_()]
        outputs = run(*ours)
        sum((out * torch.arange(3.0)).sum() for out in outputs).backward()
        grads.append([*outputs, *(t.grad for t in ours)])
    for k, (got, want) in enumerate(zip(*grads)):
        assert_close(got, want, f"result {k}")


def _gradients(fn, *inputs, module=None):
    """(outputs, gradients of the float inputs and the module's parameters) of a weighted sum of
    fn's outputs, compiled by hlocc and eager."""
    runs = []
    for run in (compiled(fn, backend="interpreter"), fn):
        if module is not None:
            module.zero_grad()
        ours = [x.clone().requires_grad_() if x.is_floating_point() else x for x in inputs]
        outputs = run(*ours)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        sum((out * torch.linspace(-1, 2, out.shape[-1] if out.dim() else 1)).sum() for out in outputs).backward()
        params = [p.grad.clone() for p in module.parameters()] if module is not None else []
        runs.append([*outputs, *(x.grad for x in ours if x.is_floating_point()), *params])
    return runs


def test_rotary_bilinear_weight_norm_and_cdist_gradients_match_eager():
    """Backward graphs that fell back: a strided slice's (`t[..., 1::2]`, rotary embeddings) is a
    slice_scatter with a step; nn.Bilinear's `_trilinear` (forward and backward), weight_norm's
    `_weight_norm_interface_backward`, cdist's `_cdist_forward`/`_cdist_backward` and pdist's have
    no PyTorch decomposition (frontends/torch/decompositions.py)."""
    torch.manual_seed(0)
    bilinear = torch.nn.Bilinear(4, 5, 3)
    normed = torch.nn.utils.parametrizations.weight_norm(torch.nn.Linear(5, 3))
    modules = torch.nn.ModuleList([bilinear, normed])
    a, b = torch.randn(6, 4), torch.randn(6, 5)

    def fn(a, b):
        rotated = torch.stack([-a[..., 1::2], a[..., ::2]], -1).flatten(-2)
        return (rotated * a, bilinear(a, b) + normed(b), torch.cdist(a, b[:, :4]),
                torch.cdist(a, b[:, 1:], p=1), torch.cdist(a, b[:, 1:], p=3), torch.pdist(a), torch.pdist(a, 0.5))

    for k, (got, want) in enumerate(zip(*_gradients(fn, a, b, module=modules))):
        assert_close(got, want, f"result {k}")


def test_grid_sample_inference_matches_eager():
    """grid_sampler_2d fell back; PyTorch's own (non-core) decomposition lowers it."""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]])

    def fn(x, theta):
        grid = F.affine_grid(theta, (1, 2, 3, 4), align_corners=False) * 1.3
        return (F.grid_sample(x, grid, padding_mode="reflection", align_corners=False),
                F.grid_sample(x, grid, mode="nearest", padding_mode="border", align_corners=True))

    with torch.no_grad():
        for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, theta), fn(x, theta))):
            assert_close(got, want, f"result {k}")


@pytest.mark.slow
def test_grid_sample_gradients_match_eager():
    """grid_sampler_2d_backward has no decomposition: F.grid_sample (bilinear, bicubic) becomes
    PyTorch's decomposition before aot_autograd, which differentiates its ATen ops (a spatial
    transformer: the gradient reaches theta through the grid); nearest's backward op is decomposed
    (frontends/torch/decompositions.py). (Bicubic: 16 weighted taps summed in another order than
    ATen's kernel: a wider tolerance.)"""
    torch.manual_seed(0)
    x = torch.randn(1, 2, 4, 5)
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]])

    def fn(x, theta):
        grid = F.affine_grid(theta, (1, 2, 3, 3), align_corners=False) * 1.3
        return (F.grid_sample(x, grid, padding_mode="reflection", align_corners=False),
                F.grid_sample(x, grid, mode="bicubic", padding_mode="border", align_corners=True),
                F.grid_sample(x, grid, mode="nearest", padding_mode="reflection", align_corners=False))

    for k, (got, want) in enumerate(zip(*_gradients(fn, x, theta))):
        assert_close(got, want, f"result {k}", scale=10.0)


def test_fake_quantize_matches_eager_bit_for_bit():
    """Quantization-aware training's fake_quantize_*_cachemask ops fell back. Rounding is half to
    even (0.125 / 0.05 = 2.5 rounds to 2), values outside the range are clamped and get no gradient;
    per-channel scales and zero points; the tensor-qparams form nn FakeQuantize calls."""
    torch.manual_seed(0)
    x = torch.randn(5, 6) * 3
    x[0, 0] = 0.125
    weight = torch.randn(4, 6)

    def fn(x):
        return (torch.fake_quantize_per_tensor_affine(x, 0.05, 3, -128, 127),
                torch.fake_quantize_per_channel_affine(weight * x[:4], torch.tensor([0.01, 0.02, 0.05, 0.1]),
                                                       torch.tensor([0, 1, -2, 3], dtype=torch.int32), 0, -128, 127),
                torch.fake_quantize_per_tensor_affine(x, torch.tensor([0.07]), torch.tensor([2], dtype=torch.int32), 0, 255))

    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = compiled(fn, backend="interpreter")(ours), fn(theirs)
    for k, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g, w), (k, g, w)
    sum(out.sum() for out in got).backward()
    sum(out.sum() for out in want).backward()
    assert torch.equal(ours.grad, theirs.grad)


def test_complex_rotary_embedding_and_its_gradient_match_eager():
    """Rotary embeddings in complex form (LLaMA's reference: view_as_complex, polar, a complex
    product, view_as_real; conj in the backward) fell back."""
    torch.manual_seed(0)
    angles = torch.arange(12.0).view(3, 4) * 0.1

    def fn(x):
        rotated = torch.view_as_complex(x.reshape(2, 3, 4, 2)) * torch.polar(torch.ones(3, 4), angles)
        return torch.view_as_real(rotated).flatten(-2), rotated.real * 2 + rotated.imag

    for k, (got, want) in enumerate(zip(*_gradients(fn, torch.randn(2, 3, 8)))):
        assert_close(got, want, f"result {k}")


def test_embedding_with_max_norm_renormalizes_the_weight_as_eager():
    """nn.Embedding(max_norm=...) renormalizes the named rows of its weight in place
    (`embedding_renorm`), which fell back; the weight written back matches eager's bit for bit."""
    torch.manual_seed(0)
    ours = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=3.0)
    theirs = torch.nn.Embedding(10, 4, max_norm=1.0, norm_type=3.0)
    theirs.load_state_dict(ours.state_dict())
    index = torch.tensor([[1, 2, 1], [7, 3, 2]])
    with torch.no_grad():
        got, want = compiled(lambda i: ours(i) * 2, backend="interpreter")(index), theirs(index) * 2
    assert torch.equal(got, want)
    assert torch.equal(ours.weight, theirs.weight)


def test_small_ops_of_a_sweep_match_eager():
    """Ops a sweep of single ops found falling back: signbit (-0.0 and NaN's sign bit), ldexp,
    addmv, index_reduce, masked_scatter (and its backward), tril/triu_indices, dist."""
    torch.manual_seed(0)
    a, b, m, v = torch.randn(4, 5), torch.randn(4, 5), torch.randn(5, 5), torch.randn(5)
    a[0, 0], a[0, 1] = -0.0, -float("nan")
    index = torch.tensor([0, 2, 0, 1])

    def fn(a, b, m, v):
        return (torch.signbit(a) + a.nan_to_num(), torch.ldexp(b, torch.tensor([2, -1, 0, 3, 1])),
                torch.addmv(v[:4], b, v, beta=0.5, alpha=2), torch.zeros(3, 5).index_reduce(0, index, b, "amax"),
                torch.ones(5, 3).index_reduce(1, index, b.t(), "prod", include_self=False),
                b.masked_scatter(b > 0, m), m[tuple(torch.tril_indices(5, 4, -1))], torch.dist(b, v, 3))

    for k, (got, want) in enumerate(zip(*_gradients(fn, a, b, m, v))):
        assert_close(got, want, f"result {k}")


def test_kthvalue_and_median_match_eager():
    """kthvalue, median and nanmedian fell back. The k-th value of a stable sort (NaN last); median
    gives NaN and the first NaN's index for a row holding one, nanmedian the lower median of the
    rest. (Which index ATen's quickselect returns among equal values or NaNs is its own: rows of
    distinct values here.)"""
    nan = float("nan")
    x = torch.randperm(24, generator=torch.Generator().manual_seed(0)).float().view(4, 6) - 10
    with_nan = x.clone()
    with_nan[1, 2], with_nan[1, 4], with_nan[3, 1] = nan, nan, nan

    def fn(x, with_nan):
        return (*torch.kthvalue(x, 2), *torch.kthvalue(x, 3, 0, True), *torch.median(x, 1), *torch.median(with_nan, 1),
                *torch.nanmedian(with_nan, 1), torch.median(with_nan), torch.nanmedian(with_nan))

    for k, (got, want) in enumerate(zip(compiled(fn, backend="interpreter")(x, with_nan), fn(x, with_nan))):
        assert torch.equal(got, want) or torch.allclose(got, want, equal_nan=True), (k, got, want)


def test_scans_search_and_median_over_symbolic_sizes():
    """dynamic=True: the boundaries' count is symbolic (searchsorted: 32 unrolled steps and a guard
    n < 2**32), and so is the median's position."""
    boundaries = torch.tensor([-1.0, 0.0, 0.5, 2.0])
    fn = lambda x, b: (*torch.cummax(x, 1), torch.searchsorted(b, x), torch.median(x, 1).values)  # noqa: E731
    f = compiled(fn, dynamic=True, backend="interpreter")
    for shape in ((3, 7), (2, 9)):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(shape[0]))
        for k, (got, want) in enumerate(zip(f(x, boundaries[:shape[0]]), fn(x, boundaries[:shape[0]]))):
            assert torch.equal(got, want), (shape, k, got, want)


def test_replicate_and_circular_padding_gradients_match_eager():
    """replication_pad{1,2,3}d_backward and new_empty_strided (circular padding's backward) fell back."""
    torch.manual_seed(0)
    x1, x2, x3 = torch.randn(2, 3, 5), torch.randn(1, 2, 4, 5), torch.randn(1, 1, 3, 4, 2)

    def fn(x1, x2, x3):
        return (F.pad(x1, (2, 3), mode="replicate"), F.pad(x2, (2, 1, 0, 3), mode="replicate"),
                F.pad(x3, (1, 1, 2, 0, 1, 2), mode="replicate"), F.pad(x2, (1, 2, 2, 1), mode="circular"))

    for k, (got, want) in enumerate(zip(*_gradients(fn, x1, x2, x3))):
        assert_close(got, want, f"result {k}")


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss_and_its_gradient_match_eager(reduction):
    """PyTorch's own decomposition of multilabel_margin_loss_forward (its Python kernel at the
    Autograd key) counts a row's target positions after its first -1 as label 0: rows that end
    early gave up to twice eager's loss. hlocc's decompositions of the op and its backward apply
    (frontends/torch/tracing.py keeps the op whole through autograd)."""
    torch.manual_seed(0)
    x = torch.randn(6, 5)
    target = torch.tensor([[3, 0, -1, 1, 2], [1, -1, 0, 0, 0], [4, 3, 2, 1, 0], [0, 0, 0, 0, 0],
                           [-1, 2, 3, 4, 1], [2, 2, -1, 0, 0]])
    fn = lambda x, t: F.multilabel_margin_loss(x, t, reduction=reduction)  # noqa: E731
    for k, (got, want) in enumerate(zip(*_gradients(fn, x, target))):
        assert_close(got, want, f"result {k}")
    with torch.no_grad():  # an unbatched row
        assert_close(compiled(fn)(x[0], target[1]), fn(x[0], target[1]), "unbatched")


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_gelu_and_silu_round_once_as_eager(dtype):
    """ATen computes gelu and silu of f16/bf16 in f32 and rounds once; computed in the half type,
    1 + erf(x/√2) cancels for negative x (bf16 gelu(-3) was -0.00586 where eager gives -0.00406).
    Over [-3.5, 8] (below it f32's own cancellation makes eager's and hlocc's erf differ in their
    last bits): bf16 equal to eager, f16 within one f16 ulp."""
    dt = getattr(torch, dtype)
    x = torch.linspace(-3.5, 8, 4001).to(dt)
    cases = {"gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}
    for name, fn in cases.items():
        got, want = compiled(fn)(x).float(), fn(x).float()
        ulp = want.abs().clamp_min(2.0 ** -14) * (2.0 ** -7 if dt == torch.bfloat16 else 2.0 ** -10)
        limit = 0 if dt == torch.bfloat16 else 1
        worst = float(((got - want).abs() / ulp).max())
        assert worst <= limit, f"{name} {dtype}: {worst:.2f} ulp from eager"


# (size, stride, offset) of as_strided over a 12-element storage, one per form the lowering takes
STRIDED = [((3, 2), (2, 1), 1),  # a row-major block: a slice
           ((2, 2, 2), (6, 1, 3), 0), ((2, 3), (5, 2), 2), ((4,), (3,), 0),  # nested strides: slices and pads
           ((3, 3), (1, 1), 0),  # overlapping windows: a gather
           ((2, 3), (0, 2), 1)]  # a stride of 0: broadcast


@pytest.mark.parametrize("dynamic", [False, True])
def test_as_strided_reads_and_writes_the_storage_as_eager(dynamic):
    """aten.as_strided and as_strided_scatter (aot_autograd's synthetic base, `x.as_strided` in user
    code) had no lowering: the graph ran eager."""
    x = torch.arange(12.0)
    for size, stride, offset in STRIDED:  # (literals in the code: dynamic=True makes a closure's ints symbolic)
        read = eval(f"lambda t: t.as_strided({size}, {stride}, {offset}) * 2")
        assert torch.equal(compiled(read, dynamic=dynamic)(x), read(x)), (size, stride, offset)
        if 0 in stride or stride == (1, 1):  # (eager refuses to write overlapping positions)
            continue

        write = eval(f"lambda t, src: torch.as_strided_scatter(t, src, {size}, {stride}, {offset})")
        src = torch.randn(size)
        assert torch.equal(compiled(write, dynamic=dynamic)(x, src), write(x, src)), (size, stride, offset)
    xt = torch.arange(12.0).reshape(3, 4).t()  # a transposed input: its storage order is its strides'

    def transposed(t):
        return t.as_strided((2, 2), (1, 3), 1) + 0

    assert torch.equal(compiled(transposed, dynamic=dynamic)(xt), transposed(xt))


def test_as_strided_beyond_a_view_s_own_elements_is_refused_by_name():
    """The storage of a view of a larger tensor holds elements the graph does not have."""
    def before(t):
        return t.as_strided((2, 2), (1, 3), 0) + 0

    with pytest.raises(Exception, match="reads storage positions -2..2 of a tensor whose own elements"):
        compiled(before)(torch.arange(12.0)[2:])
