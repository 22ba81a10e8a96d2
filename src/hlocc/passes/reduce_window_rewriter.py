"""`reduce-window-rewriter`: a long cumulative float sum or product (JAX's cumsum and cumprod, a
reduce-window as long as its axis) computed as XLA's CPU compiler computes it, by XLA's
ReduceWindowRewriter (xla/hlo/transforms/simplifiers/reduce_window_rewriter.cc, base length 16 in
XLA:CPU's pipeline): a two-level scan, applied again to its own second level until every scan is
at most 16 long.

    y = f32[n] reduce-window(x, 0), window={size=n pad=(n-1)_0}, to_apply=add        (n > 16)
      →  t = f32[C,16] reshape(pad(x, 0) to K = 16*C)                       C = ceil(n / 16)
         inner = f32[C,16] reduce-window(t, 0), window={size=1x16 pad=0_0x15_0}   (a scan per block)
         totals = f32[C] reshape(slice(inner, [0:C], [15:16]))                     (each block's sum)
         before = f32[C] slice(reduce-window(totals, 0), window={size=C pad=C_0}, [0:C])  (exclusive)
         y = f32[n] slice(reshape(add(inner, broadcast(before))), [0:n])

Each output is its block's running sum plus the sum of the blocks before it, so a sum of 65,537
f32 values is ~20x closer to the exact one than the running sum of one accumulator, and the
results are XLA:CPU's bit for bit (the order of the additions is XLA's). A reverse scan (padding
after) scans each block from its end and the blocks after it; an exclusive scan (padding n, one
more output) is the inclusive one with the init value in front (behind, reversed).

Only float `add` and `multiply` scans are rewritten: integer sums and products wrap
associatively, and maximum/minimum (and, or, xor) are exact in any order, so the one running
accumulator of the scan emitter (codegen/emitters/reduce_window_scan.py) gives XLA's results
there, faster. The init value must be the combiner's identity (0 for a sum, 1 for a product;
XLA's rewrite folds it into both levels, which would change any other): JAX's scans have it.
A symbolic axis is left alone (XLA, too, keeps a dynamic scan dimension as one window): its
blocks would nest to a depth that depends on the size.

Part of both backends' prologue (passes/pipeline.py), before `widen-narrow-reductions`: the
numbers must not depend on whether the optimization passes run.
"""

from __future__ import annotations

from hlocc.analysis.scan import BASE_LENGTH, ORDERED_COMBINERS, scan_axis
from hlocc.evaluator.reduction import fast_combiner
from hlocc.hlo.attributes import PadDim, SliceDim, WindowDim
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass

IDENTITIES = {"add": 0.0, "multiply": 1.0}
"""The identity of each of ORDERED_COMBINERS: the only init the rewrite takes (module doc)."""


def rewritable_scan(instr: HloInstruction, base_length: int = BASE_LENGTH) -> tuple[int, bool, bool] | None:
    """(axis, reverse, exclusive) where `instr` is a float add/multiply scan that the rewrite takes
    (module doc): a reduce-window of one input whose one non-trivial window dimension is as long
    as the axis (`n`), padded by n - 1 (inclusive) or n (exclusive) on one side, n > base_length,
    its init the combiner's identity; else None."""
    if instr.opcode != "reduce-window" or len(instr.operands) != 2 or not instr.shape.is_array:
        return None
    if not instr.shape.element_type.is_float or instr.shape.element_type.is_complex:
        return None
    combiner = fast_combiner(instr.to_apply)
    if combiner not in ORDERED_COMBINERS or _scalar_constant(instr.operand(1)) != IDENTITIES[combiner]:
        return None
    found = _scan_dim(instr)
    if found is None or instr.operand(0).shape.dims[found[0]] <= base_length:
        return None
    return found


def _scalar_constant(init: HloInstruction) -> float | None:
    """The value of a scalar init that is a constant, through the scalar broadcasts, reshapes and
    copies around it (StableHLO's import keeps JAX's `broadcast_in_dim` of a constant)."""
    while init.opcode in ("broadcast", "reshape", "copy"):
        init = init.operand(0)
    if init.opcode != "constant" or init.literal is None or getattr(init.literal, "size", 0) != 1:
        return None
    return float(init.literal.reshape(()))


def _scan_dim(instr: HloInstruction) -> tuple[int, bool, bool] | None:
    """(axis, reverse, exclusive) of a cumulative window over a static axis (`scan_axis`)."""
    if instr.operand(0).shape.is_symbolic:
        return None
    for exclusive in (False, True):
        found = scan_axis(instr, exclusive)
        if found is not None:
            return (*found, exclusive)
    return None


@register_hlo_pass
class ReduceWindowRewriter(HloPass):
    """The rewrite in the module doc, in every computation, to a fixed point (the exclusive scan
    over the block sums is itself rewritten while it is longer than the base length)."""

    name = "reduce-window-rewriter"
    base_length = BASE_LENGTH

    def run(self, module: HloModule) -> bool:
        changed = False
        for comp in list(module.computations):
            work = [i for i in comp.instructions if rewritable_scan(i, self.base_length)]
            while work:
                instr = work.pop()
                work.extend(self._rewrite(comp, instr))
                changed = True
        return changed

    def _rewrite(self, comp: HloComputation, instr: HloInstruction) -> list[HloInstruction]:
        """Replace the scan `instr`; returns the new scans that are still rewritable."""
        axis, reverse, exclusive = rewritable_scan(instr, self.base_length)
        x, init = instr.operands
        base, et = self.base_length, instr.shape.element_type
        rank, last = x.shape.rank, x.shape.rank - 1
        perm = list(range(rank))
        perm[axis], perm[last] = last, axis
        if axis != last:
            x = comp.add("transpose", [x], {"dimensions": tuple(perm)})
        n = x.shape.dims[last]
        columns = -(-n // base)
        if columns * base != n:
            pads = tuple(PadDim(0, columns * base - n if d == last else 0) for d in range(rank))
            x = comp.add("pad", [x, init], {"padding": pads})
        outer = tuple(x.shape.dims[:last])
        tiled = comp.add("reshape", [x], shape=Shape.array(et, outer + (columns, base)))
        inner = self._window(comp, tiled, init, instr, base, base - 1, reverse)
        edge = SliceDim(0, 1) if reverse else SliceDim(base - 1, base)
        bounds = tuple(SliceDim(0, d) for d in outer) + (SliceDim(0, columns), edge)
        last_column = comp.add("slice", [inner], {"slice": bounds})
        totals = comp.add("reshape", [last_column], shape=Shape.array(et, outer + (columns,)))
        running = self._window(comp, totals, init, instr, columns, columns, reverse)
        kept = SliceDim(1, columns + 1) if reverse else SliceDim(0, columns)
        before = comp.add("slice", [running], {"slice": tuple(SliceDim(0, d) for d in outer) + (kept,)})
        spread = comp.add("broadcast", [before], {"dimensions": tuple(range(rank))}, shape=inner.shape)
        combined = comp.add(instr.to_apply.root.opcode, [inner, spread])
        y = comp.add("reshape", [combined], shape=Shape.array(et, outer + (columns * base,)))
        if axis != last:
            y = comp.add("transpose", [y], {"dimensions": tuple(perm)})
        if columns * base != n:
            y = comp.add("slice", [y], {"slice": tuple(SliceDim(0, d if i != axis else n)
                                                       for i, d in enumerate(y.shape.dims))})
        if exclusive:
            pads = tuple(PadDim(*((0, 1) if reverse else (1, 0))) if d == axis else PadDim(0, 0)
                         for d in range(rank))
            y = comp.add("pad", [y, init], {"padding": pads})
        if y.shape.minor_to_major != instr.shape.minor_to_major:
            y = comp.add("copy", [y], shape=instr.shape)
        y.attrs.update({k: v for k, v in instr.attrs.items() if k == "metadata"})
        comp.replace_instruction(instr, y)
        y.name = instr.name  # (the printed module and its users keep the name)
        return [running] if rewritable_scan(running, self.base_length) else []

    @staticmethod
    def _window(comp: HloComputation, x: HloInstruction, init: HloInstruction, scan: HloInstruction,
                size: int, pad: int, reverse: bool) -> HloInstruction:
        """A reduce-window of `x` with `scan`'s combiner along its last dimension: `size` long,
        padded by `pad` before it (after it when `reverse`)."""
        window = tuple(WindowDim(1) for _ in x.shape.dims[:-1]) + (
            WindowDim(size, pad_lo=0 if reverse else pad, pad_hi=pad if reverse else 0),)
        return comp.add("reduce-window", [x, init], {"window": window, "to_apply": scan.to_apply})


__all__ = ["BASE_LENGTH", "ReduceWindowRewriter", "rewritable_scan"]
