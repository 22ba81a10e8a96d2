"""PyTorch models over a dynamic sequence length on the cpu backend (issue 15 item 7): every fusion,
the embedding lookups (gather) and GPT-2's causal mask included, is a kernel with runtime dims,
compiled once for every length; nothing is compiled per size."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close  # noqa: E402

import hlocc.torch as ht  # noqa: E402
from hlocc.testing import torch_models as tm  # noqa: E402


# seconds to minutes each on two loaded cores (GPT-2: ~50 s)
@pytest.mark.slow
@pytest.mark.parametrize("name", ["text_classifier", "gpt2", "bert"])
def test_sequence_lengths_compile_once_on_cpu(name, monkeypatch):
    if name in ("gpt2", "bert"):
        pytest.importorskip("transformers", reason="GPT-2/BERT come from the transformers package")
    executables = []
    compile_module = ht.compile

    def recorded(*args, **kwargs):
        executables.append(compile_module(*args, **kwargs))
        return executables[-1]

    monkeypatch.setattr(ht, "compile", recorded)
    torch._dynamo.reset()
    model = tm.build(name)
    f = torch.compile(model, backend=ht.backend, options={"strict": True, "backend": "cpu"})
    with torch.no_grad():
        for seq in (2, 3, 7, 11, 2):
            x = tm.example_input(name, seq=seq)
            torch._dynamo.mark_dynamic(x, 1)
            assert_close(f(x), model(x), f"{name} seq={seq}")
    [exe] = executables
    program = exe.program
    assert not program.deferred, program.fallbacks()
    assert exe.plan_builds == 1 and exe.compilations == 1 and program.symbolic_kernels > 1
