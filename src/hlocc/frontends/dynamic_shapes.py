"""Dynamic shapes in the StableHLO frontend: symbols for @main's `?` dimensions, the values of
shape tensors as symbolic sizes, and the conversions of StableHLO's dynamic ops to HLO ops on
symbolic shapes.

JAX's shape-polymorphic export (`jax.export` with `symbolic_shape`) passes each dimension variable
into `@_wrapped_jax_export_main` as an `i32` argument marked `jax.global_constant = "b"`, computed
in @main by `get_dimension_size` of an argument; `entry_parameter_shapes` names the dimension
after that variable (other `?` dims of @main get `argK_D`). Shape tensors (`get_dimension_size`,
constants, reshape, convert, concatenate, broadcast, integer arithmetic, compare) are evaluated at
import into tuples of symbolic sizes (`record_sizes`, rules as data in `SIZE_RULES`); the dynamic
ops read their shapes from them: `dynamic_broadcast_in_dim` → broadcast, `dynamic_reshape` →
reshape, `dynamic_iota` → iota, `real_dynamic_slice` and slice-like `dynamic_gather` → slice,
`dynamic_pad` → pad, the `stablehlo.dynamic_reduce_window` custom call → reduce-window, and
`@shape_assertion` custom calls → `ShapeGuard`s of the module. The HLO instructions that compute
shape tensors stay in the module (dead once every use is resolved; DCE removes them).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping

import numpy as np

from hlocc.frontends import mlir_support as ms
from hlocc.frontends.size_arithmetic import (
    SPECULATED,
    and_sizes,
    compare_sizes,
    elementwise,
    select_size,
    size_max,
    size_min,
    size_sign,
    speculated_extremum,
    truncating_divide,
    truncating_remainder,
)
from hlocc.hlo.attributes import PadDim, SliceDim, WindowDim
from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.symbolic import (
    Dim,
    DimExpr,
    InconclusiveDimensionError,
    floordiv,
    mod,
    substitute,
    symbol,
    variables_of,
)
from hlocc.hlo.types import UNBOUNDED, Shape

_MAX_SHAPE_TENSOR = 64  # constants larger than this are data, not shapes


# -- symbols of the entry's dimensions ------------------------------------------------------------
def entry_parameter_shapes(importer, func, rename: Mapping[str, Dim] | None = None) -> list[Shape]:
    """@main's argument shapes, each `?` dimension a symbol named after its dimension variable;
    dimensions that @main asserts equal (`get_dimension_size` == `get_dimension_size`) share one;
    a symbol in `rename` (dimension_renaming) is its expression there."""
    rename = rename or {}
    names = _dimension_variable_names(importer, func)
    shapes = []
    for k, arg in enumerate(func.regions[0].blocks[0].arguments):
        shape = ms.to_shape(arg.type)
        if shape.is_tuple or shape.is_token or UNBOUNDED not in shape.dims:
            shapes.append(shape)
            continue
        dims = [substitute(symbol(names.get((k, d), f"arg{k}_{d}")), rename) if size == UNBOUNDED else size
                for d, size in enumerate(shape.dims)]
        shapes.append(Shape.array(shape.element_type, dims, dynamic=shape.dynamic))
    return shapes


def _dimension_variable_names(importer, func) -> dict[tuple[int, int], str]:
    """(argument, dimension) → the name of the dimension variable @main passes for it to a callee
    argument marked `jax.global_constant`, where it is `get_dimension_size` of that argument; the
    name spreads to the dimensions @main compares equal to it."""
    ir = ms.mlir_modules()[0]
    args = list(func.regions[0].blocks[0].arguments)

    def dimension_of(value):
        owner = value.owner
        if getattr(owner, "name", None) != "stablehlo.get_dimension_size" or owner.operands[0] not in args:
            return None
        return args.index(owner.operands[0]), ms.int_attr(owner, "dimension")

    names: dict[tuple[int, int], str] = {}
    parent: dict = {}

    def find(key):
        while parent.get(key, key) != key:
            key = parent[key]
        return key

    for op in func.regions[0].blocks[0].operations:
        if op.operation.name == "stablehlo.compare" and str(op.attributes["comparison_direction"]).endswith("EQ>"):
            a, b = (dimension_of(v) for v in op.operands)
            if a is not None and b is not None:
                parent[find(a)] = find(b)
        if op.operation.name != "func.call":
            continue
        callee = importer.functions.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
        if callee is None or "arg_attrs" not in callee.attributes:
            continue
        for operand, attrs in zip(op.operands, callee.attributes["arg_attrs"]):
            key = dimension_of(operand)
            if key is not None and "jax.global_constant" in attrs:
                name = ir.StringAttr(attrs["jax.global_constant"]).value
                if name.isidentifier():
                    names.setdefault(key, name)
    by_class = {find(key): name for key, name in names.items()}
    keys = set(parent) | set(parent.values()) | set(names)
    return {key: by_class[find(key)] for key in keys if find(key) in by_class}


def record_dimension_variable(importer, func, index: int, sizes: tuple) -> None:
    """Remember the value passed for a function argument JAX marks as dimension variable `name`."""
    attrs = func.attributes["arg_attrs"][index] if "arg_attrs" in func.attributes else None
    if attrs is None or "jax.global_constant" not in attrs or len(sizes) != 1:
        return
    name = ms.mlir_modules()[0].StringAttr(attrs["jax.global_constant"]).value
    if name.isidentifier() and isinstance(sizes[0], DimExpr):
        importer.dimension_variables.setdefault(name, sizes[0])


def dimension_renaming(importer) -> dict[str, DimExpr]:
    """The entry dimensions that JAX derives a dimension variable from, each in terms of that
    variable: `2*b` gives `b = floordiv(arg0_0, 2)`, so `arg0_0` is `2*b`. The importer imports
    again with the entry's dimensions so written (`entry_rename`): every size of the body is then an
    expression of `b` in which JAX's `2*b` is the argument's dimension itself (written after the
    import, `x * 2` over `"b, 2*n"` compared `2*floordiv(arg0_1, 2)` with `arg0_1`). Likewise a
    dimension that a shape assertion equates to an expression of the variables (`3*m` for a later
    argument, `arg1_0 == 3*m`) is that expression."""
    entry = importer.module.entry
    if entry is None or not importer.dimension_variables:  # (a failure before the entry's parameters)
        return {}
    unnamed = {v for p in entry.parameters for v in p.shape.symbols if v.startswith("arg")}
    rename: dict[str, DimExpr] = {}
    for name, value in importer.dimension_variables.items():
        free = value.variables & unnamed
        if name in value.variables or len(value.variables) != 1 or not free or next(iter(free)) in rename:
            continue
        v = next(iter(free))
        candidate = _inverse(value, v, name)
        if candidate is not None:
            rename[v] = candidate
    for guard in importer.module.guards:  # `arg1_0 == 3*m`: a later argument's derived dimension
        for c in guard.predicate.comparisons:
            for lone, other in ((c.lhs, c.rhs), (c.rhs, c.lhs)):
                v = next(iter(lone.variables)) if isinstance(lone, DimExpr) and lone.variables else None
                if (c.direction == "EQ" and v in unnamed and v not in rename and lone == symbol(v)
                        and v not in variables_of([other])):
                    rename[v] = substitute(other, rename)
    return rename


def drop_settled_guards(module) -> None:
    """Guards that hold at every size once the entry's dimensions are written in their variables
    (`mod(2*b, 2) == 0`; binding checks the divisibility instead)."""
    module.guards[:] = [g for g in module.guards
                        if not all(isinstance(c.lhs, int) and isinstance(c.rhs, int) and c.holds({})
                                   for c in g.predicate.comparisons)]


def _inverse(value: DimExpr, v: str, name: str):
    """`k*name + c` such that `value` with `v` replaced by it is `name` (for value = v + d or
    floordiv(v + d, k)), or None."""
    n = symbol(name)
    terms = dict(value.terms)
    candidates = [n - (value - symbol(v))] if isinstance(value - symbol(v), int) else []
    for monomial, coefficient in terms.items():
        if len(monomial) == 1 and monomial[0][0].op == "floordiv" and coefficient == 1:
            numerator, k = monomial[0][0].args
            rest = value - floordiv(numerator, k)
            if isinstance(k, int) and isinstance(rest, int) and isinstance(numerator - symbol(v), int):
                candidates.append(k * (n - rest) - (numerator - symbol(v)))
    for candidate in candidates:
        if substitute(value, {v: candidate}) == n:
            return candidate
    return None


# -- shape tensors as symbolic sizes --------------------------------------------------------------
def record_sizes(cx) -> None:
    """Record the symbolic value of the op's result when it is a shape tensor the rules know."""
    results = list(cx.op.results)
    if cx.name == "func.call":
        _record_call_sizes(cx, results)
        return
    rule = SIZE_RULES.get(cx.name)
    if rule is None or len(results) != 1:
        return
    args = [cx.sizes(i) for i in range(len(cx.op.operands))]
    if any(a is None for a in args) and cx.name not in _SOURCES:
        causes = (cx.scope.unknown_sizes.get(v) for v in cx.op.operands)
        if (cause := next((c for c in causes if c is not None), None)) is not None:
            cx.scope.unknown_sizes[results[0]] = cause  # a size computed from it is unknown for that cause
        return
    try:
        value = rule(cx, *args)
    except InconclusiveDimensionError as e:
        value = speculated_extremum(cx, *args) if cx.name in SPECULATED else None
        if value is None and cx.name in _MIN_MAX:
            cx.scope.unknown_sizes[results[0]] = (f"{cx.name} of dimension sizes, which the symbolic algebra cannot "
                                                  f"decide for every size ({e})")
    if value is not None:
        cx.scope.sizes[results[0]] = tuple(value)


def _record_call_sizes(cx, results) -> None:
    """A call's results have the values its callee returns (JAX computes `divmod` of dimension
    sizes in private functions); where the rules cannot follow the callee, the values of jnp's
    integer division functions (`_INTEGER_DIVISION`)."""
    converted = cx.scope.values.get(results[0]) if results else None
    call = converted[0] if isinstance(converted, tuple) else converted
    if call is None or call.opcode != "call":
        return
    for result, sizes in zip(results, cx.importer.returned_sizes.get(id(call.attrs["to_apply"]), [])):
        if sizes is not None:
            cx.scope.sizes[result] = sizes
    if all(r in cx.scope.sizes for r in results) or len(cx.op.operands) < 2:
        return
    name = ms.mlir_modules()[0].FlatSymbolRefAttr(cx.op.attributes["callee"]).value
    x, y = cx.sizes(len(cx.op.operands) - 2), cx.sizes(len(cx.op.operands) - 1)
    division = _INTEGER_DIVISION.get(re.sub(r"_\d+$", "", name))  # JAX names a second copy `divmod_0`
    if division is None or x is None or y is None or len(x) != 1 or len(y) != 1 \
            or not _computes_integer_division(cx.importer.functions.get(name), cx.importer.functions):
        return
    try:
        values = division(x[0], y[0])
    except InconclusiveDimensionError:
        return
    for result, value in zip(results, values):
        cx.scope.sizes[result] = (value,)


_INTEGER_DIVISION = {
    "floor_divide": lambda x, y: (floordiv(x, y),), "remainder": lambda x, y: (mod(x, y),),
    "divmod": lambda x, y: (floordiv(x, y), mod(x, y)),
}
"""jnp's integer `floor_divide`, `remainder` (the divisor's sign) and `divmod`, which JAX's export
calls on dimension sizes (the SAME padding of a window over a symbolic size divides `-h`): they
round a truncating `divide` down where the signs differ and the remainder is not 0, a select on
whether `h` is odd that the rules cannot decide, though `floordiv` and `mod` say it exactly. Only
for a private function of that name that divides integers with a truncating divide or remainder
and corrects by the sign (`_computes_integer_division`)."""


def _computes_integer_division(func, functions) -> bool:
    """Whether `func` (an MLIR func.func) is jnp's integer division: a truncating divide or
    remainder corrected by `sign`, in its body or those of the functions it calls (divmod's
    floor_divide and remainder, their `_where`)."""
    names: set[str] = set()
    pending, seen = [func], set()
    while pending and len(seen) < 8:
        f = pending.pop()
        if f is None or id(f) in seen:
            continue
        seen.add(id(f))
        for op in f.regions[0].blocks[0].operations:
            names.add(op.operation.name)
            if op.operation.name == "func.call":
                pending.append(functions.get(ms.mlir_modules()[0].FlatSymbolRefAttr(op.attributes["callee"]).value))
    return "stablehlo.sign" in names and bool(names & {"stablehlo.divide", "stablehlo.remainder"})


def _constant(cx, *unused):
    shape = ms.to_shape(cx.op.results[0].type)
    if not (shape.element_type.is_integer or shape.element_type.is_pred) or shape.num_elements > _MAX_SHAPE_TENSOR:
        return None
    value, _ = ms.dense_constant(cx.op, shape)
    return [bool(v) if shape.element_type.is_pred else int(v) for v in value.reshape(-1)]


def _dimension_size(cx, *unused):
    return [cx.operands[0].shape.dims[ms.int_attr(cx.op, "dimension")]]


def _same(cx, a, *rest):
    return a


def _broadcast(cx, a, *rest):
    count = ms.to_shape(cx.op.results[0].type).num_elements
    return a * count if len(a) == 1 and isinstance(count, int) else None


def _concatenate(cx, *parts):
    if ms.int_attr(cx.op, "dimension") != 0:
        return None
    return [v for p in parts for v in p]


def _slice(cx, a, *rest):
    if len(ms.ints(cx.op, "start_indices")) != 1:
        return None
    start, limit = ms.ints(cx.op, "start_indices")[0], ms.ints(cx.op, "limit_indices")[0]
    return a[start:limit:ms.ints(cx.op, "strides", (1,))[0]]


_SOURCES = {"stablehlo.constant", "stablehlo.get_dimension_size"}
_MIN_MAX = {"stablehlo.minimum", "stablehlo.maximum", "stablehlo.clamp"}
SIZE_RULES = {
    "stablehlo.constant": _constant, "stablehlo.get_dimension_size": _dimension_size,
    "stablehlo.reshape": _same, "stablehlo.convert": _same, "stablehlo.broadcast_in_dim": _broadcast,
    "stablehlo.concatenate": _concatenate, "stablehlo.slice": _slice,
    "stablehlo.add": elementwise(operator.add), "stablehlo.subtract": elementwise(operator.sub),
    "stablehlo.multiply": elementwise(operator.mul), "stablehlo.divide": elementwise(truncating_divide),
    "stablehlo.remainder": elementwise(truncating_remainder), "stablehlo.maximum": elementwise(size_max),
    "stablehlo.minimum": elementwise(size_min),
    "stablehlo.clamp": elementwise(lambda lo, x, hi: size_max(lo, size_min(x, hi))),
    "stablehlo.compare": compare_sizes, "stablehlo.and": and_sizes,
    "stablehlo.select": select_size, "stablehlo.sign": elementwise(size_sign),
}
"""StableHLO op → its result's symbolic value from its operands' (integer divide and remainder
truncate, as StableHLO's do)."""


# -- dynamic ops ----------------------------------------------------------------------------------
def shape_operand(cx, index: int, what: str) -> tuple:
    sizes = cx.sizes(index)
    if sizes is None and (cause := cx.scope.unknown_sizes.get(cx.op.operands[index])) is not None:
        raise cx.unsupported(f"its {what} operand is computed with {cause}; a size computed with min/max of "
                             "dimension sizes is not supported yet")
    if sizes is None or any(isinstance(v, SizePredicate) for v in sizes):
        raise cx.unsupported(f"its {what} operand is not a shape computed from dimension sizes and constants")
    return sizes


def require_equal_sizes(cx, a, b) -> None:
    """Two sizes the op needs equal that may differ (a size-1 stretch would need a runtime
    choice): a guard makes sure of it at call time."""
    if a != b and a != 1 and (isinstance(a, DimExpr) or isinstance(b, DimExpr)):
        cx.importer.module.guards.append(ShapeGuard(
            SizePredicate((SizeComparison("EQ", a, b),)),
            f"{cx.location()}: {cx.name}: dimension sizes {a} = {{0}} and {b} = {{1}} must be equal", (a, b)))


def _real_dynamic_slice(cx):
    window = _runtime_start_window(cx)
    if window is not None:
        return window
    starts, limits, strides = (shape_operand(cx, i, w) for i, w in ((1, "start"), (2, "limit"), (3, "strides")))
    if not all(isinstance(s, int) for s in strides):
        raise cx.unsupported("symbolic strides")
    return cx.add("slice", cx.operands[:1], {"slice": tuple(map(SliceDim, starts, limits, strides))}, shape=None)


def _runtime_start_window(cx):
    """real_dynamic_slice(x, start, start + sizes, 1) with `start` computed at run time and
    `sizes` a shape (JAX's `xs[i]` in a scan over a symbolic carry) is a dynamic-slice of `sizes`
    (whose clamp JAX has already applied to `start`), or None for another form."""
    start, limit = cx.op.operands[1], cx.op.operands[2]
    owner = limit.owner
    if cx.sizes(1) is not None or getattr(owner, "name", None) != "stablehlo.add" or start not in owner.operands:
        return None
    strides = cx.sizes(3)
    sizes = cx.scope.sizes.get(owner.operands[1] if owner.operands[0] == start else owner.operands[0])
    if sizes is None or strides is None or any(s != 1 for s in strides):
        return None
    operand = cx.operands[0]
    starts = _vector_elements(cx, cx.operands[1])
    return cx.add("dynamic-slice", [operand, *starts], {"dynamic_slice_sizes": tuple(sizes)},
                  shape=operand.shape.with_dims(sizes))


def _vector_elements(cx, vector) -> list:
    """The scalars of a rank-1 integer instruction (start indices for dynamic-slice)."""
    scalar = vector.shape.with_dims(())
    return [cx.add("reshape", [cx.add("slice", [vector], {"slice": (SliceDim(k, k + 1, 1),)},
                                      shape=vector.shape.with_dims((1,)))], shape=scalar)
            for k in range(vector.shape.dims[0])]


def _dynamic_pad(cx):
    lows, highs, interiors = (shape_operand(cx, i, w) for i, w in ((2, "low"), (3, "high"), (4, "interior")))
    if not all(isinstance(v, int) for v in interiors):
        raise cx.unsupported("symbolic interior padding")
    return cx.add("pad", cx.operands[:2], {"padding": tuple(map(PadDim, lows, highs, interiors))}, shape=None)


def _dynamic_gather(cx):
    """A gather whose every operand dimension is an offset dimension, from constant start indices,
    is a slice (JAX emits it for `x[1:]` on a symbolic dimension); the start is clamped as gather
    clamps it, which must be decidable at import. A gather of one start vector computed at run
    time is a dynamic-slice (which clamps alike) reshaped to drop the collapsed dimensions (JAX's
    `x[:, i]` on a symbolic batch, jnp.median)."""
    _, stablehlo, _, _ = ms.mlir_modules()
    dn = stablehlo.GatherDimensionNumbers(cx.op.attributes["dimension_numbers"])
    operand = cx.operands[0].shape
    sizes = shape_operand(cx, 2, "slice_sizes")
    starts = cx.sizes(1)
    if dn.operand_batching_dims or starts is None or not all(isinstance(s, (int, DimExpr)) for s in starts) \
            or list(dn.collapsed_slice_dims) or list(dn.offset_dims) != list(range(operand.rank)):
        return _single_start_gather(cx, dn, sizes)
    begin = [0] * operand.rank
    for start, dim in zip(starts, dn.start_index_map):
        try:
            # A start <= 0 clamps to 0 whatever the sizes (JAX's `x[:n // 2]`); `>=` not max():
            # `x[b // 2:]` decides floordiv(b, 2) >= 0, not > 0.
            if isinstance(start, int) and start <= 0:
                continue
            clamped = min(start, operand.dims[dim] - sizes[dim])
            begin[dim] = clamped if clamped >= 0 else 0
        except InconclusiveDimensionError:  # decided per call by dynamic-slice's own clamp
            return _single_start_gather(cx, dn, sizes)
    slices = tuple(SliceDim(b, b + n, 1) for b, n in zip(begin, sizes))
    return cx.add("slice", cx.operands[:1], {"slice": slices}, shape=None)


def gather_attrs(cx, dn, slice_sizes: tuple) -> dict:
    """The HLO gather's attributes of a (dynamic_)gather with dimension numbers `dn`."""
    attrs = {"offset_dims": tuple(dn.offset_dims), "collapsed_slice_dims": tuple(dn.collapsed_slice_dims),
             "start_index_map": tuple(dn.start_index_map), "index_vector_dim": dn.index_vector_dim,
             "slice_sizes": tuple(slice_sizes)}
    if dn.operand_batching_dims:
        attrs["operand_batching_dims"] = tuple(dn.operand_batching_dims)
        attrs["start_indices_batching_dims"] = tuple(dn.start_indices_batching_dims)
    if ms.bool_attr(cx.op, "indices_are_sorted"):
        attrs["indices_are_sorted"] = True
    return attrs


def _single_start_gather(cx, dn, sizes: tuple):
    """dynamic_gather of a single start vector (indices of shape [k], k = len(start_index_map)) as
    dynamic-slice + reshape; any other a gather whose slice sizes are symbolic (JAX's `x[:, ::-1]`
    or `x[::2]` on a symbolic dimension: indices from an iota, every element of the other
    dimensions)."""
    operand, indices = cx.operands[0], cx.operands[1]
    kept = [d for d in range(operand.shape.rank) if d not in dn.collapsed_slice_dims]
    if (dn.operand_batching_dims or indices.shape.rank != 1 or dn.index_vector_dim != 0
            or indices.shape.dims[0] != len(dn.start_index_map) or list(dn.offset_dims) != list(range(len(kept)))
            or any(sizes[d] != 1 for d in dn.collapsed_slice_dims)):
        return cx.add("gather", cx.operands[:2], gather_attrs(cx, dn, sizes), shape=None)
    scalar = indices.shape.with_dims(())
    zero = cx.add("constant", shape=scalar, literal=np.zeros((), scalar.dtype))
    starts = [zero] * operand.shape.rank
    for d, start in zip(dn.start_index_map, _vector_elements(cx, indices)):
        starts[d] = start
    window = cx.add("dynamic-slice", [operand, *starts], {"dynamic_slice_sizes": tuple(sizes)},
                    shape=operand.shape.with_dims(sizes))
    return cx.add("reshape", [window], shape=operand.shape.with_dims([sizes[d] for d in kept]))


def _shape_assertion(cx):
    """`@shape_assertion(pred, args...)`: a guard of the module; `error_message` is JAX's text."""
    predicate = cx.sizes(0)
    if predicate is None or not isinstance(predicate[0], (SizePredicate, bool)):
        raise cx.unsupported("a shape assertion whose condition is not computed from dimension sizes")
    if predicate[0] is True:
        return []
    if predicate[0] is False:  # fails at every size
        predicate = (SizePredicate((SizeComparison("EQ", 0, 1),)),)
    args = tuple(cx.sizes(i)[0] if cx.sizes(i) else 0 for i in range(1, len(cx.op.operands)))
    message = ms.string_attr(cx.op, "error_message") or "shape assertion failed"
    cx.importer.module.guards.append(ShapeGuard(predicate[0], message, args))
    return []


def _dynamic_reduce_window(cx):
    """`stablehlo.dynamic_reduce_window(inputs, inits, window_dimensions, window_strides,
    base_dilations, window_dilations, padding)` (one input here) → reduce-window."""
    if len(cx.operands) != 7:
        raise cx.unsupported("a dynamic_reduce_window of several inputs")
    size, stride, base, dilation = (shape_operand(cx, i, w) for i, w in
                                    ((2, "window_dimensions"), (3, "window_strides"), (4, "base_dilations"),
                                     (5, "window_dilations")))
    pads = shape_operand(cx, 6, "padding")
    window = tuple(WindowDim(size[i], stride[i], pads[2 * i], pads[2 * i + 1], base[i], dilation[i], False)
                   for i in range(len(size)))
    reducer = ms.mlir_modules()[0].FlatSymbolRefAttr(cx.op.attributes["called_computations"][0]).value
    scalar = cx.operands[1].shape
    to_apply = cx.importer.call(cx.op, reducer, [scalar, scalar], None)
    return cx.add("reduce-window", cx.operands[:2], {"window": window, "to_apply": to_apply}, shape=None)


CUSTOM_CALLS = {"shape_assertion": _shape_assertion, "stablehlo.dynamic_reduce_window": _dynamic_reduce_window}
"""Custom-call targets that JAX's shape-polymorphic export emits, converted here (not kept as
custom calls)."""

def _dynamic_reshape(cx):
    return cx.add("reshape", cx.operands[:1], shape=cx.shape.with_dims(shape_operand(cx, 1, "output_shape")))


OP_CONVERSIONS = {
    "stablehlo.dynamic_reshape": _dynamic_reshape, "stablehlo.real_dynamic_slice": _real_dynamic_slice,
    "stablehlo.dynamic_pad": _dynamic_pad, "stablehlo.dynamic_gather": _dynamic_gather,
}
"""The dynamic ops converted here; dynamic_broadcast_in_dim and dynamic_iota are beside their
static forms in stablehlo_ops.py."""
