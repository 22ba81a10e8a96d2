"""Models of issue 19 through `torch.compile(backend=hlocc)` in strict mode (every graph compiled by
hlocc, none eager), forward in f32 and bf16 against eager within the corpus tolerance policy.

The default run compiles f32 with the cpu backend and bf16 with the interpreter (the same lowered
module, run by the reference evaluator: the lowering is what these tests check, and a cold cpu
compile of a model is seconds); bf16 on the cpu backend and GPT-2/BERT are slow-marked."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, compiled, ht  # noqa: E402

from hlocc.testing import torch_models as tm  # noqa: E402

SMALL = ["mlp", "cnn", "transformer_block", "text_classifier"]
# bf16 through a whole model: eager rounds its intermediates differently (e.g. matmul outputs), so
# the per-op bf16 tolerance is widened by this factor for model outputs.
BF16_MODEL_SCALE = 4.0


def _forward(name, dtype, batch=3, backend="cpu", model=None, seq=16):
    model = (model or tm.build(name)).to(dtype)
    x = tm.example_input(name, batch=batch, seq=seq)
    if x.is_floating_point():
        x = x.to(dtype)
    with torch.no_grad():
        want = model(x)
        got = compiled(model, backend=backend)(x)
    return got, want


@pytest.mark.parametrize("name", SMALL)
def test_forward_f32_matches_eager(name):
    ht.reset_stats()
    got, want = _forward(name, torch.float32)
    assert got.dtype == torch.float32 and got.shape == want.shape
    assert_close(got, want, name)
    assert ht.stats() == {"compiles": 1}  # one graph, compiled by hlocc


@pytest.mark.parametrize("name", SMALL)
def test_forward_bf16_matches_eager(name):
    got, want = _forward(name, torch.bfloat16, backend="interpreter")
    assert got.dtype == torch.bfloat16
    assert_close(got, want, name, scale=BF16_MODEL_SCALE)


# A cold cpu compilation of each model in bf16: 10-20 s each on two cores.
@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_forward_bf16_on_cpu_matches_eager(name):
    got, want = _forward(name, torch.bfloat16)
    assert_close(got, want, name, scale=BF16_MODEL_SCALE)


# GPT-2 and BERT (two layers) on the cpu backend: 20-30 s of compilation each on two cores.
@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "bert"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_transformers_models_match_eager(name, dtype):
    pytest.importorskip("transformers", reason="GPT-2/BERT come from the transformers package")
    got, want = _forward(name, getattr(torch, dtype), batch=2)
    assert_close(got, want, name, scale=1.0 if dtype == "float32" else BF16_MODEL_SCALE)


@pytest.mark.parametrize("name", ["gpt2", "bert"])
def test_transformers_models_lower_in_strict_mode(name):
    """GPT-2 and BERT in the default run: one layer each, on the interpreter."""
    pytest.importorskip("transformers", reason="GPT-2/BERT come from the transformers package")
    torch.manual_seed(0)
    model = getattr(tm, name)(layers=1).eval()
    got, want = _forward(name, torch.float32, batch=2, backend="interpreter", model=model, seq=8)
    assert_close(got, want, name)


def test_results_are_tensors_over_hlocc_buffers():
    """No copy on the way out: the result tensor wraps the array hlocc wrote (its storage is not
    torch-allocated memory reused across calls: two calls give two tensors)."""
    model = tm.build("mlp")
    f = compiled(model)
    x = tm.example_input("mlp")
    with torch.no_grad():
        a, b = f(x), f(x)
    assert a.data_ptr() != b.data_ptr()
    assert torch.equal(a, b)


def test_lstm_inference_is_lowered():
    """An LSTM in inference (dynamo traces it with allow_rnn) decomposed to `mkldnn_rnn_layer`,
    one oneDNN kernel per layer, and fell back: hlocc traces with mkldnn off, which gives the time
    steps in ATen. Two layers, bidirectional, batch_first, an initial state."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True).eval()
    x, h, c = torch.randn(2, 3, 4), torch.randn(4, 2, 5), torch.randn(4, 2, 5)
    fn = lambda x, h, c: lstm(x, (h, c))  # noqa: E731
    with torch._dynamo.config.patch(allow_rnn=True), torch.no_grad():
        got, want = compiled(fn, backend="interpreter")(x, h, c), fn(x, h, c)
    for k, (g, w) in enumerate(zip((got[0], *got[1]), (want[0], *want[1]))):
        assert_close(g, w, f"result {k}")
