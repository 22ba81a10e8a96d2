"""The per-call tensor path of a compiled torch graph (frontends/torch/tensors.py): inputs checked
against their parameter before `Tensor.numpy()` (errors name the tensor), and results that may
share memory with an input found, so the caller gets memory of its own."""

import ctypes

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the PyTorch frontend needs torch (the [torch] extra)")

from hlocc.errors import ArgumentError  # noqa: E402
from hlocc.frontends.torch.tensors import InputCheck, may_alias_input, memory_owner  # noqa: E402
from hlocc.hlo.symbolic import symbol  # noqa: E402
from hlocc.hlo.types import Shape  # noqa: E402


def check_for(dims, element_type="f32"):
    return InputCheck.of(0, "input 'x'", Shape.array(element_type, tuple(dims)))


def test_a_matching_parameter_is_a_view_of_its_memory():
    weight = torch.nn.Parameter(torch.randn(4, 3))
    array = check_for([4, 3]).array(weight)
    assert array.ctypes.data == weight.data_ptr() and np.array_equal(array, weight.detach().numpy())


def test_a_symbolic_size_takes_any_value_and_static_sizes_are_checked():
    check = check_for([symbol("s0"), 3])
    assert check.array(torch.zeros(7, 3)).shape == (7, 3)
    with pytest.raises(ArgumentError, match=r"input 'x': expected shape f32\[\?s0,3\], got \[7, 2\]"):
        check.array(torch.zeros(7, 2))


@pytest.mark.parametrize("value,message", [
    (torch.zeros(4, 3, dtype=torch.float64), r"input 'x': expected dtype f32 \(float32\), got torch.float64"),
    (torch.zeros(4), r"input 'x': expected shape f32\[4,3\], got \[4\]"),
    (np.zeros((4, 3), np.float32), r"input 'x': expected a tensor, got ndarray"),
], ids=["dtype", "rank", "not_a_tensor"])
def test_a_mismatch_is_an_error_naming_the_input(value, message):
    with pytest.raises(ArgumentError, match=message):
        check_for([4, 3]).array(value)


def test_bf16_inputs_are_reinterpreted_without_a_copy():
    x = torch.randn(2, 5).to(torch.bfloat16)
    array = check_for([2, 5], "bf16").array(x)
    assert array.dtype.name == "bfloat16" and array.ctypes.data == x.data_ptr()
    assert np.array_equal(array.astype(np.float32), x.float().numpy())


def test_results_that_may_alias_an_input_are_found():
    inputs = [check_for([4, 3]).array(torch.randn(4, 3)), check_for([2]).array(torch.randn(2))]
    owners = {id(memory_owner(a)) for a in inputs}
    assert may_alias_input(inputs[0][1:].reshape(-1), owners, inputs)      # a view of an input
    assert not may_alias_input(np.empty((4, 3), np.float32), owners, inputs)  # memory of its own
    # memory numpy does not own (a raw pointer): decided by the inputs' bounds
    raw = (ctypes.c_float * 2).from_address(inputs[1].ctypes.data)
    assert may_alias_input(np.ctypeslib.as_array(raw), owners, inputs)
    elsewhere = (ctypes.c_float * 2)()
    assert not may_alias_input(np.ctypeslib.as_array(elsewhere), owners, inputs)


def test_a_parameter_s_view_is_kept_while_its_memory_stays():
    """A weight (requires grad) passed again gets the view made last time; an in-place update is
    seen through it, and other memory (`.data` replaced) or other strides make a new view."""
    check = check_for([3, 3])
    weight = torch.nn.Parameter(torch.zeros(3, 3))
    first = check.array(weight)
    with torch.no_grad():
        weight.add_(1.0)
    assert check.array(weight) is first and (first == 1.0).all()
    weight.data = torch.arange(9.0).reshape(3, 3)
    again = check.array(weight)
    assert again.ctypes.data == weight.data_ptr() and np.array_equal(again, np.arange(9.0).reshape(3, 3))
    weight.data = weight.data.t()  # the same memory and sizes, transposed
    assert np.array_equal(check.array(weight), np.arange(9.0).reshape(3, 3).T)


def test_strided_tensors_become_c_contiguous_arrays():
    """What a static executable's runner takes as it is (hlocc.torch calls it directly)."""
    x = torch.randn(3, 4).t()
    array = check_for([4, 3]).array(x)
    assert array.flags.c_contiguous and np.array_equal(array, x.numpy())
    weight = torch.nn.Parameter(torch.randn(3, 4).t())
    array = check_for([4, 3]).array(weight)
    assert array.flags.c_contiguous and np.array_equal(array, weight.detach().numpy())


def test_a_compiled_graph_runs_its_runner_directly_on_strided_inputs():
    import hlocc.torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    graphs = []
    compiled = torch.compile(model, backend=lambda gm, inputs: hlocc.torch.backend(gm, inputs, {"strict": True,
                                                                                                 "report": graphs}))
    x = torch.randn(3, 4).t()  # [4, 3], columns contiguous
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), model(x))
        torch.testing.assert_close(compiled(x.contiguous()), model(x))
    assert graphs and all(g["compiled"] for g in graphs)  # (dynamo recompiles for the other strides)


def test_guarded_inputs_keep_a_weight_s_view_and_check_plain_inputs():
    """tensors.GuardedInputs: the second call reuses the weight's view (same object, same memory);
    `.data =` to other memory makes a new one; a plain input that breaks its check takes the
    checked path, whose error names it."""
    from hlocc.frontends.torch.tensors import GuardedInputs

    weight = torch.nn.Parameter(torch.randn(3, 2))
    x = torch.randn(4, 3)
    checks = [InputCheck.of(0, "input 'x'", Shape.array("f32", (4, 3))),
              InputCheck.of(1, "input 'w'", Shape.array("f32", (3, 2)))]
    inputs = GuardedInputs(checks, [x, weight])
    first = inputs.arrays([x, weight])
    again = inputs.arrays([x + 1, weight])
    assert again[1] is first[1] and np.array_equal(again[0], (x + 1).numpy())
    weight.data = torch.zeros(3, 2)
    moved = inputs.arrays([x, weight])
    assert moved[1].ctypes.data == weight.data_ptr() and not moved[1].any()
    with pytest.raises(ArgumentError, match=r"input 'x': expected shape f32\[4,3\], got \[4, 2\]"):
        inputs.arrays([torch.randn(4, 2), weight])
    strided = torch.randn(3, 4).t()
    assert np.array_equal(inputs.arrays([strided, weight])[0], strided.numpy())


def test_guarded_inputs_give_addresses_once_a_snapshot_holds():
    """tensors.GuardedInputs.addresses: each input's data_ptr() (a weight's from the snapshot) once
    `arrays` has made one; None where an input breaks a check or a weight moved (then `arrays`), and
    for a graph with an input that has no fast path."""
    from hlocc.frontends.torch.tensors import GuardedInputs

    weight = torch.nn.Parameter(torch.randn(3, 2))
    x = torch.randn(4, 3)
    checks = [InputCheck.of(0, "input 'x'", Shape.array("f32", (4, 3))),
              InputCheck.of(1, "input 'w'", Shape.array("f32", (3, 2)))]
    inputs = GuardedInputs(checks, [x, weight])
    assert inputs.takes_addresses and inputs.addresses([x, weight]) is None  # (no snapshot yet)
    inputs.arrays([x, weight])
    assert inputs.addresses([x, weight]) == [x.data_ptr(), weight.data_ptr()]
    assert inputs.addresses([x.double(), weight]) is None
    assert inputs.addresses([torch.randn(3, 4).t(), weight]) is None
    weight.data = torch.zeros(3, 2)
    assert inputs.addresses([x, weight]) is None
    inputs.arrays([x, weight])
    assert inputs.addresses([x, weight]) == [x.data_ptr(), weight.data_ptr()]
    assert not GuardedInputs(checks, [torch.randn(3, 4).t(), weight]).takes_addresses


@pytest.mark.parametrize("dynamic", [False, True])
def test_an_empty_result_is_torch_s_own_and_an_out_op_resizes_it(dynamic):
    """`out = torch.empty(0)` made in a compiled graph and resized by an `out=` op after it: an
    empty result over numpy's memory raised "Trying to resize storage that is not resizable"
    (stress tester); with no elements to copy, it is a tensor torch allocates, as eager's is."""
    from torch_helpers import compiled

    def add_into_empty(x):
        out = torch.empty(0)
        torch.add(x, 1, out=out)
        return out

    run = compiled(add_into_empty, dynamic=dynamic)
    for n in (6, 6, 7):
        x = torch.randn(3, n)
        assert torch.equal(run(x), add_into_empty(x))
    from hlocc.frontends.torch.results import result_tensor

    empty = result_tensor(np.empty((0, 3), np.float32))
    assert empty.dtype == torch.float32 and empty.shape == (0, 3)
    empty.resize_(40)
