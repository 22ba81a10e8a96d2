"""The innermost reduced loop of a float `reduce` with a vector of partial accumulators (XLA's
reduction emitters reassociate the same way: each thread accumulates a strided subset of the
reduced elements, and the partial results are combined at the end).

A serial loop carrying one accumulator per reduced value is a dependency chain of reducer
applications that LLVM may not reorder (float addition is not associative without fast-math), so
it runs at the latency of one add per element and never vectorizes. When the reduced dimension
that is minor-most in the operand's layout is at least two vectors long, `emit_row_partials`
instead walks it in chunks of `lanes` consecutive elements (one 64-byte vector of the widest
reduced type: 16 for f32; a static row shorter than two vectors, from `SHORT_ROW_MIN` elements on,
takes the largest power of two that fits it, so its first chunk is the whole row or most of it, and
its lanes are combined by a tree, below) carrying a `vector<lanes x T>` of independent accumulators per reduced
value (a variadic reduce such as an argmax carries `lanes` tuples):

    acc = the first chunk                                  (lane l holds element l)
    scf.for chunk in [1, size / lanes):
      scf.for lane in [0, lanes): acc[lane] = reducer(acc[lane], element(chunk * lanes + lane))
    scf.for lane in [0, lanes): the row's last whole vector (elements size - lanes + lane), folded
                                only into the lanes past the elements the chunks took (the others
                                keep theirs): the overlapped tail, when size mod lanes != 0 and
                                the caller allows it (`overlap_tail`; else a lane loop over the
                                size mod lanes last elements, into the first lanes)
    row = acc[0]; scf.for lane in [1, lanes): row = reducer(row, acc[lane])

A row of symbolic length (runtime dims) may be shorter than a chunk: every lane then starts at the
init value, and the chunk loop runs [0, n / lanes) and the tail n mod lanes, both computed at run
time (the init value is the reducer's identity, below, so the result is the same).

The lane loops have the shape `vectorize-loads-stores` and `vectorize-elementwise` turn into one
vector load and whole-vector reducer ops when the rows start at multiples of the vector. Elsewhere
(or for element computations that are not elementwise, such as an iota operand) `unroll-loops`
unrolls them and LLVM's SLP vectorizer recombines the lanes, less reliably: an f32[2048, 2047] row
sum takes 1.9 ms where f32[2048, 2048] takes 0.3 ms (the serial loop: 3.7 ms for both). The caller
folds `row` into its scalar accumulators, so the init value is applied once, as in the serial loop.

The lanes are combined in lane order by a loop rather than a balanced tree (but for order-free
reducers and short rows, `emit_row_partials`): the loop
emitter's thread loop, unrolled, repeats each row's code for each of the thread's 16 output
elements, and `lanes - 1` inlined reducers per row (a dozen ops each in bf16, after
lower-narrow-floats) made kernel compilation 2.4x slower for the f32 row-reduction benchmark and
6.5x for a bf16 row sum than the loop does. LLVM unrolls the loop itself, and vectorizes it across
the thread's rows. The fold adds `lanes - 1` applications to a chain of about `size / lanes`.

Integer and pred reductions stay serial: their arithmetic is associative, so LLVM's loop
vectorizer reassociates the serial loop itself (a u8[2048, 2048] row sum: 0.10 ms serial, 0.14 ms
with 64 partial lanes, which also took 14x the compile time).

Semantics: this relies on what XLA relies on for every reduction (jax.lax.reduce: "init_values
and computation together must form a monoid ... XLA may exploit both of these properties"): the
reducer is associative and commutative. Only the order of applications changes: float sums round
differently (as in XLA), max/min/argmax results are the same, a NaN in any lane reaches the result.
A reducer that is not associative (say a*b+1) gives a different, still deterministic, result.

Partial results are combined in index order. An argmax's reducer (JAX's: keep the accumulator's
value if it is greater or NaN, ties to the lower index) is commutative but for two NaNs, where it
keeps its first operand: a serial fold keeps the first NaN of the row, which numpy, XLA:CPU and
the evaluator return. Lane l holds the fold of elements l, l + lanes, ..., so lane order is not
row order: rows with NaNs at 1 and 6 gave 6. Where a reducer breaks ties by comparing two copies
of one integer operand (`index_operand`), two partial results are passed to it lower index first
(`combine_partials`, also the GPU forms' shuffle and cross-warp combiners): every subset's fold
then combines as the serial fold would.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, scf, vector
from xdsl.dialects.builtin import (
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    VectorType,
    i64,
)
from xdsl.ir import Attribute, Block, SSAValue

from hlocc.analysis.affine_expr import Var, VarKind, size_expr, sym
from hlocc.analysis.indexing_map import IndexingMap, Variable
from hlocc.analysis.interval import Interval
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.index_ops import emit_scalar_computation
from hlocc.codegen.ir import VECTOR_FORMS
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.ir.size_ops import size_value
from hlocc.codegen.target import cpu_target
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.symbolic import Dim, DimExpr, floordiv, mod

ORDER_FREE_ACCUMULATORS = 4
"""The most vectors of partials `emit_row_partials` uses for order-free reducers."""

SHORT_ROW_MIN = 4
"""The shortest static row `plan_partials` takes when it is shorter than two vectors (`lanes` is
then the largest power of two that fits the row). Such a row's serial loop is one chain of
`size - 1` dependent reducer applications, while the partials load it as one vector and fold the
lanes by a halving tree (`combine_lanes`), log2(lanes) vector steps: the max of the torch
transformer block's f32[1024, 16] attention rows (a compare, or, select chain of ~6 cycles a step)
went from 21 to 10 µs."""

_PARTIAL_FLOATS = frozenset({"f16", "bf16", "f32", "f64"})


@dataclass(frozen=True)
class PartialsPlan:
    """Reduce range variable `symbol` of the operand map with `lanes` partial accumulators."""

    symbol: int
    lanes: int


def plan_partials(instr: HloInstruction, m: IndexingMap) -> PartialsPlan | None:
    """Partials for a reduce whose operand map is `m`, or None for the serial loop: the reduced
    values are floats (f16/bf16/f32/f64, beside integers or preds in a variadic reduce), and the
    operand's minor-most non-trivial dimension in its layout is reduced (so a chunk is contiguous)
    and at least two chunks long. The lanes fill one vector of the target (`ElementEmitter` is not
    told its target; the CPU is the only one kernels are compiled for); a static row shorter than two
    vectors but of `SHORT_ROW_MIN` elements or more takes the largest power of two that fits it."""
    n = len(instr.operands) // 2
    types = [instr.operand(k).shape.element_type for k in range(n)]
    if not any(t.name in _PARTIAL_FLOATS for t in types) or not all(
            t.name in _PARTIAL_FLOATS or t.is_integer or t.is_pred for t in types):
        return None
    lanes = cpu_target().vector_bytes * 8 // max(max(t.bits, 8) for t in types)
    shape = instr.operand(0).shape
    minor = [d for d in shape.minor_to_major if isinstance(shape.dims[d], DimExpr) or shape.dims[d] > 1]
    if not minor or lanes < 2:
        return None
    r = m.results[minor[0]]
    if not (isinstance(r, Var) and r.kind is VarKind.SYMBOL):
        return None
    size = m.symbols[r.index].bounds.size
    if size < 2 * lanes:
        lanes = 1 << (size.bit_length() - 1) if size >= SHORT_ROW_MIN else 0
        if lanes < SHORT_ROW_MIN:
            return None
    return PartialsPlan(r.index, lanes)


def chunked_map(m: IndexingMap, j: int, lanes: int, shift: int = 0) -> IndexingMap:
    """`m` with range variable j replaced by `s_j * lanes + lane + shift` (`lane` a new last range
    variable in [0, lanes - 1]; s_j in [0, ceil(size / lanes) - 1]). Points past the end of the
    dimension are in the domain but never visited: the tail loop stops at the size. A negative
    `shift` (`overlapped_tail`) moves the last chunk back so that it ends at the row's end."""
    size = m.symbols[j].bounds.size
    lane = sym(len(m.symbols))
    symbols = list(m.symbols)
    symbols[j] = Variable(Interval(0, -(-size // lanes) - 1), symbols[j].name)
    return m.substitute(lambda v: v * lanes + lane + shift if v == sym(j) else v,
                        symbols=[*symbols, Variable(Interval(0, lanes - 1), "lane")])


def overlapped_tail(row: int, lanes: int) -> int | None:
    """The shift of the last chunk of a static row of `row` elements when it is walked as a whole
    vector ending at the row's end (`lanes - row mod lanes` of its lanes repeat elements of the
    chunk before), or None where the row has no tail or is shorter than a vector. One whole-vector
    chunk instead of a `row mod lanes` lane loop, which vectorize-loads-stores leaves alone (it
    takes power-of-two trip counts) and LLVM then splits into 8 + 4 + 2 + 1 pieces, each with its
    own copy of the element computation: on softmax f32[16384, 127] the tail cost 30% of the row."""
    chunks, tail = divmod(row, lanes)
    return tail - lanes if tail and chunks else None


RUNTIME_TAIL = "runtime"
"""The shift key of a runtime row's overlapped tail (`tail_map`; `emit_row_partials(runtime_tail=)`)."""


def tail_map(m: IndexingMap, j: int, lanes: int, row: DimExpr) -> IndexingMap:
    """`chunked_map(m, j, lanes)` at the last whole vector of a runtime row of `row` elements: element
    `row - lanes + lane` (the chunk variable stays, unused). Only for rows of `lanes` elements or more."""
    chunked = chunked_map(m, j, lanes)
    lane = sym(len(m.symbols))
    return m.substitute(lambda v: size_expr(row) - lanes + lane if v == sym(j) else v, symbols=chunked.symbols)


def runtime_tail_mask(b: KernelBuilder, tail: SSAValue, lanes: int) -> SSAValue:
    """vector<lanes x i1>: lane >= lanes - tail, the lanes of `tail_map`'s vector past the chunks."""
    i32 = IntegerType(32)
    vt = VectorType(i32, [lanes])
    iota = b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(vt, list(range(lanes))), vt))
    first = b.add(arith.IndexCastOp(b.add(arith.SubiOp(b.index(lanes), tail)), i32))
    bcast = b.add(vector.BroadcastOp(first, vt))
    scalar_form = arith.CmpiOp(iota, bcast, "sge")  # (xDSL's arith.cmpi takes scalars: its xla stand-in)
    return b.add(VECTOR_FORMS[arith.CmpiOp].create(operands=[iota, bcast],
                                                   result_types=[VectorType(IntegerType(1), [lanes])],
                                                   properties=dict(scalar_form.properties)))


SideWriter = Callable[[list[SSAValue], list[SSAValue]], list[SSAValue]]
"""`(range variables of the chunked maps, outputs) -> outputs`: what else to do at an element.
With `overlap_tail`, a `TailWriter` instead: `(range variables, outputs, shift) -> outputs`, the
range variables those of `chunked_map(m, j, lanes, shift)` (shift 0 but in the overlapped tail)."""


def emit_row_partials(e: ElementEmitter, reduces: HloInstruction | Sequence[HloInstruction],
                      maps: Sequence[IndexingMap], indices: Sequence[SSAValue], symbols: Sequence[SSAValue | None],
                      plan: PartialsPlan, inits: Sequence[SSAValue], outputs: Sequence[SSAValue] = (),
                      visit: SideWriter | None = None, overlap_tail: bool = False,
                      order_free: bool = False, runtime_tail: bool = False,
                      chains: int = ORDER_FREE_ACCUMULATORS) -> tuple[list[SSAValue], list[SSAValue]]:
    """The reduction of the operands of `reduces` (one reduce, or several that share `plan`, in one
    pass over the row: each element is computed and read once) over range variable `plan.symbol`
    alone, the other range variables at `symbols` (None at plan.symbol): one value per reduced
    operand, in the order of the reduces' operands, without the init value (`inits`, one per reduced
    operand, only seed the vectors, whose every lane the first chunk overwrites); `maps` are the
    reduced operands' maps, in the same order. `outputs` come back as `visit` left them. `visit`,
    when given, runs at every element with the range variables of
    `chunked_map(m, plan.symbol, plan.lanes)` and the carried `outputs` (the reduction emitter writes
    its side outputs there, so the element computation is shared and each output chunk is stored as
    one vector).

    `overlap_tail`: a static row's partial last chunk is walked as a whole vector ending at the
    row's end (`overlapped_tail`), the lanes that repeat elements keeping their accumulator;
    `visit` (a `TailWriter` then) sees them too, so it may only
    write values that do not change when written twice (never an output that can share a buffer
    with an input it reads).

    `order_free` (the caller's promise that the reducers' result does not depend on the order of
    their applications: `order_free(reduces)`): a static row of 4 chunks or more folds chunk c into
    vector c mod k of k = min(ORDER_FREE_ACCUMULATORS, chunks / 2) vectors of partials, combined
    lane-wise before the tail, and the lanes are combined by a balanced tree (`combine_lanes`), so
    that the chains of reducer applications run side by side (a max's compare, or, select chain
    costs ~6 cycles a step); a runtime row folds rounds of k = ORDER_FREE_ACCUMULATORS chunks
    (`_interleaved_runtime_chunks`). The stitch emitter also passes it for float sums, which it
    reassociates (stitch.py `reassociated_sums`). `chains` lowers k (the stitch emitter's 1 for a
    stage whose elements are expensive to compute, `stitch.chains_for`).

    A static row shorter than two chunks (`plan_partials`' short rows) combines its lanes by the
    tree too, whatever its reducer: there the lane fold is the whole reduction, and in lane order it
    is the serial loop's chain again.

    `runtime_tail` (with `overlap_tail`): a runtime row's tail too, where the row holds a whole
    vector (checked at run time; a shorter row keeps the lane loop): `tail_map`'s vector, its
    lanes before the tail masked at run time (`runtime_tail_mask`); `visit` sees the shift
    RUNTIME_TAIL there."""
    reduces = [reduces] if isinstance(reduces, HloInstruction) else list(reduces)
    # (reduce, operand number) of every reduced value, in order.
    operands = [(r, k) for r in reduces for k in range(len(r.operands) // 2)]
    n = len(operands)
    j, lanes = plan.symbol, plan.lanes
    types = [element_type(r.operand(k).shape.element_type) for r, k in operands]
    vector_types = [VectorType(t, [lanes]) for t in types]
    out_types = [o.type for o in outputs]
    row = _row_length(reduces[0], maps[0], j)
    shift = overlapped_tail(row, lanes) if overlap_tail and not isinstance(row, DimExpr) else None
    split = {0: [chunked_map(m, j, lanes) for m in maps[:n]]}
    if shift is not None:
        split[shift] = [chunked_map(m, j, lanes, shift) for m in maps[:n]]
    runtime_tail = runtime_tail and overlap_tail and isinstance(row, DimExpr) and mod(row, lanes) != 0
    if runtime_tail:
        split[RUNTIME_TAIL] = [tail_map(m, j, lanes, row) for m in maps[:n]]
    masks: dict = {}  # RUNTIME_TAIL -> its mask, where the runtime tail is emitted

    def at(chunk: SSAValue, lane: SSAValue) -> list[SSAValue]:
        return [chunk if k == j else s for k, s in enumerate(symbols)] + [lane]

    def elements(chunk: SSAValue, lane: SSAValue, at_shift: int) -> list[SSAValue]:
        return [e.scalar(r.operand(k), e.apply(m, indices, at(chunk, lane)))
                for (r, k), m in zip(operands, split[at_shift])]

    def lane_loop(chunk: SSAValue, count: int | SSAValue, accs: Sequence[SSAValue] | None,
                  carried: Sequence[SSAValue], outs: Sequence[SSAValue], at_shift: int = 0) -> list[SSAValue]:
        """scf.for lane in [0, count): lane `lane` of `carried` becomes reducer(accs[lane], element)
        (the element itself when accs is None). Reading `accs`, defined outside the loop, and
        writing `carried` is the form vectorize-elementwise takes. A negative `at_shift` is the
        overlapped tail: its first -at_shift lanes keep their accumulator (a constant mask read at
        the lane, which vectorizes to one select; the init value need not be an identity)."""
        mask = masks.get(at_shift)
        if at_shift and mask is None:
            flags = [int(k >= -at_shift) for k in range(lanes)]
            mask_type = VectorType(IntegerType(1), [lanes])
            mask = e.b.add(arith.ConstantOp(DenseIntOrFPElementsAttr.from_list(mask_type, flags), mask_type))
        block = Block(arg_types=[IndexType(), *vector_types, *out_types])
        lane = block.args[0]
        with e.nested(block) as b:
            values = elements(chunk, lane, at_shift)
            new_outs = list(block.args[1 + n:])
            if visit is not None:
                new_outs = visit(at(chunk, lane), new_outs, at_shift) if overlap_tail else \
                    visit(at(chunk, lane), new_outs)
            if accs is not None:
                old = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(accs, types)]
                values = _apply_reducers(b, reduces, old, values)
                if mask is not None:
                    keep = b.add(vector.ExtractOp(mask, [lane], IntegerType(1)))
                    values = [b.add(arith.SelectOp(keep, v, o)) for v, o in zip(values, old)]
            b.insert(scf.YieldOp(*[b.add(vector.InsertOp(v, c, [lane])) for v, c in zip(values, block.args[1:])],
                                 *new_outs))
        bound = count if isinstance(count, SSAValue) else e.b.index(count)
        loop = scf.ForOp(e.b.index(0), bound, e.b.index(1), [*carried, *outs], block)
        return list(e.b.insert(loop).results)

    def chunk_loop(first: SSAValue, end: SSAValue, results: list[SSAValue]) -> list[SSAValue]:
        block = Block(arg_types=[IndexType(), *vector_types, *out_types])
        with e.nested(block) as b:
            carried = list(block.args[1:1 + n])
            b.insert(scf.YieldOp(*lane_loop(block.args[0], lanes, carried, carried, block.args[1 + n:])))
        return list(e.b.insert(scf.ForOp(first, end, e.b.index(1), results, block)).results)

    seeds = [e.b.add(vector.BroadcastOp(init, vt)) for init, vt in zip(inits, vector_types)]
    if isinstance(row, DimExpr):
        # A runtime row length may be shorter than a chunk: every lane starts at the init value
        # (the reducer's identity: the monoid rule above) and all chunks fold into it.
        # (Size expressions, not index arithmetic: a speculated row 16*n_16 has n_16 chunks, no tail.)
        chunks = size_value(e.b, floordiv(row, lanes))
        if order_free and chains > 1:
            results = _interleaved_runtime_chunks(e, reduces, [*seeds, *outputs], n, row, lanes, lane_loop,
                                                  chunk_loop, chains)
        else:
            results = chunk_loop(e.b.index(0), chunks, [*seeds, *outputs])
        if mod(row, lanes):
            tail = size_value(e.b, mod(row, lanes))
            if runtime_tail:
                whole = e.b.add(arith.CmpiOp(size_value(e.b, row), e.b.index(lanes), "uge"))

                def overlapped(r=results) -> list[SSAValue]:
                    masks[RUNTIME_TAIL] = runtime_tail_mask(e.b, tail, lanes)
                    return lane_loop(chunks, lanes, r[:n], r[:n], r[n:], RUNTIME_TAIL)

                results = e.if_else_many(whole, overlapped,
                                         lambda r=results: lane_loop(chunks, tail, r[:n], r[:n], r[n:]),
                                         [r.type for r in results])
            else:
                results = lane_loop(chunks, tail, results[:n], results[:n], results[n:])
    else:
        chunks, tail = divmod(row, lanes)
        results = lane_loop(e.b.index(0), lanes, None, seeds, outputs)
        k = min(chains, chunks // 2) if order_free else 1
        if k > 1:
            results = _interleaved_chunks(e, reduces, results, n, chunks, k, lane_loop)
        elif chunks > 1:
            results = chunk_loop(e.b.index(1), e.b.index(chunks), results)
        if shift is not None:
            results = lane_loop(e.b.index(chunks), lanes, results[:n], results[:n], results[n:], shift)
        elif tail:
            results = lane_loop(e.b.index(chunks), tail, results[:n], results[:n], results[n:])
    partials, k = [], 0
    for r in reduces:
        m = len(r.operands) // 2
        partials += combine_lanes(e.b, r.to_apply, results[k:k + m], types[k:k + m],
                                  tree=order_free or (not isinstance(row, DimExpr) and row < 2 * lanes))
        k += m
    return partials, results[n:]


def _interleaved_chunks(e: ElementEmitter, reduces: Sequence[HloInstruction], results: list[SSAValue], n: int,
                        chunks: int, k: int, lane_loop: Callable) -> list[SSAValue]:
    """Chunks 1 .. chunks - 1 folded into `k` vectors of partials (`results`: the first chunk's
    vectors, then the outputs): chunks 1 .. k - 1 start vectors 1 .. k - 1, a loop over rounds
    [1, chunks / k) folds chunk round * k + i into vector i, the chunks left fold into vectors
    0, 1, ...; then vector 0 = reducer(vector 0, vector i) lane-wise for i in [1, k)."""
    lanes = results[0].type.get_shape()[0]
    accs, outs = [results[:n]], results[n:]
    for i in range(1, k):
        r = lane_loop(e.b.index(i), lanes, None, results[:n], outs)
        accs.append(r[:n])
        outs = r[n:]
    rounds = chunks // k
    accs, outs = _rounds(e, accs, outs, n, lanes, lane_loop, e.b.index(1), e.b.index(rounds))
    for c in range(rounds * k, chunks):
        i = c - rounds * k
        r = lane_loop(e.b.index(c), lanes, accs[i], accs[i], outs)
        accs[i], outs = r[:n], r[n:]
    combined = accs[0]
    for other in accs[1:]:
        combined = _combine_vectors(e, reduces, combined, other)
    return [*combined, *outs]


def _rounds(e: ElementEmitter, accs: list[list[SSAValue]], outs: list[SSAValue], n: int, lanes: int,
            lane_loop: Callable, first: SSAValue, end: SSAValue) -> tuple[list[list[SSAValue]], list[SSAValue]]:
    """scf.for round in [first, end): chunk round * k + i folded into vector i of the k = len(accs)
    vectors of partials (`n` reduced values each); (the vectors, the outputs) after it."""
    k = len(accs)
    block = Block(arg_types=[IndexType(), *[v.type for a in accs for v in a], *[o.type for o in outs]])
    with e.nested(block) as b:
        base = b.add(arith.MuliOp(block.args[0], b.index(k)))
        carried, new = list(block.args[1:]), []
        done = carried[k * n:]
        for i in range(k):
            chunk = b.add(arith.AddiOp(base, b.index(i))) if i else base
            r = lane_loop(chunk, lanes, carried[i * n:(i + 1) * n], carried[i * n:(i + 1) * n], done)
            new += r[:n]
            done = r[n:]
        b.insert(scf.YieldOp(*new, *done))
    loop = e.b.insert(scf.ForOp(first, end, e.b.index(1), [*sum(accs, []), *outs], block))
    res = list(loop.results)
    return [res[i * n:(i + 1) * n] for i in range(k)], res[k * n:]


def _interleaved_runtime_chunks(e: ElementEmitter, reduces: Sequence[HloInstruction], results: list[SSAValue],
                                n: int, row: DimExpr, lanes: int, lane_loop: Callable,
                                chunk_loop: Callable, k: int) -> list[SSAValue]:
    """`_interleaved_chunks` over a runtime row of `row` elements (`results`: the seed vectors,
    every lane the init value, then the outputs): a loop over rounds [0, row / (k * lanes)) folds
    chunk round * k + i into vector i of k (`emit_row_partials`' chains), the chunks left (fewer than
    k) fold into vector 0, then the vectors combine lane-wise. A row shorter than k chunks has no
    round (every vector but the first stays at the init value: the reducer's identity)."""
    seeds, outs = results[:n], results[n:]
    rounds = size_value(e.b, floordiv(floordiv(row, lanes), k))
    accs, outs = _rounds(e, [seeds] * k, outs, n, lanes, lane_loop, e.b.index(0), rounds)
    first = e.b.add(arith.MuliOp(rounds, e.b.index(k)))
    rest = chunk_loop(first, size_value(e.b, floordiv(row, lanes)), [*accs[0], *outs])
    combined, outs = rest[:n], rest[n:]
    for other in accs[1:]:
        combined = _combine_vectors(e, reduces, combined, other)
    return [*combined, *outs]


def _combine_vectors(e: ElementEmitter, reduces: Sequence[HloInstruction], accs: list[SSAValue],
                     others: list[SSAValue]) -> list[SSAValue]:
    """Lane l of the result = reducer(accs[l], others[l]): a lane loop reading vectors defined
    outside it and inserting into carried ones (the form vectorize-elementwise takes)."""
    lanes = accs[0].type.get_shape()[0]
    types = [a.type.element_type for a in accs]
    block = Block(arg_types=[IndexType(), *[a.type for a in accs]])
    lane = block.args[0]
    with e.nested(block) as b:
        old = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(accs, types)]
        new = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(others, types)]
        values = _apply_reducers(b, reduces, old, new, partials=True)
        b.insert(scf.YieldOp(*[b.add(vector.InsertOp(v, c, [lane])) for v, c in zip(values, block.args[1:])]))
    return list(e.b.insert(scf.ForOp(e.b.index(0), e.b.index(lanes), e.b.index(1), accs, block)).results)


def order_free(reduces: Sequence[HloInstruction]) -> bool:
    """Whether every reducer picks one of its operands (maximum, minimum of its two parameters), so
    that the reduce's value does not depend on the order of the applications (but for the sign of
    a zero among equal zeros: XLA does not specify the order either)."""
    for r in reduces:
        root = r.to_apply.root
        if len(r.operands) != 2 or root.opcode not in ("maximum", "minimum") or \
                {x.opcode for x in root.operands} != {"parameter"} or root.operand(0) is root.operand(1):
            return False
    return True


def _row_length(instr: HloInstruction, m: IndexingMap, j: int) -> Dim:
    """The size of the reduced dimension that range variable j walks (read at run time when it is
    symbolic: the variable's bounds are then only SIZE_BOUND)."""
    dims = instr.operand(0).shape.dims
    for d, r in enumerate(m.results):
        if r == sym(j) and isinstance(dims[d], DimExpr):
            return dims[d]
    return m.symbols[j].bounds.size


def _apply_reducers(b: KernelBuilder, reduces: Sequence[HloInstruction], accs: Sequence[SSAValue],
                    values: Sequence[SSAValue], partials: bool = False) -> list[SSAValue]:
    """Each reduce's reducer on its slice of `accs` and `values` (its reduced operands, in order);
    with `partials`, both are partial results, combined in index order (`combine_partials`)."""
    out, k = [], 0
    apply = combine_partials if partials else \
        lambda b, reducer, a, v: emit_scalar_computation(b, reducer, [*a, *v])
    for r in reduces:
        m = len(r.operands) // 2
        out += apply(b, r.to_apply, accs[k:k + m], values[k:k + m])
        k += m
    return out


def index_operand(reducer: HloComputation) -> int | None:
    """The reduced value by which a variadic reducer breaks ties, comparing its two copies (an
    argmax's index: compare(p_j, p_j+m), direction=LT), or None."""
    m = reducer.num_parameters // 2
    if m < 2:
        return None
    for instr in reducer.instructions:
        if instr.opcode != "compare" or instr.attrs.get("direction") not in ("LT", "GT", "LE", "GE"):
            continue
        numbers = {o.parameter_number for o in instr.operands if o.opcode == "parameter"}
        if len(numbers) == 2 and max(numbers) - min(numbers) == m and \
                instr.operand(0).shape.element_type.is_integer:
            return min(numbers)
    return None


def combine_partials(b: KernelBuilder, reducer: HloComputation, accs: Sequence[SSAValue],
                     others: Sequence[SSAValue]) -> list[SSAValue]:
    """reducer(accs, others) for two partial results (scalars) of one reduction: where the reducer
    has an `index_operand`, the one holding the lower index goes first (see the module
    docstring)."""
    j = index_operand(reducer)
    if j is None:
        return emit_scalar_computation(b, reducer, [*accs, *others])
    signed = reducer.parameter(j).shape.element_type.is_signed
    swap = b.add(arith.CmpiOp(others[j], accs[j], "slt" if signed else "ult"))
    first = [b.add(arith.SelectOp(swap, o, a)) for a, o in zip(accs, others)]
    second = [b.add(arith.SelectOp(swap, a, o)) for a, o in zip(accs, others)]
    return emit_scalar_computation(b, reducer, [*first, *second])


def fold_elements(e: ElementEmitter, reduces: Sequence[HloInstruction], accs: Sequence[SSAValue],
                  index: Sequence[SSAValue]) -> list[SSAValue]:
    """`accs` (the reduced values of `reduces`, in order) with each reduce's operands at `index`
    folded in: one step of a serial reduction loop."""
    values = [e.scalar(r.operand(k), index) for r in reduces for k in range(len(r.operands) // 2)]
    return _apply_reducers(e.b, reduces, accs, values)


def combiner_function(name: str, reduces: Sequence[HloInstruction], types: Sequence[Attribute]):
    """`func.func private @name(accs..., others...) -> accs`: each reduce's reducer on its slice of
    two accumulator lists (`types`, the reduced values of `reduces` in order); the combiner of an
    `xla.shuffle_reduce` (the reduction and stitch emitters' GPU forms)."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import FunctionType
    from xdsl.ir import Region

    block = Block(arg_types=[*types, *types])
    b = KernelBuilder(block)
    n = len(types)
    b.insert(func.ReturnOp(*_apply_reducers(b, reduces, block.args[:n], block.args[n:], partials=True)))
    return func.FuncOp(name, FunctionType.from_lists([*types, *types], list(types)), Region(block), "private")


def combine_lanes(b: KernelBuilder, reducer: HloComputation, accs: Sequence[SSAValue],
                  types: Sequence[Attribute], tree: bool = False) -> list[SSAValue]:
    """Lane 0, then reducer(row, lane l) for l in [1, lanes), as a loop (see the module docstring);
    with `tree`, a balanced tree of reducers over the lanes (log2(lanes) deep) that halves the
    vector at each step, lane l with lane l + w/2: for f32, f64 and integer values as vector ops
    (the halves are `vector.shuffle`s, combined by a lane loop that vectorize-elementwise makes
    whole-vector reducer ops) down to two lanes, whose reducer is scalar; narrow floats (which
    lower-narrow-floats rewrites lane by lane) as scalars, unrolled. The halving order is the
    one a vector shuffle reduction takes: where LLVM's SLP vectorizer met the scalar tree over
    adjacent lanes it paired them in <2 x float> pieces."""
    lanes = accs[0].type.get_shape()[0]
    if tree and all(isinstance(t, Float32Type | Float64Type | IntegerType) for t in types):
        # Halving: lanes [0, w/2) and [w/2, w) as two vectors (vector.shuffle), combined by a lane
        # loop that vectorize-elementwise makes one vector op per reducer op: log2(lanes) steps.
        while lanes > 2:
            half = lanes // 2
            low = [b.add(_halves(a, 0, half)) for a in accs]
            high = [b.add(_halves(a, half, half)) for a in accs]
            accs = _lane_combine(b, reducer, low, high)
            lanes = half
    if tree:
        level = [[b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(accs, types)] for lane in range(lanes)]
        while len(level) > 1:
            half = len(level) // 2
            level = [combine_partials(b, reducer, level[i], level[i + half])
                     for i in range(half)] + level[2 * half:]
        return list(level[0])
    first = [b.add(vector.ExtractOp(a, [0], t)) for a, t in zip(accs, types)]
    block = Block(arg_types=[IndexType(), *types])
    lane = block.args[0]
    with b.at(block):
        values = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(accs, types)]
        b.insert(scf.YieldOp(*combine_partials(b, reducer, block.args[1:], values)))
    return list(b.insert(scf.ForOp(b.index(1), b.index(lanes), b.index(1), first, block)).results)


def _halves(a: SSAValue, first: int, count: int) -> vector.ShuffleOp:
    """Lanes [first, first + count) of vector `a`, as a vector."""
    t = VectorType(a.type.element_type, [count])
    return vector.ShuffleOp(a, a, DenseArrayBase.from_list(i64, list(range(first, first + count))), result_type=t)


def _lane_combine(b: KernelBuilder, reducer: HloComputation, accs: Sequence[SSAValue],
                  others: Sequence[SSAValue]) -> list[SSAValue]:
    """Lane l = reducer(accs[l], others[l]), as a lane loop (the form vectorize-elementwise takes)."""
    lanes = accs[0].type.get_shape()[0]
    types = [a.type.element_type for a in accs]
    block = Block(arg_types=[IndexType(), *[a.type for a in accs]])
    lane = block.args[0]
    with b.at(block):
        old = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(accs, types)]
        new = [b.add(vector.ExtractOp(a, [lane], t)) for a, t in zip(others, types)]
        values = combine_partials(b, reducer, old, new)
        b.insert(scf.YieldOp(*[b.add(vector.InsertOp(v, c, [lane])) for v, c in zip(values, block.args[1:])]))
    return list(b.insert(scf.ForOp(b.index(0), b.index(lanes), b.index(1), list(accs), block)).results)


__all__ = ["RUNTIME_TAIL", "PartialsPlan", "SideWriter", "apply_reducers", "chunked_map", "combine_lanes",
           "combine_partials", "combiner_function", "emit_row_partials", "fold_elements", "order_free",
           "overlapped_tail", "plan_partials", "runtime_tail_mask", "tail_map"]

apply_reducers = _apply_reducers
