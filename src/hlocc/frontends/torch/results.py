"""How a compiled torch graph's results become the tensors its caller gets (hlocc.torch
`CompiledGraph`): an output eager returns expanded (stride 0), the one native function of a static
graph writing into tensors made here (runtime/native_sequence.py), the test of whether a static
program's results are all fresh runtime buffers (each then wrapped without alias checks), and the
tensor of one result array (`result_tensor`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.frontends.torch.tensors import from_numpy, memory_owner, torch_dtype


def expand(tensor: Any, dims: tuple[int, ...]) -> Any:
    """`tensor` with stride 0 along `dims`, its values there being equal (an expand's, in eager)."""
    first = tuple(slice(0, 1) if d in dims else slice(None) for d in range(tensor.dim()))
    return tensor[first].contiguous().expand(tensor.shape)


def native_sequence(graph: Any, runner: Any, flush_denormal: bool) -> Callable[[list], list] | None:
    """The call of a static graph on its inputs' addresses as one native function writing into
    fresh tensors (runtime/native_sequence.py), or None where its program or outputs have no such
    form (every graph output must be a program result of a dtype torch has)."""
    import torch

    from hlocc.runtime.executable import CHECKED_ALLOCATION_BYTES
    from hlocc.runtime.native_sequence import NativeSequence

    outputs = graph.lowered.outputs
    if not all(out.kind == "result" for out in outputs) or runner.fresh_bytes() >= CHECKED_ALLOCATION_BYTES:
        return None
    sequence = NativeSequence.of(runner.address_plan(), flush_denormal)
    if sequence is None:
        return None
    made = [(dims, torch_dtype(dtype)) for dtype, dims in sequence.outputs]
    if any(dtype is None for _, dtype in made):
        return None
    order = [out.index for out in outputs]
    empty, run, cpu = torch.empty, sequence.run, torch.device("cpu")  # (not the default device: the program's)
    assertions = graph._assertions  # (pred results after the outputs, raised as CompiledGraph._run does)

    def call(addresses: list) -> list:
        results = [empty(dims, dtype=dtype, device=cpu) for dims, dtype in made]
        run(addresses, [r.data_ptr() for r in results])
        for index, message in assertions:
            if not results[index].item():
                raise RuntimeError(message)
        return [results[i] for i in order]
    call.sequence = sequence
    return call


def fresh_results(outputs: Sequence[Any], results: Sequence[np.ndarray]) -> list[int] | None:
    """The result indices of `outputs` where every output is a writeable array of a dtype torch
    takes (not bf16) with elements (`result_tensor`) in a buffer the runtime owns, so
    `torch.from_numpy` is all it needs; else None."""
    if not all(out.kind == "result" for out in outputs):
        return None
    arrays = [results[out.index] for out in outputs]
    fresh = all(type(a) is np.ndarray and a.flags.writeable and a.dtype.kind in "biuf" and a.dtype.name != "bfloat16"
                and a.size and isinstance(memory_owner(a), np.ndarray) for a in arrays)
    return [out.index for out in outputs] if fresh else None



def result_tensor(array: np.ndarray) -> Any:
    """The tensor of a result array: over its memory (`from_numpy`), or, where it has no elements,
    a new tensor of torch's (nothing to copy). Eager's results are tensors torch allocated, which
    can be resized, and one over numpy's memory cannot: `out = torch.empty(0)` made in a compiled
    graph and given to an `out=` op after it (which resizes it) raised "Trying to resize storage that
    is not resizable". A graph that runs as one native function makes every output with torch.empty
    (native_sequence); the call plans' outputs with elements stay numpy's memory (docs/architecture.md)."""
    if array.size:
        return from_numpy(array)
    import torch

    return torch.empty(array.shape, dtype=torch_dtype(array.dtype), device=torch.device("cpu"))
