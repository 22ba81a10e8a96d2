"""Table entries for views, reshapes and data movement: view/reshape/squeeze/unsqueeze, permute,
expand, slice/select, cat/stack/split, constant_pad_nd, flip, repeat, and the SymInt arithmetic
dynamo records between them (`sym_size`, Python's `+ - * //` on sizes, `getitem`).

hlocc arrays have no strides: a view is a new value (HLO reshape/transpose/slice), and XLA's
fusion makes it free where it can; PyTorch's aliasing is gone once `aot_autograd` functionalized
the graph. Sizes come from the node's FakeTensor, so `-1` and symbolic sizes are already resolved.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

from hlocc.errors import UnsupportedError
from hlocc.frontends.torch.types import to_dim
from hlocc.hlo.attributes import PadDim, SliceDim
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.symbolic import DimExpr, lower_bound
from hlocc.hlo.types import Shape, primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext


_S64 = primitive_type("s64")


def _norm_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def _reshape(cx: LoweringContext, x, *_):
    return _product_unflattened(cx, x) or cx.reshape(x, cx.shape.dims)


def _product_unflattened(cx: LoweringContext, x: HloInstruction) -> HloInstruction | None:
    """`view(addmm(b, view(y, [M, K]), w), [..., N])`, a Linear over a rank > 2 input as its
    decomposition leaves it, as one dot of `y` itself (contracting its last dimension) and the bias
    added at `y`'s rank; None where the graph is not that (or the product has other users). With the
    reshapes gone, the fusion that reads the product (the residual add and LayerNorm statistics
    after attention's projection, stitched into one kernel) has no reshape to index through: that
    kernel compiled in 0.8 s against 0.13 s for the same LayerNorm without it (transformer block)."""
    source = cx.node.args[0]
    dims = tuple(cx.shape.dims)
    if len(getattr(source, "users", ())) != 1 or not all(isinstance(d, int) for d in dims):
        return None
    bias, product = (x.operands if x.opcode == "add" and x.operands[0].opcode == "broadcast" else (None, x))
    if product.opcode != "dot" or product.attrs.get("lhs_batch_dims") or product.operands[0].opcode != "reshape":
        return None
    lhs, rhs = product.operands
    y = lhs.operands[0]
    if (y.shape.rank < 3 or lhs.shape.rank != 2 or tuple(y.shape.dims) != dims[:-1] + (lhs.shape.dims[1],)
            or product.shape.dims[1] != dims[-1] or product.attrs.get("lhs_contracting_dims") != (1,)):
        return None
    if bias is not None and (bias.attrs.get("dimensions") != (1,) or bias.operands[0].shape.rank != 1):
        return None
    out = cx.add("dot", [y, rhs], {"lhs_batch_dims": (), "lhs_contracting_dims": (len(dims) - 1,),
                                   "rhs_batch_dims": (), "rhs_contracting_dims": product.attrs["rhs_contracting_dims"]},
                 shape=cx.shape)
    if bias is None:
        return out
    return cx.add("add", [cx.add("broadcast", [bias.operands[0]], {"dimensions": (len(dims) - 1,)}, shape=cx.shape),
                          out])


def _permute(cx: LoweringContext, x, dims):
    dims = tuple(_norm_dim(d, x.shape.rank) for d in dims)
    return x if dims == tuple(range(x.shape.rank)) else cx.add("transpose", [x], {"dimensions": dims}, shape=cx.shape)


def _transpose(cx: LoweringContext, x, a=0, b=1):
    dims = list(range(x.shape.rank))
    if dims:
        a, b = _norm_dim(a, x.shape.rank), _norm_dim(b, x.shape.rank)
        dims[a], dims[b] = dims[b], dims[a]
    return _permute(cx, x, dims)


def _expand(cx: LoweringContext, x, *_, **__):
    return cx.broadcast_to(x, cx.shape.dims)


def slice_dim(cx: LoweringContext, x, dim: int, start, size, step: int = 1) -> HloInstruction:
    """Elements start, start+step, ... (`size` of them) of dimension `dim`."""
    limit = start + (size - 1) * step + 1 if size != 0 else start
    if not (_provably_within(limit, x.shape.dims[dim]) and _provably_within(start, limit)):
        return _gathered_slice(cx, x, dim, start, size, step)
    limits = [SliceDim(0, d, 1) for d in x.shape.dims]
    limits[dim] = SliceDim(start, limit, step)
    if limits[dim] == SliceDim(0, x.shape.dims[dim], 1):
        return x
    return cx.add("slice", [x], {"slice": tuple(limits)}, shape=x.shape.with_dims(
        [size if i == dim else d for i, d in enumerate(x.shape.dims)]))


def _provably_within(limit, size) -> bool:
    """Whether `limit` <= `size` for every value of their symbols (each >= 1), as HLO's slice rule
    checks it; sizes known only to PyTorch's guards (`x[:, :2]` of a dynamic s0 >= 2) are not."""
    if isinstance(limit, int) and isinstance(size, int):
        return True  # (static: the shape rule's own check stands)
    low = lower_bound(size - limit)
    return low is not None and low >= 0


def _gathered_slice(cx: LoweringContext, x, dim: int, start, size, step: int) -> HloInstruction:
    """A slice whose end HLO's slice rule cannot prove in bounds as a gather of start + step·iota: a
    symbolic-length slice of a static dimension (`position_ids[:, :seq]` of a 128-entry buffer), or
    a fixed-length one of a symbolic dimension (`x[:, :2]`, topk's first k under dynamic=True), or
    one whose length may be negative for small sizes (unfold's `floordiv(s - 3, 2) + 1` windows).
    The bounds hold by PyTorch's guards but not for every value of the symbol."""
    shape = x.shape.with_dims([size]).with_element_type(primitive_type("s64"))
    index = cx.add("iota", attrs={"iota_dimension": 0}, shape=shape)
    if step != 1:
        index = cx.add("multiply", [index, cx.full(step, shape)])
    if not (isinstance(start, int) and start == 0):
        index = cx.add("add", [index, cx.broadcast_to(cx.constant(start, "s64"), [size])])
    return cx.add("gather", [x, index], {
        "offset_dims": tuple(i for i in range(x.shape.rank) if i != dim), "collapsed_slice_dims": (dim,),
        "start_index_map": (dim,), "index_vector_dim": 1,
        "slice_sizes": tuple(1 if i == dim else d for i, d in enumerate(x.shape.dims))},
        shape=x.shape.with_dims([size if i == dim else d for i, d in enumerate(x.shape.dims)]))


def _slice(cx: LoweringContext, x, dim=0, start=None, end=None, step=1):
    dim = _norm_dim(dim, x.shape.rank)
    size = x.shape.dims[dim]
    start = 0 if start is None else start
    if isinstance(start, int) and start < 0:
        start = max(start + size, 0) if isinstance(size, int) else start + size
    if isinstance(start, int) and isinstance(size, int):
        start = min(start, size)
    return slice_dim(cx, x, dim, start, cx.shape.dims[dim], step)


def _select(cx: LoweringContext, x, dim, index):
    dim = _norm_dim(dim, x.shape.rank)
    if isinstance(index, int) and index < 0:
        index += x.shape.dims[dim]
    return cx.reshape(slice_dim(cx, x, dim, index, 1), cx.shape.dims)


def _unfold(cx: LoweringContext, x, dim, size, step):
    """Tensor.unfold: the windows of `size` elements every `step` along `dim`, as a new last
    dimension: window offset j is the strided slice j, j + step, ... (one per window), the `size`
    slices stacked."""
    dim = _norm_dim(dim, x.shape.rank)
    count = cx.shape.dims[dim]
    if not isinstance(size, int):
        raise cx.error(f"unfold of a symbolic window size {size}")
    parts = [slice_dim(cx, x, dim, j, count, step) for j in range(size)]
    parts = [cx.reshape(p, [*p.shape.dims, 1]) for p in parts]
    return cx.add("concatenate", parts, {"dimensions": (x.shape.rank,)}, shape=cx.shape) if len(parts) > 1 \
        else cx.reshape(parts[0], cx.shape.dims)


def _cat(cx: LoweringContext, tensors, dim=0):
    et = cx.element_type
    # PyTorch skips 1-D empty tensors in cat (legacy behaviour); HLO needs equal ranks
    parts = [cx.convert(t, et) for t in tensors if not (t.shape.rank == 1 and t.shape.dims[0] == 0)]
    dim = _norm_dim(dim, cx.shape.rank)
    if len(parts) == 1:
        return parts[0]
    return cx.add("concatenate", parts, {"dimensions": (dim,)}, shape=cx.shape)


def _stack(cx: LoweringContext, tensors, dim=0):
    dim = _norm_dim(dim, cx.shape.rank)
    parts = [cx.reshape(cx.convert(t, cx.element_type), cx.shape.dims[:dim] + (1,) + cx.shape.dims[dim + 1:])
             for t in tensors]
    return parts[0] if len(parts) == 1 else cx.add("concatenate", parts, {"dimensions": (dim,)}, shape=cx.shape)


def _split_with_sizes(cx: LoweringContext, x, sizes, dim=0):
    dim = _norm_dim(dim, x.shape.rank)
    parts, start = [], 0
    for size in sizes:
        parts.append(slice_dim(cx, x, dim, start, size))
        start = start + size
    return parts


def _split(cx: LoweringContext, x, split_size, dim=0):
    return _split_with_sizes(cx, x, [s.dims[_norm_dim(dim, x.shape.rank)] for s in cx.shapes()], dim)


def _unbind(cx: LoweringContext, x, dim=0):
    dim = _norm_dim(dim, x.shape.rank)
    return [cx.reshape(slice_dim(cx, x, dim, i, 1), s.dims) for i, s in enumerate(cx.shapes())]


def _constant_pad_nd(cx: LoweringContext, x, pad, value=0):
    """`pad` lists (before, after) pairs from the last dimension backwards; negative pads crop
    (HLO's pad takes negative edge padding as XLA's does)."""
    padding = [PadDim(0, 0)] * x.shape.rank
    for i in range(len(pad) // 2):
        padding[x.shape.rank - 1 - i] = PadDim(pad[2 * i], pad[2 * i + 1])
    return cx.add("pad", [x, cx.constant(value, cx.element_type)], {"padding": tuple(padding)}, shape=cx.shape)


def _flip(cx: LoweringContext, x, dims):
    return cx.add("reverse", [x], {"dimensions": tuple(sorted(_norm_dim(d, x.shape.rank) for d in dims))},
                  shape=cx.shape)


def _repeat(cx: LoweringContext, x, repeats):
    """Tile: broadcast each dimension d to (repeats[d], size[d]), then merge the pairs."""
    lead = len(repeats) - x.shape.rank
    dims = [1] * lead + list(x.shape.dims)
    x = cx.reshape(x, dims)
    pairs = [v for r, d in zip(repeats, dims) for v in (r, d)]
    tiled = cx.add("broadcast", [x], {"dimensions": tuple(2 * i + 1 for i in range(len(dims)))},
                   shape=x.shape.with_dims(pairs))
    return cx.reshape(tiled, cx.shape.dims)


def _diagonal_index(cx: LoweringContext, offset: int, length) -> HloInstruction:
    """s64[length, 2]: the (row, column) of each diagonal element, i + max(-offset, 0) and i + max(offset, 0)."""
    line_shape = Shape.array(primitive_type("s64"), (length,))
    line = cx.add("iota", attrs={"iota_dimension": 0}, shape=line_shape)
    columns = []
    for start in (max(-offset, 0), max(offset, 0)):
        column = line if start == 0 else cx.add("add", [line, cx.full(start, line_shape)])
        columns.append(cx.reshape(column, [length, 1]))
    return cx.add("concatenate", columns, {"dimensions": (1,)})


def _diagonal(cx: LoweringContext, x, offset=0, dim1=0, dim2=1):
    """x[..., i, ..., i + offset, ...] for i < the diagonal's length, which PyTorch puts last: a
    gather along (dim1, dim2), the other dimensions taken whole (einsum's "ii->i", diag, trace)."""
    rank = x.shape.rank
    dim1, dim2 = _norm_dim(dim1, rank), _norm_dim(dim2, rank)
    return cx.add("gather", [x, _diagonal_index(cx, offset, cx.shape.dims[-1])], {
        "offset_dims": tuple(range(rank - 2)), "collapsed_slice_dims": tuple(sorted((dim1, dim2))),
        "start_index_map": (dim1, dim2), "index_vector_dim": 1,
        "slice_sizes": tuple(1 if i in (dim1, dim2) else d for i, d in enumerate(x.shape.dims))}, shape=cx.shape)


def _diagonal_scatter(cx: LoweringContext, x, src, offset=0, dim1=0, dim2=1):
    """x with its diagonal (as `_diagonal` reads it) replaced by `src` (diagonal's backward)."""
    rank = x.shape.rank
    dim1, dim2 = _norm_dim(dim1, rank), _norm_dim(dim2, rank)
    src = cx.convert(src, cx.element_type)
    return cx.add("scatter", [x, _diagonal_index(cx, offset, src.shape.dims[-1]), src], {
        "update_window_dims": tuple(range(rank - 2)), "inserted_window_dims": tuple(sorted((dim1, dim2))),
        "scatter_dims_to_operand_dims": (dim1, dim2), "index_vector_dim": 1,
        "to_apply": cx.lowering.reducer("assign", cx.element_type)}, shape=cx.shape)


def _sym_size(cx: LoweringContext, x, dim):
    return x.shape.dims[dim]


def _sym_numel(cx: LoweringContext, x):
    n = 1
    for d in x.shape.dims:
        n = n * d
    return n


def _getitem(cx: LoweringContext, values, index):
    value = values[index]
    if value is None:
        raise cx.error(f"output {index} of '{cx.node.args[0].name}' is not lowered")
    return value


def _sym_op(op, build, floats: bool = False):
    """Python's `op` on sizes and numbers (a size, or a number); where an operand is a float
    computed from a size (`_sym_float`: an f64 scalar instruction), or for `floats` (`/`, `**`) a
    size, `build(cx, *f64 scalars)`: attention's `1 / sqrt(float(d))` computed in the module."""
    def rule(cx: LoweringContext, *args):
        if any(isinstance(a, HloInstruction) for a in args) or (floats and any(isinstance(a, DimExpr) for a in args)):
            return build(cx, *(_f64(cx, a) for a in args))
        return op(*args)
    return rule


def _hlo(opcode: str):
    return lambda cx, *xs: cx.add(opcode, list(xs), shape=_F64)


def _float_floordiv(cx: LoweringContext, a, b):
    """Python's `a // b` of floats: floor(a / b)."""
    return cx.add("floor", [cx.add("divide", [a, b], shape=_F64)], shape=_F64)


def _float_mod(cx: LoweringContext, a, b):
    """Python's `a % b` of floats (the divisor's sign): a - b * floor(a / b)."""
    return cx.add("subtract", [a, cx.add("multiply", [_float_floordiv(cx, a, b), b], shape=_F64)], shape=_F64)


def _sym_float(cx: LoweringContext, x):
    """torch.sym_float: a float of a size, an f64 scalar of the size's value when it is symbolic."""
    return _f64(cx, x) if isinstance(x, (DimExpr, HloInstruction)) else float(x)


def _local_scalar_dense(cx: LoweringContext, x):
    """Tensor.item() of a one-element tensor: its value as a scalar instruction, as the table takes
    a number computed in the graph: f64 for a float (a Python float), s64 for an integer, pred for
    a bool. Under dynamic=True dynamo passes a module's float attributes (a scale, an eps) as 0-d
    inputs read by .item(); without this rule every such inference graph (GPT-2, Llama, T5) ran
    eager. (An integer used as a size would be data-dependent: refused where it is used.)"""
    if not isinstance(x, HloInstruction):
        return x
    et = x.shape.element_type
    if et.is_complex:
        raise cx.error("item() of a complex tensor is not lowered")
    return cx.convert(cx.reshape(x, []), "f64" if et.is_float else "pred" if et.name == "pred" else "s64")


def _sym_rounding(fn, opcode: str | None):
    """`math.floor`/`ceil`/`trunc` of a float computed from a size: an int size, PyTorch's own
    expression for it (`TruncToInt(1.5*ToFloat(s))`, interpolate's output size) as an hlocc size
    (types.to_dim: `floordiv(3*s, 2)`); where that has no hlocc form (a float that is not a dyadic
    fraction), HLO's `opcode` on the f64 scalar (a value, not a size)."""
    as_float = _sym_math(fn, opcode) if opcode is not None else None

    def rule(cx: LoweringContext, x):
        if isinstance(x, (int, float)):
            return fn(x)
        try:
            return to_dim(cx.val, cx.lowering.facts)
        except UnsupportedError:
            if as_float is None:
                raise
            return as_float(cx, x)
    return rule


def _sym_math(fn, opcode: str):
    """A math function of a size (`math.sqrt(x.shape[-1])` traces as `_sym_sqrt`): on a float of a
    symbolic size, HLO's `opcode` on an f64 scalar."""
    def rule(cx: LoweringContext, x):
        if isinstance(x, (DimExpr, HloInstruction)):
            return cx.add(opcode, [_f64(cx, x)], shape=_F64)
        return fn(x)
    return rule


_F64 = Shape.array("f64", ())


def _f64(cx: LoweringContext, x) -> HloInstruction:
    if isinstance(x, HloInstruction):
        return cx.convert(x, "f64")
    return cx.constant(x, "f64")


# -- element indexing (shared by the gather, scatter, scan and sort rules) -------------------------
def element_count(x) -> int:
    """The number of elements of an instruction or a shape (static)."""
    n = 1
    for d in getattr(x, "shape", x).dims:
        n *= d
    return n


def wrapped_index(cx: LoweringContext, index: HloInstruction, where: tuple) -> HloInstruction:
    """`index` as s64 with negative values wrapped by the size of dimension where[1] of where[0]
    (PyTorch's negative indexing), checked to lie in [-size, size) (`check_index_range`)."""
    x, dim = where
    index = cx.convert(index, "s64")
    scalar_size = cx.size_of(x, [dim], "s64")
    check_index_range(cx, index, cx.add("negate", [scalar_size]), scalar_size,
                      f"index out of range for dimension {dim} of size {x.shape.dims[dim]}")
    negative = cx.add("compare", [index, cx.full(0, index.shape)], {"direction": "LT"})
    size = cx.broadcast_to(scalar_size, index.shape.dims)
    return cx.add("select", [negative, cx.add("add", [index, size]), index])


def check_index_range(cx: LoweringContext, index: HloInstruction, low: HloInstruction, high: HloInstruction,
                      message: str) -> None:
    """An assertion that every element of the s64 `index` lies in [low, high) (scalars): an extra
    result of the program that the compiled graph checks after each call, raising RuntimeError(message)
    as eager raises for an index out of range, where the gather would clamp it to an answer."""
    if index.shape.num_elements == 0:
        return
    bounds = [cx.add("compare", [index, cx.broadcast_to(bound, index.shape.dims)], {"direction": direction})
              for bound, direction in ((low, "GE"), (high, "LT"))]
    inside = cx.add("and", bounds)
    every = cx.add("reduce", [inside, cx.constant(True, "pred")],
                   {"dimensions": tuple(range(index.shape.rank)), "to_apply": cx.reducer("and", "pred")},
                   shape=Shape.array(primitive_type("pred"), []))
    cx.lowering.assertions.append((every, message))


def checked_index(cx: LoweringContext, index: HloInstruction, where: tuple) -> HloInstruction:
    """`index` as s64, checked to lie in [0, size) of dimension where[1] of where[0]: the index of
    torch.gather, scatter and index_select, which take no negative index."""
    x, dim = where
    index = cx.convert(index, "s64")
    check_index_range(cx, index, cx.constant(0, "s64"), cx.size_of(x, [dim], "s64"),
                      f"index out of range for dimension {dim} of size {x.shape.dims[dim]}")
    return index


def element_indices(cx: LoweringContext, x, dim: int, index: HloInstruction, check: bool = True) -> HloInstruction:
    """[*index.shape, rank] coordinates into x: iotas, with `index` along `dim` (`checked_index`;
    unchecked where a rule made the index itself, in range)."""
    along = checked_index(cx, index, (x, dim)) if check else cx.convert(index, "s64")
    columns = []
    for d in range(index.shape.rank):
        column = along if d == dim else cx.add(
            "iota", attrs={"iota_dimension": d}, shape=index.shape.with_element_type(_S64))
        columns.append(cx.reshape(column, list(index.shape.dims) + [1]))
    return cx.add("concatenate", columns, {"dimensions": (index.shape.rank,)}) if len(columns) > 1 else columns[0]


def gather_along(cx: LoweringContext, x, dim: int, index: HloInstruction) -> HloInstruction:
    """torch.gather(x, dim, index) of an index of the result's own shape (not the node's: a rule
    gathering on the way to its result, so in range)."""
    rank = x.shape.rank
    return cx.add("gather", [x, element_indices(cx, x, dim, index, check=False)],
                  {"offset_dims": (), "collapsed_slice_dims": tuple(range(rank)), "start_index_map": tuple(range(rank)),
                   "index_vector_dim": rank, "slice_sizes": (1,) * rank},
                  shape=index.shape.with_element_type(x.shape.element_type))


OPS = {
    "aten.view.default": _reshape, "aten._unsafe_view.default": _reshape, "aten.reshape.default": _reshape,
    "aten.view_copy.default": _reshape, "aten.squeeze.dim": _reshape, "aten.squeeze.dims": _reshape,
    "aten.squeeze.default": _reshape, "aten.unsqueeze.default": _reshape,
    "prims.collapse_view.default": _reshape,
    "aten.permute.default": _permute, "aten.permute_copy.default": _permute,
    "aten.transpose.int": _transpose, "aten.t.default": _transpose,
    "aten.expand.default": _expand, "aten.expand_copy.default": _expand,
    "aten.slice.Tensor": _slice, "aten.slice_copy.Tensor": _slice,
    "aten.select.int": _select, "aten.select_copy.int": _select,
    "aten.cat.default": _cat, "aten.stack.default": _stack,
    "aten.split_with_sizes.default": _split_with_sizes, "aten.split.Tensor": _split,
    "aten.split_with_sizes_copy.default": _split_with_sizes, "aten.unbind.int": _unbind,
    "aten.diagonal.default": _diagonal, "aten.diagonal_copy.default": _diagonal,
    "aten.diagonal_scatter.default": _diagonal_scatter,
    "aten.constant_pad_nd.default": _constant_pad_nd, "aten.flip.default": _flip, "aten.repeat.default": _repeat,
    "aten.unfold.default": _unfold,
    "aten.sym_size.int": _sym_size, "aten.sym_numel.default": _sym_numel,
    "aten._local_scalar_dense.default": _local_scalar_dense,
    "getitem": _getitem,
    "add": _sym_op(operator.add, _hlo("add")), "sub": _sym_op(operator.sub, _hlo("subtract")),
    "mul": _sym_op(operator.mul, _hlo("multiply")), "neg": _sym_op(operator.neg, _hlo("negate")),
    "floordiv": _sym_op(operator.floordiv, _float_floordiv), "mod": _sym_op(operator.mod, _float_mod),
    "truediv": _sym_op(operator.truediv, _hlo("divide"), floats=True),
    "pow": _sym_op(operator.pow, _hlo("power"), floats=True),
    "sym_max": _sym_op(max, _hlo("maximum")), "sym_min": _sym_op(min, _hlo("minimum")), "sym_float": _sym_float,
    "_sym_sqrt": _sym_math(math.sqrt, "sqrt"), "_sym_exp": _sym_math(math.exp, "exponential"),
    "_sym_log": _sym_math(math.log, "log"), "_sym_cos": _sym_math(math.cos, "cosine"),
    "_sym_sin": _sym_math(math.sin, "sine"), "_sym_tanh": _sym_math(math.tanh, "tanh"),
    "floor": _sym_rounding(math.floor, "floor"), "ceil": _sym_rounding(math.ceil, "ceil"),
    "trunc": _sym_rounding(math.trunc, None),
}
