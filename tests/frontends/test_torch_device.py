"""The PyTorch frontend on a device backend (hlocc.torch `_device_runner`): tensors go in and results
come out through DLPack, with no host copy. Checked on cuda-sim, whose device memory is the host's,
so CPU tensors travel the same DLPack path a GPU's CUDA tensors do: an MLP against eager, with the
arguments used in place, a dynamic batch compiled once, and a graph compiled for CUDA tensors
refusing a CPU input by name."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, record_graphs  # noqa: E402

import hlocc.torch as ht  # noqa: E402
from hlocc.errors import UnsupportedError  # noqa: E402
from hlocc.frontends.torch.lowering import lower_graph  # noqa: E402


def _mlp():
    torch._dynamo.reset()  # (dynamo's automatic dynamic shapes remember Sequential.forward across tests)
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8))


def test_an_mlp_on_cuda_sim_takes_and_returns_tensors_through_dlpack(monkeypatch):
    graphs = record_graphs(monkeypatch)
    model, x = _mlp(), torch.randn(5, 16)
    run = torch.compile(model, backend="hlocc", options={"backend": "cuda-sim", "strict": True})
    with torch.no_grad():
        got = run(x)
        assert_close(got, model(x), "mlp on cuda-sim")
    graph = graphs[0]
    assert graph._on_device and graph.executable.backend == "cuda-sim"
    assert graph.executable.runner.last_run.arguments_in_place >= 1  # x read where it lies, no upload
    assert isinstance(got, torch.Tensor) and got.device.type == "cpu"


def test_a_dynamic_batch_on_cuda_sim_compiles_once():
    model = _mlp()
    before = ht.stats().get("compiles", 0)
    run = torch.compile(model, backend="hlocc", dynamic=True, options={"backend": "cuda-sim", "strict": True})
    with torch.no_grad():
        for batch in (2, 3, 7, 12):  # (dynamo specializes a size of 1 in a graph of its own)
            x = torch.randn(batch, 16)
            assert_close(run(x), model(x), f"mlp on cuda-sim at batch {batch}")
    assert ht.stats().get("compiles", 0) - before == 1


def test_a_graph_for_cuda_tensors_refuses_a_cpu_input_by_name():
    gm = torch.fx.experimental.proxy_tensor.make_fx(lambda a: a * 2)(torch.randn(3))
    with pytest.raises(UnsupportedError, match="input 'a_1' is on cpu; the graph is compiled for cuda tensors"):
        lower_graph(gm, device="cuda")


def test_host_tensors_of_every_dtype_are_executable_arguments():
    """A bf16 tensor (which numpy's DLPack import lacks) and a tensor that requires grad were raw
    TypeError and RuntimeError where an Executable took them."""
    import numpy as np

    import hlocc

    exe = hlocc.compile("HloModule m\nENTRY e {\n  x = bf16[4] parameter(0)\n  ROOT y = bf16[4] negate(x)\n}\n",
                        backend="cpu")
    x = torch.tensor([1.5, -2, 0.25, 3], dtype=torch.bfloat16)
    for arg in (x, x.clone().requires_grad_()):
        np.testing.assert_array_equal(np.asarray(exe(arg), np.float32), [-1.5, 2, -0.25, -3])
    with pytest.raises(hlocc.ArgumentError, match="expected dtype bf16 .* got float32"):
        exe(torch.ones(4))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device for torch")
def test_on_a_gpu_cuda_tensors_go_in_and_come_out_at_every_batch():
    model = _mlp().cuda()
    run = torch.compile(model, backend="hlocc", dynamic=True, options={"backend": "cuda", "strict": True})
    with torch.no_grad():
        for batch in (2, 3, 7, 12, 3):
            x = torch.randn(batch, 16, device="cuda")
            got = run(x)
            assert got.device.type == "cuda", got.device
            assert_close(got.cpu(), model(x).cpu(), f"mlp on the GPU at batch {batch}")
