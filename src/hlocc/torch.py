"""PyTorch models compiled by hlocc (needs the `[torch]` extra).

    import torch
    compiled = torch.compile(model, backend="hlocc")            # found through the entry point
    compiled = torch.compile(model, backend="hlocc", dynamic=True)   # one hlocc compile for all batches
    run = hlocc.torch.compile_exported(torch.export.export(model, (x,)))   # ahead of time

`backend` is the dynamo backend registered as `hlocc` (`torch_dynamo_backends` entry point): dynamo
hands it an FX graph, `aot_autograd` functionalizes it, applies PyTorch's core-ATen decompositions
(with scaled_dot_product_attention in its math form, so its backward is ATen too) and splits forward and
backward; each graph is lowered by `frontends/torch` through its op table and compiled by
`hlocc.compile`. Symbolic sizes (`dynamic=True`, `mark_dynamic`, `torch.export.Dim`) become
hlocc's symbolic dimensions, their value ranges hlocc guards: one compile serves every size.
Tensors pass as numpy views of their memory (no copy for contiguous CPU tensors) and results come
back as tensors over hlocc's output buffers.

A compiled graph runs with denormals flushed to zero (FTZ/DAZ in the calling thread, restored after;
`options={"flush_denormal": False}` keeps IEEE denormals), as XLA's CPU runtime executes: a softmax's
exp(x - max) of far-below-max scores gives denormals, and every BLAS call and kernel that then reads
them takes the processor's slow path (a 16 µs matmul measured at 300 µs). Values below 1.2e-38 (f32)
become 0; PyTorch's own fused kernels (attention's) do not produce them in the first place.

A graph holding an op the table does not lower (or that hlocc fails to compile) runs eager, with one
`FallbackWarning` naming the ops; `HLOCC_TORCH_STRICT=1` (or `options={"strict": True}`) makes that an
error. `explain(model, *args)` reports what happened to each graph. `stats()` counts hlocc compiles
and fallbacks in this process.
"""

from __future__ import annotations

import itertools
import os
import time
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.compiler import DEVICE_BACKENDS, Executable, compile
from hlocc.errors import ArgumentError, HloError, UnsupportedError
from hlocc.frontends.torch.aliasing import AliasedWrites
from hlocc.frontends.torch.decompositions import attention_as_math, decompositions
from hlocc.frontends.torch.lowering import LoweredGraph, lower_graph, unsupported_ops
from hlocc.frontends.torch.results import expand, fresh_results, native_sequence, result_tensor
from hlocc.frontends.torch.tensors import (
    GuardedInputs,
    InputCheck,
    exported_inputs,
    may_alias_input,
    memory_owner,
)
from hlocc.frontends.torch.tracing import mutates_attributes, traced_forms
from hlocc.frontends.torch.views import input_view
from hlocc.hlo.symbolic import evaluate
from hlocc.runtime import blas
from hlocc.runtime.blas_gemm import with_blas_gemms


class FallbackWarning(UserWarning):
    """A graph hlocc does not compile runs eager (the message names the ops and the reason)."""


_STATS: Counter = Counter()
_GRAPH_NUMBERS = itertools.count()  # graph names (forward_0, backward_1, ...) unique in the process


def stats() -> dict[str, int]:
    """Counts in this process: `compiles` (graphs compiled by hlocc), `fallbacks` (graphs run eager)."""
    return dict(_STATS)


def reset_stats() -> None:
    _STATS.clear()


def _torch():
    try:
        import torch
    except ImportError:
        raise UnsupportedError("hlocc.torch needs torch: pip install 'hlocc[torch]'") from None
    if not _BLAS:
        _BLAS.append(_bind_blas(torch))
    return torch


_BLAS: list[bool] = []  # whether torch's BLAS was bound (once per process)


def _bind_blas(torch) -> bool:
    """The runtime's f32/f64 gemms call the MKL that torch's CPU build carries (libtorch_cpu exports
    its Fortran `sgemm_`/`dgemm_`; runtime/blas.py), as torch's own matmuls do: at the small sizes of
    a model's layers it is 1.3-1.6x numpy's OpenBLAS, and called on raw addresses it skips numpy's
    per-call work. HLOCC_TORCH_BLAS=numpy keeps numpy's."""
    if os.environ.get("HLOCC_TORCH_BLAS", "") == "numpy":
        return False
    from hlocc.runtime import blas

    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    return os.path.exists(path) and blas.use_library(path)


def strict_mode(options: dict | None = None) -> bool:
    """Fallback is an error: `options["strict"]`, else HLOCC_TORCH_STRICT=1."""
    if options and "strict" in options:
        return bool(options["strict"])
    return os.environ.get("HLOCC_TORCH_STRICT", "") not in ("", "0")


# -- the compiled graph ---------------------------------------------------------------------------
_TINY, _ONE = np.float32(1e-39), np.float32(1.0)  # a denormal times one is 0 where they are flushed


class CompiledGraph:
    """A lowered FX graph and its hlocc Executable, called with the graph's inputs (a list: the
    boxed calling convention of aot_autograd) and returning the graph's outputs. `guarded_by`: the
    example inputs of a graph dynamo calls directly, whose guards check every tensor before a call
    (tensors.GuardedInputs: then an unchanged weight costs one identity test and one `data_ptr()`)."""

    _boxed_call = True

    def __init__(self, lowered: LoweredGraph, executable: Executable | None, input_names: Sequence[str],
                 flush_denormal: bool = True, guarded_by: Sequence[Any] | None = None):
        self.lowered, self.executable, self.input_names = lowered, executable, list(input_names)
        self.flush_denormal = flush_denormal
        self._assertions = lowered.assertions  # checked by _run after each call
        # per entry parameter: what its tensor is checked against, read once (calls are hot)
        self._inputs = [InputCheck.of(index, self._name(index), param.shape, index in lowered.number_inputs)
                        for index, param in zip(lowered.parameters, lowered.module.entry.parameters)]
        guarded = (GuardedInputs(self._inputs, [guarded_by[c.index] for c in self._inputs])
                   if guarded_by is not None and not lowered.number_inputs else None)
        on_device = executable is not None and executable.backend in DEVICE_BACKENDS
        self._on_device = on_device
        self._arrays = guarded.arrays if guarded is not None and not on_device else self._checked_arrays
        self._execute = _device_runner(executable) if on_device else _direct_runner(executable)
        # every output a result in a fresh buffer of the runtime's (a static plan's outputs are, or are
        # not, at every call): learned at the first call, then each is wrapped without alias checks
        self._fresh_results: list[int] | None = None
        self._wrap, self._set_flush_denormal = _torch().from_numpy, _torch().set_flush_denormal
        runner = getattr(executable, "runner", None)
        self._static = runner is not None and getattr(self._execute, "__self__", None) is runner
        # A static program over inputs that all have a fast path takes their addresses (data_ptr()),
        # with no array per input (GuardedInputs.addresses, ThunkExecutable.address_plan): the
        # MLP's seven inputs cost 0.5 µs each as arrays.
        self._addresses = self._execute_at = None
        if self._static and guarded is not None and guarded.takes_addresses and runner.address_plan() is not None:
            self._addresses, self._execute_at = guarded.addresses, runner.run_addresses
        # Such a program whose every step has a native form runs as one native function into
        # tensors made here (runtime/native_sequence.py): no ctypes call per kernel, no output views.
        self._native = native_sequence(self, runner, flush_denormal) if self._addresses is not None else None
        # outputs eager returns expanded (stride 0) or as views are so (aot_autograd reads their strides)
        outs = lowered.outputs
        self._expanded, self._views = any(o.broadcast for o in outs), any(o.kind == "view" for o in outs)
        if self._expanded:
            self._native = self._addresses = None

    def _checked_arrays(self, args: Sequence[Any]) -> list:
        if self._on_device:  # tensors as they are: the executable checks them (DLPack)
            return [args[check.index] for check in self._inputs]
        return [check.array(args[check.index]) for check in self._inputs]

    @property
    def module(self):
        return self.lowered.module

    def _name(self, index: int) -> str:
        return self.input_names[index] if index < len(self.input_names) else f"input {index}"

    def _run(self, execute: Callable[[list], Any], values: list) -> Any:
        """`execute` (the executable's run on arrays, or on addresses) on `values`, with denormals
        flushed to zero (FTZ/DAZ) in this thread for the call when `flush_denormal` and they are
        not already (module doc). Raises the graph's failed assertions (LoweredGraph.assertions)."""
        if not self.flush_denormal or _TINY * _ONE == 0:
            results = execute(values)
        else:
            flush = self._set_flush_denormal
            flush(True)
            try:
                results = execute(values)
            finally:
                flush(False)
        for index, message in self._assertions:
            if not bool(results[index]):
                raise RuntimeError(message)
        return results

    def __call__(self, args: list) -> list:
        native, fresh = self._native, self._fresh_results
        if self._addresses is not None and (native is not None or fresh is not None):
            addresses = self._addresses(args)  # (args holds the tensors over the call)
            if addresses is not None:
                if native is not None:
                    return native(addresses)
                results = self._run(self._execute_at, addresses)
                wrap = self._wrap
                return [wrap(results[i]) for i in fresh]
        arrays = self._arrays(args)
        results = self._run(self._execute, arrays) if self.executable is not None else ()
        fresh = self._fresh_results
        if fresh is not None:
            wrap = self._wrap
            return [wrap(results[i]) for i in fresh]
        binding = None
        owners = None
        outputs = []
        for out in self.lowered.outputs:
            if out.kind == "result" and self._on_device:
                outputs.append(results[out.index])  # a tensor over the result's own device memory
            elif out.kind == "result":
                array = results[out.index]
                # a buffer of the runtime's own (inputs never own their data) needs no alias check
                if not isinstance(memory_owner(array), np.ndarray):
                    if owners is None:
                        owners = {id(memory_owner(a)) for a in arrays}
                    if may_alias_input(array, owners, arrays):
                        array = array.copy()  # a result that is (a view of) an input: the caller owns it
                outputs.append(result_tensor(array))
            elif out.kind == "number":
                outputs.append(results[out.index].item())
            elif out.kind == "input":
                outputs.append(args[out.index])
            elif out.kind == "view":
                outputs.append(None)  # (made below: it may view another output)
            elif out.kind == "size":
                if binding is None:
                    binding = self.executable.bind(*arrays)
                    binding.update({name: args[i] for i, name in self.lowered.number_inputs.items()})
                outputs.append(evaluate(out.value, binding))
            else:
                outputs.append(out.value)
        if self._expanded or self._views:  # (an expanded result, then the views, of inputs or of outputs)
            outputs = [expand(t, out.broadcast) if out.broadcast and out.kind == "result" else t
                       for t, out in zip(outputs, self.lowered.outputs)]
            return [out.value([*args, *outputs]) if out.kind == "view" else t
                    for t, out in zip(outputs, self.lowered.outputs)]
        if self._static and self._fresh_results is None:
            self._fresh_results = fresh_results(self.lowered.outputs, results)
        return outputs


TORCH_DEVICE = {"cuda": "cuda"}
"""The torch device type of a backend's tensors where it is not the CPU's: `cuda` takes and returns
CUDA tensors (cuda-sim's device memory is the host's: CPU tensors, through the same DLPack path)."""


def _device_runner(executable: Executable) -> Callable[[list], list]:
    """How a compiled graph runs on a device backend (cuda, cuda-sim): the tensors go in through
    DLPack as they are (used in place where they lie in the device's memory, in the parameter's
    layout), the results come back as device arrays that torch takes through DLPack: no copy
    through the host. Returns the results as a list of tensors."""
    from_dlpack = _torch().utils.dlpack.from_dlpack
    single = not executable.result_shape.is_tuple

    def run(args: list) -> list:
        tensors = [t.detach() if getattr(t, "requires_grad", False) else t for t in args]
        results = executable(*tensors, return_device_arrays=True)
        return [from_dlpack(r) for r in ([results] if single else results)]
    return run


def _direct_runner(executable: Executable | None) -> Callable[[list], Any]:
    """How a compiled graph runs its executable on the InputChecks' arrays: a static cpu program's
    runner directly, the arrays being what `Executable.checked` would pass on (C-contiguous, of the
    parameters' dtypes and sizes: tensors.InputCheck.array), its matrix products as calls of the
    bound BLAS (runtime/blas_gemm.py); any other through the Executable."""
    runner = getattr(executable, "runner", None)
    static = (type(executable) is Executable and executable.backend == "cpu" and hasattr(runner, "call_plan")
              and all(p.shape.is_array and not p.shape.symbols and not p.shape.has_bounded_dims
                      for p in executable.module.entry.parameters))
    if static:
        if blas.bound() and runner._call_plan is None:  # (before its first call plans the program)
            runner.program = with_blas_gemms(runner.program)
        return runner.run
    return lambda arrays: executable(*arrays)


def compile_graph(graph_module: Any, example_inputs: Sequence[Any], *, name: str = "torch_graph",
                  options: dict | None = None, constants: dict | None = None, shape_env: Any = None,
                  input_names: Sequence[str] | None = None, report: list | None = None,
                  guarded: bool = False) -> Callable:
    """The callable of one core-ATen FX graph: compiled by hlocc, or the graph itself (eager) with
    one FallbackWarning when it holds ops hlocc does not lower (an error in strict mode). `guarded`:
    dynamo calls it directly, its guards checking `example_inputs`' properties (CompiledGraph)."""
    options = dict(options or {})
    strict = strict_mode(options)
    hlocc_backend = options.get("backend", "cpu")
    compile_options = {k: v for k, v in options.items() if k in ("gemm", "check_bounds", "hlo_passes")}
    # A model's products stay library calls unless asked: on the torch models the generated kernels
    # (the cpu default, `auto`) were slower than MKL's calls and cost 4-15x the compile time
    # (transformer block 0.46 vs 0.71 ms, 1.9 vs 27.6 s cold; docs/architecture.md, PyTorch section).
    compile_options.setdefault("gemm", "library")
    flush_denormal = bool(options.get("flush_denormal", True)) and hlocc_backend == "cpu"
    names = list(input_names or [n.name for n in graph_module.graph.nodes if n.op == "placeholder"])
    entry = {"name": name, "ops": sum(1 for n in graph_module.graph.nodes if n.op == "call_function")}
    missing = unsupported_ops(graph_module)
    t0 = time.perf_counter()
    try:
        if missing:
            listed = ", ".join(f"{op} ({why})" for op, why in sorted(missing.items()))
            raise UnsupportedError(f"ops hlocc does not lower: {listed}")
        if shape_env is None:
            shape_env = _shape_env(example_inputs)
        lowered = lower_graph(graph_module, name, constants=constants, shape_env=shape_env,
                              device=TORCH_DEVICE.get(hlocc_backend, "cpu"))
        # (a size output binds its symbols through the executable: `x.resize_(x.numel())` has no other)
        needed = lowered.module.entry.root.operands or any(out.kind == "size" for out in lowered.outputs)
        executable = compile(lowered.module, hlocc_backend, **compile_options) if needed else None
    except HloError as e:
        _STATS["fallbacks"] += 1
        entry.update(compiled=False, reason=str(e))
        if report is not None:
            report.append(entry)
        if strict:
            raise UnsupportedError(f"hlocc.torch ({name}, strict mode): {e}") from None
        warnings.warn(FallbackWarning(f"hlocc.torch: {name} runs eager: {e}"), stacklevel=2)
        return _eager(graph_module)
    _STATS["compiles"] += 1
    entry.update(compiled=True, compile_ms=(time.perf_counter() - t0) * 1e3,
                 instructions=sum(len(c.instructions) for c in lowered.module.computations),
                 symbols=sorted(frozenset().union(*(p.shape.symbols for p in lowered.module.entry.parameters))),
                 guards=[str(g) for g in lowered.module.guards])
    if report is not None:
        report.append(entry)
    return CompiledGraph(lowered, executable, names, flush_denormal,
                         guarded_by=list(example_inputs) if guarded else None)


def _eager(graph_module: Any) -> Callable:
    def run(args: list):
        return graph_module(*args)
    run._boxed_call = True
    return run


def _shape_env(example_inputs: Sequence[Any]) -> Any:
    from torch._guards import detect_fake_mode

    mode = detect_fake_mode(list(example_inputs))
    return getattr(mode, "shape_env", None) if mode is not None else None


# -- the dynamo backend ---------------------------------------------------------------------------
def backend(graph_module: Any, example_inputs: Sequence[Any], options: dict | None = None,
            mode: str | None = None) -> Callable:
    """The `hlocc` dynamo backend: forward and backward graphs through aot_autograd, each compiled by
    hlocc (`torch.compile(..., options={...})`: backend="cpu", gemm ("library" unless given), strict,
    flush_denormal (True: see the module doc) and "report", a list that gets one dict per graph). `mode` (max-autotune,
    ...) has no meaning for hlocc and is ignored."""
    torch = _torch()
    from torch._functorch.aot_autograd import aot_module_simplified

    options = dict(options or {})
    report = options.pop("report", None)
    attention_as_math(graph_module)
    def compiler(kind: str, guarded: bool = False):
        # A backward graph is compiled and run by backward(), which may be called in a frame dynamo
        # resumed after a graph break (a training step calling loss.backward() inside the compiled
        # function): dynamo, still on there, would trace hlocc's own Python (its numpy constants and
        # call plans became graphs of their own, which failed). Dynamo is off while hlocc compiles,
        # and while a backward graph runs (dynamo already calls the graphs it compiled with it off).
        @torch._dynamo.disable
        def compile_fn(gm, inputs):
            graph = compile_graph(gm, inputs, name=f"{kind}_{next(_GRAPH_NUMBERS)}", options=options,
                                  report=report, guarded=guarded)
            if kind != "backward":
                return graph
            run = torch._dynamo.disable(graph)
            run._boxed_call = True
            return run
        return compile_fn

    with traced_forms():
        inference = _inference_graph(graph_module, example_inputs)
        if inference is not None:
            return _unboxed(compiler("inference", guarded=True)(inference, example_inputs))
        return aot_module_simplified(graph_module, example_inputs, fw_compiler=compiler("forward"),
                                     bw_compiler=compiler("backward"), inference_compiler=compiler("inference"),
                                     decompositions=decompositions())


_dynamo_backend = backend  # (compile_exported's argument `backend` hides the name)


def _inference_graph(graph_module: Any, example_inputs: Sequence[Any]) -> Any:
    """The core-ATen graph of a dynamo graph that needs no autograd (grad mode off, or no input
    requiring grad: what dynamo guards on), traced by `aot_export_joint_simple` with the inputs and
    outputs of the dynamo graph, so that its compiled form is called by dynamo directly: no
    aot_autograd runtime wrapper per call (5 µs of the MLP's 70). None where that export refuses
    the graph (an input mutated, an output aliasing an input) or fails: aot_module_simplified,
    whose runtime wrapper replays those effects, takes it then."""
    torch = _torch()
    from torch._functorch.aot_autograd import aot_export_joint_simple

    if torch.is_grad_enabled() and any(isinstance(x, torch.Tensor) and x.requires_grad for x in example_inputs):
        return None
    if mutates_attributes(graph_module):
        return None
    try:
        exported = aot_export_joint_simple(graph_module, list(example_inputs), trace_joint=False,
                                           decompositions=decompositions())
    except Exception:  # noqa: BLE001 (its refusals are RuntimeErrors; anything else: the general path)
        return None
    # An op with side effects (linalg.inv's error check) threads an effect token through the graph:
    # one input and one output more than dynamo passes and expects, which only aot_autograd's
    # runtime wrapper supplies (called directly, the graph, compiled or eager, missed an argument)
    if sum(1 for n in exported.graph.nodes if n.op == "placeholder") != len(example_inputs):
        return None
    return exported


def _unboxed(graph: Callable) -> Callable:
    """A boxed graph (called with one list) as dynamo calls a backend's result: with the inputs."""
    def run(*args: Any) -> Any:
        return graph(args)
    run.graph = graph
    return run


# -- ahead of time: torch.export ------------------------------------------------------------------
@dataclass
class ExportedExecutable:
    """An ExportedProgram compiled by hlocc: call it with the program's user inputs (as the
    exported module takes them); returns its outputs in the program's output structure."""

    graph: Callable
    input_kinds: list[tuple[str, str]]  # per placeholder: (kind, name or target)
    state: dict[str, Any]
    out_spec: Any
    in_spec: Any
    mutations: list[tuple[int, str]] = field(default_factory=list)  # (output index, buffer written)
    user_outputs: list[int] = field(default_factory=list)
    input_mutations: list[tuple[int, int]] = field(default_factory=list)  # (output index, placeholder written)
    # user input number -> the value a non-tensor input had at export (the program is specialized to it)
    constant_inputs: dict[int, Any] = field(default_factory=dict)
    views: dict[int, Callable] = field(default_factory=dict)  # user output -> eager's view of an input (views.py)
    aliasing: AliasedWrites | None = None  # a written input sharing memory with another: another path

    @property
    def module(self):
        return getattr(self.graph, "module", None)

    @property
    def executable(self) -> Executable | None:
        return getattr(self.graph, "executable", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import torch.utils._pytree as pytree

        flat = exported_inputs(args, kwargs, self.in_spec, self.constant_inputs, self.input_kinds)
        if self.aliasing is not None and self.aliasing.found(flat):
            return self.aliasing.variant()(*args, **kwargs)
        users = iter(flat)
        inputs = [next(users) if kind == "USER_INPUT" else self.state[target] for kind, target in self.input_kinds]
        outputs = self.graph(inputs)
        for index, target in self.mutations:
            self.state[target].copy_(outputs[index])
        for index, placeholder in self.input_mutations:  # `acc.add_(x)` on a user's tensor
            inputs[placeholder].copy_(outputs[index])
        return pytree.tree_unflatten([self.views[k](inputs) if k in self.views else outputs[i]
                                      for k, i in enumerate(self.user_outputs)], self.out_spec)


def compile_exported(exported: Any, *, backend: str = "cpu", params: str = "constants",
                     **options: Any) -> ExportedExecutable:
    """Compile a `torch.export.ExportedProgram` with hlocc: decomposed to core ATen, parameters,
    buffers and constants baked into the module (`params="constants"`, the default) or passed at
    each call (`params="arguments"`, for weights that change). Its `torch.export.Dim`s become
    symbolic dimensions and its range constraints guards. Strict: a program hlocc cannot lower is
    an UnsupportedError (there is no eager graph to fall back to that would be ahead of time)."""
    if params not in ("constants", "arguments"):
        raise ArgumentError(f"params='{params}': choose 'constants' or 'arguments'")
    with traced_forms():
        program = exported.run_decompositions(decompositions())
    gm = program.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    state = {**program.state_dict, **program.constants}
    outputs = program.graph_signature.output_specs
    mutations = [(i, s.target) for i, s in enumerate(outputs) if s.kind.name == "BUFFER_MUTATION"]
    written = {target for _, target in mutations}  # buffers the program updates: arguments, never constants
    kinds, constants, names = [], {}, []
    for node, spec in zip(placeholders, program.graph_signature.input_specs):
        kind = spec.kind.name
        target = spec.target if kind != "USER_INPUT" else spec.arg.name
        kinds.append((kind, target))
        names.append(f"input '{target}'" if kind == "USER_INPUT" else f"{kind.lower()} '{target}'")
        if kind != "USER_INPUT" and params == "constants" and target not in written:
            constants[node.name] = state[target]
    placeholder_of = {spec.arg.name: i for i, spec in enumerate(program.graph_signature.input_specs)
                      if spec.kind.name == "USER_INPUT"}
    input_mutations = [(i, placeholder_of[s.target]) for i, s in enumerate(outputs)
                       if s.kind.name == "USER_INPUT_MUTATION"]
    users = [i for i, s in enumerate(outputs) if s.kind.name == "USER_OUTPUT"]
    nodes = list(gm.graph.output_node().args[0])  # (outputs viewing an input or its new value: x.add_(1)[1:])
    roots = {n: k for k, n in enumerate(placeholders) if n.name not in constants} | {nodes[i]: k for i, k in
                                                                                     input_mutations}
    views = {k: view for k, i in enumerate(users) if (view := input_view(nodes[i], roots)) is not None}
    user_specs = [spec for spec in program.graph_signature.input_specs if spec.kind.name == "USER_INPUT"]
    constant_inputs = {k: spec.arg.value for k, spec in enumerate(user_specs) if hasattr(spec.arg, "value")}
    options = {**options, "backend": backend, "strict": True}
    graph = compile_graph(gm, [], name="exported", options=options, constants=constants,
                          shape_env=dict(program.range_constraints), input_names=names)
    user_of = {p: k for k, p in enumerate(i for i, (kind, _) in enumerate(kinds) if kind == "USER_INPUT")}
    aliasing = AliasedWrites.of([user_of[p] for _, p in input_mutations],
                                [state[t] for (kind, t), n in zip(kinds, placeholders) if kind != "USER_INPUT"
                                 and n.name not in constants], [state[t] for t in written],
                                lambda: _torch().compile(exported.module(), backend=_dynamo_backend, options=options))
    return ExportedExecutable(graph, kinds, state, program.call_spec.out_spec, program.call_spec.in_spec,
                              mutations, users, input_mutations, constant_inputs, views, aliasing)


# -- explain --------------------------------------------------------------------------------------
@dataclass
class Explanation:
    """What `torch.compile(model, backend="hlocc")` did for one call: dynamo's graphs and graph
    breaks, and per aot graph whether hlocc compiled it (with its HLO size, symbols and guards) or
    why it runs eager."""

    graph_count: int
    graph_breaks: int
    break_reasons: list[str]
    graphs: list[dict]

    @property
    def fallbacks(self) -> list[dict]:
        return [g for g in self.graphs if not g["compiled"]]

    def __str__(self) -> str:
        lines = [f"dynamo graphs: {self.graph_count}, graph breaks: {self.graph_breaks}"]
        lines += [f"  break: {r}" for r in self.break_reasons]
        for g in self.graphs:
            if g["compiled"]:
                extra = f", symbols {', '.join(g['symbols'])}" if g["symbols"] else ""
                lines.append(f"{g['name']}: {g['ops']} ATen ops -> {g['instructions']} HLO instructions, compiled "
                             f"by hlocc in {g['compile_ms']:.0f} ms{extra}")
                lines += [f"  guard: {x}" for x in g["guards"]]
            else:
                lines.append(f"{g['name']}: {g['ops']} ATen ops, runs eager: {g['reason']}")
        return "\n".join(lines)


def explain(model: Callable, *args: Any, **kwargs: Any) -> Explanation:
    """Compile `model` for `args` with the hlocc backend (fallbacks allowed, no warnings) and say
    what happened to each graph. Resets dynamo's caches (it compiles afresh)."""
    torch = _torch()
    torch._dynamo.reset()
    dynamo = torch._dynamo.explain(model)(*args, **kwargs)
    torch._dynamo.reset()
    report: list[dict] = []
    compiled = torch.compile(model, backend=lambda gm, inputs: backend(gm, inputs, {"report": report,
                                                                                    "strict": False}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FallbackWarning)
        compiled(*args, **kwargs)
    torch._dynamo.reset()
    reasons = [str(getattr(b, "reason", b)).strip().splitlines()[0] for b in dynamo.break_reasons]
    return Explanation(dynamo.graph_count, dynamo.graph_break_count, reasons, report)


__all__ = ["CompiledGraph", "Explanation", "ExportedExecutable", "FallbackWarning", "backend", "compile_exported",
           "compile_graph", "decompositions", "explain", "reset_stats", "stats", "strict_mode"]
