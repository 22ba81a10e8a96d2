"""Speculation (BladeDISC's disc_specialize_fusion_with_speculation, issue 18): a fusion with
symbolic shapes compiled into several *versions*, each valid where a predicate over the dimension
variables holds, one of them chosen per binding on the host.

A version is the fused computation under an assumption written as a substitution of its
dimension variables, so the symbolic kernel compiler needs no flag for it: `n mod 16 == 0`
becomes `n := 16*n_16`, and the emitter then sees sizes that are multiples of the vector width
(the loop emitter's vectors never straddle a row, the accesses are aligned, and
vectorize-loads-stores turns them into vector loads, which it cannot prove for a bare `n`). The
generic kernel, valid everywhere, is always the last version.

    versions = plan_versions(computation, options)      # at build: which versions a fusion gets
    version.holds(binding); version.dims(binding, syms)   # at bind: the first that holds, its dims

Versions built (the others of BladeDISC's four are listed in docs/architecture.md "Speculation"):
- `vectorized`: each lone dimension variable that is the physical minor-most dimension of a loop
  fusion's output (of more than one row: the rows after the first start at `row * n`, which the
  generic kernel cannot prove aligned) is a multiple of the loop's vector width (the emitter's
  elements per thread).
- `column_tiled`: a column reduction (a reduce over the major dims, keeping the minor ones:
  x.sum(axis=0) over [?b, ?n]) compiled by the tiled column emitter
  (codegen/emitters/column_reduce.py: a block of columns per thread, rows read as vectors) where
  the columns fill a vector (`AtLeast`: `n >= 16` for f32). Not a substitution but a `marker` on
  the version's reduces, which picks that emitter (`KernelVersion.specialize`).
- `warp_rows` (the GPU's launch configuration, `SpeculationOptions(target="gpu")`: the cuda
  backend's plan): a stitch fusion whose rows are a warp's (a static row of up to
  stitch_gpu.WARP_ROW_ELEMENTS) over a runtime row count that is a lone variable `b` runs
  WARP_ROWS_PER_BLOCK rows per block where `b mod 8 == 0` (`b := 8*b_8`, so the rows per block
  divide the rows: no spare warp), one row per block of 32 threads elsewhere. The GPU target also
  gets `vectorized` at its own width (the loop emitter's 16 bytes per thread: `n mod 4 == 0` for
  f32, whose rows then start 16-byte aligned, so loads and stores are `ld.global.v4`), not
  `column_tiled` (the host's tiles).
- `block_row` (the GPU's row-reduction schedule, BladeDISC's "a block per row above 512 columns"):
  a GPU stitch fusion over a runtime row length `n` (softmax over [?b, ?n], a lone row reduction
  over one) runs a warp per row in the generic kernel (with `warp_rows` over its row count) and a
  block of 512 threads per row where `n >= 1025` (`AtLeast`; a marker, `STITCH_BLOCK_ROW_MARKER`,
  picks the form: codegen/emitters/stitch_gpu.py). 1024 is the static rows' threshold, measured on
  an H200 (a warp's row of 1024 elements twice as fast as a block's). Not `vectorized`: the GPU
  stitch form strides its rows element by element (coalesced across the warp).
- `stitched`, a version of the whole plan (`PlanVersion`, runtime/plan_speculation.py): a row
  reduction and its consumers over a symbolic row length as ONE stitch kernel where the row fits
  the on-chip budget (`RowFits`), the multi-kernel plan (`generic`) elsewhere. A plan is more than
  a substitution in one fusion (the fusions, buffers and thunks differ), so it is two plans of
  the dynamic program, one chosen per binding.

The predicates are evaluated once per binding, when the plan is bound (memoized per argument
dimensions with the rest of the bound plan), never per kernel launch. `SpeculationOptions`:
`mode` "on" (default), "off" (the generic kernel and plan only) or "force:<version>" (that version
wherever a fusion has it, whatever the predicate: for tests; a binding where the forced version's
assumption fails is an ArgumentError, not a wrong answer, and `block_row`, whose predicate is
about speed only, runs at every size; `force:stitched` runs the stitched plan
at every size, any other forced version the generic plan); `max_versions` bounds the versions per fusion,
generic included, so compile time stays linear in the fusions. The environment's
HLOCC_SPECULATION ("on", "off", "force:<version>", optionally ",max=<k>") sets the default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.symbolic import Dim, DimExpr, symbol

GENERIC = "generic"
STITCHED = "stitched"
COLUMN_TILED = "column_tiled"
WARP_ROWS = "warp_rows"
BLOCK_ROW = "block_row"
VERSION_NAMES = (GENERIC, "vectorized", COLUMN_TILED, STITCHED, WARP_ROWS, BLOCK_ROW)
TARGETS = ("cpu", "gpu")


@dataclass(frozen=True)
class Divisible:
    """`variable mod divisor == 0`; the version substitutes `variable := divisor * <variable>_<divisor>`."""

    variable: str
    divisor: int

    @property
    def quotient(self) -> str:
        return f"{self.variable}_{self.divisor}"

    def holds(self, binding: Mapping[str, int]) -> bool:
        return binding[self.variable] % self.divisor == 0

    def sizes(self, binding: Mapping[str, int]) -> str:
        return f"{self.variable}={binding[self.variable]}"

    def __str__(self) -> str:
        return f"{self.variable} mod {self.divisor} == 0"


@dataclass(frozen=True)
class AtLeast:
    """`size >= least` (`size` a size expression: a column count `n`, or `d*n`)."""

    size: DimExpr
    least: int

    def holds(self, binding: Mapping[str, int]) -> bool:
        return self.size.evaluate(binding) >= self.least

    def sizes(self, binding: Mapping[str, int]) -> str:
        return f"{self.size}={self.size.evaluate(binding)}"

    def __str__(self) -> str:
        return f"{self.size} >= {self.least}"


@dataclass(frozen=True)
class KernelVersion:
    """One version of a fusion's kernel: valid where every condition holds (the generic one has none).
    `marker`: a backend-config key put on the reduces of the version's computation, which picks its
    emitter (the tiled column reduction's `COLUMN_TILE_MARKER`); empty: the usual emitter."""

    name: str
    conditions: tuple[Divisible | AtLeast, ...] = ()
    marker: str = ""
    assumed: bool = True
    """Whether the kernel relies on its conditions (a substitution; the column tiles' one vector), or
    they choose speed only (`block_row`: right at every size): a forced version whose conditions
    fail at a binding is then still run, as `force:stitched` runs the stitched plan everywhere."""

    @property
    def predicate(self) -> str:
        return " and ".join(map(str, self.conditions)) or "true"

    def substitution(self) -> dict[str, Dim]:
        return {c.variable: c.divisor * symbol(c.quotient) for c in self.conditions if isinstance(c, Divisible)}

    def specialize(self, computation: HloComputation) -> HloComputation:
        """The fused computation this version compiles: its substitution, and its marker."""
        from hlocc.hlo.attributes import RawAttr
        from hlocc.hlo.specialize import specialize_computation

        fused = specialize_computation(computation, self.substitution())
        if self.marker:
            for instr in fused.instructions:
                if instr.opcode == "reduce":  # (beside the stitch pass's own marker, if any)
                    config = str(instr.attrs.get("backend_config") or "").strip()
                    keep = config[1:-1].strip() if config.startswith("{") and config.endswith("}") else ""
                    instr.attrs["backend_config"] = RawAttr(f'{{{keep + "," if keep else ""}"{self.marker}":{{}}}}')
        return fused

    def holds(self, binding: Mapping[str, int]) -> bool:
        return all(c.holds(binding) for c in self.conditions)

    def dims(self, binding: Mapping[str, int], symbols: Sequence[str]) -> tuple[int, ...]:
        """The values of the version kernel's `symbols` at `binding` (a quotient variable's is the
        original variable's over its divisor)."""
        values = dict(binding)
        for c in self.conditions:
            if isinstance(c, Divisible):
                values[c.quotient] = binding[c.variable] // c.divisor
        return tuple(values[s] for s in symbols)

    def __str__(self) -> str:
        return f"{self.name} if {self.predicate}"


@dataclass(frozen=True)
class SpeculationOptions:
    """Module doc: which versions the plan builds and how it picks one."""

    mode: str = "on"
    max_versions: int = 4
    target: str = "cpu"  # whose versions: the host's, or the GPU's launch configuration (module doc)

    def __post_init__(self):
        if self.target not in TARGETS:
            raise UnsupportedError(f"speculation target '{self.target}': choose {' or '.join(TARGETS)}")
        if self.mode not in ("on", "off") and not (self.mode.startswith("force:")
                                                    and self.mode[len("force:"):] in VERSION_NAMES):
            raise UnsupportedError(f"speculation '{self.mode}': choose on, off or force:<version> with a version "
                                   f"of {', '.join(VERSION_NAMES)}")
        if self.max_versions < 1:
            raise UnsupportedError(f"speculation max_versions={self.max_versions}: at least 1 (the generic kernel)")

    @property
    def forced(self) -> str | None:
        return self.mode[len("force:"):] if self.mode.startswith("force:") else None

    @staticmethod
    def from_env() -> SpeculationOptions:
        """HLOCC_SPECULATION: "on" | "off" | "force:<version>", then optionally ",max=<k>"."""
        text = os.environ.get("HLOCC_SPECULATION", "").strip()
        if not text:
            return SpeculationOptions()
        mode, _, rest = text.partition(",")
        if rest and not (rest.startswith("max=") and rest[4:].isdigit()):
            raise UnsupportedError(f"HLOCC_SPECULATION='{text}': expected <mode>[,max=<k>]")
        return SpeculationOptions(mode or "on", int(rest[4:]) if rest else 4)


def loop_vector_elements(computation: HloComputation, target: str = "cpu") -> int:
    """The elements per thread of the symbolic loop kernel of `computation` on the host (the loop
    emitter's choice: a vector register, one element for a fusion with a reduce), the elements of a
    stitch kernel's row vector where its row length is symbolic, 1 for other emitters; with
    `target="gpu"` the GPU form's (16 bytes a thread)."""
    from hlocc.codegen.emitters.loop import LoopEmitter
    from hlocc.codegen.emitters.registry import emitter_for
    from hlocc.codegen.emitters.stitch import StitchEmitter
    from hlocc.codegen.target import cpu_target, gpu_target

    try:
        emitter = emitter_for(computation, gpu_target() if target == "gpu" else cpu_target())
    except UnsupportedError:
        return 1
    if isinstance(emitter, StitchEmitter):  # a runtime row length: its vectors' elements (the CPU form's)
        return emitter.vector_elements() if isinstance(emitter.plan.row_length, DimExpr) and not emitter.gpu else 1
    return emitter.launch()[1] if isinstance(emitter, LoopEmitter) else 1


def plan_versions(computation: HloComputation, vector_elements: int, options: SpeculationOptions
                  ) -> list[KernelVersion]:
    """The versions `computation` gets, the generic one last (module doc). `vector_elements`: the
    elements per thread of its loop (1: nothing to vectorize, no speculation)."""
    generic = KernelVersion(GENERIC)
    if options.mode == "off" or options.max_versions < 2:
        return [generic]
    if options.target == "gpu":
        versions = [v for v in (block_row_version(computation), warp_rows_version(computation)) if v is not None]
        if versions:
            return [*versions[:options.max_versions - 1], generic]
        vector_elements = loop_vector_elements(computation, "gpu")
        column = None
    else:
        column = column_tile_version(computation)
    if column is not None or vector_elements < 2:
        return [*([column] if column else []), generic]
    names = set().union(*(i.shape.symbols for i in computation.instructions))
    conditions = []
    for leaf in computation.root.shape.leaves():
        if not getattr(leaf, "is_array", False) or not leaf.rank:
            continue
        axis = leaf.minor_to_major[0] if leaf.minor_to_major else leaf.rank - 1
        minor = leaf.dims[axis]
        if all(d == 1 for k, d in enumerate(leaf.dims) if k != axis):
            continue  # one row: its vectors start aligned already, a version would only drop the tail
        if isinstance(minor, DimExpr) and len(minor.variables) == 1 and minor == symbol(next(iter(minor.variables))):
            c = Divisible(next(iter(minor.variables)), vector_elements)
            if c.quotient not in names and c not in conditions:
                conditions.append(c)
    versions = [KernelVersion("vectorized", tuple(conditions))] if conditions else []
    return [*versions[:options.max_versions - 1], generic]


def column_tile_version(computation: HloComputation) -> KernelVersion | None:
    """`column_tiled if <columns> >= <lanes>` for a column reduction over symbolic sizes
    (codegen/emitters/column_reduce.py: a block of columns per thread, rows read contiguously, the
    last chunk's vectors ending at the row's end, which needs a row of one vector at least)."""
    from hlocc.codegen.emitters.column_reduce import COLUMN_TILE_MARKER, column_lanes, column_plan
    from hlocc.codegen.target import cpu_target

    plan = column_plan(computation)
    if plan is None:
        return None
    lanes = column_lanes(plan, cpu_target().vector_bytes)
    if not isinstance(plan.columns, DimExpr):
        return KernelVersion(COLUMN_TILED, (), COLUMN_TILE_MARKER) if plan.columns >= lanes else None
    return KernelVersion(COLUMN_TILED, (AtLeast(plan.columns, lanes),), COLUMN_TILE_MARKER)


def warp_rows_version(computation: HloComputation) -> KernelVersion | None:
    """`warp_rows if b mod 8 == 0` for a GPU stitch fusion whose rows are a warp's and whose row
    count is the lone variable `b` (module doc; codegen/emitters/stitch_gpu.py `gpu_tiling` takes
    the most rows per block that divide the row count at every size)."""
    from hlocc.analysis.stitch_info import marked_stitch_plan
    from hlocc.codegen.emitters.stitch_gpu import WARP_ROW_ELEMENTS, WARP_ROWS_PER_BLOCK

    plan = marked_stitch_plan(computation)
    if plan is None:
        return None
    rows = plan.rows
    # (a runtime row length is a warp's in the generic kernel: `block_row` takes the long ones)
    long_rows = not isinstance(plan.row_length, DimExpr) and plan.row_length > WARP_ROW_ELEMENTS
    if long_rows or not isinstance(rows, DimExpr):
        return None
    if len(rows.variables) != 1 or rows != symbol(next(iter(rows.variables))):
        return None
    condition = Divisible(next(iter(rows.variables)), WARP_ROWS_PER_BLOCK)
    names = set().union(*(i.shape.symbols for i in computation.instructions))
    return KernelVersion(WARP_ROWS, (condition,)) if condition.quotient not in names else None


def block_row_version(computation: HloComputation) -> KernelVersion | None:
    """`block_row if n >= 1025` for a GPU stitch fusion over a runtime row length `n` (module doc;
    codegen/emitters/stitch_gpu.py: a warp per row in the generic kernel, a block per row in this
    version)."""
    from hlocc.analysis.stitch_info import marked_stitch_plan
    from hlocc.codegen.emitters.stitch_gpu import STITCH_BLOCK_ROW_MARKER, WARP_ROW_ELEMENTS

    plan = marked_stitch_plan(computation)
    if plan is None or not isinstance(plan.row_length, DimExpr):
        return None
    return KernelVersion(BLOCK_ROW, (AtLeast(plan.row_length, WARP_ROW_ELEMENTS + 1),), STITCH_BLOCK_ROW_MARKER,
                         assumed=False)


@dataclass(frozen=True)
class RowFits:
    """`least <= row <= most`: a stitch kernel over the symbolic row length `row` keeps its rows on
    chip at this binding (cost_model.stitch_row_range of its element type and live rows). A
    performance predicate: the stitched kernel is right at every length."""

    row: DimExpr
    least: int
    most: int

    def holds(self, binding: Mapping[str, int]) -> bool:
        return self.least <= self.row.evaluate(binding) <= self.most

    def __str__(self) -> str:
        return f"{self.least} <= {self.row} <= {self.most}"


@dataclass(frozen=True)
class PlanVersion:
    """A version of a whole dynamic program's plan (runtime/plan_speculation.py): `stitched`, the
    plan whose stitch fusions over a symbolic row length are one kernel each, valid where every
    condition holds; `generic`, the multi-kernel plan (no condition)."""

    name: str
    conditions: tuple[RowFits, ...] = ()

    @property
    def predicate(self) -> str:
        return " and ".join(map(str, self.conditions)) or "true"

    def holds(self, binding: Mapping[str, int]) -> bool:
        return all(c.holds(binding) for c in self.conditions)

    def __str__(self) -> str:
        return f"{self.name} if {self.predicate}"


def choose_plan(versions: Sequence[PlanVersion], binding: Mapping[str, int], forced: str | None) -> int:
    """The index of the plan version a binding runs: under `force:stitched` the stitched plan, under
    any other forced version the generic plan (where the kernel versions are), else the first whose
    predicate holds (the stitched plan's predicate is about speed only: it is right everywhere)."""
    if forced is not None:
        want = STITCHED if forced == STITCHED else GENERIC
        return next((k for k, v in enumerate(versions) if v.name == want), len(versions) - 1)
    return next(k for k, v in enumerate(versions) if v.holds(binding))


def choose_version(versions: Sequence[KernelVersion], binding: Mapping[str, int], forced: str | None,
                   where: str) -> int:
    """The index of the version a binding runs: the forced one where the fusion has it (an
    ArgumentError if its assumption fails at `binding`), else the first whose predicate holds."""
    if forced is not None:
        for k, v in enumerate(versions):
            if v.name == forced:
                if v.assumed and not v.holds(binding):
                    sizes = ", ".join(c.sizes(binding) for c in v.conditions)
                    raise ArgumentError(f"{where}: speculation forces version '{forced}' but its predicate "
                                        f"{v.predicate} fails at {sizes}")
                return k
    return next(k for k, v in enumerate(versions) if v.holds(binding))


__all__ = ["BLOCK_ROW", "COLUMN_TILED", "GENERIC", "STITCHED", "VERSION_NAMES", "WARP_ROWS", "AtLeast", "Divisible",
           "KernelVersion", "PlanVersion", "RowFits", "SpeculationOptions", "block_row_version", "choose_plan",
           "choose_version", "column_tile_version", "loop_vector_elements", "plan_versions", "warp_rows_version"]
