"""Cumulative reduce-windows: JAX's cumsum, cumprod and cummax along one axis, a window as long as
the axis padded by its length - 1 before it (after it for a reverse scan).

The CPU's scan emitter (codegen/emitters/reduce_window_scan.py) computes such a window with one
running accumulator per output line, O(n) a line, where it is its fusion's root. Anywhere else (an
operand read elementwise by a consumer's fusion, or one output of a multi-output loop fusion) it is
the elemental reduce-window, which folds a whole window for every element: O(n^2) a line. The
fusion passes therefore keep a scan the root of its own fusion (`produces_scan`; passes/fusible.py
and passes/priority_fusion.py), where its producers may still fuse into it.
"""

from __future__ import annotations

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError


def scan_axis(instr: HloInstruction, exclusive: bool = False) -> tuple[int, bool] | None:
    """(axis, reverse) where `instr` is a cumulative reduce-window of one input along one axis (a
    window of the whole axis padded by its length - 1 on one side, stride and dilations 1, no
    window reversal, every other dimension a window of 1 unpadded), else None. `exclusive`: padded
    by the whole length instead (one more output, the init first: an exclusive scan)."""
    if instr.opcode != "reduce-window" or len(instr.operands) != 2:
        return None
    dims = instr.operand(0).shape.dims
    found = None
    try:
        for d, (w, n) in enumerate(zip(instr.attrs.get("window", ()), dims)):
            if (w.stride, w.lhs_dilate, w.rhs_dilate, w.reversal) != (1, 1, 1, False):
                return None
            if _same(w.size, 1) and _same(w.pad_lo, 0) and _same(w.pad_hi, 0):
                continue
            if found is not None or not _same(w.size, n):
                return None
            pad = n if exclusive else n - 1
            if _same(w.pad_lo, pad) and _same(w.pad_hi, 0):
                found = (d, False)
            elif _same(w.pad_lo, 0) and _same(w.pad_hi, pad):
                found = (d, True)
            else:
                return None
    except InconclusiveDimensionError:
        return None
    return found


def _same(a, b) -> bool:
    if isinstance(a, DimExpr) or isinstance(b, DimExpr):
        return (a - b) == 0
    return a == b


def rounds_scan(convert: HloInstruction, scan: HloInstruction) -> bool:
    """Whether `convert` is the rounding epilogue the scan emitter takes after the scan `scan`: a
    convert of the same dims and layout, the scan's only user (widen-narrow-reductions accumulates
    a bf16/f16 scan in f32 and rounds each result back)."""
    return (convert.opcode == "convert" and len(scan.users) == 1
            and tuple(scan.shape.dims) == tuple(convert.shape.dims)
            and tuple(scan.shape.minor_to_major) == tuple(convert.shape.minor_to_major))


BASE_LENGTH = 16
"""XLA:CPU's scan base length: passes/reduce_window_rewriter.py splits a longer float sum or product
scan into scans of at most this length (XLA's ReduceWindowRewriter(16))."""

ORDERED_COMBINERS = ("add", "multiply")
"""Float combiners whose result depends on the order of the fold."""


def scan_window(root: HloInstruction) -> tuple[HloInstruction, HloInstruction | None] | None:
    """(the cumulative reduce-window, its rounding convert or None) where `root` (a fusion's root)
    is a scan the scan emitter computes: the window itself, or `rounds_scan` of it; else None.

    Not a reverse float sum or product of a static axis at most BASE_LENGTH long: the running
    accumulator of a reverse scan folds from the end of the axis, while each window folds from its
    start (XLA's elemental reduce-window, and the blocks of XLA's two-level scan), which rounds
    differently; at that length the elemental window's O(n^2) is cheap and gives XLA's bits."""
    window, epilogue = root, None
    if root.opcode == "convert" and rounds_scan(root, root.operand(0)):
        window, epilogue = root.operand(0), root
    found = scan_axis(window)
    if found is None or found[1] and _order_matters(window) and _static_at_most(window, found[0], BASE_LENGTH):
        return None
    return window, epilogue


def _order_matters(window: HloInstruction) -> bool:
    et = window.shape.element_type
    return window.to_apply.root.opcode in ORDERED_COMBINERS and et.is_float


def _static_at_most(window: HloInstruction, axis: int, length: int) -> bool:
    n = window.operand(0).shape.dims[axis]
    return not isinstance(n, DimExpr) and n <= length


def takes_scan(scan: HloInstruction, consumer: HloInstruction) -> bool:
    """Whether `consumer` with the scan `scan` fused into it is still a fusion the scan emitter
    computes: its rounding convert alone (`rounds_scan`)."""
    root = consumer.attrs["calls"].root if consumer.opcode == "fusion" else consumer
    if len(consumer.operands) != 1 or consumer.opcode == "fusion" and root.operand(0).opcode != "parameter":
        return False
    return rounds_scan(root, scan)


def produces_scan(instr: HloInstruction) -> bool:
    """`instr` is a cumulative reduce-window, or a fusion the scan emitter computes (its root a scan
    or a scan's rounding convert: `scan_window`) (module doc)."""
    if instr.opcode == "fusion":
        return scan_window(instr.attrs["calls"].root) is not None
    return instr.opcode == "reduce-window" and scan_window(instr) is not None
