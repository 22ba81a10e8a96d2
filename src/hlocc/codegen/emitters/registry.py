"""Which emitter generates a fusion's kernel (XLA's GetFusionEmitter).

Hero analysis (`analysis.hero`) names the emitter kind of a fused computation; `EMITTERS` maps each
kind to its emitter class, and `emitter_for` instantiates it. A
kind whose emitter hlocc does not have (custom fusions) gets the loop emitter, which
computes any elementwise or index op and raises `UnsupportedError` for the rest; the runtime then
falls back to the host and says why. A fusion whose root is a sort, a topk or a custom-call "TopK"
gets the sort emitter (`sort.py`; CPU only: elsewhere it raises UnsupportedError and the runtime
keeps the library call).

On the cpu target a fusion whose root is a cumulative reduce-window (a cumsum) gets the scan
emitter (`reduce_window_scan.py`), which XLA has no kind for (it rewrites such windows in HLO).

The choice uses only the computation: whether a dynamic-update-slice can run in place depends on
buffers, which the emitter cannot see, so the in-place emitter declares the output as aliasing
its operand (`KernelModule.output_aliases`) and the runtime makes that true.
"""

from __future__ import annotations

import time

from hlocc.analysis.hero import EmitterKind, computation_emitter_kind
from hlocc.codegen.elemental.storage import array_leaves
from hlocc.codegen.emitters.base import fusion_symbols
from hlocc.codegen.emitters.column_reduce import ColumnReduceEmitter, is_column_tile_marked
from hlocc.codegen.emitters.concatenate import ConcatenateEmitter
from hlocc.codegen.emitters.dynamic_update_slice import InPlaceDynamicUpdateSliceEmitter
from hlocc.codegen.emitters.input_slices import InputSlicesEmitter
from hlocc.codegen.emitters.loop import LoopEmitter
from hlocc.codegen.emitters.matmul import MatmulEmitter
from hlocc.codegen.emitters.reduce_window_scan import ReduceWindowScanEmitter, is_scan_fusion
from hlocc.codegen.emitters.reduction import ReductionEmitter
from hlocc.codegen.emitters.scatter import ScatterEmitter
from hlocc.codegen.emitters.sort import SortEmitter, is_sort_fusion
from hlocc.codegen.emitters.stitch import StitchEmitter
from hlocc.codegen.emitters.transpose import TransposeEmitter
from hlocc.codegen.target import Target
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.symbolic import InconclusiveDimensionError

EMITTERS: dict[EmitterKind, type] = {
    EmitterKind.LOOP: LoopEmitter,
    EmitterKind.REDUCTION: ReductionEmitter,
    EmitterKind.TRANSPOSE: TransposeEmitter,
    EmitterKind.IN_PLACE_DYNAMIC_UPDATE_SLICE: InPlaceDynamicUpdateSliceEmitter,
    EmitterKind.SCATTER: ScatterEmitter,
    EmitterKind.CONCATENATE: ConcatenateEmitter,
    EmitterKind.INPUT_SLICES: InputSlicesEmitter,
    EmitterKind.GEMM: MatmulEmitter,
    EmitterKind.STITCH: StitchEmitter,
}
"""The emitter class of each kind hlocc has an emitter for."""


def emitter_for(fusion: HloComputation, target: Target, name: str = "main", kind: EmitterKind | None = None):
    """The emitter for `fusion` (hero analysis's kind unless `kind` is given) on `target`. A fusion
    with symbolic shapes gets its hero's emitter where that one compiles symbolic shapes (its
    `symbolic_ops`), else the loop emitter (reductions computed elementally, a row per thread with
    vector partials); the emitter names what it cannot compile. A speculated tiled column reduction
    (its reduces marked, runtime/speculation.py) gets the column emitter."""
    if kind is None and is_sort_fusion(fusion):
        return SortEmitter(fusion, target, name)  # sort, topk, custom-call TopK (CPU; elsewhere the library)
    if kind is None and is_column_tile_marked(fusion):
        return ColumnReduceEmitter(fusion, target, name)
    if kind is None and target.kind == "cpu" and is_scan_fusion(fusion):
        return ReduceWindowScanEmitter(fusion, target, name)  # a cumulative window: a scan, not a kind of XLA's
    if kind is None and fusion_symbols(fusion):
        try:
            kind = computation_emitter_kind(fusion)
        except InconclusiveDimensionError:  # a size-based choice that symbolic sizes do not decide
            kind = EmitterKind.LOOP
        if not getattr(EMITTERS.get(kind), "symbolic_ops", None):
            kind = EmitterKind.LOOP
    kind = kind or computation_emitter_kind(fusion)
    cls = EMITTERS.get(kind) or EMITTERS[EmitterKind.LOOP]
    return cls(fusion, target, name)


def emit_fusion(fusion: HloComputation, target: Target, name: str, times: dict[str, float]):
    """The kernel module the chosen emitter generates for `fusion` (its milliseconds in
    `times["emit"]`), or None when every output is empty: no output element means no thread and
    nothing to emit (nor a grid map over a size-0 dimension). An empty output beside non-empty
    ones is the emitter's to reject. What every backend compiles from."""
    if all(leaf.num_elements == 0 for leaf in array_leaves(fusion.root.shape)):
        return None
    t0 = time.perf_counter()
    kernel = emitter_for(fusion, target, name).emit()
    times["emit"] = (time.perf_counter() - t0) * 1e3
    return kernel


__all__ = ["EMITTERS", "emit_fusion", "emitter_for"]
