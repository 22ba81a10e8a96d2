"""Plan-level speculation (issue 18 items 1 and 2; BladeDISC chooses between a stitch schedule and
the multi-kernel one by the row's size): a module whose row reductions run over a symbolic row
length gets two plans of its dynamic program, and each binding runs one of them.

    build_speculated_program(module, compile_kernel, ...)
      plan `stitched`: the backend's pipeline with `stitch_fusion.speculative_rows()`: a softmax,
        layernorm or RMSnorm over [b, n] is ONE stitch kernel (codegen/emitters/stitch.py over a
        runtime row length)
      plan `generic`: the same module (a copy taken before the passes) without it: the
        multi-kernel plan, with its kernel versions (runtime/speculation.py `vectorized`)
    per new binding (memoized with the rest of the bound plan, as kernel versions are): the
      stitched plan where every stitched row fits the on-chip budget, `RowFits`: n within
      cost_model.stitch_row_range (at least `stitch_min_row`, at most half of L2 over the live
      rows), else the generic plan

The predicate is about speed, not correctness: the stitched kernel is right at every row length
(n = 0 and 1 included), which the tests check by forcing it (`force:stitched`). The program
returned is the stitched plan's DynamicProgram with `versions` set; `DynamicProgram._calls` asks
`PlanVersions.calls` which plan a new binding takes. Steady calls of a bound size pay nothing more
than a counter of the calls per version (`--stats`).

Modes (SpeculationOptions): "on" builds both plans; "off" and a forced kernel version
(`force:generic`, `force:vectorized`) build the generic plan only, as before; `force:stitched`
builds the stitched plan only and runs it at every size. A module without a row reduction over a
symbolic row length builds one plan, as before. A module with a dot or a convolution builds the
stitched plan only, under "on" too, and runs it at every size (`worth_two_plans`): its products
dominate the steady time, so the generic plan's gain on rows outside the budget is small, while
building it costs a second compile of the module (benchmarks/dynamic.py's transformer block, d=256,
one run: 2.6 s cold with the stitched plan alone, 3.2 s with both, and the steady time the same:
6.9 against 6.7 ms at s = 511, 8.6 ms unstitched).
"""

from __future__ import annotations

import copy
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hlocc.analysis.cost_model import stitch_row_range
from hlocc.analysis.stitch_info import marked_stitch_plan
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloModule
from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError, symbol
from hlocc.passes.stitch_fusion import row_inputs, speculative_rows
from hlocc.runtime.dynamic_program import DynamicProgram, build_dynamic_program
from hlocc.runtime.executable import KernelCompiler
from hlocc.runtime.speculation import GENERIC, STITCHED, PlanVersion, RowFits, SpeculationOptions, choose_plan


class _CountedCalls:
    """A binding's calls (CallPlan or BoundCall) that count their runs in `counts[version]`."""

    def __init__(self, calls: Any, counts: dict[str, int], version: str):
        self.calls, self._counts, self._version = calls, counts, version

    def run(self, args):
        counts = self._counts
        counts[self._version] = counts.get(self._version, 0) + 1  # (a reader may have cleared them)
        return self.calls.run(args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.calls, name)


@dataclass
class PlanVersions:
    """The plan versions of a dynamic program (module doc): `(version, program)` pairs in the order
    they are tried, `None` standing for the program that holds this object (the stitched plan)."""

    versions: list[tuple[PlanVersion, DynamicProgram | None]]
    forced: str | None = None
    calls: dict[str, int] = field(default_factory=dict)  # calls per version name
    sizes: dict[str, int] = field(default_factory=dict)  # bindings per version name

    def bound_calls(self, owner: DynamicProgram, arg_dims: tuple):
        """The calls at `arg_dims` of the version whose predicate holds at their binding."""
        values = owner.shape_function(arg_dims)
        index = owner.sizes.index
        binding = {name: values[index[symbol(name)]] for name in owner.shape_function.variables}
        version, program = self.versions[choose_plan([v for v, _ in self.versions], binding, self.forced)]
        bound = (program or owner)._calls(arg_dims, own=True)
        self.sizes[version.name] = self.sizes.get(version.name, 0) + 1
        self.calls.setdefault(version.name, 0)
        return replace(bound, calls=_CountedCalls(bound.calls, self.calls, version.name))

    def others(self) -> list[DynamicProgram]:
        return [p for _, p in self.versions if p is not None]

    def lines(self) -> list[str]:
        """One line per version: its predicate, the sizes bound to it and the calls it ran."""
        return [f"plan: version {v.name} if {v.predicate}: {self.sizes.get(v.name, 0)} size(s), "
                f"{self.calls.get(v.name, 0)} call(s)" for v, _ in self.versions]

    def describe(self) -> list[str]:
        """Every other version's thunks, after a `plan version` line (the owner prints its own)."""
        out = []
        for v, program in self.versions:
            if program is not None:
                out += [f"// plan version {v}:", *program.template.describe()]
        return out


def row_fits(computation: HloComputation) -> RowFits | None:
    """The `RowFits` predicate of a stitch fusion's computation over a symbolic row length (its live
    rows: its row-shaped parameters), None for any other computation."""
    plan = marked_stitch_plan(computation)
    if plan is None or not isinstance(plan.row_length, DimExpr):
        return None
    least, most = stitch_row_range(plan.row_shape.element_type, row_inputs(plan, computation.parameters))
    return RowFits(plan.row_length, least, most)


def stitch_conditions(module: HloModule) -> tuple[RowFits, ...]:
    """`RowFits` of every stitch fusion of `module` over a symbolic row length (none: nothing was
    stitched speculatively)."""
    out: list[RowFits] = []
    for instr in module.all_instructions():
        fits = row_fits(instr.fused_computation) if instr.opcode == "fusion" else None
        if fits is not None and fits not in out:
            out.append(fits)
    return tuple(out)


def reduces_symbolic_rows(module: HloModule) -> bool:
    """Whether some reduce of `module` reduces a dimension of symbolic size (a stitch candidate)."""
    return any(i.opcode == "reduce" and any(isinstance(i.operand(0).shape.dims[d], DimExpr)
                                            for d in i.attrs["dimensions"])
               for i in module.all_instructions() if i.operands and i.operand(0).shape.is_array)


def worth_two_plans(module: HloModule) -> bool:
    """Whether "on" builds the generic plan beside the stitched one: the row reductions are the
    program's work, no dot or convolution beside them (module doc)."""
    return not any(i.opcode in ("dot", "convolution") for i in module.all_instructions())


def copy_module(module: HloModule) -> HloModule:
    """A structurally equal copy, with the guards and shape facts: a deep copy (the printer's round
    trip took 5.2 s on a transformer block whose weights are constants: 786K literal elements
    formatted and parsed back, against 7 ms). `deepcopy` recurses along operand chains: a deep
    module (GPT-2's) is copied on a thread of its own with a stack to match."""
    try:
        return copy.deepcopy(module)
    except RecursionError:
        return _on_a_deep_stack(copy.deepcopy, module)


def _on_a_deep_stack(fn: Callable[[Any], Any], arg: Any) -> Any:
    """`fn(arg)` on a thread with a 1 GiB stack (virtual: only the pages used are committed) and a
    recursion limit to match; its exception is raised here."""
    outcome: list[tuple[bool, Any]] = []

    def run() -> None:
        try:
            outcome.append((True, fn(arg)))
        except BaseException as e:  # noqa: BLE001 (handed to the caller's thread)
            outcome.append((False, e))

    limit, size = sys.getrecursionlimit(), threading.stack_size()
    sys.setrecursionlimit(max(limit, 200_000))
    threading.stack_size(1 << 30)
    try:
        worker = threading.Thread(target=run, name="hlocc-copy-module")
        worker.start()
        worker.join()
    finally:
        threading.stack_size(size)
        sys.setrecursionlimit(limit)
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


def build_speculated_program(module: HloModule, compile_kernel: KernelCompiler, *,
                             speculation: SpeculationOptions | None = None, times: dict[str, float] | None = None,
                             **kwargs: Any) -> DynamicProgram:
    """`build_dynamic_program(module, compile_kernel, **kwargs)`, with the stitched and generic plan
    versions where they apply (module doc)."""
    options = speculation or SpeculationOptions.from_env()
    times = times if times is not None else {}
    if options.mode == "off" or options.forced not in (None, STITCHED) or not reduces_symbolic_rows(module):
        return build_dynamic_program(module, compile_kernel, speculation=options, times=times, **kwargs)
    pristine = copy_module(module) if options.forced is None else None
    try:
        with speculative_rows():
            stitched = build_dynamic_program(module, compile_kernel, speculation=options, times=times, **kwargs)
    except (UnsupportedError, InconclusiveDimensionError):
        if pristine is None:
            raise
        # (the speculative stitch must never cost a module its plan: the generic one, as before)
        return build_dynamic_program(pristine, compile_kernel, speculation=options, times=times, **kwargs)
    conditions = stitch_conditions(stitched.module)
    if not conditions:
        return stitched
    versions: list[tuple[PlanVersion, DynamicProgram | None]] = [(PlanVersion(STITCHED, conditions), None)]
    two_plans = pristine is not None and worth_two_plans(module)
    if two_plans:
        t0 = time.perf_counter()
        generic = build_dynamic_program(pristine, compile_kernel, speculation=options, **kwargs)
        times["generic-plan"] = (time.perf_counter() - t0) * 1e3
        versions.append((PlanVersion(GENERIC), generic))
        stitched.symbolic_kernels += generic.symbolic_kernels
    stitched.versions = PlanVersions(versions, None if two_plans else STITCHED)
    return stitched


__all__ = ["PlanVersions", "build_speculated_program", "copy_module", "reduces_symbolic_rows", "row_fits",
           "stitch_conditions", "worth_two_plans"]
