"""The syntax of instruction attributes, as a table: attribute name → value kind, with one parser and
one printer per kind. The parser and the printer both read this table, so an attribute added here
reads and prints the same way (xla_facts.md §2.4 lists XLA's attributes).

Kinds: int, bool, float, ints (`{1,2}`), slice (`{[0:4:2], ...}`), padding (`0_1_0x2_2`), window
(`{size=3x3 stride=2x2 ...}`), dim_labels (`b01f_01io->b01f`), enum (a bare word), enums
(`{default, high}`), string (`"..."`), shape, shapes (`{f32[2], s32[]}`), computation(s) (resolved
by the parser) and raw (kept verbatim: sharding, backend_config, replica groups, ...).
"""

from __future__ import annotations

import re

from hlocc.hlo.attributes import (
    PadDim,
    RawAttr,
    SliceDim,
    WindowDim,
    padding_str,
    parse_dim_labels,
    window_str,
)
from hlocc.hlo.symbolic import SIZE_PATTERN, parse_size, size_text

_INTS = ("dimensions", "dynamic_slice_sizes", "offset_dims", "collapsed_slice_dims", "start_index_map",
         "slice_sizes", "operand_batching_dims", "start_indices_batching_dims", "update_window_dims",
         "inserted_window_dims", "scatter_dims_to_operand_dims", "input_batching_dims",
         "scatter_indices_batching_dims", "lhs_contracting_dims", "rhs_contracting_dims", "lhs_batch_dims",
         "rhs_batch_dims", "lhs_ragged_dims", "rhs_group_dims", "fft_length", "broadcast_dimensions")
_INT = ("index", "iota_dimension", "index_vector_dim", "k", "exponent_bits", "mantissa_bits", "feature_index",
        "feature_group_count", "batch_group_count", "delta", "num_carries", "inferred_dimension", "channel_id",
        "cross_program_prefetch_index", "split_dimension")
_BOOL = ("indices_are_sorted", "unique_indices", "is_stable", "largest", "left_side", "lower", "unit_diagonal",
         "is_reverse", "is_associative", "use_global_device_ids", "constrain_layout", "is_host_transfer",
         "custom_call_has_side_effect", "is_composite")
_ENUM = ("direction", "type", "kind", "distribution", "algorithm", "fft_type", "transpose_a", "api_version",
         "schedule", "conv_kind", "padding_type", "mode")
_STRING = ("custom_call_target", "infeed_config", "outfeed_config", "async_execution_thread")
_RAW = ("replica_groups", "source_target_pairs", "output_to_operand_aliasing", "domain", "literal",
        "collective_device_list")
_COMPUTATION = ("to_apply", "calls", "condition", "body", "select", "scatter", "true_computation",
                "false_computation")
_COMPUTATIONS = ("branch_computations", "called_computations")

ATTRIBUTE_KINDS: dict[str, str] = {
    **{n: "ints" for n in _INTS}, **{n: "int" for n in _INT}, **{n: "bool" for n in _BOOL},
    **{n: "enum" for n in _ENUM}, **{n: "string" for n in _STRING}, **{n: "raw" for n in _RAW},
    **{n: "computation" for n in _COMPUTATION}, **{n: "computations" for n in _COMPUTATIONS},
    "slice": "slice", "padding": "padding", "window": "window", "dim_labels": "dim_labels",
    "epsilon": "float", "operand_precision": "enums", "outfeed_shape": "shape",
    "operand_layout_constraints": "shapes",
}
"""Attributes with a meaning; their values are typed."""

GENERIC_ATTRIBUTES: dict[str, str] = {
    name: "raw" for name in ("sharding", "frontend_attributes", "metadata", "backend_config",
                             "control-predecessors", "parameter_replication", "origin", "statistics",
                             "result_accuracy")
}
"""Attributes any instruction may carry; hlocc keeps them verbatim."""

_DXD_RE = re.compile(rf"{SIZE_PATTERN}(?:x{SIZE_PATTERN})*")
_PAD_RE = re.compile(rf"{SIZE_PATTERN}_{SIZE_PATTERN}(?:_\d+)?(?:x{SIZE_PATTERN}_{SIZE_PATTERN}(?:_\d+)?)*")
_SIZE_RE = re.compile(SIZE_PATTERN)
_DIM_LABELS_RE = re.compile(r"[0-9bf?]{2,}_[0-9io?]{2,}->[0-9bf?]{2,}")
_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.$\-]*")
_FLOAT_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def parse_attribute_value(kind: str, s, parser):
    """Read one value of `kind` from scanner `s`; raises ValueError or HloParseError with the cause."""
    if kind == "int":
        return s.integer()
    if kind == "bool":
        return parser._bool()
    if kind == "float":
        m = s.match(_FLOAT_RE)
        if not m:
            raise s.expected("a number")
        return float(m.group(0))
    if kind == "ints":
        if s.peek(2) == "{{":
            return RawAttr(s.raw_balanced())
        return _int_list(s)
    if kind == "enum":
        m = s.match(_WORD_RE)
        if not m:
            raise s.expected("a keyword")
        return m.group(0)
    if kind == "enums":
        s.expect("{")
        words = []
        while not s.accept("}"):
            if words:
                s.expect(",")
            m = s.match(_WORD_RE)
            if not m:
                raise s.expected("a keyword")
            words.append(m.group(0))
        return tuple(words)
    if kind == "string":
        return s.string()
    if kind == "raw":
        return RawAttr(s.raw_balanced())
    if kind == "slice":
        return _slice(s)
    if kind == "padding":
        m = s.match(_PAD_RE)
        if not m:
            raise s.expected("a padding like 0_0x1_1 (low_high[_interior] per dimension)")
        return tuple(PadDim(*map(parse_size, _split_sizes(d, "_"))) for d in _split_sizes(m.group(0), "x"))
    if kind == "window":
        return _window(s)
    if kind == "dim_labels":
        m = s.match(_DIM_LABELS_RE)
        if not m:
            raise s.expected("dimension labels like b01f_01io->b01f")
        return parse_dim_labels(m.group(0))
    if kind == "shape":
        return parser.shape()
    if kind == "shapes":
        s.expect("{")
        shapes = []
        while not s.accept("}"):
            if shapes:
                s.expect(",")
            shapes.append(parser.shape())
        return tuple(shapes)
    raise AssertionError(kind)


def _int_list(s) -> tuple[int, ...]:
    s.expect("{", "'{' to start an integer list")
    values = []
    while not s.accept("}"):
        if values:
            s.expect(",", "',' or '}' in an integer list")
        values.append(_size(s, "an integer"))  # `?(expr)`: a symbolic dynamic_slice_sizes entry
    return tuple(values)


def _slice(s) -> tuple[SliceDim, ...]:
    s.expect("{", "'{' to start a slice")
    dims = []
    while not s.accept("}"):
        if dims:
            s.expect(",")
        s.expect("[")
        start = _size(s, "a slice start")
        s.expect(":")
        limit = _size(s, "a slice limit")
        stride = s.integer("a slice stride") if s.accept(":") else 1
        s.expect("]")
        dims.append(SliceDim(start, limit, stride))
    return tuple(dims)


def _size(s, what: str):
    """An integer or a symbolic `?(expr)` size (hlo/symbolic.py)."""
    if s.peek() != "?":
        return s.integer(what)
    m = s.match(_SIZE_RE)
    if not m:
        raise s.expected(what)
    return parse_size(m.group(0))


def _split_sizes(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "(") - (c == ")")
        if c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _window(s) -> tuple[WindowDim, ...]:
    s.expect("{", "'{' to start a window")
    fields: dict[str, list] = {}
    while not s.accept("}"):
        pos = s.pos
        m = s.match(_WORD_RE)
        if not m:
            raise s.expected("a window field (size, stride, pad, lhs_dilate, rhs_dilate, rhs_reversal)")
        key = m.group(0)
        s.expect("=")
        if key == "pad":
            pm = s.match(_PAD_RE)
            if not pm:
                raise s.expected("window padding like 1_1x0_0")
            fields[key] = [tuple(map(parse_size, _split_sizes(d, "_"))) for d in _split_sizes(pm.group(0), "x")]
        elif key in ("size", "stride", "lhs_dilate", "rhs_dilate", "rhs_reversal"):
            dm = s.match(_DXD_RE)
            if not dm:
                raise s.expected(f"window {key} like 3x3")
            fields[key] = [parse_size(v) for v in _split_sizes(dm.group(0), "x")]
        else:
            raise s.error(f"unknown window field '{key}'", pos)
    if "size" not in fields:
        raise ValueError("a window needs size=")
    rank = len(fields["size"])
    for key, values in fields.items():
        if len(values) != rank:
            raise ValueError(f"window {key} has {len(values)} dimensions, size has {rank}")
    pads = fields.get("pad", [(0, 0)] * rank)
    return tuple(
        WindowDim(fields["size"][i], fields.get("stride", [1] * rank)[i], pads[i][0], pads[i][1],
                  fields.get("lhs_dilate", [1] * rank)[i], fields.get("rhs_dilate", [1] * rank)[i],
                  bool(fields.get("rhs_reversal", [0] * rank)[i]))
        for i in range(rank))


def format_attribute_value(kind: str, value) -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "ints":
        return str(value) if isinstance(value, RawAttr) else "{" + ",".join(map(size_text, value)) + "}"
    if kind == "enums":
        return "{" + ",".join(value) + "}"
    if kind == "string":
        return '"' + value + '"'
    if kind == "slice":
        return "{" + ", ".join(map(str, value)) + "}"
    if kind == "padding":
        return padding_str(value)
    if kind == "window":
        return window_str(value)
    if kind == "shapes":
        return "{" + ", ".join(v.to_string() for v in value) + "}"
    if kind == "float":
        return repr(float(value))
    if kind == "computation":
        return value.name
    if kind == "computations":
        return "{" + ", ".join(c.name for c in value) + "}"
    return str(value)


def attribute_kind(name: str) -> str:
    return ATTRIBUTE_KINDS.get(name) or GENERIC_ATTRIBUTES[name]
