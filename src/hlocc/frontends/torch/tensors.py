"""CPU tensors ↔ numpy arrays without copies where the memory allows it.

A contiguous CPU tensor and the numpy array of `to_numpy` share memory (`Tensor.numpy()`; bf16,
which numpy lacks, through a view as int16 reinterpreted as ml_dtypes' bfloat16, hlocc's bf16
storage). A non-contiguous tensor is passed as its strided view: hlocc's argument check makes the
one copy it needs. `from_numpy` wraps a result array as a tensor the same way, without a copy.

`InputCheck` is what a compiled graph knows of one input before any call (its dtype, static sizes,
name), so that the per-call conversion of a tensor that matches it is a few attribute reads and
`Tensor.numpy()`; any mismatch takes the slow path, whose errors name the tensor. Either way the
array is C-contiguous (a strided tensor is copied once there), which lets a static executable skip
its own argument checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

from hlocc.errors import ArgumentError
from hlocc.hlo.types import Shape

_REINTERPRETED = {"bfloat16": ("int16", "bfloat16")}  # torch dtype → (carrier int dtype, ml_dtypes name)
_BF16 = np.dtype(ml_dtypes.bfloat16)


def to_numpy(tensor: Any, name: str = "tensor") -> np.ndarray:
    """The numpy view of a CPU tensor (ArgumentError naming it when it is on another device)."""
    import torch

    if tensor.device.type != "cpu":
        raise ArgumentError(f"{name} is on {tensor.device}; the cpu backend takes CPU tensors")
    if tensor.requires_grad:
        tensor = tensor.detach()
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype in _REINTERPRETED:
        carrier, target = _REINTERPRETED[dtype]
        return tensor.view(getattr(torch, carrier)).numpy().view(getattr(ml_dtypes, target))
    return tensor.numpy()


def from_numpy(array: np.ndarray) -> Any:
    """The tensor of a result array, sharing its memory."""
    import torch

    if type(array) is not np.ndarray:
        array = np.asarray(array)
    if array.dtype == _BF16:
        return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
    if not array.flags.writeable:  # (torch warns on read-only memory; results are the caller's)
        array = array.copy()
    return torch.from_numpy(array)


@dataclass(frozen=True)
class InputCheck:
    """One tensor input of a compiled graph: graph input `index`, its `name` for errors, its
    parameter `shape`, the torch dtype that matches it (None: always the checked path), and its
    static sizes (position, size)."""

    index: int
    name: str
    shape: Shape
    torch_dtype: Any
    rank: int
    static_sizes: tuple[tuple[int, int], ...]
    reinterpret: bool  # bf16: through to_numpy's int16 view
    dims: tuple[int, ...] | None  # all the sizes, where every one is static
    # [(tensor, data_ptr, sizes, strides, array)]: the last parameter (requires_grad) seen and its view,
    # one tuple replaced whole (a call on another thread reads either the old or the new one)
    _parameter: list = field(default_factory=lambda: [None], compare=False, repr=False)

    @staticmethod
    def of(index: int, name: str, shape: Shape, number: bool = False) -> InputCheck:
        static = tuple((k, d) for k, d in enumerate(shape.dims) if isinstance(d, int))
        dims = tuple(shape.dims) if len(static) == len(shape.dims) else None
        return (NumberCheck if number else InputCheck)(index, name, shape, _torch_dtype(shape.dtype), len(shape.dims),
                                                       static, shape.dtype == _BF16, dims)

    def array(self, tensor: Any) -> np.ndarray:
        """The numpy view of `tensor`, checked against the parameter (errors name it): C-contiguous,
        of the parameter's dtype and static sizes (a strided tensor's values are copied), so that
        a static executable's runner takes it as it is."""
        last = self._parameter[0]
        if last is not None and last[0] is tensor and tensor.data_ptr() == last[1] and tensor.shape == last[2] \
                and tensor.stride() == last[3]:
            return last[4]  # a weight again, its memory where it was: the view made last time
        try:
            sizes = tensor.shape
            fits = (tensor.dtype is self.torch_dtype and tensor.is_cpu
                    and (sizes == self.dims if self.dims is not None
                         else len(sizes) == self.rank and all(sizes[k] == d for k, d in self.static_sizes)))
        except AttributeError:
            fits = False
        if not fits or self.reinterpret or not tensor.is_contiguous():
            return np.ascontiguousarray(checked_array(tensor, self.name, self.shape))
        if not tensor.requires_grad:
            return tensor.numpy()
        # A parameter (nn.Parameter requires grad even under no_grad): dynamo passes the same tensor
        # at every call, and its detached view is kept (holding it costs nothing: the model does).
        array = tensor.detach().numpy()
        self._parameter[0] = (tensor, tensor.data_ptr(), sizes, tensor.stride(), array)
        return array


class NumberCheck(InputCheck):
    """A graph input passed as a Python int (a SymInt's value: lowering.size_parameter), not a tensor."""

    def array(self, value: Any) -> np.ndarray:
        if type(value) is not int:
            raise ArgumentError(f"{self.name}: expected an int (a size), got {type(value).__name__}")
        return np.asarray(value, self.shape.dtype)


class GuardedInputs:
    """The arrays of all of a compiled graph's inputs by one generated function, for a graph that
    dynamo calls directly: its guards (TENSOR_MATCH: each tensor argument's dtype, device, sizes,
    strides and requires_grad; a change recompiles) hold before every call, so a weight (requires
    grad) that is the same object at the same address as the last time is the view made then: one
    identity test and one `data_ptr()` per weight, no per-input method call (BERT has 37 weights). A
    plain input (its example C-contiguous) is `Tensor.numpy()` after a check of its dtype, sizes and
    contiguity, which costs little for the one or two a graph has. Anything else (the first call,
    another tensor, memory moved by `.data =`) takes the InputChecks' path, whose weights' views
    become the snapshot the next call compares with."""

    def __init__(self, checks: Sequence[InputCheck], examples: Sequence[Any]):
        self.checks = list(checks)
        self._weights: list[int] = []  # positions in `checks` of the weights, in snapshot order
        namespace: dict[str, Any] = {}
        # Two generated functions: `convert` gives each input's array, `locate` (where every input
        # takes a fast path) its address alone (`addresses`).
        convert, locate = ["def convert(args, W):"], ["def locate(args, W):"]
        every_fast = True
        for k, (check, example) in enumerate(zip(self.checks, examples)):
            convert.append(f"    t = args[{check.index}]")
            locate.append(f"    t = args[{check.index}]")
            # bf16 (numpy has none): its array is the checked path's reinterpreted view, its address
            # the tensor's like any other's
            dtype = _torch_bf16() if check.reinterpret else check.torch_dtype
            fast = (dtype is not None and check.dims is not None and getattr(example, "dtype", None) is dtype
                    and example.is_contiguous())
            if not fast:
                every_fast = False
                namespace[f"check{k}"] = check.array
                convert.append(f"    a{k} = check{k}(t)")
            elif example.requires_grad:
                j = 3 * len(self._weights)
                self._weights.append(k)
                test = [f"    if t is not W[{j}] or t.data_ptr() != W[{j + 1}]:", "        return None"]
                convert += [*test, f"    a{k} = W[{j + 2}]"]
                locate += [*test, f"    a{k} = W[{j + 1}]"]
            else:  # (checked all the same: cheap, and a direct call has no guards)
                namespace[f"dtype{k}"], namespace[f"dims{k}"], namespace[f"check{k}"] = dtype, check.dims, check.array
                test = [f"    if t.dtype is not dtype{k} or t.shape != dims{k} or t.requires_grad "
                        "or not t.is_contiguous():", "        return None"]
                # (`numpy()` refuses a tensor not on the CPU)
                convert += [*test, f"    a{k} = check{k}(t)" if check.reinterpret else f"    a{k} = t.numpy()"]
                locate += [*test, "    if not t.is_cpu:", "        return None", f"    a{k} = t.data_ptr()"]
        values = f"    return [{', '.join(f'a{k}' for k in range(len(self.checks)))}]"
        source = "\n".join([*convert, values, *(locate + [values] if every_fast else [])])
        exec(compile(source, "<hlocc.torch inputs>", "exec"), namespace)
        self._convert = namespace["convert"]
        self._locate = namespace.get("locate")
        self._snapshot: tuple | None = None  # (tensor, data_ptr, view) per weight, replaced whole

    @property
    def takes_addresses(self) -> bool:
        """Whether `addresses` can give the inputs' addresses (every input on a fast path)."""
        return self._locate is not None

    def addresses(self, args: Sequence[Any]) -> list[int] | None:
        """The address of each input's bytes, where every input is what the snapshot and the
        checks of `arrays` take as it is (C-contiguous, of the parameter's dtype and sizes; a
        weight where it was): then no array is made. None otherwise (`arrays` then says what
        to do). The tensors must outlive the call that reads these addresses (the caller's args)."""
        snapshot = self._snapshot
        if snapshot is None or self._locate is None:
            return None
        try:
            return self._locate(args, snapshot)
        except Exception:  # noqa: BLE001 (a broken guard assumption: `arrays`' checked path says what)
            return None

    def arrays(self, args: Sequence[Any]) -> list[np.ndarray]:
        snapshot = self._snapshot
        if snapshot is not None:
            try:
                arrays = self._convert(args, snapshot)
            except Exception:  # noqa: BLE001 (a broken guard assumption: the checked path says what)
                arrays = None
            if arrays is not None:
                return arrays
        arrays = [check.array(args[check.index]) for check in self.checks]
        snapshot = []
        for k in self._weights:
            tensor = args[self.checks[k].index]
            if arrays[k].ctypes.data != tensor.data_ptr():  # (a copy: it would not see in-place updates)
                self._snapshot = None
                return arrays
            snapshot += [tensor, tensor.data_ptr(), arrays[k]]
        self._snapshot = tuple(snapshot)
        return arrays


def torch_dtype(dtype: np.dtype) -> Any:
    """The torch dtype of a numpy dtype (ml_dtypes' bfloat16: torch.bfloat16), None where torch has
    none."""
    return _torch_bf16() if np.dtype(dtype) == _BF16 else _torch_dtype(dtype)


def _torch_bf16() -> Any:
    import torch

    return torch.bfloat16


def _torch_dtype(dtype: np.dtype) -> Any:
    import torch

    try:
        return torch.from_numpy(np.empty(0, dtype)).dtype
    except TypeError:  # (bf16 and the types torch lacks: the checked path)
        return None


def checked_array(tensor: Any, name: str, shape: Shape) -> np.ndarray:
    """The numpy view of an input tensor, checked against its parameter's Shape (errors name it)."""
    import torch

    if not isinstance(tensor, torch.Tensor):  # (numpy arrays have a dtype and a device too)
        raise ArgumentError(f"{name}: expected a tensor, got {type(tensor).__name__}")
    array = to_numpy(tensor, name)
    if array.dtype != shape.dtype:
        raise ArgumentError(f"{name}: expected dtype {shape.element_type} ({shape.dtype}), got {tensor.dtype}")
    if array.ndim != len(shape.dims) or any(isinstance(d, int) and d != a for d, a in zip(shape.dims, array.shape)):
        raise ArgumentError(f"{name}: expected shape {shape.to_string(False)}, got {list(array.shape)}")
    return array


def memory_owner(array: np.ndarray) -> Any:
    """The object whose memory `array` views: the end of its chain of numpy bases (numpy collapses
    views of views, so this is one or two steps), or the array itself when it owns its data."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array if array.base is None else array.base


def may_alias_input(result: np.ndarray, input_owners: set[int], inputs: Sequence[np.ndarray]) -> bool:
    """Whether a result array may share memory with an input array: its memory owner is an input's,
    or is neither an input's nor a numpy array of its own (memory numpy knows nothing of), where
    the bounds of every input are compared."""
    owner = memory_owner(result)
    if id(owner) in input_owners:
        return True
    if isinstance(owner, np.ndarray):  # a buffer of the runtime's own (inputs never own their data)
        return False
    return any(np.may_share_memory(result, a) for a in inputs)


def exported_inputs(args: tuple, kwargs: dict, in_spec: Any, constants: dict[int, Any],
                    input_kinds: Sequence[tuple[str, str]]) -> list:
    """An exported program's user inputs from a call, in the program's order (its `in_spec`, as the
    exported module takes them): keyword arguments and dict entries by name, whatever their order;
    a missing or unexpected one, or a non-tensor input other than its value at export (`constants`:
    input number -> value; the program is specialized to it), is an ArgumentError naming it (by the
    program's `input_kinds`: (kind, name) per placeholder)."""
    import torch.utils._pytree as pytree

    flat, spec = pytree.tree_flatten((args, kwargs))
    if spec != in_spec:  # (keywords or dict keys in another order: by their paths)
        given = dict(pytree.tree_flatten_with_path((args, kwargs))[0])
        expected = [p for p, _ in pytree.tree_flatten_with_path(
            pytree.tree_unflatten([None] * in_spec.num_leaves, in_spec))[0]]
        if set(given) != set(expected):
            missing = [pytree.keystr(p) for p in expected if p not in given]
            extra = [pytree.keystr(p) for p in given if p not in set(expected)]
            raise ArgumentError("the arguments do not match the exported program's inputs"
                                + (f"; missing: {', '.join(missing)}" if missing else "")
                                + (f"; unexpected: {', '.join(extra)}" if extra else ""))
        flat = [given[p] for p in expected]
    for k, value in constants.items():
        if flat[k] != value:
            names = [name for kind, name in input_kinds if kind == "USER_INPUT"]
            raise ArgumentError(f"input '{names[k]}' was {value!r} at export, and the program is specialized "
                                f"to it; got {flat[k]!r}")
    return flat

