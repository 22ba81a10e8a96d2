"""`x ** c` with a constant exponent is lowered as ATen's CPU kernel computes it (products for 2 and
3, (r)sqrt for ±0.5, reciprocals for -1 and -2; `power` otherwise), and matches eager."""

import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from torch_helpers import assert_close, compiled  # noqa: E402

from hlocc.torch import compile_exported  # noqa: E402

EXPONENTS = {2: "multiply", 3: "multiply", 0.5: "sqrt", -0.5: "rsqrt", -1: "divide", -2: "divide", 1.7: "power"}


class Pow(torch.nn.Module):
    def __init__(self, exponent):
        super().__init__()
        self.exponent = exponent

    def forward(self, x):
        return torch.pow(x, self.exponent)


# one exponent per lowering by default; the second multiply (3) and divide (-2) in the slow set
@pytest.mark.parametrize("exponent", [pytest.param(e, marks=pytest.mark.slow) if e in (3, -2) else e
                                      for e in EXPONENTS])
def test_pow_by_a_constant(exponent):
    x = torch.rand(3, 5) * 4 + 0.25
    model = Pow(exponent)
    run = compile_exported(torch.export.export(model, (x,)), backend="interpreter")
    opcodes = {i.opcode for i in run.module.entry.instructions}
    assert EXPONENTS[exponent] in opcodes
    assert ("power" in opcodes) == (EXPONENTS[exponent] == "power")
    assert_close(run(x), model(x), f"x ** {exponent}")


def test_pow_of_an_integer_tensor_stays_power():
    x = torch.arange(1, 7).reshape(2, 3)
    with torch.no_grad():
        assert torch.equal(compiled(Pow(3), backend="interpreter")(x), x ** 3)
