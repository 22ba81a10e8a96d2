"""The op table of the StableHLO frontend: StableHLO/CHLO/func op name → its conversion to HLO.

A conversion takes an `OpContext` (the op, its converted operands, its result shape) and returns
the instruction of its result, a tuple-shaped instruction for several results, or a list with one
instruction per result. Attributes get the names and typed values the HLO parser gives them
(hlo/attribute_syntax.py), so an imported module is the IR the HLO text of the same program
parses to. Semantics follow the StableHLO spec (openxla/stablehlo docs/spec.md) and XLA's
StableHLO → HLO converter: e.g. an attribute equal to HLO's default is left out, as XLA prints it.
"""

from __future__ import annotations

from hlocc.frontends import chlo, dynamic_shapes
from hlocc.frontends import mlir_support as ms
from hlocc.hlo.attributes import PadDim, RawAttr, SliceDim, WindowDim, parse_dim_labels
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import Shape, primitive_type

# Ops that are an HLO op (of another name) with the same operands and no attributes.
RENAMED = {
    "abs": "abs", "add": "add", "and": "and", "atan2": "atan2", "cbrt": "cbrt", "ceil": "ceil",
    "count_leading_zeros": "count-leading-zeros", "complex": "complex", "cosine": "cosine", "divide": "divide",
    "exponential": "exponential", "exponential_minus_one": "exponential-minus-one", "floor": "floor",
    "imag": "imag", "is_finite": "is-finite", "log": "log", "log_plus_one": "log-plus-one", "logistic": "logistic",
    "maximum": "maximum", "minimum": "minimum", "multiply": "multiply", "negate": "negate", "not": "not", "or": "or",
    "popcnt": "popcnt", "power": "power", "real": "real", "remainder": "remainder",
    "round_nearest_afz": "round-nearest-afz", "round_nearest_even": "round-nearest-even", "rsqrt": "rsqrt",
    "shift_left": "shift-left", "shift_right_arithmetic": "shift-right-arithmetic",
    "shift_right_logical": "shift-right-logical", "sign": "sign", "sine": "sine", "sqrt": "sqrt",
    "subtract": "subtract", "tan": "tan", "tanh": "tanh", "xor": "xor", "clamp": "clamp",
    "bitcast_convert": "bitcast-convert", "dynamic_update_slice": "dynamic-update-slice",
    "tuple": "tuple", "after_all": "after-all", "create_token": "after-all", "replica_id": "replica-id",
    "partition_id": "partition-id",
}

# Comparison types that HLO infers from the element type; a compare prints `type=` only otherwise.
_DEFAULT_COMPARE_TYPE = {"pred": "UNSIGNED", "float": "FLOAT", "complex": "FLOAT", "signed": "SIGNED",
                         "unsigned": "UNSIGNED"}
_RNG_ALGORITHMS = {"DEFAULT": "rng_default", "THREE_FRY": "rng_three_fry", "PHILOX": "rng_philox"}


def _renamed(opcode: str):
    return lambda cx: cx.add(opcode, cx.operands)


def _attr(cx, name: str, kind):
    """A dialect attribute of the op through its Python class (`kind(attr)`), or None."""
    return kind(cx.op.attributes[name]) if name in cx.op.attributes else None


# -- elementwise ----------------------------------------------------------------------------------
def _compare(cx):
    _, stablehlo, _, _ = ms.mlir_modules()
    attrs = {"direction": _attr(cx, "comparison_direction", stablehlo.ComparisonDirectionAttr).value}
    kind = _attr(cx, "compare_type", stablehlo.ComparisonTypeAttr)
    if kind is not None and kind.value != _DEFAULT_COMPARE_TYPE[cx.operands[0].shape.element_type.kind.value]:
        attrs["type"] = kind.value
    return cx.add("compare", cx.operands, attrs)


def _select(cx):
    pred, on_true, on_false = cx.operands
    if pred.shape.rank == 0 and cx.shape.rank > 0:  # HLO's select takes a predicate of the result's shape
        # The operand's dims, symbolic where the result type has a bare `?`.
        pred = cx.add("broadcast", [pred], {"dimensions": ()}, shape=pred.shape.with_dims(on_true.shape.dims))
    return cx.add("select", [pred, on_true, on_false])


def _reduce_precision(cx):
    return cx.add("reduce-precision", cx.operands, {"exponent_bits": ms.int_attr(cx.op, "exponent_bits"),
                                                    "mantissa_bits": ms.int_attr(cx.op, "mantissa_bits")})


def _constant(cx):
    """A splat of several elements is a scalar constant broadcast (as XLA exports it)."""
    value, splat = ms.dense_constant(cx.op, cx.shape)
    if not splat:
        return cx.add("constant", literal=value)
    scalar = cx.add("constant", shape=cx.shape.with_dims(()), literal=value.reshape(-1)[:1].reshape(()))
    return cx.add("broadcast", [scalar], {"dimensions": ()})


def _convert(cx):
    """A convert to the operand's own type is no instruction (XLA's builder drops it too); one from
    a complex type to a real one takes the real part (StableHLO's semantics; HLO's convert refuses
    it, and XLA's importer writes `real` too)."""
    operand = cx.operands[0]
    if operand.shape.element_type.is_complex and not cx.shape.element_type.is_complex:
        operand = cx.add("real", [operand], shape=operand.shape.with_element_type(
            primitive_type("f64" if operand.shape.element_type.name == "c128" else "f32")))
    return operand if operand.shape.element_type == cx.shape.element_type else cx.add("convert", [operand])


def _dynamic_iota(cx):
    cx.shape = cx.shape.with_dims(dynamic_shapes.shape_operand(cx, 0, "output_shape"))
    return _iota(cx)


def _iota(cx):
    """An iota of several dimensions is a 1-D iota broadcast along its dimension, as XLA exports it."""
    dimension = ms.int_attr(cx.op, "iota_dimension")
    if cx.shape.rank <= 1:
        return cx.add("iota", attrs={"iota_dimension": dimension})
    line = cx.add("iota", attrs={"iota_dimension": 0}, shape=cx.shape.with_dims([cx.shape.dims[dimension]]))
    return cx.add("broadcast", [line], {"dimensions": (dimension,)})


# -- data movement --------------------------------------------------------------------------------
def _broadcast_in_dim(cx):
    operand = cx.operands[0]
    dims = ms.ints(cx.op, "broadcast_dimensions")
    # A `?` of the result is the size of the operand dimension mapped to it.
    sizes = list(cx.shape.dims)
    for i, d in enumerate(dims):
        if ms.unresolved(Shape.array(cx.shape.element_type, [sizes[d]])):
            sizes[d] = operand.shape.dims[i]
    return broadcast_in_dim(cx, operand, dims, cx.shape.with_dims(sizes))


def broadcast_in_dim(cx, operand, dims, shape: Shape):
    """StableHLO's broadcast_in_dim of `operand` to `shape`. HLO's broadcast does not stretch
    size-1 dimensions (StableHLO's does): those are reshaped away first, as XLA's converter does."""
    kept = [i for i, d in enumerate(dims) if operand.shape.dims[i] == shape.dims[d] or operand.shape.dims[i] != 1]
    if len(kept) < len(dims):
        operand = cx.add("reshape", [operand], shape=operand.shape.with_dims([operand.shape.dims[i] for i in kept]))
        dims = tuple(dims[i] for i in kept)
    return cx.add("broadcast", [operand], {"dimensions": tuple(dims)}, shape=shape)


def _dynamic_broadcast_in_dim(cx):
    """The result's sizes are the values of the `output_dimensions` shape tensor."""
    operand = cx.operands[0]
    dims = ms.ints(cx.op, "broadcast_dimensions")
    shape = cx.shape.with_dims(dynamic_shapes.shape_operand(cx, 1, "output_dimensions"))
    for i, d in enumerate(dims):
        dynamic_shapes.require_equal_sizes(cx, operand.shape.dims[i], shape.dims[d])
    return broadcast_in_dim(cx, operand, dims, shape)


def _reshape(cx):
    """A `?` of the result (at most one) is the operand's element count over the other sizes."""
    operand = cx.operands[0]
    sizes = list(cx.shape.dims)
    open_dims = [i for i, d in enumerate(sizes) if ms.unresolved(Shape.array(cx.shape.element_type, [d]))]
    if len(open_dims) > 1:
        raise cx.unsupported("a reshape to several unknown dimensions")
    if not open_dims:
        return cx.add("reshape", [operand])
    rest = 1
    for i, d in enumerate(sizes):
        if i != open_dims[0]:
            rest = rest * d
    sizes[open_dims[0]] = operand.shape.num_elements // rest
    return cx.add("reshape", [operand], shape=cx.shape.with_dims(sizes))


def _broadcast(cx):
    """stablehlo.broadcast prepends `broadcast_sizes` dimensions."""
    added = len(ms.ints(cx.op, "broadcast_sizes"))
    return cx.add("broadcast", cx.operands, {"dimensions": tuple(range(added, cx.shape.rank))})


def _transpose(cx):
    return cx.add("transpose", cx.operands, {"dimensions": ms.ints(cx.op, "permutation")})


def _reverse(cx):
    return cx.add("reverse", cx.operands, {"dimensions": ms.ints(cx.op, "dimensions")})


def _slice(cx):
    starts, limits = ms.ints(cx.op, "start_indices"), ms.ints(cx.op, "limit_indices")
    strides = ms.ints(cx.op, "strides", (1,) * len(starts))
    return cx.add("slice", cx.operands, {"slice": tuple(map(SliceDim, starts, limits, strides))})


def _dynamic_slice(cx):
    return cx.add("dynamic-slice", cx.operands, {"dynamic_slice_sizes": ms.ints(cx.op, "slice_sizes")})


def _concatenate(cx):
    return cx.add("concatenate", cx.operands, {"dimensions": (ms.int_attr(cx.op, "dimension"),)})


def _pad(cx):
    lows, highs, interiors = (ms.ints(cx.op, n) for n in ("edge_padding_low", "edge_padding_high",
                                                          "interior_padding"))
    return cx.add("pad", cx.operands, {"padding": tuple(map(PadDim, lows, highs, interiors))})


def _get_tuple_element(cx):
    return cx.add("get-tuple-element", cx.operands, {"index": ms.int_attr(cx.op, "index")})


def _get_dimension_size(cx):
    return cx.add("get-dimension-size", cx.operands, {"dimensions": (ms.int_attr(cx.op, "dimension"),)})


def _gather(cx):
    _, stablehlo, _, _ = ms.mlir_modules()
    dn = _attr(cx, "dimension_numbers", stablehlo.GatherDimensionNumbers)
    return cx.add("gather", cx.operands, dynamic_shapes.gather_attrs(cx, dn, ms.ints(cx.op, "slice_sizes")))


def _scatter(cx):
    _, stablehlo, _, _ = ms.mlir_modules()
    dn = _attr(cx, "scatter_dimension_numbers", stablehlo.ScatterDimensionNumbers)
    attrs = {"update_window_dims": tuple(dn.update_window_dims), "inserted_window_dims": tuple(dn.inserted_window_dims),
             "scatter_dims_to_operand_dims": tuple(dn.scattered_dims_to_operand_dims),
             "index_vector_dim": dn.index_vector_dim, "to_apply": cx.region(0)}
    if dn.input_batching_dims:
        attrs["input_batching_dims"] = tuple(dn.input_batching_dims)
        attrs["scatter_indices_batching_dims"] = tuple(dn.scatter_indices_batching_dims)
    for flag in ("indices_are_sorted", "unique_indices"):
        if ms.bool_attr(cx.op, flag):
            attrs[flag] = True
    return cx.add("scatter", cx.operands, attrs)


# -- reductions and windows -----------------------------------------------------------------------
def _reduce(cx):
    return cx.add("reduce", cx.operands, {"dimensions": ms.ints(cx.op, "dimensions"), "to_apply": cx.region(0)})


def _window(cx, rank: int, sizes, pads=None) -> tuple[WindowDim, ...]:
    """The window of a windowed op from its attributes (`pads`, (low, high) per dimension: given
    where they are computed from sizes, dynamic_conv's)."""
    op = cx.op
    strides = ms.ints(op, "window_strides", (1,) * rank)
    pads = pads if pads is not None else ms.padding_pairs(op, "padding", rank)
    lhs = ms.ints(op, "base_dilations", ms.ints(op, "lhs_dilation", (1,) * rank))
    rhs = ms.ints(op, "window_dilations", ms.ints(op, "rhs_dilation", (1,) * rank))
    reversal = ms.ints(op, "window_reversal", (0,) * rank)
    return tuple(WindowDim(sizes[i], strides[i], pads[i][0], pads[i][1], lhs[i], rhs[i], bool(reversal[i]))
                 for i in range(rank))


def _reduce_window(cx):
    sizes = ms.ints(cx.op, "window_dimensions")
    return cx.add("reduce-window", cx.operands, {"window": _window(cx, len(sizes), sizes), "to_apply": cx.region(0)})


def _select_and_scatter(cx):
    sizes = ms.ints(cx.op, "window_dimensions")
    return cx.add("select-and-scatter", cx.operands, {"window": _window(cx, len(sizes), sizes),
                                                      "select": cx.region(0), "scatter": cx.region(1)})


# -- linear algebra -------------------------------------------------------------------------------
def _precision(cx, attrs: dict) -> dict:
    """`operand_precision` when any operand's precision is not DEFAULT (XLA prints it only then)."""
    _, stablehlo, _, _ = ms.mlir_modules()
    if "precision_config" in cx.op.attributes:
        words = tuple(stablehlo.PrecisionAttr(a).value.lower() for a in cx.op.attributes["precision_config"])
        if any(w != "default" for w in words):
            attrs["operand_precision"] = words
    if "algorithm" in cx.op.attributes:
        raise cx.unsupported("a dot algorithm is not supported")
    return attrs


def _dot_general(cx):
    _, stablehlo, _, _ = ms.mlir_modules()
    dn = _attr(cx, "dot_dimension_numbers", stablehlo.DotDimensionNumbers)
    attrs = {}
    if dn.lhs_batching_dimensions:
        attrs["lhs_batch_dims"] = tuple(dn.lhs_batching_dimensions)
    attrs["lhs_contracting_dims"] = tuple(dn.lhs_contracting_dimensions)
    if dn.rhs_batching_dimensions:
        attrs["rhs_batch_dims"] = tuple(dn.rhs_batching_dimensions)
    attrs["rhs_contracting_dims"] = tuple(dn.rhs_contracting_dimensions)
    return cx.add("dot", cx.operands, _precision(cx, attrs))


def _dot(cx):
    """stablehlo.dot: vector/matrix product contracting lhs's last with rhs's first dimension."""
    lhs = cx.operands[0]
    attrs = {"lhs_contracting_dims": (lhs.shape.rank - 1,), "rhs_contracting_dims": (0,)}
    return cx.add("dot", cx.operands, _precision(cx, attrs))


def _convolution(cx, pads=None):
    _, stablehlo, _, _ = ms.mlir_modules()
    dn = _attr(cx, "dimension_numbers", stablehlo.ConvDimensionNumbers)
    kernel = cx.operands[1].shape
    sizes = [kernel.dims[d] for d in dn.kernel_spatial_dimensions]
    attrs = {"window": _window(cx, len(sizes), sizes, pads),
             "dim_labels": parse_dim_labels(_dim_labels(dn, cx.shape.rank))}
    for name in ("feature_group_count", "batch_group_count"):
        count = ms.int_attr(cx.op, name, 1)
        if count != 1:
            attrs[name] = count
    return cx.add("convolution", cx.operands[:2], _precision(cx, attrs))


def _dynamic_conv(cx):
    """stablehlo.dynamic_conv(lhs, rhs, padding): a convolution whose padding is a shape tensor
    ([spatial, 2]: low, high), JAX's SAME padding with a stride over a symbolic image size
    (`floordiv(...)` sizes): a convolution with symbolic padding."""
    flat = dynamic_shapes.shape_operand(cx, 2, "padding")
    return _convolution(cx, [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)])


def _dim_labels(dn, rank: int) -> str:
    """HLO's `b01f_01io->b01f` text of convolution dimension numbers."""
    def labels(roles: dict[int, str], spatial) -> str:
        out = [""] * rank
        for dim, role in roles.items():
            out[dim] = role
        for i, dim in enumerate(spatial):
            out[dim] = str(i)
        return "".join(out)

    lhs = labels({dn.input_batch_dimension: "b", dn.input_feature_dimension: "f"}, dn.input_spatial_dimensions)
    rhs = labels({dn.kernel_input_feature_dimension: "i", dn.kernel_output_feature_dimension: "o"},
                 dn.kernel_spatial_dimensions)
    out = labels({dn.output_batch_dimension: "b", dn.output_feature_dimension: "f"}, dn.output_spatial_dimensions)
    return f"{lhs}_{rhs}->{out}"


def _sort(cx):
    attrs = {"dimensions": (ms.int_attr(cx.op, "dimension", -1) % cx.operands[0].shape.rank,)}
    if ms.bool_attr(cx.op, "is_stable"):
        attrs["is_stable"] = True
    attrs["to_apply"] = cx.region(0)
    return cx.add("sort", cx.operands, attrs)


def _map(cx):
    return cx.add("map", cx.operands, {"dimensions": ms.ints(cx.op, "dimensions"), "to_apply": cx.region(0)})


# -- control flow ---------------------------------------------------------------------------------
def _tuple_of(cx, values):
    return cx.add("tuple", values, shape=Shape.tuple([v.shape for v in values]))


def _while(cx):
    """The carried values and the captured outer values travel in one tuple; the loop's results
    are its first elements."""

    captures = ms.free_values(cx.op.regions[0], cx.op.regions[1])
    init = _tuple_of(cx, cx.operands + [cx.importer.value(cx.scope, v) for v in captures])
    carried = [o.shape for o in cx.operands]  # symbolic, where the block arguments' types say `?`
    cond = cx.region(0, tuple_param=True, captures=captures, tuple_root=False, arg_shapes=carried)
    body = cx.region(1, tuple_param=True, captures=captures, tuple_root=True, return_captures=True,
                     arg_shapes=carried)
    return cx.add("while", [init], {"condition": cond, "body": body}, shape=init.shape)


def _branches(cx):
    """Each branch region as a computation of one tuple parameter holding its captured values, and
    that tuple as the branch's operand; a branch returns a tuple when the op has several results."""

    comps, operands = [], []
    for i, region in enumerate(cx.op.regions):
        captures = ms.free_values(region)
        operands.append(_tuple_of(cx, [cx.importer.value(cx.scope, v) for v in captures]))
        comps.append(cx.region(i, tuple_param=True, captures=captures))
    return comps, operands


def _case(cx):
    comps, operands = _branches(cx)
    return cx.add("conditional", [cx.operands[0]] + operands, {"branch_computations": tuple(comps)})


def _if(cx):
    comps, operands = _branches(cx)
    return cx.add("conditional", [cx.operands[0]] + operands,
                  {"true_computation": comps[0], "false_computation": comps[1]})


def _call(cx):
    """The callee is converted for the operands' (symbolic) shapes and shape-tensor values."""
    return _call_function(cx, ms.mlir_modules()[0].FlatSymbolRefAttr(cx.op.attributes["callee"]).value)


def _call_function(cx, name: str):
    """A `call` of function @name converted for the operands' (symbolic) shapes and shape-tensor
    values (a composite's decomposition as well: JAX's top_k on a `?` batch computes its shapes)."""
    callee = cx.importer.call(cx.op, name, [o.shape for o in cx.operands],
                              [cx.sizes(i) for i in range(len(cx.operands))])
    return cx.add("call", cx.operands, {"to_apply": callee})


def _optimization_barrier(cx):
    return cx.add("opt-barrier", [_tuple_of(cx, cx.operands)], shape=Shape.tuple([o.shape for o in cx.operands]))


def _rng_bit_generator(cx):
    """`stablehlo.rng_bit_generator(state)`, or JAX's shape-polymorphic custom call
    `stablehlo.dynamic_rng_bit_generator(state, shape)`, whose bits' shape is a shape tensor."""
    _, stablehlo, _, _ = ms.mlir_modules()
    algorithm = _RNG_ALGORITHMS[_attr(cx, "rng_algorithm", stablehlo.RngAlgorithmAttr).value]
    shape = None
    if len(cx.operands) == 2:
        state, bits = cx.shape.tuple_shapes
        dims = dynamic_shapes.shape_operand(cx, 1, "output_shape")
        shape = Shape.tuple([state, bits.with_dims(dims, [isinstance(d, DimExpr) for d in dims])])
    return cx.add("rng-bit-generator", cx.operands[:1], {"algorithm": algorithm}, shape=shape)


def _rng(cx):
    """stablehlo.rng(a, b, shape): the shape operand is HLO's result shape."""
    distribution = "rng_" + str(cx.op.attributes["rng_distribution"]).split()[-1].rstrip(">").lower()
    a, b, shape_operand = cx.operands
    rng = cx.add("rng", [a, b], {"distribution": distribution})
    if not shape_operand.users:
        cx.scope.computation.remove_instructions([shape_operand])
    return rng


def _fft(cx):
    _, stablehlo, _, _ = ms.mlir_modules()
    return cx.add("fft", cx.operands, {"fft_type": _attr(cx, "fft_type", stablehlo.FftTypeAttr).value,
                                       "fft_length": ms.ints(cx.op, "fft_length")})


def _cholesky(cx):
    return cx.add("cholesky", cx.operands, {"lower": True} if ms.bool_attr(cx.op, "lower") else {})


def _triangular_solve(cx):
    attrs = {flag: True for flag in ("left_side", "lower", "unit_diagonal") if ms.bool_attr(cx.op, flag)}
    attrs["transpose_a"] = str(cx.op.attributes["transpose_a"]).split()[-1].rstrip(">")
    return cx.add("triangular-solve", cx.operands, attrs)


def _batch_norm(opcode: str):
    def convert(cx):
        epsilon = ms.mlir_modules()[0].FloatAttr(cx.op.attributes["epsilon"]).value
        return cx.add(opcode, cx.operands, {"epsilon": epsilon, "feature_index": ms.int_attr(cx.op, "feature_index")})
    return convert


def _custom_call(cx):
    """The target, backend config (a string, or the typed-FFI dictionary `mhlo.backend_config`,
    printed as HLO prints them) and side-effect flag are kept; layouts are not. The targets of
    JAX's shape-polymorphic export are converted by frontends/dynamic_shapes.py."""
    ir = ms.mlir_modules()[0]
    target = ms.string_attr(cx.op, "call_target_name")
    if target in dynamic_shapes.CUSTOM_CALLS:
        return dynamic_shapes.CUSTOM_CALLS[target](cx)
    if target == "ApproxTopK":
        return _approx_top_k(cx)
    if target == "stablehlo.dynamic_rng_bit_generator":
        return _rng_bit_generator(cx)
    attrs = {"custom_call_target": target}
    if ms.bool_attr(cx.op, "has_side_effect"):
        attrs["custom_call_has_side_effect"] = True
    config = ms.string_attr(cx.op, "backend_config") if "backend_config" in cx.op.attributes and isinstance(
        cx.op.attributes["backend_config"], ir.StringAttr) else None
    if config:
        attrs["backend_config"] = RawAttr('"' + config.replace("\\", "\\\\").replace('"', '\\"') + '"')
    for name in ("mhlo.backend_config", "backend_config"):
        if name in cx.op.attributes and isinstance(cx.op.attributes[name], ir.DictAttr):
            attrs["backend_config"] = RawAttr(str(cx.op.attributes[name]))
    operands, shape, shape_operands = cx.operands, None, ms.ints(cx.op, "indices_of_shape_operands")
    if shape_operands:  # symbolic result shapes (JAX's LAPACK calls on "n, n"): shape tensors, not operands
        leaves = cx.shape.tuple_shapes if cx.shape.is_tuple else [cx.shape]
        dims = [dynamic_shapes.shape_operand(cx, i, f"result {j} shape") for j, i in enumerate(shape_operands)]
        leaves = [leaf.with_dims(d, [isinstance(x, DimExpr) for x in d]) for leaf, d in zip(leaves, dims)]
        shape = Shape.tuple(leaves) if cx.shape.is_tuple else leaves[0]
        operands = [o for i, o in enumerate(operands) if i not in shape_operands]
    if "output_operand_aliases" in cx.op.attributes:
        attrs["output_to_operand_aliasing"] = _aliasing(cx.op.attributes["output_operand_aliases"], shape_operands)
    version = ms.int_attr(cx.op, "api_version", 1)
    if version == 4 or "mhlo.backend_config" in cx.op.attributes:
        attrs["api_version"] = "API_VERSION_TYPED_FFI"
    elif version in (2, 3):
        attrs["api_version"] = "API_VERSION_STATUS_RETURNING" + ("_UNIFIED" if version == 3 else "")
    return cx.add("custom-call", operands, attrs, shape=shape)


def _approx_top_k(cx):
    """`jax.lax.approx_max_k`/`approx_min_k`: XLA's ApproxTopK custom call, as XLA's CPU compiler
    runs it (its fallback: an exact sort along `reduction_dim` with the call's comparator, then the
    first `top_k`; JAX's HLO text has that sort and slice already). Its operands are the inputs and
    then as many init values, which the fallback does not read."""
    ir = ms.mlir_modules()[0]
    config = cx.op.attributes["mhlo.backend_config"] if "mhlo.backend_config" in cx.op.attributes else None
    if not isinstance(config, ir.DictAttr) or "top_k" not in config or "reduction_dim" not in config:
        raise cx.unsupported("ApproxTopK without the top_k and reduction_dim of its mhlo.backend_config")
    if "aggregate_to_topk" in config and not ir.BoolAttr(config["aggregate_to_topk"]).value:
        raise cx.unsupported("ApproxTopK with aggregate_to_topk=false (its partial results are XLA's "
                             "TPU approximation)")
    k, dim = ir.IntegerAttr(config["top_k"]).value, ir.IntegerAttr(config["reduction_dim"]).value
    inputs = cx.operands[:len(cx.operands) // 2]
    dim %= inputs[0].shape.rank
    comparator = ir.FlatSymbolRefAttr(ir.ArrayAttr(cx.op.attributes["called_computations"])[0]).value
    scalars = [Shape.array(x.shape.element_type, ()) for x in inputs for _ in range(2)]
    compare = cx.importer.call(cx.op, comparator, scalars, [None] * len(scalars))
    ordered = cx.add("sort", inputs, {"dimensions": (dim,), "to_apply": compare},
                     shape=Shape.tuple([x.shape for x in inputs]))
    results = []
    for i, x in enumerate(inputs):
        element = cx.add("get-tuple-element", [ordered], {"index": i}, shape=x.shape)
        bounds = [SliceDim(0, k if d == dim else n, 1) for d, n in enumerate(x.shape.dims)]
        results.append(cx.add("slice", [element], {"slice": tuple(bounds)},
                              shape=x.shape.with_dims([k if d == dim else n for d, n in enumerate(x.shape.dims)])))
    return results[0] if len(results) == 1 else _tuple_of(cx, results)


def _aliasing(aliases, removed: tuple = ()) -> RawAttr:
    """HLO's `{{out}: (operand, {index})}` text of StableHLO output_operand_aliases (the operands
    `removed`, shape operands, not counted)."""
    _, stablehlo, _, _ = ms.mlir_modules()

    def index(values):
        return "{" + ",".join(map(str, values)) + "}"

    def operand(i: int) -> int:
        return i - sum(1 for r in removed if r < i)

    pairs = [stablehlo.OutputOperandAlias(a) for a in aliases]
    return RawAttr("{" + ", ".join(f"{index(p.output_tuple_indices)}: ({operand(p.operand_index)}, "
                                   f"{index(p.operand_tuple_indices)})" for p in pairs) + "}")


def _composite(cx):
    """stablehlo.composite: a call of its decomposition function (XLA inlines it likewise)."""
    name = ms.mlir_modules()[0].FlatSymbolRefAttr(cx.op.attributes["decomposition"]).value
    return _call_function(cx, name)


OP_CONVERSIONS = {
    **{f"stablehlo.{name}": _renamed(opcode) for name, opcode in RENAMED.items()},
    "stablehlo.compare": _compare, "stablehlo.convert": _convert, "stablehlo.select": _select,
    "stablehlo.reduce_precision": _reduce_precision,
    "stablehlo.constant": _constant, "stablehlo.iota": _iota,
    "stablehlo.broadcast_in_dim": _broadcast_in_dim, "stablehlo.broadcast": _broadcast, "stablehlo.reshape": _reshape,
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim, "stablehlo.dynamic_iota": _dynamic_iota,
    "stablehlo.transpose": _transpose, "stablehlo.reverse": _reverse, "stablehlo.slice": _slice,
    "stablehlo.dynamic_slice": _dynamic_slice, "stablehlo.concatenate": _concatenate, "stablehlo.pad": _pad,
    "stablehlo.get_tuple_element": _get_tuple_element, "stablehlo.get_dimension_size": _get_dimension_size,
    "stablehlo.gather": _gather, "stablehlo.scatter": _scatter,
    "stablehlo.reduce": _reduce, "stablehlo.reduce_window": _reduce_window,
    "stablehlo.select_and_scatter": _select_and_scatter,
    "stablehlo.dot_general": _dot_general, "stablehlo.dot": _dot, "stablehlo.convolution": _convolution,
    "stablehlo.dynamic_conv": _dynamic_conv,
    "stablehlo.sort": _sort, "stablehlo.map": _map,
    "stablehlo.while": _while, "stablehlo.case": _case, "stablehlo.if": _if, "func.call": _call,
    "stablehlo.optimization_barrier": _optimization_barrier, "stablehlo.rng_bit_generator": _rng_bit_generator,
    "stablehlo.custom_call": _custom_call, "stablehlo.rng": _rng, "stablehlo.fft": _fft,
    "stablehlo.cholesky": _cholesky, "stablehlo.triangular_solve": _triangular_solve,
    "stablehlo.batch_norm_inference": _batch_norm("batch-norm-inference"),
    "stablehlo.batch_norm_training": _batch_norm("batch-norm-training"),
    "stablehlo.batch_norm_grad": _batch_norm("batch-norm-grad"), "stablehlo.composite": _composite,
    # One device: a sharding constraint is the identity (hlocc runs a `Sharding` custom call likewise).
    "sdy.sharding_constraint": lambda cx: cx.operands[0],
    "chlo.top_k": chlo.convert_top_k, "chlo.square": chlo.convert_elementwise,
    **{name: chlo.convert_elementwise for name in (*chlo.DIRECT_REAL, *chlo.EXPANDED)},
    **dynamic_shapes.OP_CONVERSIONS,
}
"""Every op the frontend converts; anything else is an UnsupportedError naming the op and its place."""
