"""Output-to-input indexing of single HLO instructions (one registry entry per opcode).

`output_to_input(instr)` returns, for every operand, the map from an index of the instruction's
output to the indices of that operand it reads, or None where no indexing map expresses the
access (sort, scatter's indices and updates, ...: "undefined" in XLA). Conventions follow XLA's
indexing analysis (docs/indexing.md; shared/reference/xla_facts.md, the IndexingMap section):

- elementwise ops (incl. select, clamp, convert, compare, map): identity; a scalar operand of an
  array op (clamp bounds) maps to `()`;
- broadcast: operand dim i <- d[dimensions[i]]; transpose: operand dim perm[i] <- d_i;
  reverse: d_i -> size_i - 1 - d_i; slice: d_i * stride + start;
- reshape: linearise the output index row-major and delinearise into the operand; bitcast: the
  same through the physical (layout) order of both shapes;
- pad: `(d - lo) floordiv (interior + 1)` with constraints `d - lo in [0, (n-1)(interior+1)]` and
  `(d - lo) mod (interior + 1) in [0, 0]`; the padding value maps to `()`;
- concatenate: operand k gets `d_c - offset_k` with d_c restricted to [offset_k, offset_k+n_k-1]
  (with symbolic sizes: as the constraints `d_c - offset_k >= 0`, `n_k - 1 - (d_c - offset_k) >= 0`,
  and a pad's bounds likewise);
- reduce: a range variable per reduced dimension (in order), the kept dims from d; inits `()`;
- reduce-window: `d*stride + s*rhs_dilate - pad_lo` through the pad rule for lhs dilation;
- dot: batch dims, then lhs free dims, then rhs free dims of the output; one range variable per
  contracting pair;
- dynamic-slice: `d_i + r_i` with runtime offsets r_i in [0, n_i - size_i] (clamped starts);
  dynamic-update-slice: operand identity (approximate, as XLA), update `d_i - r_i` restricted to
  the updated window; offsets `()`;
- gather, any dimension numbers (XLA's analysis takes only the canonical form of its gather
  simplifier; the general form costs nothing more here): operand dim `start_index_map[k]` starts at
  `r_k` in [0, n - slice_size] (the clamped component k of the index vector), an operand batching
  dim at the output batch dim of its indices batching dim, any other dim at 0; window dims add their
  offset dim. Indices: the output batch dims in order, `s0` over the index vector at
  index_vector_dim (none when the vector is implicit). Canonical form: operand `d_{1+i} + r_i`,
  indices `(d0, s0)`;
- iota, constant, parameter: no operands.
Runtime variables carry `source=(instr, operand_number)`: the scalar operand that holds the value
(for gather and scatter, the indices operand; variable i is component i of the index vector).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from hlocc.analysis.affine_expr import Const, Expr, IndexingError, dim, rt, size_expr, sym
from hlocc.analysis.indexing_map import NO_UPPER_BOUND, IndexingMap, Variable, size_bound, variables_from_sizes
from hlocc.analysis.interval import Interval
from hlocc.analysis.linearize import delinearize, linear_index
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.symbolic import DimExpr

OpIndexing = Callable[[HloInstruction, tuple[int, ...]], list[IndexingMap | None]]
_REGISTRY: dict[str, OpIndexing] = {}


def register(*opcodes: str):
    def wrap(fn: OpIndexing) -> OpIndexing:
        for opcode in opcodes:
            _REGISTRY[opcode] = fn
        return fn
    return wrap


def output_dims(instr: HloInstruction, output_index: int = 0) -> tuple[int, ...]:
    shape = instr.shape
    if shape.is_tuple:
        shape = shape.tuple_shapes[output_index]
    return shape.dims


def output_to_input(instr: HloInstruction, output_index: int = 0) -> list[IndexingMap | None]:
    """One map (or None: undefined) per operand, from output `output_index` of instr."""
    fn = _REGISTRY.get(instr.opcode)
    if fn is None:
        return [None] * len(instr.operands)
    out = output_dims(instr, output_index)
    if fn is _elementwise and all(type(n) is int for n in out):
        return list(_elementwise_maps(out, tuple(op.shape.rank for op in instr.operands)))
    maps = fn(instr, out)
    return [m.simplify() if m is not None else None for m in maps]


@functools.lru_cache(maxsize=1024)
def _elementwise_maps(out: tuple[int, ...], ranks: tuple[int, ...]) -> tuple[IndexingMap, ...]:
    """An elementwise op's simplified maps depend on its static output dims and its operands' ranks
    only: built once per shape, not once per instruction (a kernel's emission and partitioning ask
    for every instruction's maps; simplifying them was a third of a 17k-op kernel's emission)."""
    maps = (_map(out, _ds(len(out))) if rank == len(out) else _scalar(out) for rank in ranks)
    return tuple(m.simplify() for m in maps)


def _map(out: tuple[int, ...], results, **kw) -> IndexingMap:
    return IndexingMap(variables_from_sizes(out), tuple(results), **kw)


def _scalar(out: tuple[int, ...]) -> IndexingMap:
    return _map(out, ())


def _ds(n: int) -> list[Expr]:
    return [dim(i) for i in range(n)]


# -- elementwise and pure data movement ----------------------------------------------------------

@register(*[name for name, info in OPCODES.items() if info.is_elementwise], "map")
def _elementwise(instr, out):
    return [_map(out, _ds(len(out))) if op.shape.rank == len(out) else _scalar(out) for op in instr.operands]


@register("bitcast-convert")
def _bitcast_convert(instr, out):
    in_dims = instr.operand(0).shape.dims
    if len(in_dims) == len(out):
        return [_map(out, _ds(len(out)))]
    if len(in_dims) < len(out):  # wide -> narrow: the extra minor output dim picks a part
        return [_map(out, _ds(len(in_dims)))]
    return [_map(out, _ds(len(out)) + [sym(0)], symbols=variables_from_sizes(in_dims[-1:]))]


@register("broadcast")
def _broadcast(instr, out):
    return [_map(out, [dim(d) for d in instr.attrs.get("dimensions", ())])]


@register("transpose")
def _transpose(instr, out):
    perm = instr.attrs["dimensions"]
    results: list[Expr] = [Const(0)] * len(perm)
    for i, p in enumerate(perm):
        results[p] = dim(i)
    return [_map(out, results)]


@register("reverse")
def _reverse(instr, out):
    flipped = set(instr.attrs["dimensions"])
    return [_map(out, [out[i] - 1 - dim(i) if i in flipped else dim(i) for i in range(len(out))])]


@register("slice")
def _slice(instr, out):
    return [_map(out, [dim(i) * s.stride + s.start for i, s in enumerate(instr.attrs["slice"])])]


@register("reshape")
def _reshape(instr, out):
    linear = linear_index(out, _ds(len(out)))
    return [_map(out, delinearize(linear, instr.operand(0).shape.dims))]


@register("bitcast")
def _bitcast(instr, out):
    operand = instr.operand(0).shape
    linear = linear_index(out, _ds(len(out)), instr.shape.minor_to_major)
    return [_map(out, delinearize(linear, operand.dims, operand.minor_to_major))]


@register("pad")
def _pad(instr, out):
    in_dims = instr.operand(0).shape.dims
    results, constraints = [], []
    for i, (p, n) in enumerate(zip(instr.attrs["padding"], in_dims)):
        shifted = dim(i) - p.lo
        step = p.interior + 1
        results.append(shifted // step)
        if isinstance(n, DimExpr):  # symbolic: 0 <= shifted <= (n-1)*step, two one-sided constraints
            constraints += [(shifted, Interval(0, NO_UPPER_BOUND)),
                            (size_expr((n - 1) * step) - shifted, Interval(0, NO_UPPER_BOUND))]
        else:
            constraints.append((shifted, Interval(0, (n - 1) * step)))
        if step > 1:
            constraints.append((shifted % step, Interval(0, 0)))
    return [_map(out, results, constraints=tuple(constraints)), _scalar(out)]


@register("concatenate")
def _concatenate(instr, out):
    axis = instr.attrs["dimensions"][0]
    maps, offset = [], 0
    for op in instr.operands:
        n = op.shape.dims[axis]
        dims = list(variables_from_sizes(out))
        results = [dim(i) - offset if i == axis else dim(i) for i in range(len(out))]
        if isinstance(n, DimExpr) or isinstance(offset, DimExpr):  # the window as constraints
            window = ((results[axis], Interval(0, NO_UPPER_BOUND)),
                      (size_expr(n) - 1 - results[axis], Interval(0, NO_UPPER_BOUND)))
            maps.append(IndexingMap(tuple(dims), tuple(results), constraints=window))
        else:
            dims[axis] = Variable(Interval(offset, offset + n - 1))
            maps.append(IndexingMap(tuple(dims), tuple(results)))
        offset += n
    return maps


@register("iota", "constant", "parameter")
def _no_operands(instr, out):
    return []


# -- reductions and contractions -----------------------------------------------------------------

@register("reduce")
def _reduce(instr, out):
    n = len(instr.operands) // 2
    in_dims = instr.operand(0).shape.dims
    reduced = sorted(instr.attrs["dimensions"])
    kept = [i for i in range(len(in_dims)) if i not in reduced]
    results: list[Expr] = [Const(0)] * len(in_dims)
    for j, r in enumerate(reduced):
        results[r] = sym(j)
    for i, k in enumerate(kept):
        results[k] = dim(i)
    symbols = variables_from_sizes([in_dims[r] for r in reduced])
    return [_map(out, results, symbols=symbols)] * n + [_scalar(out)] * n


@register("reduce-window")
def _reduce_window(instr, out):
    n = len(instr.operands) // 2
    in_dims = instr.operand(0).shape.dims
    results, constraints = [], []
    for i, (w, size) in enumerate(zip(instr.attrs.get("window", ()), in_dims)):
        position = dim(i) * w.stride + sym(i) * w.rhs_dilate - size_expr(w.pad_lo)
        results.append(position // w.lhs_dilate)
        if isinstance(size, DimExpr):  # symbolic: two one-sided constraints, as pad's
            constraints += [(position, Interval(0, NO_UPPER_BOUND)),
                            (size_expr((size - 1) * w.lhs_dilate) - position, Interval(0, NO_UPPER_BOUND))]
        else:
            constraints.append((position, Interval(0, (size - 1) * w.lhs_dilate)))
        if w.lhs_dilate > 1:
            constraints.append((position % w.lhs_dilate, Interval(0, 0)))
    symbols = variables_from_sizes([w.size for w in instr.attrs.get("window", ())])
    m = _map(out, results, symbols=symbols, constraints=tuple(constraints))
    return [m] * n + [_scalar(out)] * n


@register("dot")
def _dot(instr, out):
    lhs, rhs = instr.operand(0).shape.dims, instr.operand(1).shape.dims
    lb, rb = instr.attrs.get("lhs_batch_dims", ()), instr.attrs.get("rhs_batch_dims", ())
    lc, rc = instr.attrs.get("lhs_contracting_dims", ()), instr.attrs.get("rhs_contracting_dims", ())
    symbols = variables_from_sizes([lhs[c] for c in lc])
    lhs_free = [i for i in range(len(lhs)) if i not in lb and i not in lc]
    rhs_free = [i for i in range(len(rhs)) if i not in rb and i not in rc]

    def operand_map(rank, batch, contracting, free, first_free):
        results: list[Expr] = [Const(0)] * rank
        for j, b in enumerate(batch):
            results[b] = dim(j)
        for j, c in enumerate(contracting):
            results[c] = sym(j)
        for j, f in enumerate(free):
            results[f] = dim(first_free + j)
        return _map(out, results, symbols=symbols)

    return [operand_map(len(lhs), lb, lc, lhs_free, len(lb)),
            operand_map(len(rhs), rb, rc, rhs_free, len(lb) + len(lhs_free))]


# -- dynamic indexing ------------------------------------------------------------------------------

def _offset_vars(instr, in_dims, sizes, first_operand: int) -> tuple[Variable, ...]:
    """The clamped start offsets, in [0, n - s] (`largest_start`)."""
    return tuple(Variable(Interval(0, largest_start(n, s)), "", (instr, first_operand + i))
                 for i, (n, s) in enumerate(zip(in_dims, sizes)))


def largest_start(n: int | DimExpr, size: int | DimExpr) -> int:
    """The largest start that dynamic-slice and gather clamp to, `n - size`, or a bound of it where
    it is symbolic (the kernel clamps to the runtime value): `n` for a symbolic size of a static
    dimension, the size bound less a static size. Both symbolic may leave a constant (JAX's
    `x[1:, ::2]` on a symbolic `x` gathers `b - 1` rows of `b`)."""
    room = n - size
    if not isinstance(room, DimExpr):
        return max(0, room)
    if not isinstance(n, DimExpr):
        return n
    return max(0, size_bound(n) - size) if not isinstance(size, DimExpr) else size_bound(n)


def _window(e: Expr, n) -> tuple:
    """`e in [0, n-1]` as constraints: one interval, or two one-sided ones for a symbolic `n`."""
    if isinstance(n, DimExpr):
        return ((e, Interval(0, NO_UPPER_BOUND)), (size_expr(n) - 1 - e, Interval(0, NO_UPPER_BOUND)))
    return ((e, Interval(0, n - 1)),)


@register("dynamic-slice")
def _dynamic_slice(instr, out):
    in_dims = instr.operand(0).shape.dims
    runtime = _offset_vars(instr, in_dims, out, 1)
    data = _map(out, [dim(i) + rt(i) for i in range(len(out))], runtime=runtime)
    return [data] + [_scalar(out)] * len(in_dims)


@register("dynamic-update-slice")
def _dynamic_update_slice(instr, out):
    upd = instr.operand(1).shape.dims
    runtime = _offset_vars(instr, out, upd, 2)
    results = [dim(i) - rt(i) for i in range(len(out))]
    constraints = tuple(c for e, n in zip(results, upd) for c in _window(e, n))
    update = _map(out, results, runtime=runtime, constraints=constraints)
    return [_map(out, _ds(len(out))), update] + [_scalar(out)] * len(out)


@register("gather")
def _gather(instr, out):
    """The maps of gather_scatter.gather's semantics: runtime variable k is component k of the
    index vector, clamped (see the module docstring)."""
    a = instr.attrs
    operand, indices = instr.operand(0).shape.dims, instr.operand(1).shape.dims
    sizes, vector_dim, offset_dims = a["slice_sizes"], a["index_vector_dim"], a["offset_dims"]
    batch = [dim(d) for d in range(len(out)) if d not in offset_dims]  # the indices' dims but the vector's
    starts: list[Expr] = [Const(0)] * len(operand)
    for k, d in enumerate(a["start_index_map"]):
        starts[d] = rt(k)
    for od, idim in zip(a.get("operand_batching_dims", ()), a.get("start_indices_batching_dims", ())):
        starts[od] = batch[idim if idim < vector_dim else idim - 1]
    removed = {*a["collapsed_slice_dims"], *a.get("operand_batching_dims", ())}
    window = [d for d in range(len(operand)) if d not in removed]
    for w, d in enumerate(window):
        starts[d] = starts[d] + dim(offset_dims[w])
    runtime = tuple(Variable(Interval(0, largest_start(operand[d], sizes[d])), "", (instr, 1))
                    for d in a["start_index_map"])
    if vector_dim == len(indices):  # an implicit index vector of one component
        return [_map(out, starts, runtime=runtime), _map(out, batch)]
    vector = batch[:vector_dim] + [sym(0)] + batch[vector_dim:]
    return [_map(out, starts, runtime=runtime), _map(out, vector, symbols=variables_from_sizes([indices[vector_dim]]))]


@register("scatter")
def _scatter(instr, out):
    n = len(instr.operands) // 2
    return [_map(out, _ds(len(out)))] * n + [None] * (len(instr.operands) - n)


def scatter_update_to_operand(instr: HloInstruction) -> IndexingMap:
    """For a canonical scatter (indices [N, K], index_vector_dim 1, update_window_dims 1..rank, no
    inserted dims, scatter_dims_to_operand_dims 0..K-1): the map from an index of the updates
    tensor to the operand element it combines into, `(d0, d1..dr){r} -> (d_{1+i} + r_i)`. Updates
    whose whole window would leave the operand are skipped by XLA's scatter; the runtime variable
    bounds state the in-bounds offsets."""
    a = instr.attrs
    n = len(instr.operands) // 2
    operand, indices, updates = instr.operand(0).shape.dims, instr.operand(n).shape.dims, instr.operand(n + 1).shape
    rank = len(operand)
    if (len(indices) != 2 or a.get("index_vector_dim") != 1 or a.get("inserted_window_dims")
            or tuple(a.get("update_window_dims", ())) != tuple(range(1, rank + 1))
            or tuple(a.get("scatter_dims_to_operand_dims", ())) != tuple(range(indices[1]))):
        raise IndexingError(f"scatter '{instr.name}' is not in canonical form")
    k = indices[1]
    window = updates.dims[1:]
    runtime = tuple(Variable(Interval(0, operand[i] - window[i]), "", (instr, n)) for i in range(k))
    results = [dim(1 + i) + rt(i) if i < k else dim(1 + i) for i in range(rank)]
    return IndexingMap(variables_from_sizes(updates.dims), tuple(results), runtime=runtime).simplify()
