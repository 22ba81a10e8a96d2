"""The kernels of a dynamic program's plan (runtime/dynamic_program.py, issue 15): a fusion with
symbolic shapes compiled once, symbolically (`SymbolicKernel`, with the versions speculation plans:
runtime/speculation.py), bound per binding to its dimension values (`BoundKernel`); or, where the
kernel compiler cannot compile it symbolically yet, compiled per binding of the variables it uses
at first use and cached (`DeferredKernel`: the visible fallback, listed with its reason).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.specialize import specialize_computation
from hlocc.hlo.symbolic import InconclusiveDimensionError, size_hint
from hlocc.runtime.executable import KernelCompiler
from hlocc.runtime.speculation import (
    GENERIC,
    KernelVersion,
    SpeculationOptions,
    choose_version,
    loop_vector_elements,
    plan_versions,
)
from hlocc.runtime.thunks import KernelThunk, SequentialThunk

_FALLBACK_ERRORS = (UnsupportedError, InconclusiveDimensionError)

@dataclass
class BoundKernel:
    """A symbolic kernel (the version chosen at this binding) with its dimension values: what a
    KernelThunk launches. `calls` counts the launches of each version (speculation stats)."""

    kernel: Any
    dims: tuple[int, ...]
    version: str = GENERIC
    calls: dict[str, int] | None = None

    @property
    def name(self) -> str:
        return self.kernel.name

    def run_addresses(self, addresses: list[int]) -> None:
        self.kernel.run_addresses(addresses, self.dims)
        if self.calls is not None:
            self.calls[self.version] += 1

    def __getattr__(self, name: str) -> Any:
        if name == "launcher" and hasattr(self.kernel, "launcher"):  # a prepared launch at these dims
            return self._launcher
        if name == "launch_at" and hasattr(self.kernel, "launch_at"):  # a launch at these dims over any table
            return self._launch_at
        raise AttributeError(name)

    def _launch_at(self, count: int) -> Any:
        """`run(table, address)` at these dims (CompiledKernel.launch_at), counted like `run_addresses`."""
        run = self.kernel.launch_at(count, self.dims)
        if self.calls is None:
            return run
        calls, version = self.calls, self.version

        def counted(table: Any, address: int) -> None:
            run(table, address)
            calls[version] += 1
        counted.keep = run
        return counted

    def _launcher(self, count: int) -> Any:
        """The kernel's prepared launch at these dims; counted per version like `run_addresses`."""
        launch = self.kernel.launcher(count, dims=self.dims)
        if self.calls is None:
            return launch
        return _CountedLaunch(launch, self.calls, self.version)


class _CountedLaunch:
    """A prepared launch (runtime.thunks.KernelLauncher) that counts its runs in `calls[version]`."""

    def __init__(self, launch: Any, calls: dict[str, int], version: str):
        self.launch, self.table, self._calls, self._version = launch, launch.table, calls, version

    def run(self) -> None:
        self.launch.run()
        self._calls[self._version] += 1


@dataclass
class SymbolicKernel:
    """A kernel compiled once from a fusion with symbolic shapes; `symbols` are the dimension
    variables `run_addresses(addresses, dims)` takes, in order. `versions`: the speculated kernels
    (runtime/speculation.py), each with its KernelVersion, the generic `kernel` last; `bind` picks
    one per binding."""

    kernel: Any
    versions: list[tuple[KernelVersion, Any]] = field(default_factory=list)
    forced: str | None = None
    calls: dict[str, int] = field(default_factory=dict)  # launches per version name

    def bind(self, binding: dict[str, int], where: str) -> BoundKernel:
        """The version whose predicate holds at `binding` (or the forced one) with its dims."""
        if not self.versions:
            return BoundKernel(self.kernel, tuple(binding[s] for s in self.symbols))
        version, kernel = self.versions[choose_version([v for v, _ in self.versions], binding, self.forced, where)]
        self.calls.setdefault(version.name, 0)
        return BoundKernel(kernel, version.dims(binding, kernel.symbols), version.name, self.calls)

    def launch_at(self, binding: dict[str, int], where: str, count: int) -> Any:
        """`bind(binding, where)`'s launch over any table of `count` buffers (BoundKernel.launch_at),
        without the BoundKernel where there is one version (what a shared call plan's binding takes)."""
        if not self.versions:
            return self.kernel.launch_at(count, tuple([binding[s] for s in self.kernel.symbols]))
        return self.bind(binding, where)._launch_at(count)

    def describe_versions(self) -> list[str]:
        """One line per version: its name, predicate and kernel, and the launches so far."""
        return [f"version {v.name} if {v.predicate}: kernel over ({', '.join(k.symbols)}), "
                f"{self.calls.get(v.name, 0)} launch(es)"
                for v, k in self.versions]

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def emitter(self) -> str:
        return self.kernel.emitter

    @property
    def output_aliases(self) -> tuple:
        return self.kernel.output_aliases

    @property
    def symbols(self) -> tuple[str, ...]:
        return tuple(self.kernel.symbols)


@dataclass
class DeferredKernel:
    """A fusion compiled per binding of the variables it uses (module doc), each on first use."""

    name: str
    computation: HloComputation
    noalias: bool
    reason: str  # why it has no symbolic kernel
    compile_kernel: KernelCompiler
    variables: tuple[str, ...]
    instances: dict[tuple, Any] = field(default_factory=dict)  # dims -> Kernel, or the UnsupportedError
    compile_ms: float = 0.0
    emitter: str = "per-size"
    output_aliases: tuple = ()  # known per binding (the instance's)

    def instance(self, binding: dict[str, int]) -> Any:
        key = tuple(binding[v] for v in self.variables)
        if key not in self.instances:
            t0 = time.perf_counter()
            fused = specialize_computation(self.computation, dict(zip(self.variables, key)))
            try:
                self.instances[key] = self.compile_kernel(fused, self.name, self.noalias)
            except UnsupportedError as e:
                self.instances[key] = e
            self.compile_ms += (time.perf_counter() - t0) * 1e3
        return self.instances[key]


def dynamic_kernel_compiler(compile_kernel: KernelCompiler, deferred: list[DeferredKernel],
                            speculation: SpeculationOptions | None = None) -> KernelCompiler:
    """`compile_kernel` for the plan: a fusion with symbolic shapes compiled symbolically (with its
    speculated versions, runtime/speculation.py), or a DeferredKernel (appended to `deferred`)
    where the compiler cannot do that yet."""
    speculation = speculation or SpeculationOptions()

    def compile_dynamic(computation: HloComputation, name: str, noalias: bool) -> Any:
        variables = sorted(frozenset().union(*(i.shape.symbols for i in computation.instructions)))
        if not variables:
            return compile_kernel(computation, name, noalias)
        with size_hint(None):  # kernels must be right at every size: no guessing inside
            try:
                generic = SymbolicKernel(compile_kernel(computation, name, noalias))
            except _FALLBACK_ERRORS as e:
                reason = str(e)
            else:
                return _speculate(generic, computation, name, noalias, compile_kernel, speculation)
        kernel = DeferredKernel(name, computation, noalias, reason, compile_kernel, tuple(variables))
        deferred.append(kernel)
        return kernel
    return compile_dynamic


def _speculate(generic: SymbolicKernel, computation: HloComputation, name: str, noalias: bool,
               compile_kernel: KernelCompiler, options: SpeculationOptions) -> SymbolicKernel:
    """`generic` with the versions speculation plans for `computation` compiled before it (a
    version the compiler refuses is left out: the generic kernel covers its sizes)."""
    versions = plan_versions(computation, loop_vector_elements(computation), options)
    if len(versions) < 2:
        return generic
    compiled = []
    for version in versions[:-1]:
        try:
            fused = version.specialize(computation)
            compiled.append((version, compile_kernel(fused, f"{name}.{version.name}", noalias)))
        except _FALLBACK_ERRORS:
            continue
    if not compiled:
        return generic
    return replace(generic, versions=[*compiled, (versions[-1], generic.kernel)], forced=options.forced)


def speculated_kernels(template: SequentialThunk) -> list[tuple[str, SymbolicKernel]]:
    """(fusion, kernel) of each KernelThunk of `template` whose kernel has several versions."""
    return [(t.instr_name, t.kernel) for t in template.walk()
            if isinstance(t, KernelThunk) and isinstance(t.kernel, SymbolicKernel) and t.kernel.versions]


__all__ = ["BoundKernel", "DeferredKernel", "SymbolicKernel", "dynamic_kernel_compiler", "speculated_kernels"]
