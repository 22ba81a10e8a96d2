"""`compile(text_or_module, backend)` → Executable, and the Executable's argument checking.

Backends: `interpreter` runs the reference evaluator; `cpu` JIT-compiles kernels for the host
(backends/cpu: the whole-program runtime of runtime/executable.py); `cuda` runs the same runtime
on an NVIDIA GPU (backends/cuda: PTX kernels through the CUDA driver, cuBLAS gemms, device memory,
DLPack arrays in and out) and fails with the reason where no GPU can be used; `cuda-sim` runs the
cuda path on a simulated GPU (the GPU kernels in SIMT simulation, device memory in host memory),
which is how it is tested without one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.frontends import load_module
from hlocc.hlo.ir import HloModule
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.types import UNBOUNDED, Shape

BACKENDS = ("interpreter", "cpu", "cuda", "cuda-sim")
DEVICE_BACKENDS = ("cuda", "cuda-sim")


@dataclass
class Executable:
    """A compiled module. Call it with one numpy array (or scalar) per entry parameter; it returns
    one array, or a tuple of arrays when the entry's result is a tuple."""

    module: HloModule
    backend: str
    compile_times_ms: dict[str, float] = field(default_factory=dict)
    seed: int = 0
    runner: Any = None  # the backend's compiled form (None for the interpreter)

    @property
    def parameter_shapes(self) -> list[Shape]:
        return [p.shape for p in self.module.entry.parameters]

    @property
    def result_shape(self) -> Shape:
        return self.module.entry.root.shape

    def __call__(self, *args, return_device_arrays: bool = False) -> Any:
        """Run on `args` (numpy arrays, scalars, or any DLPack array: torch, jax, cupy). With
        `return_device_arrays` (cuda backends) the results stay in device memory as DeviceArrays,
        which torch/jax/cupy/numpy take through DLPack without a copy."""
        on_device = self.backend in DEVICE_BACKENDS
        if return_device_arrays and not on_device:
            raise ArgumentError(f"return_device_arrays: the {self.backend} backend returns host arrays only")
        values = check_arguments(self.module, args, device_arrays=on_device)
        if on_device:
            return self.runner.run(values, return_device_arrays=return_device_arrays)
        if self.runner is not None:
            return self.runner.run(values)
        from hlocc.evaluator import Evaluator

        return Evaluator(self.seed).run(self.module, values)


def check_arguments(module: HloModule, args: Sequence[Any], *, cast: bool = False,
                    device_arrays: bool = False) -> list[Any]:
    """Check count, shapes and dtypes of `args` against the entry parameters; return them as arrays
    of the parameter dtypes. With `cast`, arrays of another dtype are converted (used by the CLI for
    .npz inputs that store bf16/f8 as float32); without it a dtype mismatch is an error.

    A DLPack array (`__dlpack_device__`) in host memory becomes a numpy array without a copy; one
    in device memory becomes a DLPackArray (backends/cuda/dlpack.py) when `device_arrays` (a cuda
    backend) and is an error otherwise."""
    params = module.entry.parameters
    if len(args) != len(params):
        raise ArgumentError(f"'{module.name}' takes {len(params)} argument{'s' if len(params) != 1 else ''}, "
                            f"got {len(args)}")
    return [_check_one(i, p.shape, a, cast, device_arrays) for i, (p, a) in enumerate(zip(params, args))]


def _check_one(index: int, shape: Shape, value: Any, cast: bool, device_arrays: bool = False) -> Any:
    if shape.is_tuple:
        if not isinstance(value, (tuple, list)) or len(value) != len(shape.tuple_shapes):
            raise ArgumentError(f"argument {index}: expected a tuple of {len(shape.tuple_shapes)} arrays for {shape}")
        return tuple(_check_one(index, s, v, cast, device_arrays) for s, v in zip(shape.tuple_shapes, value))
    if shape.is_token:
        from hlocc.evaluator.core import TOKEN

        return TOKEN
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack_device__"):
        from hlocc.backends.cuda.dlpack import DLPackArray, import_argument

        value = import_argument(value)
        if isinstance(value, DLPackArray):
            return _check_device_array(index, shape, value, device_arrays)
    arr = np.asarray(value)
    # A dynamic dimension accepts any size up to its bound (or any size for `?`).
    fits = len(arr.shape) == shape.rank and all(
        a == d or (dyn and (d == UNBOUNDED or a <= d)) for a, d, dyn in zip(arr.shape, shape.dims, shape.dynamic))
    if not fits:
        raise ArgumentError(f"argument {index}: expected shape {shape.to_string(False)}, "
                            f"got an array of shape {list(arr.shape)} ({arr.dtype})")
    if arr.dtype != shape.dtype:
        # Python scalars and lists carry no dtype of their own: convert them; numpy arrays must match.
        if not (cast or not isinstance(value, np.ndarray)):
            raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), "
                                f"got {arr.dtype}")
        with np.errstate(all="ignore"):
            arr = arr.astype(shape.dtype)
    return arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)


def _check_device_array(index: int, shape: Shape, value: Any, device_arrays: bool) -> Any:
    if not device_arrays:
        raise ArgumentError(f"argument {index}: the array is in {value.device_name} memory; this backend takes "
                            "host arrays (copy it to the host, or use --backend cuda)")
    if list(value.shape) != list(shape.dims) or any(shape.dynamic):
        raise ArgumentError(f"argument {index}: expected shape {shape.to_string(False)}, "
                            f"got an array of shape {list(value.shape)} ({value.dtype}) in {value.device_name} memory")
    if value.dtype != shape.dtype:
        raise ArgumentError(f"argument {index}: expected dtype {shape.element_type} ({shape.dtype}), got "
                            f"{value.dtype} in {value.device_name} memory (device arrays are not converted)")
    return value


def compile(module_or_text: HloModule | str | Any, backend: str = "interpreter", *, verify: bool = True,
            seed: int = 0, hlo_passes: bool = True, print_ir_after_all: bool = False,
            dump_dir: str | None = None, stream: TextIO | None = None, check_bounds: bool = False) -> Executable:
    """Parse or import (if given HLO or StableHLO text, MLIR bytecode or a `jax.export.Exported`),
    verify and compile a module for `backend`.

    hlo_passes: run the HLO pass pipeline (simplification and fusion) before code generation;
      without it each fusion and each op of the module as written becomes its own kernel.
    print_ir_after_all: write every HLO pass's result and every kernel pass's IR to `stream`
      (default stdout); dump_dir: write them, the buffer assignment and the thunks to files.
    check_bounds (cpu backend): every kernel checks each load and store against its buffer and a
      violation raises a BoundsCheckError naming the kernel, the buffer and the index (slower
      kernels, for debugging; off, the kernels are the usual ones).
    A module object is copied first: compilation never changes the caller's module."""
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    fresh = not isinstance(module_or_text, HloModule)  # made here: no copy needed
    module = load_module(module_or_text)
    times["parse"] = (time.perf_counter() - t0) * 1e3
    if verify:
        t0 = time.perf_counter()
        from hlocc.hlo.verifier import verify_module

        verify_module(module)
        times["verify"] = (time.perf_counter() - t0) * 1e3
    if backend not in BACKENDS:
        raise UnsupportedError(f"unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
    if check_bounds and backend != "cpu":
        raise UnsupportedError(f"check_bounds is implemented for the cpu backend, not '{backend}'")
    device = device_for(backend) if backend in DEVICE_BACKENDS else None
    import hlocc.evaluator  # noqa: F401  (registers the evaluations)

    runner = None
    if backend != "interpreter":
        from hlocc.codegen.pipeline import PipelineOptions

        out = stream or sys.stdout
        options = (PipelineOptions(print_ir_after_all, dump_dir, "kernel", lambda text: print(text, file=out))
                   if (print_ir_after_all or dump_dir) else None)
        work = module if fresh else parse_hlo(module.to_string())
        kwargs = dict(options=options, hlo_passes=hlo_passes, seed=seed, print_after_all=print_ir_after_all,
                      stream=out, times=times)
        if device is not None:
            from hlocc.backends.cuda.executable import compile_module as compile_for_device

            runner = compile_for_device(work, device, **kwargs)
        else:
            from hlocc.backends.cpu.executable import compile_module

            if check_bounds:
                from dataclasses import replace

                from hlocc.codegen.target import cpu_target

                kwargs["target"] = replace(cpu_target(), check_bounds=True)
            runner = compile_module(work, **kwargs)
        if dump_dir:
            _dump_program(runner, dump_dir)
    return Executable(module, backend, times, seed, runner)


def device_for(backend: str) -> Any:
    """The device a cuda backend runs on: the GPU for `cuda` (an UnsupportedError with the reason
    when there is none), a SimulatedDevice for `cuda-sim`."""
    if backend == "cuda-sim":
        from hlocc.backends.cuda.device import SimulatedDevice

        return SimulatedDevice()
    from hlocc.backends.cuda.driver import cuda_available, cuda_device

    ok, why = cuda_available()
    if not ok:
        raise UnsupportedError(f"backend 'cuda': {why}; use --backend cpu, or --backend cuda-sim to run the GPU "
                               "kernels in simulation")
    return cuda_device()


def _dump_program(runner, dump_dir: str) -> None:
    import os

    os.makedirs(dump_dir, exist_ok=True)
    files = {"module.after_passes.hlo": runner.module.to_string(),
             "buffer_assignment.txt": runner.assignment.to_string(),
             "thunks.txt": runner.to_string(),
             "stats.txt": runner.stats.to_string()}
    for name, text in files.items():
        with open(os.path.join(dump_dir, name), "w") as f:
            f.write(text + "\n")
