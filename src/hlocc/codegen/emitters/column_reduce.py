"""The tiled column reduction on symbolic shapes (BladeDISC's column-reduction tiling speculation,
issue 18): a reduce over the physically major dimensions of its input, keeping the minor ones
(x.sum(axis=0) over f32[?b, ?n], a bias gradient, a mean over the batch), as a kernel version that
runtime/speculation.py compiles beside the generic kernel and picks where the columns fill a vector.

The generic symbolic kernel is the loop emitter's: one output element per thread, its column read
down the rows at a stride of a whole row, one scalar reducer application per element in a single
dependency chain. Here (CPU form) a thread takes `groups` vectors of `lanes` adjacent columns
(`CPU_COLUMN_BYTES` of each row, as the static reduction emitter's CPU column chunks) and

    for r in [0, rows):                    one row at a time, in order
      for g in [0, groups):                each group's lanes contiguous in the row
        acc[g][lane] = reducer(acc[g][lane], x[r, first + g*lanes + lane])
    out[first + g*lanes + lane] = epilogue(acc[g][lane])

so each row's chunk is one contiguous run of vector loads and the groups' chains run side by side
(vectorize-loads-stores-unaligned and vectorize-elementwise turn the lane loops into vector loads,
ops and stores). Every column still folds its rows in row order, as the loop emitter and the
evaluator do: the results are the same, sums included.

The column count is known at run time only. A thread whose whole chunk lies inside the row runs
the loop above; the last thread, where the chunk overruns the row, walks its `ceil(left / lanes)`
groups `LAST_CHUNK_GROUPS` at a time, each group's vector starting at
`min(first + g*lanes, columns - lanes)`: the row's last whole vector, whose first lanes repeat
columns of the group before (and which a group past it repeats whole), writing the same values
again (no mask, no scalar tail). That needs `columns >= lanes`: the version's predicate
(`column_tile_version`); the generic kernel runs narrower inputs.

A fusion it takes (`column_plan`): reduces (one value each) of one input shape over the same
dimensions, every reduced dimension physically more major than every kept one; the values computed
from the reduces are elementwise ops of the output shape (an epilogue: a mean's divide, a convert)
up to the roots, and no reduce reads another. The reduces of such a version's fused computation
carry `COLUMN_TILE_MARKER` in their backend config, which sends it here (`registry.emitter_for`).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, func, vector
from xdsl.dialects.builtin import FunctionType, ModuleOp, VectorType
from xdsl.ir import Region, SSAValue

from hlocc.analysis.affine_expr import Const, sym
from hlocc.analysis.hero import is_elementwise
from hlocc.analysis.indexing_map import IndexingMap, Variable, size_bound
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import array_leaves, store_element
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.emitters.loop import SYMBOLIC_LOOP_OPS
from hlocc.codegen.emitters.reduce_partials import apply_reducers
from hlocc.codegen.emitters.reduction_tiling import CPU_COLUMN_BYTES
from hlocc.codegen.emitters.stitch import emit_for
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.partitioner import partition_fusion
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import Dim, DimExpr
from hlocc.hlo.symbolic import floordiv as sym_floordiv
from hlocc.hlo.types import Shape

COLUMN_TILE_MARKER = "__hlocc_column_tile"
"""In the backend config of each reduce of a fused computation compiled as a tiled column reduction."""


LAST_CHUNK_GROUPS = 4
"""Groups the last chunk of a row walks together: one reducer chain per group and row, so four
chains run side by side (one group at a time, a [4096, 128] column sum ran each column's chain
at the latency of an add)."""


def is_column_tile_marked(computation: HloComputation) -> bool:
    return any(i.opcode == "reduce" and COLUMN_TILE_MARKER in str(i.attrs.get("backend_config") or "")
               for i in computation.instructions)


@dataclass(frozen=True)
class ColumnPlan:
    """A fusion's column reduction: `reduces` over `reduced` dims of `input_shape`, keeping `kept`
    (both in logical order); `rows` and `columns` are the products of their sizes."""

    reduces: tuple[HloInstruction, ...]
    input_shape: Shape
    kept: tuple[int, ...]
    reduced: tuple[int, ...]
    rows: Dim
    columns: Dim
    roots: tuple[HloInstruction, ...]


def column_plan(computation: HloComputation) -> ColumnPlan | None:
    """The column reduction `computation` computes (module doc), or None where it is none."""
    reduces = [i for i in computation.instructions if i.opcode == "reduce"]
    if not reduces or any(len(r.operands) != 2 for r in reduces):
        return None
    shape = reduces[0].operand(0).shape
    dims = tuple(reduces[0].attrs["dimensions"])
    if any(_key(r.operand(0).shape) != _key(shape) or tuple(r.attrs["dimensions"]) != dims for r in reduces):
        return None
    kept = tuple(d for d in range(shape.rank) if d not in dims)
    order = [d for d in shape.minor_to_major if shape.dims[d] != 1]
    if not kept or not dims or [d for d in order if d in kept] != order[:len([d for d in order if d in kept])]:
        return None  # a reduced dimension between kept ones, or minor to one: not a column reduction
    if any(r.operand(0).shape.element_type.is_complex or r.operand(0).shape.element_type.is_pred for r in reduces):
        return None
    roots = tuple(computation.root.operands) if computation.root.opcode == "tuple" else (computation.root,)
    out = reduces[0].shape
    after = _computed_from_reduces(computation)
    for x in computation.instructions:
        if id(x) not in after or x.opcode == "reduce" or (x.opcode == "tuple" and x is computation.root):
            continue
        if not is_elementwise(x) or _key(x.shape)[1:] != _key(out)[1:]:  # (a convert may change the type:
            return None  # widen-narrow-reductions rounds a bf16 sum's f32 result back to bf16)
    if any(id(op) in after for r in reduces for op in r.operands) or any(id(r) not in after for r in roots):
        return None  # a reduce reads another (two stages), or a root not computed from the reduces
    rows, columns = 1, 1
    for d in dims:
        rows = rows * shape.dims[d]
    for d in kept:
        columns = columns * shape.dims[d]
    return ColumnPlan(tuple(reduces), shape, kept, dims, rows, columns, roots)


def column_lanes(plan: ColumnPlan, vector_bytes: int) -> int:
    """The columns of one vector of the widest reduced value."""
    bits = max(max(r.operand(0).shape.element_type.bits, 8) for r in plan.reduces)
    return max(1, vector_bytes * 8 // bits)


def _key(shape: Shape):
    return shape.element_type, tuple(shape.dims), tuple(shape.minor_to_major)


def _computed_from_reduces(computation: HloComputation) -> set[int]:
    """Ids of the reduces and of every instruction that reads one, directly or not."""
    out: set[int] = set()
    for x in computation.post_order():
        if x.opcode == "reduce" or any(id(op) in out for op in x.operands):
            out.add(id(x))
    return out


def _split(linear, shape: Shape, dims: tuple[int, ...]) -> dict[int, object]:
    """The indices of `dims` of `shape` at position `linear` of their own physical order (the
    others left out); the most major non-trivial one takes no `mod` (`linear` is in range)."""
    order = [d for d in shape.minor_to_major if d in dims and shape.dims[d] != 1]
    out: dict[int, object] = {d: Const(0) for d in dims}  # an Expr: maps hold no ints
    stride = 1
    for k, d in enumerate(order):
        index = linear // stride if not (isinstance(stride, int) and stride == 1) else linear
        out[d] = index if k == len(order) - 1 else index % shape.dims[d]
        stride = stride * shape.dims[d]
    return out


class ColumnReduceEmitter(FusionEmitterBase):
    """Module doc; CPU only (a GPU column reduction keeps the reduction emitter's 32x32 tiles)."""

    symbolic_ops = SYMBOLIC_LOOP_OPS

    def __init__(self, fusion, target, name: str = "main"):
        super().__init__(fusion, target, name)
        plan = column_plan(fusion)
        if plan is None or target.warp_size > 1:
            raise UnsupportedError(f"unsupported: tiled column reduction of fusion '{fusion.name}': "
                                   "not a reduce over the major dimensions with an elementwise epilogue (CPU)")
        self.plan = plan
        self.lanes = column_lanes(plan, target.vector_bytes)
        values_bytes = target.vector_bytes * len(plan.reduces)
        self.groups = max(1, CPU_COLUMN_BYTES // values_bytes)
        self.width = self.groups * self.lanes
        self.blocks = sym_floordiv(plan.columns + (self.width - 1), self.width) \
            if isinstance(plan.columns, DimExpr) else -(-plan.columns // self.width)

    def _dims(self) -> tuple[Variable, Variable]:
        return Variable(Interval(0, 0), "th_x"), Variable(Interval(0, size_bound(self.blocks) - 1), "bl_x")

    def input_map(self) -> IndexingMap:
        """(th_x, bl_x)[r, first, lane] -> the logical input index of row r, column first + lane."""
        p = self.plan
        index = {**_split(sym(0), p.input_shape, p.reduced), **_split(sym(1) + sym(2), p.input_shape, p.kept)}
        symbols = (Variable(Interval(0, size_bound(p.rows) - 1), "r"),
                   Variable(Interval(0, size_bound(p.columns) - 1), "first"),
                   Variable(Interval(0, self.lanes - 1), "lane"))
        return IndexingMap(self._dims(), tuple(index[d] for d in range(p.input_shape.rank)), symbols)

    def output_map(self) -> IndexingMap:
        """(th_x, bl_x)[first, lane] -> the logical index of the reduce's output at that column."""
        p = self.plan
        out = p.reduces[0].shape
        index = _split(sym(0) + sym(1), out, tuple(range(out.rank)))
        symbols = (Variable(Interval(0, size_bound(p.columns) - 1), "first"),
                   Variable(Interval(0, self.lanes - 1), "lane"))
        return IndexingMap(self._dims(), tuple(index[d] for d in range(out.rank)), symbols)

    def emit(self) -> KernelModule:
        leaves = array_leaves(self.fusion.root.shape)
        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, leaves)
        b = KernelBuilder(block)
        launch = LaunchDims(1, self.blocks)
        ids = list(thread_and_block_ids(b, launch))
        e = ElementEmitter(b, partition_fusion(self.fusion).fusion, None, list(block.args[:len(params)]))
        outputs = list(block.args[len(params):])
        columns = size_value(b, self.plan.columns)
        first = b.add(arith.MuliOp(ids[1], b.index(self.width)))
        end = b.add(arith.AddiOp(first, b.index(self.width)))
        inside = b.cmpi("ule", end, columns)
        outputs = e.if_else_many(inside, lambda: self._whole_chunk(e, ids, first, outputs),
                                 lambda: self._last_chunk(e, ids, first, columns, outputs),
                                 [o.type for o in outputs])
        b.insert(func.ReturnOp(*outputs))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        return KernelModule(ModuleOp([entry]), self.name, launch, len(params), len(leaves),
                            emitter="column_tiled", symbols=self.symbols)

    # -- the two kinds of thread ------------------------------------------------------------------------
    def _whole_chunk(self, e: ElementEmitter, ids, first: SSAValue, outputs: list[SSAValue]) -> list[SSAValue]:
        """`groups` vectors of columns from `first`, all inside the row: one pass over the rows."""
        starts = [first] + [e.b.add(arith.AddiOp(first, e.b.index(g * self.lanes))) for g in range(1, self.groups)]
        accs = self._rows(e, ids, starts)
        for start, group in zip(starts, accs):
            outputs = self._write(e, ids, start, group, outputs)
        return outputs

    def _last_chunk(self, e: ElementEmitter, ids, first: SSAValue, columns: SSAValue,
                    outputs: list[SSAValue]) -> list[SSAValue]:
        """The chunk that overruns the row: its ceil(left / lanes) groups `LAST_CHUNK_GROUPS` at a
        time (one pass over the rows each), each a whole vector ending at most at the row's end
        (module doc); a group past the row's last vector repeats it. A chunk of one vector's
        columns takes it alone (three repeats cost more than they hide: [4096, 16] 0.0121 against
        0.0085 ms)."""
        b = e.b
        k = min(LAST_CHUNK_GROUPS, self.groups)
        left = b.add(arith.SubiOp(columns, first))
        last = b.add(arith.SubiOp(columns, b.index(self.lanes)))
        wide = b.cmpi("ugt", left, b.index(self.lanes))
        return e.if_else_many(wide, lambda: self._groups_of(e, ids, first, left, last, k, outputs),
                              lambda: self._groups_of(e, ids, first, left, last, 1, outputs),
                              [o.type for o in outputs])

    def _groups_of(self, e: ElementEmitter, ids, first: SSAValue, left: SSAValue, last: SSAValue, k: int,
                   outputs: list[SSAValue]) -> list[SSAValue]:
        """scf.for over the chunk's groups `k` at a time, from `first`, `left` columns in all."""
        b = e.b
        count = b.add(arith.DivUIOp(b.add(arith.AddiOp(left, b.index(k * self.lanes - 1))),
                                    b.index(k * self.lanes)))

        def groups(g: SSAValue, outs: list[SSAValue]) -> list[SSAValue]:
            base = e.b.add(arith.AddiOp(first, e.b.add(arith.MuliOp(g, e.b.index(k * self.lanes)))))
            starts = [e.b.add(arith.MinUIOp(e.b.add(arith.AddiOp(base, e.b.index(i * self.lanes))) if i else base,
                                            last)) for i in range(k)]
            for start, accs in zip(starts, self._rows(e, ids, starts)):
                outs = self._write(e, ids, start, accs, outs)
            return outs

        return emit_for(e, b.index(0), count, outputs, groups)

    # -- the row loop and the writes --------------------------------------------------------------------
    def _rows(self, e: ElementEmitter, ids, starts: list[SSAValue]) -> list[list[SSAValue]]:
        """Per start column, the vectors (one per reduce) of its lanes' columns reduced over the rows."""
        reduces = list(self.plan.reduces)
        types = [element_type(r.operand(0).shape.element_type) for r in reduces]
        vtypes = [VectorType(t, [self.lanes]) for t in types]
        inits = [e.scalar(r.operand(1), []) for r in reduces]
        seeds = [e.b.add(vector.BroadcastOp(v, vt)) for _ in starts for v, vt in zip(inits, vtypes)]
        m = self.input_map()
        n = len(reduces)

        def row(r: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            new = []
            for k, start in enumerate(starts):
                def lane_step(lane: SSAValue, accs: list[SSAValue], start=start, k=k) -> list[SSAValue]:
                    # Lane `lane` of the accumulators defined outside the lane loop (each lane its
                    # own): the form vectorize-elementwise takes.
                    index = e.apply(m, ids, [r, start, lane])
                    old = [e.b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(carried[k * n:(k + 1) * n], types)]
                    values = apply_reducers(e.b, reduces, old, [e.scalar(x.operand(0), index) for x in reduces])
                    return [e.b.add(vector.InsertOp(v, a, [lane])) for v, a in zip(values, accs)]

                new += emit_for(e, e.b.index(0), e.b.index(self.lanes), carried[k * n:(k + 1) * n], lane_step)
            return new

        results = emit_for(e, e.b.index(0), size_value(e.b, self.plan.rows), seeds, row)
        return [results[k * n:(k + 1) * n] for k in range(len(starts))]

    def _write(self, e: ElementEmitter, ids, start: SSAValue, accs: list[SSAValue],
               outputs: list[SSAValue]) -> list[SSAValue]:
        """Every root at the columns of `start`'s vector, from the reduces' values in `accs`."""
        m = self.output_map()
        reduces = list(self.plan.reduces)
        leaves = array_leaves(self.fusion.root.shape)

        def lane_write(lane: SSAValue, outs: list[SSAValue]) -> list[SSAValue]:
            for r, a in zip(reduces, accs):
                e.overrides[id(r)] = [e.b.add(vector.ExtractOp(a, [lane], a.type.element_type))]
            index = e.apply(m, ids, [start, lane])
            outs = [store_element(e.b, e.scalar(root, index), o, leaf, index)
                    for root, o, leaf in zip(self.plan.roots, outs, leaves)]
            for r in reduces:
                del e.overrides[id(r)]
            return outs

        return emit_for(e, e.b.index(0), e.b.index(self.lanes), outputs, lane_write)


__all__ = ["COLUMN_TILE_MARKER", "ColumnPlan", "ColumnReduceEmitter", "column_lanes", "column_plan",
           "is_column_tile_marked"]
