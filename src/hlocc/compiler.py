"""`compile(text_or_module, backend)` → Executable, and the Executable's argument checking.

Backends: `interpreter` runs the reference evaluator; `cpu` JIT-compiles kernels for the host
(backends/cpu: the whole-program runtime of runtime/executable.py); `cuda` runs the same runtime
on an NVIDIA GPU (backends/cuda: PTX kernels through the CUDA driver, cuBLAS gemms, device memory,
DLPack arrays in and out) and fails with the reason where no GPU can be used; `cuda-sim` runs the
cuda path on a simulated GPU (the GPU kernels in SIMT simulation, device memory in host memory),
which is how it is tested without one.

A module with symbolic dimensions (hlo/symbolic.py) compiles to a `DynamicExecutable`. On the cpu,
cuda and cuda-sim backends it holds one plan for every size (runtime/dynamic_program.py, on a device
backends/cuda/dynamic.py): HLO passes, schedule and buffer assignment run once on the symbolic
module; per call the compiled shape function binds the variables, checks the guards and gives every
size; kernels are symbolic, or compiled per binding of their fusion where the kernel compiler cannot
compile them symbolically yet (listed by `stats_text`). On the interpreter, or where the plan cannot
be built (the reason is in `plan_reason`), each call runs a static specialization of the whole
module for its binding, compiled on first use and cached (`specializations` lists each with why).

Compiling the same HLO text again in a process, with the same options, returns the executable
compiled the first time (`_PROGRAMS`, the last 64 programs, keyed by the text's SHA-256, backend and
options; `clear_compile_cache()` empties it). Kernels are cached below that, in memory and on disk
(backends/cpu/kernel.py, runtime/cache.py).
"""

from __future__ import annotations

import hashlib
import operator
import sys
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from hlocc.backends.arguments import array_shape, check_arguments
from hlocc.errors import ArgumentError, ElidedConstantsWarning, UnsupportedError, elided_constants_message
from hlocc.frontends import load_module
from hlocc.hlo.ir import HloModule
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import Shape
from hlocc.runtime.gc_pause import gc_paused

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
    # Static compilations built: 1 for a compiled backend, 0 for the interpreter; a
    # DynamicExecutable counts its per-binding specializations.
    compilations: int = 0
    _argument_plan: Any = field(default=None, repr=False, compare=False)  # see `checked`
    # `__call__`'s fast path: a function of the arguments, None where it gives no result (None
    # before it is known, False where there is none)
    _steady: Any = field(default=None, repr=False, compare=False)

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
        # The steady call: arguments exactly as the cpu program takes them, straight to its
        # native call (ThunkExecutable.steady_call) or a binding made before (DynamicExecutable).
        steady = self._steady
        if steady and not return_device_arrays:
            result = steady(args)
            if result is not None:
                return result
        return self._call(args, return_device_arrays)

    def _call(self, args: tuple, return_device_arrays: bool) -> Any:
        on_device = self.backend in DEVICE_BACKENDS
        if return_device_arrays and not on_device:
            raise ArgumentError(f"return_device_arrays: the {self.backend} backend returns host arrays only")
        values = self.checked(args, on_device)
        if on_device:
            return self.runner.run(values, return_device_arrays=return_device_arrays)
        runner = self.runner
        if runner is not None:
            result = runner.run(values)
            if self._steady is None:
                self._steady = runner.steady_call()
            return result
        from hlocc.evaluator import Evaluator

        return Evaluator(self.seed).run(self.module, values)


    def fast_shapes(self, args: Sequence[Any]) -> tuple | None:
        """The arguments' shapes where `checked`'s fast path takes them as they are (C-contiguous
        numpy arrays of the parameters' dtypes and fixed dimensions, `argument_plan`), else None."""
        plan = self._argument_plan
        if plan is None:
            plan = self._argument_plan = argument_plan(self.module)
        if not plan or len(args) != len(plan):
            return None
        shapes = []
        for a, (dims, dtype, fixed) in zip(args, plan):
            if type(a) is not np.ndarray or a.dtype != dtype or not a.flags.c_contiguous:
                return None
            shape = a.shape
            if shape != dims and (fixed is None or len(shape) != len(dims) or (fixed and fixed[0](shape) != fixed[1])):
                return None
            shapes.append(shape)
        return tuple(shapes)

    def checked(self, args: Sequence[Any], device_arrays: bool = False) -> Sequence[Any]:
        """`check_arguments`, with its fast path: arguments that are already C-contiguous numpy
        arrays of the parameters' dtypes and fixed dimensions (the expectations planned at the
        first call, `argument_plan`) are taken as they are; anything else gets the full checks."""
        if self.fast_shapes(args) is not None:
            return args
        return check_arguments(self.module, args, device_arrays=device_arrays)


def argument_plan(module: HloModule) -> tuple:
    """Per entry parameter, what `Executable.checked` compares an argument with: (its dims, None
    where symbolic; its dtype; None for a static shape, else its fixed dims as (a getter of them
    from a shape, their sizes), or () where it has none: one C-level comparison, where a generator
    over the (axis, size) pairs cost ~0.25 µs a call).
    Empty where a parameter is a tuple, a token or has a bounded dynamic dimension (every call
    takes the full checks)."""
    plan = []
    for p in module.entry.parameters:
        shape = p.shape
        if not shape.is_array or shape.has_bounded_dims:
            return ()
        dims = tuple(None if isinstance(d, DimExpr) else d for d in shape.dims)
        axes = tuple(k for k, d in enumerate(dims) if d is not None)
        getter = operator.itemgetter(*axes) if axes else None  # (of one axis it gives the size, of more a tuple)
        fixed = None if None not in dims else (getter, getter(dims)) if axes else ()
        plan.append((dims, shape.dtype, fixed))
    return tuple(plan)


SPECIALIZATION_REASON = "no plan for every size on this backend"


@dataclass
class Specialization:
    """One static compilation of a module with symbolic dimensions, for one binding of them."""

    binding: dict[str, int]
    compile_ms: float
    reason: str = SPECIALIZATION_REASON

    def __str__(self) -> str:
        values = ", ".join(f"{k}={v}" for k, v in sorted(self.binding.items()))
        return f"specialized for {values} in {self.compile_ms:.1f} ms ({self.reason})"


@dataclass
class DynamicExecutable(Executable):
    """An Executable of a module with symbolic dimensions; see the module docstring. `program` is
    the plan for every size (None: whole-module specializations, for `plan_reason`)."""

    options: dict = field(default_factory=dict)
    specializations: list[Specialization] = field(default_factory=list)
    program: Any = None
    plan_reason: str = SPECIALIZATION_REASON
    _cache: dict = field(default_factory=dict, repr=False)
    # Sizes the program computes (set-dimension-size, SliceToDynamic): the extra arguments each call
    # passes for them (runtime/bounded.py SizeArguments), or None.
    size_arguments: Any = None

    @property
    def plan_builds(self) -> int:
        """How many times the HLO passes and buffer assignment ran: 1 with a plan, else one per
        specialization."""
        return 1 if self.program is not None else len(self.specializations)

    @property
    def last_peak_bytes(self) -> int | None:
        """Bytes the last call allocated (outputs, temporaries, copied parameters); None without a plan."""
        return self.program.last_peak_bytes if self.program is not None else None

    def bind(self, *args) -> dict[str, int]:
        """The dimension variables' values for `args`, the guards checked (ArgumentError otherwise)."""
        from hlocc.hlo.specialize import bind_symbols

        params = self.module.entry.parameters
        if self.size_arguments is not None and len(args) != len(params):  # the user's arguments only
            args = self.size_arguments.extend(args)
        if len(args) != len(params):
            check_arguments(self.module, args)  # the count error
        shapes = [None if p.shape.is_tuple or p.shape.is_token else array_shape(a) for p, a in zip(params, args)]
        binding = bind_symbols(self.module, shapes)
        for guard in self.module.guards:
            guard.check(binding)
        return binding

    def specialized(self, binding: dict[str, int]) -> Executable:
        """The static Executable for `binding`, compiled on first use."""
        key = tuple(sorted(binding.items()))
        if key not in self._cache:
            from hlocc.hlo.specialize import specialize

            t0 = time.perf_counter()
            self._cache[key] = compile(specialize(self.module, binding), self.backend, seed=self.seed, **self.options)
            self.compilations += self._cache[key].compilations  # 0 on the interpreter, which builds nothing
            self.specializations.append(Specialization(dict(binding), (time.perf_counter() - t0) * 1e3,
                                                       self.plan_reason))
        return self._cache[key]

    def _call(self, args: tuple, return_device_arrays: bool) -> Any:
        if self.size_arguments is not None:
            args = self.size_arguments.extend(args)
        if self.program is None:
            return self.specialized(self.bind(*args))(*args, return_device_arrays=return_device_arrays)
        on_device = self.backend in DEVICE_BACKENDS
        if return_device_arrays and not on_device:
            raise ArgumentError(f"return_device_arrays: the {self.backend} backend returns host arrays only")
        program = self.program
        args, key = self.checked_shapes(args, on_device)  # (on a device, DLPack arrays are taken)
        result = program.run(args, key, return_device_arrays=True) if return_device_arrays else program.run(args, key)
        if program.deferred:  # only kernels compiled per size change the count
            self.compilations = program.compilations
        return result

    def checked_shapes(self, args: Sequence[Any], device_arrays: bool = False) -> tuple[Sequence[Any], tuple | None]:
        """`checked(args, device_arrays)` and, from its fast path, the arguments' shapes (the key of their
        binding, DynamicProgram.run), or None where the full checks ran. One pass reads each shape
        once: keying the binding by a second pass cost ~0.3 µs a call, 7-10% of a small program's."""
        shapes = self.fast_shapes(args)
        if shapes is not None:
            return args, shapes
        return check_arguments(self.module, args, device_arrays=device_arrays), None

    def stats_text(self) -> str:
        """The plan (or the specializations), the fallback fusions with their reasons, for `--stats`."""
        symbols = frozenset().union(*(p.shape.symbols for p in self.module.entry.parameters))
        lines = [f"symbolic dimensions: {', '.join(sorted(symbols))}; {self.compilations} compilation(s)"]
        if self.program is None:
            return "\n".join(lines + [f"  whole module per size: {self.plan_reason}"]
                             + [f"  {s}" for s in self.specializations])
        program = self.program
        lines.append(f"one plan for every size (HLO passes and buffer assignment ran once); "
                     f"{program.symbolic_kernels} kernel(s) for every size, {len(program.deferred)} compiled per size")
        lines += [f"  {line}" for line in program.fallbacks()]
        lines += [f"  {line}" for line in program.speculation_lines()]
        bound = list(program._bound.values())
        hosted = sorted({h for b in bound for h in b.host_fusions})
        lines += [f"  on the evaluator at some sizes: {h}" for h in hosted]
        lines.append(f"sizes seen: {len(bound)}; peak memory at the last call: {program.last_peak_bytes} bytes")
        program.stats.peak_bytes = program.last_peak_bytes
        lines.append(program.stats.to_string())
        return "\n".join(lines)


def _disabled_passes() -> str:
    """The passes $HLOCC_DISABLE_HLO_PASSES turns off (passes/pipeline.py `disabled_passes`), as
    part of the program caches' keys, since they change the plan."""
    from hlocc.passes.pipeline import disabled_passes

    return ",".join(sorted(disabled_passes()))


def compile(module_or_text: HloModule | str | Any, backend: str = "interpreter", *, verify: bool = True,
            seed: int = 0, hlo_passes: bool = True, print_ir_after_all: bool = False,
            dump_dir: str | None = None, stream: TextIO | None = None, gemm: str | None = None,
            check_bounds: bool = False, size_hint: dict[str, int] | None = None,
            autotune: str = "cached") -> Executable:
    """Parse or import (if given HLO or StableHLO text, MLIR bytecode or a `jax.export.Exported`),
    verify and compile a module for `backend`.

    hlo_passes: run the HLO pass pipeline (simplification and fusion) before code generation;
      without it each fusion and each op of the module as written becomes its own kernel.
    print_ir_after_all: write every HLO pass's result and every kernel pass's IR to `stream`
      (default stdout); dump_dir: write them, the buffer assignment and the thunks to files.
    gemm: "library" (dots call numpy's BLAS) or "codegen" (each dot and its elementwise epilogue
      one generated kernel: passes/pipeline.py `cpu_pipeline`; on cuda and cuda-sim `cuda_pipeline`,
      bf16/f16 dots as mma.sync kernels) or "auto" (cpu: codegen for the small dots where it
      measured faster, library for the others). Default (None): `default_gemm(backend)`, auto on
      the cpu, library elsewhere.
    check_bounds (cpu and cuda-sim backends): every kernel checks each load and store against its
      buffer and a violation raises a BoundsCheckError naming the kernel, the buffer and the index
      (slower kernels, for debugging; off, the kernels are the usual ones).
    size_hint (a module with symbolic dimensions, cpu and cuda backends): the dimension variables' likely
      values, at which the plan's fusion and scheduling heuristics are decided (default: 128 each;
      the plan is correct at every size whatever the hint).
    autotune (gemm="codegen"): "off" (the analytic schedule), "cached" (a winner the persistent
      cache holds, else the analytic schedule; no timing) or "full" (time candidate schedules of
      each matmul kernel compiled and store the winner: backends/cpu/gemm_tuning.py).
    A module object is copied first: compilation never changes the caller's module."""
    gemm = default_gemm(backend) if gemm is None else gemm
    _check_options(backend, check_bounds, gemm, autotune)  # before any cache: a hit must not hide a bad option
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    program_key = None
    # A matmul schedule in force (tests, benchmarks, the tuner) changes kernels the program caches
    # do not key: such a compile plans afresh (its kernels are keyed with it).
    if (isinstance(module_or_text, str) and backend == "cpu" and not (print_ir_after_all or dump_dir)
            and not _forced_schedule()):
        disabled = _disabled_passes()
        program_key = (hashlib.sha256(module_or_text.encode()).hexdigest(), backend, verify, seed, hlo_passes,
                       gemm, check_bounds, autotune, disabled)
        with _PROGRAMS_LOCK:
            hit = _PROGRAMS.get(program_key)
            if hit is not None:
                _PROGRAMS.move_to_end(program_key)
        if hit is not None:
            times["program_cache"] = (time.perf_counter() - t0) * 1e3
            # The compiled program is shared: this call built nothing (compilations 0).
            return Executable(hit.module, hit.backend, times, hit.seed, hit.runner)
    disk_key = None
    if program_key is not None:
        from hlocc.backends.cpu.program_cache import program_key as disk_program_key

        disk_key = disk_program_key(module_or_text, _cpu_target(check_bounds), verify=verify, seed=seed,
                                    hlo_passes=hlo_passes, gemm=gemm,
                                    **({"disabled_passes": disabled} if disabled else {}))
        planned = _from_program_plan(disk_key, times, gemm=gemm, check_bounds=check_bounds, seed=seed,
                                     autotune=autotune)
        if planned is not None:
            _remember_program(program_key, planned)
            return planned
    fresh = not isinstance(module_or_text, HloModule)  # made here: no copy needed
    with gc_paused():  # parsing allocates cyclic IR only (runtime/gc_pause.py)
        module = load_module(module_or_text)
    times["parse"] = (time.perf_counter() - t0) * 1e3
    if module.elided_constants:  # zeros, not the program's values: never silently (errors.py)
        warnings.warn(ElidedConstantsWarning(elided_constants_message(module.elided_constants,
                                                                      f"module '{module.name}'")), stacklevel=2)
    if verify:
        t0 = time.perf_counter()
        from hlocc.hlo.verifier import verify_module

        verify_module(module)
        times["verify"] = (time.perf_counter() - t0) * 1e3
    from hlocc.codegen.schedule.choice import autotune_mode
    from hlocc.runtime.bounded import has_bounded_dynamism, symbolize_bounded

    size_arguments = None  # XLA's dynamic dims (`<=N`, `?`): dimension variables (runtime/bounded.py)
    if has_bounded_dynamism(module):
        work = _copy_with_guards(module)
        try:
            size_arguments = symbolize_bounded(work)
            module, fresh = work, False  # the plan works on a copy (its text has no guards to reload)
        except UnsupportedError:
            if backend != "interpreter":
                raise
            # (the interpreter evaluates such a module as written, its arrays at their bounds)

    if any(p.shape.is_symbolic for p in module.entry.parameters):
        options = dict(verify=False, hlo_passes=hlo_passes, print_ir_after_all=print_ir_after_all,
                       dump_dir=dump_dir, stream=stream, gemm=gemm,
                       check_bounds=check_bounds, autotune=autotune)
        if size_hint:
            options["size_hint"] = dict(size_hint)
        executable = DynamicExecutable(module, backend, times, seed, options=options, size_arguments=size_arguments)
        if backend != "interpreter":
            # The plan's passes change the module they get: a fresh one is the executable's own
            # (reloaded if the plan fails), a caller's is copied, guards included.
            work = module if fresh else _copy_with_guards(module)
            _build_plan(executable, work, times, reload=(lambda: load_module(module_or_text)) if fresh else None)
        return executable
    device = device_for(backend, check_bounds) if backend in DEVICE_BACKENDS else None
    import hlocc.evaluator  # noqa: F401  (registers the evaluations)

    runner = None
    if backend != "interpreter":
        out = stream or sys.stdout
        options = _kernel_options(print_ir_after_all, dump_dir, out)
        work = module if fresh else parse_hlo(module.to_string())
        kwargs = dict(options=options, hlo_passes=hlo_passes, seed=seed, print_after_all=print_ir_after_all,
                      stream=out, times=times)
        if device is not None:
            from hlocc.backends.cuda.executable import compile_module as compile_for_device

            runner = compile_for_device(work, device, gemm=gemm, **kwargs)
        else:
            from hlocc.backends.cpu.executable import compile_module

            kwargs["target"] = _cpu_target(check_bounds)
            with autotune_mode(autotune):
                runner = compile_module(work, gemm=gemm, **kwargs)
            if disk_key is not None:
                from hlocc.backends.cpu.program_cache import store_program

                store_program(disk_key, runner.module, times)
        if dump_dir:
            _dump_program(runner, dump_dir)
    executable = Executable(module, backend, times, seed, runner, compilations=int(runner is not None))
    if program_key is not None:
        _remember_program(program_key, executable)
    return executable


def _forced_schedule() -> str:
    """`choice.forced_schedule_key()`, without importing the schedule package (and xDSL with it,
    ~0.5 s) before the program cache is asked: a schedule is in force only through that module's
    `use_schedule`, so where it is not loaded none is."""
    choice = sys.modules.get("hlocc.codegen.schedule.choice")
    return choice.forced_schedule_key() if choice is not None else ""


def default_gemm(backend: str) -> str:
    """The gemm mode a compile for `backend` gets when none is given: "auto" on the cpu, decided by
    benchmarks/programs.py --gemm library,auto on the JAX corpus (docs/architecture.md, matmul
    section), "library" elsewhere (cuBLAS; no GPU figure for the generated kernels yet)."""
    return "auto" if backend == "cpu" else "library"


def _check_options(backend: str, check_bounds: bool, gemm: str, autotune: str) -> None:
    from hlocc.codegen.schedule.choice import AUTOTUNE_MODES

    if backend not in BACKENDS:
        raise UnsupportedError(f"unknown backend '{backend}' (choose from {', '.join(BACKENDS)})")
    if check_bounds and backend not in ("cpu", "cuda-sim"):
        raise UnsupportedError(f"check_bounds is implemented for the cpu and cuda-sim backends, not '{backend}'")
    backends = {"library": BACKENDS, "codegen": ("cpu", "cuda", "cuda-sim"), "auto": ("cpu",)}
    if backend not in backends.get(gemm, ()):
        raise UnsupportedError(f"gemm='{gemm}': choose 'library', 'codegen' with the cpu, cuda or cuda-sim backend, "
                               "or 'auto' with the cpu backend")
    if autotune not in AUTOTUNE_MODES:
        raise UnsupportedError(f"autotune='{autotune}': choose one of {', '.join(AUTOTUNE_MODES)}")


def _remember_program(key: tuple, executable: Executable) -> None:
    with _PROGRAMS_LOCK:
        _PROGRAMS[key] = executable
        while len(_PROGRAMS) > _MAX_PROGRAMS:
            _PROGRAMS.popitem(last=False)


def _cpu_target(check_bounds: bool):
    from dataclasses import replace

    from hlocc.codegen.target import cpu_target

    return replace(cpu_target(), check_bounds=True) if check_bounds else cpu_target()


def _from_program_plan(key: str, times: dict[str, float], *, gemm: str, check_bounds: bool,
                       seed: int, autotune: str) -> Executable | None:
    """The cpu program compiled from the plan the disk cache holds under `key`
    (backends/cpu/program_cache.py), or None: no parsing of the input, no verification, no HLO
    passes."""
    from hlocc.backends.cpu.executable import compile_module
    from hlocc.backends.cpu.program_cache import load_program

    with gc_paused():
        module = load_program(key, times)
    if module is None:
        return None
    from hlocc.codegen.schedule.choice import autotune_mode

    with autotune_mode(autotune):
        runner = compile_module(module, _cpu_target(check_bounds), gemm=gemm, planned=True, seed=seed, times=times)
    return Executable(module, "cpu", times, seed, runner, compilations=1)


_PROGRAMS: OrderedDict[tuple, Executable] = OrderedDict()
_PROGRAMS_LOCK = threading.Lock()
_MAX_PROGRAMS = 64


def clear_compile_cache() -> None:
    """Forget the programs compiled in this process (module doc)."""
    with _PROGRAMS_LOCK:
        _PROGRAMS.clear()


def device_for(backend: str, check_bounds: bool = False) -> Any:
    """The device a cuda backend runs on: the GPU for `cuda` (an UnsupportedError with the reason
    when there is none), a SimulatedDevice for `cuda-sim` (bounds-checked kernels if asked)."""
    if backend == "cuda-sim":
        from hlocc.backends.cuda.device import SimulatedDevice

        return SimulatedDevice(check_bounds=check_bounds)
    from hlocc.backends.cuda.driver import cuda_available, cuda_device

    ok, why = cuda_available()
    if not ok:
        raise UnsupportedError(f"backend 'cuda': {why}; use --backend cpu, or --backend cuda-sim to run the GPU "
                               "kernels in simulation")
    return cuda_device()


def _copy_with_guards(module: HloModule) -> HloModule:
    """The plan's own copy of `module`, guards included: runtime/plan_speculation.copy_module (a
    deep copy; printing and parsing back formatted every constant)."""
    from hlocc.runtime.plan_speculation import copy_module

    return copy_module(module)


def _kernel_options(print_ir_after_all: bool, dump_dir: str | None, out: Any):
    """The kernel pipeline's options where its IR is printed after every pass or dumped (else None)."""
    from hlocc.codegen.pipeline import PipelineOptions

    if not (print_ir_after_all or dump_dir):
        return None
    return PipelineOptions(print_ir_after_all, dump_dir, "kernel", lambda text: print(text, file=out))


def _build_plan(executable: DynamicExecutable, module: HloModule, times: dict[str, float], reload=None) -> None:
    """Give `executable` its plan for every size, or leave it to whole-module specializations with
    the reason when the plan cannot be built (e.g. a variable no argument dimension binds); then
    `reload()`, when given, is the module as loaded (the failed plan may have changed `module`)."""
    from hlocc.backends.cpu.executable import compile_dynamic_module
    from hlocc.codegen.schedule.choice import autotune_mode
    from hlocc.hlo.symbolic import InconclusiveDimensionError

    options = executable.options
    kernels = _kernel_options(options.get("print_ir_after_all", False), options.get("dump_dir"),
                              options.get("stream") or sys.stdout)
    common = dict(options=kernels, hlo_passes=options.get("hlo_passes", True), seed=executable.seed,
                  print_after_all=options.get("print_ir_after_all", False), stream=options.get("stream"), times=times,
                  gemm=options.get("gemm", "library"), hint=options.get("size_hint"))
    device = device_for(executable.backend, options.get("check_bounds", False)) \
        if executable.backend in DEVICE_BACKENDS else None
    try:
        if device is not None:
            from hlocc.backends.cuda.dynamic import compile_dynamic_module as compile_for_device

            executable.program = compile_for_device(module, device, **common)
        else:
            with autotune_mode(options.get("autotune", "cached")):
                executable.program = compile_dynamic_module(module, _cpu_target(options.get("check_bounds", False)),
                                                            **common)
    except (UnsupportedError, InconclusiveDimensionError) as e:
        executable.plan_reason = f"no plan for every size: {e}"
        if reload is not None:
            executable.module = reload()
        return
    executable.compilations = executable.program.compilations
    parameters = executable.module.entry.parameters
    if device is None and executable.size_arguments is None and all(p.shape.is_array for p in parameters):
        # `__call__`'s fast path: a size bound before
        executable._steady = executable.program.steady_call([np.dtype(p.shape.dtype) for p in parameters])
    else:
        executable._steady = False
    if options.get("dump_dir"):
        _dump_program(executable.program, options["dump_dir"])


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
