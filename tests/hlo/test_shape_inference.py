"""Shape inference: for every opcode an inferred-shape case, and for each rule a negative case whose
message names the instruction and the broken rule."""

from __future__ import annotations

import pytest

from hlocc.errors import HloVerifyError
from hlocc.hlo.opcodes import OPCODES, infer_shape
from hlocc.hlo.parser import parse_hlo, parse_shape

PRELUDE = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
add_s32 {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] add(a, b)
}
add_pair {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = s32[] parameter(3)
  r0 = f32[] add(a0, b0)
  r1 = s32[] add(a1, b1)
  ROOT r = (f32[], s32[]) tuple(r0, r1)
}
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT
}
lt_pair {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=LT
}
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=GE
}
to_s32 {
  a = f32[] parameter(0)
  ROOT r = s32[] convert(a)
}
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[4]) tuple(j, x)
}
negate_f32 {
  x = f32[4] parameter(0)
  ROOT r = f32[4] negate(x)
}
abs_f32 {
  x = f32[4] parameter(0)
  ROOT r = f32[4] abs(x)
}
fused_one {
  x = f32[4] parameter(0)
  ROOT r = s32[4] convert(x)
}
fused {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  ROOT r = f32[4] multiply(x, y)
}
"""


def _root(body: str):
    module = parse_hlo(PRELUDE + "\nENTRY main {\n" + body + "\n}\n")
    return module.entry.root


def infer(body: str):
    return infer_shape(_root(body))


def _unary(op: str, src: str, dst: str, attrs: str = "") -> str:
    return f"p = {src} parameter(0)\nROOT r = {dst} {op}(p){attrs}"


def _binary(op: str, src: str, dst: str, attrs: str = "") -> str:
    return f"p = {src} parameter(0)\nq = {src} parameter(1)\nROOT r = {dst} {op}(p, q){attrs}"


_UNARY_SAME = ["acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosh", "erf", "floor",
               "round-nearest-afz", "round-nearest-even", "sinh", "cosine", "exponential", "exponential-minus-one",
               "log", "log-plus-one", "logistic", "rsqrt", "sine", "sqrt", "tan", "tanh", "negate", "sign", "copy"]
_BINARY_SAME = ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power", "atan2"]

# (body, expected root shape). The body's last instruction (ROOT) is inferred.
POSITIVE: dict[str, tuple[str, str]] = {}
for _op in _UNARY_SAME:
    POSITIVE[_op] = (_unary(_op, "f32[2,<=3]", "f32[2,<=3]"), "f32[2,<=3]")
for _op in _BINARY_SAME:
    POSITIVE[_op] = (_binary(_op, "f32[2,3]", "f32[2,3]"), "f32[2,3]")
for _op in ["and", "or", "xor"]:
    POSITIVE[_op] = (_binary(_op, "pred[5]", "pred[5]"), "pred[5]")
for _op in ["shift-left", "shift-right-arithmetic", "shift-right-logical"]:
    POSITIVE[_op] = (_binary(_op, "u8[5]", "u8[5]"), "u8[5]")
POSITIVE.update({
    "not": (_unary("not", "s32[3]", "s32[3]"), "s32[3]"),
    "popcnt": (_unary("popcnt", "u32[3]", "u32[3]"), "u32[3]"),
    "count-leading-zeros": (_unary("count-leading-zeros", "s64[3]", "s64[3]"), "s64[3]"),
    "abs": (_unary("abs", "c64[3]", "f32[3]"), "f32[3]"),
    "real": (_unary("real", "c128[3]", "f64[3]"), "f64[3]"),
    "imag": (_unary("imag", "c64[3]", "f32[3]"), "f32[3]"),
    "is-finite": (_unary("is-finite", "bf16[3]", "pred[3]"), "pred[3]"),
    "convert": (_unary("convert", "f32[3,?]", "s8[3,?]"), "s8[3,?]"),
    "bitcast-convert": (_unary("bitcast-convert", "f32[3]", "u8[3,4]"), "u8[3,4]"),
    "reduce-precision": (_unary("reduce-precision", "f32[3]", "f32[3]", ", exponent_bits=5, mantissa_bits=10"),
                         "f32[3]"),
    "compare": (_binary("compare", "s32[2,3]", "pred[2,3]", ", direction=GT"), "pred[2,3]"),
    "complex": (_binary("complex", "f64[4]", "c128[4]"), "c128[4]"),
    "stochastic-convert": ("p = f32[4] parameter(0)\nq = u32[4] parameter(1)\nROOT r = s8[4] stochastic-convert(p, q)",
                           "s8[4]"),
    "select": ("p = pred[4] parameter(0)\nq = f32[4] parameter(1)\nROOT r = f32[4] select(p, q, q)", "f32[4]"),
    "clamp": ("lo = f32[] parameter(0)\nx = f32[4] parameter(1)\nROOT r = f32[4] clamp(lo, x, lo)", "f32[4]"),
    "broadcast": (_unary("broadcast", "f32[3]", "f32[2,3,4]", ", dimensions={1}"), "f32[2,3,4]"),
    "reshape": (_unary("reshape", "f32[6,2]", "f32[3,4]"), "f32[3,4]"),
    "dynamic-reshape": ("p = f32[6] parameter(0)\nn = s32[] parameter(1)\n"
                        "ROOT r = f32[<=6] dynamic-reshape(p, n)", "f32[<=6]"),
    "bitcast": (_unary("bitcast", "f32[6,2]", "s32[12]"), "s32[12]"),
    "transpose": (_unary("transpose", "f32[2,3,4]", "f32[4,2,3]", ", dimensions={2,0,1}"), "f32[4,2,3]"),
    "reverse": (_unary("reverse", "f32[2,3]", "f32[2,3]", ", dimensions={1}"), "f32[2,3]"),
    "slice": (_unary("slice", "f32[10,8]", "f32[3,4]", ", slice={[2:5], [0:8:2]}"), "f32[3,4]"),
    "dynamic-slice": ("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\n"
                      "ROOT r = f32[2,3] dynamic-slice(p, i, i), dynamic_slice_sizes={2,3}", "f32[2,3]"),
    "dynamic-update-slice": ("p = f32[10,8] parameter(0)\nu = f32[2,3] parameter(1)\ni = s64[] parameter(2)\n"
                             "ROOT r = f32[10,8] dynamic-update-slice(p, u, i, i)", "f32[10,8]"),
    "pad": ("p = f32[4,3] parameter(0)\nz = f32[] constant(0)\n"
            "ROOT r = f32[9,5] pad(p, z), padding=1_1_1x-1_0_1", "f32[9,4]"),
    "concatenate": ("p = f32[2,3] parameter(0)\nq = f32[2,5] parameter(1)\n"
                    "ROOT r = f32[2,8] concatenate(p, q), dimensions={1}", "f32[2,8]"),
    "iota": ("ROOT r = s32[4,5] iota(), iota_dimension=1", "s32[4,5]"),
    "constant": ("ROOT r = f32[2] constant({1, 2})", "f32[2]"),
    "parameter": ("ROOT p = (f32[2], s32[]) parameter(0)", "(f32[2], s32[])"),
    "tuple": ("p = f32[2] parameter(0)\nq = s32[] parameter(1)\nROOT r = (f32[2], s32[]) tuple(p, q)",
              "(f32[2], s32[])"),
    "get-tuple-element": ("p = (f32[2], s32[]) parameter(0)\nROOT r = s32[] get-tuple-element(p), index=1", "s32[]"),
    "get-dimension-size": (_unary("get-dimension-size", "f32[2,<=7]", "s32[]", ", dimensions={1}"), "s32[]"),
    "set-dimension-size": ("p = f32[2,7] parameter(0)\nn = s32[] parameter(1)\n"
                           "ROOT r = f32[2,<=7] set-dimension-size(p, n), dimensions={1}", "f32[2,<=7]"),
    "gather": ("p = f32[5,6,7] parameter(0)\ni = s32[4,2] parameter(1)\n"
               "ROOT r = f32[4,6,3] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={0}, "
               "start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,6,3}", "f32[4,6,3]"),
    "scatter": ("p = f32[5,6] parameter(0)\ni = s32[3,1] parameter(1)\nu = f32[3,6] parameter(2)\n"
                "ROOT r = f32[5,6] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0}, "
                "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add", "f32[5,6]"),
    "reduce": ("p = f32[4,5,6] parameter(0)\nz = f32[] constant(0)\n"
               "ROOT r = f32[5] reduce(p, z), dimensions={0,2}, to_apply=add", "f32[5]"),
    "reduce-window": ("p = f32[8,9] parameter(0)\nz = f32[] constant(0)\n"
                      "ROOT r = f32[4,4] reduce-window(p, z), window={size=2x3 stride=2x2}, to_apply=add",
                      "f32[4,4]"),
    "select-and-scatter": ("p = f32[8,8] parameter(0)\ns = f32[4,4] parameter(1)\nz = f32[] constant(0)\n"
                           "ROOT r = f32[8,8] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, "
                           "select=ge, scatter=add", "f32[8,8]"),
    "dot": ("p = f32[7,2,3] parameter(0)\nq = f32[7,3,5] parameter(1)\n"
            "ROOT r = f32[7,2,5] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
            "rhs_contracting_dims={1}", "f32[7,2,5]"),
    "ragged-dot": ("p = f32[19,11,5] parameter(0)\nq = f32[3,5,7] parameter(1)\ng = s64[19,3] parameter(2)\n"
                   "ROOT r = f32[19,11,7] ragged-dot(p, q, g), lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
                   "lhs_ragged_dims={1}, rhs_group_dims={0}", "f32[19,11,7]"),
    "scaled-dot": ("p = f8e4m3fn[2,32] parameter(0)\nq = f8e4m3fn[32,5] parameter(1)\n"
                   "sp = f8e8m0fnu[2,1] parameter(2)\nsq = f8e8m0fnu[1,5] parameter(3)\n"
                   "ROOT r = f32[2,5] scaled-dot(p, q, sp, sq), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                   "f32[2,5]"),
    "convolution": ("p = f32[1,10,10,3] parameter(0)\nk = f32[3,3,3,8] parameter(1)\n"
                    "ROOT r = f32[1,5,5,8] convolution(p, k), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                    "dim_labels=b01f_01io->b01f", "f32[1,5,5,8]"),
    "fft": (_unary("fft", "f32[4,8]", "c64[4,5]", ", fft_type=RFFT, fft_length={8}"), "c64[4,5]"),
    "sort": ("p = f32[4,5] parameter(0)\nq = s32[4,5] parameter(1)\n"
             "ROOT r = (f32[4,5], s32[4,5]) sort(p, q), dimensions={1}, to_apply=lt_pair", "(f32[4,5], s32[4,5])"),
    "topk": (_unary("topk", "f32[4,9]", "(f32[4,3], s32[4,3])", ", k=3, largest=true"), "(f32[4,3], s32[4,3])"),
    "map": ("p = f32[4] parameter(0)\nROOT r = s32[4] map(p), dimensions={0}, to_apply=to_s32", "s32[4]"),
    "scan": ("p = f32[4] parameter(0)\nz = f32[] parameter(1)\n"
             "ROOT r = (f32[4], f32[]) scan(p, z), dimensions={0}, num_carries=1, to_apply=add",
             "(f32[4], f32[])"),
    "cholesky": (_unary("cholesky", "f32[2,3,3]", "f32[2,3,3]", ", lower=true"), "f32[2,3,3]"),
    "triangular-solve": ("a = f32[3,3] parameter(0)\nb = f32[3,4] parameter(1)\n"
                         "ROOT r = f32[3,4] triangular-solve(a, b), left_side=true, lower=true, "
                         "transpose_a=NO_TRANSPOSE", "f32[3,4]"),
    "batch-norm-training": ("x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\n"
                            "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.001, "
                            "feature_index=1", "(f32[2,3,4], f32[3], f32[3])"),
    "batch-norm-inference": ("x = f32[2,3,4] parameter(0)\ns = f32[4] parameter(1)\n"
                             "ROOT r = f32[2,3,4] batch-norm-inference(x, s, s, s, s), epsilon=0.001, "
                             "feature_index=2", "f32[2,3,4]"),
    "batch-norm-grad": ("x = f32[2,3] parameter(0)\ns = f32[3] parameter(1)\n"
                        "ROOT r = (f32[2,3], f32[3], f32[3]) batch-norm-grad(x, s, s, s, x), epsilon=0.001, "
                        "feature_index=1", "(f32[2,3], f32[3], f32[3])"),
    "rng": ("a = f32[] parameter(0)\nROOT r = f32[3,4] rng(a, a), distribution=rng_uniform", "f32[3,4]"),
    "rng-bit-generator": (_unary("rng-bit-generator", "u64[2]", "(u64[2], u32[5])", ", algorithm=rng_philox"),
                          "(u64[2], u32[5])"),
    "rng-get-and-update-state": ("ROOT r = u64[2] rng-get-and-update-state(), delta=4", "u64[2]"),
    "call": ("p = f32[4] parameter(0)\nROOT r = f32[4] call(p), to_apply=negate_f32", "f32[4]"),
    "while": ("i = s32[] constant(0)\nx = f32[4] parameter(0)\nt = (s32[], f32[4]) tuple(i, x)\n"
              "ROOT w = (s32[], f32[4]) while(t), condition=cond, body=body", "(s32[], f32[4])"),
    "conditional": ("b = pred[] parameter(0)\nx = f32[4] parameter(1)\n"
                    "ROOT r = f32[4] conditional(b, x, x), true_computation=negate_f32, false_computation=abs_f32",
                    "f32[4]"),
    "fusion": ("p = f32[4] parameter(0)\nROOT r = f32[4] fusion(p, p), kind=kLoop, calls=fused", "f32[4]"),
    "custom-call": (_unary("custom-call", "f32[4]", "(f32[2], s8[9])", ', custom_call_target="foo"'),
                    "(f32[2], s8[9])"),
    "opt-barrier": (_unary("opt-barrier", "(f32[4], s32[])", "(f32[4], s32[])"), "(f32[4], s32[])"),
    "after-all": ("a = token[] parameter(0)\nROOT r = token[] after-all(a, a)", "token[]"),
    "add-dependency": ("x = f32[4] parameter(0)\na = token[] parameter(1)\nROOT r = f32[4] add-dependency(x, a)",
                       "f32[4]"),
    "domain": (_unary("domain", "u32[]", "u32[]", ', domain={kind="sharding", entry={maximal device=1}, exit={}}'),
               "u32[]"),
    "replica-id": ("ROOT r = u32[] replica-id()", "u32[]"),
    "partition-id": ("ROOT r = u32[] partition-id()", "u32[]"),
    "infeed": (_unary("infeed", "token[]", "(s32[3], token[])"), "(s32[3], token[])"),
    "outfeed": ("x = f32[4] parameter(0)\na = token[] parameter(1)\nROOT r = token[] outfeed(x, a)", "token[]"),
    "send": ("x = f32[4] parameter(0)\na = token[] parameter(1)\n"
             "ROOT r = (f32[4], u32[], token[]) send(x, a), channel_id=1", "(f32[4], u32[], token[])"),
    "send-done": ("x = (f32[4], u32[], token[]) parameter(0)\nROOT r = token[] send-done(x), channel_id=1",
                  "token[]"),
    "recv": (_unary("recv", "token[]", "(f32[4], u32[], token[])", ", channel_id=1"), "(f32[4], u32[], token[])"),
    "recv-done": ("x = (f32[4], u32[], token[]) parameter(0)\nROOT r = (f32[4], token[]) recv-done(x), channel_id=1",
                  "(f32[4], token[])"),
    "copy-start": (_unary("copy-start", "f32[4]", "(f32[4], f32[4], u32[])"), "(f32[4], f32[4], u32[])"),
    "copy-done": ("x = (f32[4], f32[4], u32[]) parameter(0)\nROOT r = f32[4] copy-done(x)", "f32[4]"),
    "async-start": ("x = f32[4] parameter(0)\n"
                    "ROOT r = ((f32[4]), f32[4], s32[]) async-start(x), calls=negate_f32", "((f32[4]), f32[4], s32[])"),
    "async-update": ("x = ((f32[4]), f32[4], s32[]) parameter(0)\n"
                     "ROOT r = ((f32[4]), f32[4], s32[]) async-update(x), calls=negate_f32",
                     "((f32[4]), f32[4], s32[])"),
    "async-done": ("x = ((f32[4]), f32[4], s32[]) parameter(0)\nROOT r = f32[4] async-done(x), calls=negate_f32",
                   "f32[4]"),
    "all-gather": (_unary("all-gather", "f32[4,3]", "f32[4,12]", ", replica_groups={{0,1,2,3}}, dimensions={1}"),
                   "f32[4,12]"),
    "all-gather-start": (_unary("all-gather-start", "f32[4,3]", "f32[4,12]", ", dimensions={1}"), "f32[4,12]"),
    "all-gather-done": (_unary("all-gather-done", "(f32[4,3], f32[4,12])", "f32[4,12]"), "f32[4,12]"),
    "all-reduce": ("x = f32[4] parameter(0)\ny = f32[2] parameter(1)\n"
                   "ROOT r = (f32[4], f32[2]) all-reduce(x, y), replica_groups={}, to_apply=add", "(f32[4], f32[2])"),
    "all-reduce-start": (_unary("all-reduce-start", "f32[4]", "f32[4]", ", to_apply=add"), "f32[4]"),
    "all-reduce-done": (_unary("all-reduce-done", "f32[4]", "f32[4]"), "f32[4]"),
    "all-to-all": ("x = f32[4] parameter(0)\ny = s32[2] parameter(1)\n"
                   "ROOT r = (f32[4], s32[2]) all-to-all(x, y), replica_groups={{0,1}}", "(f32[4], s32[2])"),
    "ragged-all-to-all": ("x = f32[6] parameter(0)\no = s32[3] parameter(1)\n"
                          "ROOT r = f32[6] ragged-all-to-all(x, x, o, o, o, o), replica_groups={{0,1,2}}", "f32[6]"),
    "reduce-scatter": (_unary("reduce-scatter", "f32[4,8]", "f32[4,2]", ", dimensions={1}, to_apply=add"),
                       "f32[4,2]"),
    "collective-broadcast": (_unary("collective-broadcast", "f32[4]", "f32[4]", ", replica_groups={}"), "f32[4]"),
    "collective-permute": (_unary("collective-permute", "f32[4]", "f32[4]", ", source_target_pairs={{0,1}}"),
                           "f32[4]"),
    "collective-permute-start": (_unary("collective-permute-start", "f32[4]", "(f32[4], f32[4])",
                                        ", source_target_pairs={{0,1}}"), "(f32[4], f32[4])"),
    "collective-permute-done": (_unary("collective-permute-done", "(f32[4], f32[4])", "f32[4]"), "f32[4]"),
})


def test_every_opcode_has_a_positive_case():
    assert set(POSITIVE) == set(OPCODES)


@pytest.mark.parametrize("opcode", sorted(POSITIVE))
def test_inferred_shape(opcode):
    body, expected = POSITIVE[opcode]
    root = _root(body)
    assert root.opcode == opcode
    inferred = infer_shape(root)
    assert inferred == parse_shape(expected), f"{opcode}: {inferred} != {expected}"
    assert inferred.layout is None


@pytest.mark.parametrize("body,expected", [
    # dynamic dimensions propagate through elementwise ops; `?` takes the other side's size
    (_binary("add", "f32[<=4]", "f32[<=4]"), "f32[<=4]"),
    ("p = f32[?,3] parameter(0)\nq = f32[5,3] parameter(1)\nROOT r = f32[5,3] add(p, q)", "f32[5,3]"),
    ("p = f32[<=8,3] parameter(0)\nROOT r = f32[3,<=8] transpose(p), dimensions={1,0}", "f32[3,<=8]"),
    ("p = f32[<=8,3] parameter(0)\nz = f32[] constant(0)\nROOT r = f32[<=8] reduce(p, z), dimensions={1}, "
     "to_apply=add", "f32[<=8]"),
    # bitcast-convert to a wider type removes the minor dimension
    (_unary("bitcast-convert", "u16[3,2]", "f32[3]"), "f32[3]"),
    # select with scalar predicate; clamp with array bounds
    ("p = pred[] parameter(0)\nq = s32[3] parameter(1)\nROOT r = s32[3] select(p, q, q)", "s32[3]"),
    ("x = f32[4] parameter(0)\nROOT r = f32[4] clamp(x, x, x)", "f32[4]"),
    # dot without batch dims, preferred element type from the declared shape
    ("p = bf16[2,3] parameter(0)\nq = bf16[5,3] parameter(1)\n"
     "ROOT r = f32[2,5] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={1}", "f32[2,5]"),
    # outer product: no contracting dims
    ("p = f32[2] parameter(0)\nq = f32[3] parameter(1)\nROOT r = f32[2,3] dot(p, q)", "f32[2,3]"),
    # variadic reduce returns a tuple
    ("p = f32[4,5] parameter(0)\nq = s32[4,5] parameter(1)\nz = f32[] constant(0)\ni = s32[] constant(0)\n"
     "ROOT r = (f32[4], s32[4]) reduce(p, q, z, i), dimensions={1}, to_apply=add_pair", "(f32[4], s32[4])"),
    # convolution with feature groups, dilation and another layout
    ("p = f32[2,6,9] parameter(0)\nk = f32[3,3,4] parameter(1)\n"
     "ROOT r = f32[2,4,5] convolution(p, k), window={size=3 rhs_dilate=2}, dim_labels=bf0_0io->bf0, "
     "feature_group_count=2", "f32[2,4,5]"),
    # batch_group_count divides the batch
    ("p = f32[4,3,5] parameter(0)\nk = f32[3,2,2] parameter(1)\n"
     "ROOT r = f32[2,2,4] convolution(p, k), window={size=2}, dim_labels=bf0_io0->bf0, batch_group_count=2",
     "f32[2,2,4]"),
    # gather with batching dims
    ("p = f32[3,10] parameter(0)\ni = s32[3,4,1] parameter(1)\n"
     "ROOT r = f32[3,4,2] gather(p, i), offset_dims={2}, collapsed_slice_dims={}, start_index_map={1}, "
     "operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=2, slice_sizes={1,2}",
     "f32[3,4,2]"),
    # gather with implicit index vector dimension
    ("p = f32[5,6] parameter(0)\ni = s32[4] parameter(1)\n"
     "ROOT r = f32[4,6] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, "
     "index_vector_dim=1, slice_sizes={1,6}", "f32[4,6]"),
    # fft kinds
    (_unary("fft", "c64[4,5]", "f32[4,8]", ", fft_type=IRFFT, fft_length={8}"), "f32[4,8]"),
    (_unary("fft", "c128[2,3,4]", "c128[2,3,4]", ", fft_type=IFFT, fft_length={3,4}"), "c128[2,3,4]"),
    # ragged-dot with ragged contracting dimension gains a group dimension
    ("p = f32[11,19,5] parameter(0)\nq = f32[19,5,7] parameter(1)\ng = s64[19,3] parameter(2)\n"
     "ROOT r = f32[3,11,7] ragged-dot(p, q, g), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}, "
     "lhs_ragged_dims={2}", "f32[3,11,7]"),
    # slice of a whole dynamic dim stays dynamic
    (_unary("slice", "f32[<=6,4]", "f32[<=6,2]", ", slice={[0:6], [1:3]}"), "f32[<=6,2]"),
    # reduce-window with padding and base dilation
    ("p = f32[5] parameter(0)\nz = f32[] constant(0)\n"
     "ROOT r = f32[5] reduce-window(p, z), window={size=3 pad=1_1 lhs_dilate=2 stride=2}, to_apply=add", "f32[5]"),
    # reducer returning a 1-tuple gives a 1-tuple
    ("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
     "ROOT r = (f32[]) reduce(p, z), dimensions={0}, to_apply=add_tuple1", "(f32[])"),
    # conditional with branch_computations
    ("b = s32[] parameter(0)\nx = f32[4] parameter(1)\n"
     "ROOT r = f32[4] conditional(b, x, x, x), branch_computations={negate_f32, abs_f32, negate_f32}", "f32[4]"),
    # all-to-all array form, all-reduce of a single operand
    (_unary("all-to-all", "f32[4,6]", "f32[4,6]", ", dimensions={1}"), "f32[4,6]"),
    (_unary("all-reduce", "f32[4,6]", "f32[4,6]", ", to_apply=add"), "f32[4,6]"),
])
def test_inferred_shape_variants(body, expected):
    extra = "add_tuple1 {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n s = f32[] add(a, b)\n" \
            " ROOT t = (f32[]) tuple(s)\n}\n"
    module = parse_hlo(PRELUDE + extra + "\nENTRY main {\n" + body + "\n}\n")
    assert infer_shape(module.entry.root) == parse_shape(expected)


# (body, message pattern): each breaks one rule; the message names the instruction 'r'.
NEGATIVE = [
    # elementwise
    (_unary("exponential", "s32[3]", "s32[3]"), r"exponential requires a floating-point or complex type, got s32\[3\]"),
    (_unary("popcnt", "f32[3]", "f32[3]"), r"popcnt requires an integer type"),
    (_unary("not", "f32[3]", "f32[3]"), r"not requires an integer or pred type"),
    (_unary("abs", "u32[3]", "u32[3]"), r"abs requires a signed integer, floating-point or complex type"),
    (_unary("abs", "(f32[3])", "f32[3]"), r"operand 0 of abs must be an array, got \(f32\[3\]\)"),
    (_unary("convert", "c64[3]", "f32[3]"), r"convert from complex c64\[3\] to non-complex type f32"),
    (_unary("bitcast-convert", "u8[3]", "f32[3]"), r"needs a minor dimension of size 4"),
    (_unary("bitcast-convert", "pred[3]", "s8[3]"), r"between pred and non-pred"),
    (_unary("reduce-precision", "f32[3]", "f32[3]", ", exponent_bits=0, mantissa_bits=3"), r"exponent_bits >= 1"),
    ("p = f32[4] parameter(0)\nq = f32[5] parameter(1)\nROOT r = f32[4] add(p, q)",
     r"instruction 'r': operands of add must have equal dimensions, got f32\[4\] and f32\[5\]"),
    ("p = f32[4] parameter(0)\nq = s32[4] parameter(1)\nROOT r = f32[4] add(p, q)",
     r"operands of add must have equal element types, got f32\[4\] and s32\[4\]"),
    ("p = f32[4] parameter(0)\nq = f32[4,1] parameter(1)\nROOT r = f32[4] multiply(p, q)",
     r"operands of multiply must have equal dimensions"),
    (_binary("and", "f32[3]", "f32[3]"), r"and requires an integer or pred type"),
    (_binary("shift-left", "f32[3]", "f32[3]"), r"shift-left requires an integer type"),
    (_binary("compare", "f32[3]", "pred[3]", ", direction=XX"), r"compare direction must be one of EQ"),
    (_binary("compare", "f32[3]", "pred[3]", ", direction=EQ, type=WEIRD"), r"compare type must be one of"),
    (_binary("complex", "bf16[3]", "c64[3]"), r"complex requires f32 or f64 operands, got bf16\[3\]"),
    (_binary("complex", "s32[3]", "c64[3]"), r"complex requires a floating-point type"),
    ("p = f32[4] parameter(0)\nq = u16[4] parameter(1)\nROOT r = s8[4] stochastic-convert(p, q)",
     r"random bits of stochastic-convert must be unsigned of the operand's width"),
    ("p = f32[4] parameter(0)\nq = u32[4] parameter(1)\nROOT r = bf16[4] stochastic-convert(p, q)",
     r"'r'.*stochastic-convert rounds to an integer type, got the result type bf16"),
    ("p = s32[4] parameter(0)\nq = f32[4] parameter(1)\nROOT r = f32[4] select(p, q, q)",
     r"select predicate must be pred, got s32\[4\]"),
    ("p = pred[3] parameter(0)\nq = f32[4] parameter(1)\nROOT r = f32[4] select(p, q, q)",
     r"select predicate must have the branches' dimensions"),
    ("p = pred[4] parameter(0)\nq = f32[4] parameter(1)\ns = f32[5] parameter(2)\nROOT r = f32[4] select(p, q, s)",
     r"select branches must have equal dimensions"),
    ("lo = f32[2] parameter(0)\nx = f32[4] parameter(1)\nROOT r = f32[4] clamp(lo, x, lo)",
     r"clamp min must be a scalar or have the operand's dimensions"),
    ("lo = s32[] parameter(0)\nx = f32[4] parameter(1)\nROOT r = f32[4] clamp(lo, x, lo)",
     r"min and operand of clamp must have equal element types"),
    # data movement
    (_unary("broadcast", "f32[3]", "f32[2,4]", ", dimensions={1}"),
     r"operand dimension 0 \(size 3\) does not match output dimension 1 \(size 4\)"),
    (_unary("broadcast", "f32[3]", "f32[2,3]", ", dimensions={2}"), r"broadcast dimensions entry 2 is out of range"),
    (_unary("broadcast", "f32[3]", "f32[2,3]", ", dimensions={0,1}"), r"one entry per operand dimension"),
    (_unary("reshape", "f32[6]", "f32[4]"), r"reshape from f32\[6\] to \[4\] changes the element count"),
    (_unary("bitcast", "f32[6]", "f16[6]"), r"bitcast from f32\[6\] to f16\[6\] changes the size"),
    (_unary("transpose", "f32[2,3]", "f32[3,2]", ", dimensions={0,0}"),
     r"transpose dimensions \(0, 0\) is not a permutation of the 2 dimensions"),
    (_unary("reverse", "f32[2,3]", "f32[2,3]", ", dimensions={1,1}"), r"reverse dimensions \(1, 1\) has repeated"),
    (_unary("slice", "f32[10]", "f32[3]", ", slice={[8:11]}"), r"slice \[8:11\] of dimension 0 is out of bounds"),
    (_unary("slice", "f32[10]", "f32[3]", ", slice={[0:5], [0:1]}"), r"slice has 2 dimensions but the operand"),
    ("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\n"
     "ROOT r = f32[2,3] dynamic-slice(p, i), dynamic_slice_sizes={2,3}", r"dynamic-slice needs 2 start indices"),
    ("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\nj = s64[] parameter(2)\n"
     "ROOT r = f32[2,3] dynamic-slice(p, i, j), dynamic_slice_sizes={2,3}",
     r"start indices of dynamic-slice must have one type"),
    ("p = f32[10,8] parameter(0)\ni = f32[] parameter(1)\n"
     "ROOT r = f32[2,3] dynamic-slice(p, i, i), dynamic_slice_sizes={2,3}", r"start index 0 of dynamic-slice must be "
                                                                            r"an integer scalar"),
    ("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\n"
     "ROOT r = f32[2,9] dynamic-slice(p, i, i), dynamic_slice_sizes={2,9}",
     r"dynamic slice size 9 of dimension 1 is out of bounds"),
    ("p = f32[10,8] parameter(0)\nu = f32[2,9] parameter(1)\ni = s32[] parameter(2)\n"
     "ROOT r = f32[10,8] dynamic-update-slice(p, u, i, i)", r"update dimension 1 \(size 9\) exceeds"),
    ("p = f32[10,8] parameter(0)\nu = f32[2] parameter(1)\ni = s32[] parameter(2)\n"
     "ROOT r = f32[10,8] dynamic-update-slice(p, u, i, i)", r"must have the rank of the operand"),
    ("p = f32[4] parameter(0)\nz = f32[] constant(0)\nROOT r = f32[4] pad(p, z), padding=-3_-3",
     r"gives negative size -2"),
    ("p = f32[4] parameter(0)\nz = s32[] constant(0)\nROOT r = f32[4] pad(p, z), padding=0_0",
     r"operand and padding value of pad must have equal element types"),
    ("p = f32[4] parameter(0)\nz = f32[1] parameter(1)\nROOT r = f32[4] pad(p, z), padding=0_0",
     r"padding value of pad must be a scalar"),
    ("p = f32[2,3] parameter(0)\nq = f32[3,5] parameter(1)\nROOT r = f32[2,8] concatenate(p, q), dimensions={1}",
     r"operands of concatenate must agree outside dimension 1"),
    ("p = f32[2,3] parameter(0)\nq = f32[2,3] parameter(1)\nROOT r = f32[2,6] concatenate(p, q), dimensions={2}",
     r"concatenate dimension entry 2 is out of range for rank 2"),
    ("ROOT r = s32[4] iota(), iota_dimension=1", r"iota_dimension entry 1 is out of range for rank 1"),
    ("ROOT r = s32[] iota(), iota_dimension=0", r"iota does not support scalars"),
    ("p = (f32[2], s32[]) parameter(0)\nROOT r = s32[] get-tuple-element(p), index=2",
     r"tuple index 2 is out of range for \(f32\[2\], s32\[\]\) with 2 elements"),
    ("p = f32[2] parameter(0)\nROOT r = s32[] get-tuple-element(p), index=0", r"needs a tuple operand"),
    (_unary("get-dimension-size", "f32[2]", "s32[]", ", dimensions={1}"), r"dimensions entry 1 is out of range"),
    ("p = f32[2,7] parameter(0)\nn = s64[] parameter(1)\n"
     "ROOT r = f32[2,<=7] set-dimension-size(p, n), dimensions={1}", r"size operand of set-dimension-size must be s32"),
    # gather / scatter
    ("p = f32[5,6,7] parameter(0)\ni = s32[4,3] parameter(1)\n"
     "ROOT r = f32[4,6,3] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={0}, "
     "start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,6,3}",
     r"index vector dimension 1 of indices s32\[4,3\] has size 3, expected 2"),
    ("p = f32[5,6,7] parameter(0)\ni = s32[4,2] parameter(1)\n"
     "ROOT r = f32[4,6,3] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={0}, "
     "start_index_map={0,2}, index_vector_dim=1, slice_sizes={2,6,3}",
     r"slice size of collapsed or batching dimension 0 must be <= 1"),
    ("p = f32[5,6,7] parameter(0)\ni = s32[4,2] parameter(1)\n"
     "ROOT r = f32[4,6,3] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={0}, "
     "start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,6,8}", r"slice size 8 of dimension 2 is out of bounds"),
    ("p = f32[5,6,7] parameter(0)\ni = s32[4,2] parameter(1)\n"
     "ROOT r = f32[4,6,3] gather(p, i), offset_dims={2,1}, collapsed_slice_dims={0}, "
     "start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,6,3}", r"offset_dims \(2, 1\) must be sorted"),
    ("p = f32[5,6,7] parameter(0)\ni = f32[4,2] parameter(1)\n"
     "ROOT r = f32[4,6,3] gather(p, i), offset_dims={1,2}, collapsed_slice_dims={0}, "
     "start_index_map={0,2}, index_vector_dim=1, slice_sizes={1,6,3}", r"indices of gather must be integers"),
    ("p = f32[5,6] parameter(0)\ni = s32[3,1] parameter(1)\nu = f32[3,7] parameter(2)\n"
     "ROOT r = f32[5,6] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
     r"update window dimension 1 \(size 7\) exceeds the operand's window bound 6"),
    ("p = f32[5,6] parameter(0)\ni = s32[3,1] parameter(1)\nu = f32[2,6] parameter(2)\n"
     "ROOT r = f32[5,6] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add",
     r"update scatter dimensions \[2\] must equal the indices' batch dimensions \[3\]"),
    ("p = f32[5,6] parameter(0)\ni = s32[3,1] parameter(1)\nu = f32[3,6] parameter(2)\n"
     "ROOT r = f32[5,6] scatter(p, i, u), update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_s32",
     r"accumulator type s32 of to_apply computation 'add_s32'"),
    ("p = f32[5,6] parameter(0)\ni = s32[3,1] parameter(1)\n"
     "ROOT r = f32[5,6] scatter(p, i), update_window_dims={1}, inserted_window_dims={0}, "
     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add", r"an odd count >= 3"),
    # reductions and called computations
    ("p = f32[4,5] parameter(0)\nz = f32[] constant(0)\nROOT r = f32[4] reduce(p, z), dimensions={2}, to_apply=add",
     r"reduce dimensions entry 2 is out of range for rank 2"),
    ("p = f32[4,5] parameter(0)\nz = f32[] constant(0)\nROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=lt",
     r"accumulator parameter 0 is f32\[\] but result 0 is pred\[\]"),
    ("p = f32[4,5] parameter(0)\nz = f32[] constant(0)\n"
     "ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add_pair",
     r"to_apply computation 'add_pair' takes 4 parameters, expected 2"),
    ("p = f32[4,5] parameter(0)\nz = f32[2] parameter(1)\nROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add",
     r"init value 0 of reduce must be a scalar"),
    ("p = f32[4,5] parameter(0)\nROOT r = f32[4] reduce(p), dimensions={1}, to_apply=add",
     r"reduce takes N inputs followed by N init values"),
    ("p = f32[8] parameter(0)\nz = f32[] constant(0)\n"
     "ROOT r = f32[4] reduce-window(p, z), window={size=2x2}, to_apply=add",
     r"window has 2 dimensions but the operand f32\[8\] has rank 1"),
    ("p = f32[8] parameter(0)\nz = f32[] constant(0)\n"
     "ROOT r = f32[4] reduce-window(p, z), window={size=2 stride=0}, to_apply=add",
     r"window dimension 0 has non-positive stride 0"),
    ("p = f32[8,8] parameter(0)\ns = f32[3,4] parameter(1)\nz = f32[] constant(0)\n"
     "ROOT r = f32[8,8] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, select=ge, scatter=add",
     r"source f32\[3,4\] must have the window output shape f32\[4,4\]"),
    ("p = f32[8,8] parameter(0)\ns = f32[4,4] parameter(1)\nz = f32[] constant(0)\n"
     "ROOT r = f32[8,8] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, select=add, scatter=add",
     r"select computation 'add' returns f32\[\], expected pred\[\]"),
    ("p = f32[4,5] parameter(0)\nq = s32[4,5] parameter(1)\n"
     "ROOT r = (f32[4,5], s32[4,5]) sort(p, q), dimensions={1}, to_apply=lt",
     r"comparator computation 'lt' takes 2 parameters, expected 4"),
    ("p = f32[4,5] parameter(0)\nq = s32[4,6] parameter(1)\n"
     "ROOT r = (f32[4,5], s32[4,6]) sort(p, q), dimensions={1}, to_apply=lt_pair",
     r"operands of sort must have equal dimensions"),
    ("p = f32[4,5] parameter(0)\nROOT r = f32[4,5] sort(p), dimensions={2}, to_apply=lt",
     r"sort dimension entry 2 is out of range for rank 2"),
    ("p = f32[4,5] parameter(0)\nROOT r = f32[4,5] sort(p), dimensions={1}, to_apply=add",
     r"comparator computation 'add' returns f32\[\], expected pred\[\]"),
    (_unary("topk", "f32[4,2]", "(f32[4,3], s32[4,3])", ", k=3"), r"topk k=3 is out of range"),
    ("p = s32[4] parameter(0)\nROOT r = s32[4] map(p), dimensions={0}, to_apply=to_s32",
     r"parameter 0 of to_apply computation 'to_s32' has shape f32\[\], expected s32\[\]"),
    ("p = f32[4] parameter(0)\nq = f32[5] parameter(1)\nROOT r = s32[4] map(p, q), to_apply=add",
     r"operands of map must have equal dimensions"),
    # dot, convolution, linear algebra
    ("p = f32[2,8] parameter(0)\nq = f32[9,3] parameter(1)\n"
     "ROOT r = f32[2,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     r"instruction 'r': lhs contracting dimension 1 \(size 8\) does not match rhs contracting dimension 0 \(size 9\)"),
    ("p = f32[2,8] parameter(0)\nq = f32[8,3] parameter(1)\n"
     "ROOT r = f32[2,3] dot(p, q), lhs_contracting_dims={2}, rhs_contracting_dims={0}",
     r"lhs_contracting_dims entry 2 is out of range for rank 2"),
    ("p = f32[2,8] parameter(0)\nq = f32[8,3] parameter(1)\n"
     "ROOT r = f32[2,3] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={}",
     r"lhs has 1 contracting dimensions but rhs has 0"),
    ("p = f32[4,2,8] parameter(0)\nq = f32[5,8,3] parameter(1)\n"
     "ROOT r = f32[4,2,3] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
     "rhs_contracting_dims={1}", r"lhs batch dimension 0 \(size 4\) does not match rhs batch dimension 0 \(size 5\)"),
    ("p = f32[4,8] parameter(0)\nq = f32[4,8] parameter(1)\n"
     "ROOT r = f32[4] dot(p, q), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={0}, "
     "rhs_contracting_dims={1}", r"both a contracting and a batch dimension"),
    ("p = f32[1,10,10,3] parameter(0)\nk = f32[3,3,4,8] parameter(1)\n"
     "ROOT r = f32[1,8,8,8] convolution(p, k), window={size=3x3}, dim_labels=b01f_01io->b01f",
     r"input feature dimension \(size 3\) must be feature_group_count \(1\) times the kernel input feature "
     r"dimension \(size 4\)"),
    ("p = f32[1,10,10,3] parameter(0)\nk = f32[3,3,3,8] parameter(1)\n"
     "ROOT r = f32[1,8,8,8] convolution(p, k), window={size=2x3}, dim_labels=b01f_01io->b01f",
     r"window size 2 of spatial dimension 0 does not match the kernel's \(size 3\)"),
    ("p = f32[1,10,3] parameter(0)\nk = f32[3,3,8] parameter(1)\n"
     "ROOT r = f32[1,8,8] convolution(p, k), window={size=3x3}, dim_labels=b01f_01io->b01f",
     r"dim_labels b01f_01io->b01f do not match the lhs rank 3"),
    ("p = f32[3,10,6] parameter(0)\nk = f32[3,6,6] parameter(1)\n"
     "ROOT r = f32[3,8,6] convolution(p, k), window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2",
     r"must be multiples of batch_group_count \(2\)"),
    (_unary("fft", "f32[4,8]", "c64[4,8]", ", fft_type=FFT, fft_length={8}"), r"FFT requires a complex operand"),
    (_unary("fft", "f32[4,8]", "c64[4,5]", ", fft_type=RFFT, fft_length={6}"),
     r"RFFT operand f32\[4,8\] must end in dimensions \[6\]"),
    (_unary("cholesky", "f32[3,4]", "f32[3,4]"), r"operand of cholesky must be square matrices"),
    ("a = f32[3,3] parameter(0)\nb = f32[4,4] parameter(1)\n"
     "ROOT r = f32[4,4] triangular-solve(a, b), left_side=true", r"dimension 0 of b f32\[4,4\] must match the size 3"),
    ("x = f32[2,3,4] parameter(0)\ns = f32[4] parameter(1)\n"
     "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.001, feature_index=1",
     r"scale of batch-norm-training must be f32\[3\] \(the feature dimension\), got f32\[4\]"),
    ("x = f32[2,3,4] parameter(0)\ns = f32[3] parameter(1)\n"
     "ROOT r = (f32[2,3,4], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.001, feature_index=3",
     r"feature_index entry 3 is out of range for rank 3"),
    ("a = f32[] parameter(0)\nb = s32[] parameter(1)\nROOT r = f32[3] rng(a, b), distribution=rng_uniform",
     r"parameters of rng must have equal element types"),
    ("a = s32[] parameter(0)\nROOT r = s32[3] rng(a, a), distribution=rng_normal",
     r"rng_normal requires floating-point parameters"),
    (_unary("rng-bit-generator", "u64[2]", "(u64[3], u32[5])", ", algorithm=rng_philox"),
     r"rng-bit-generator must produce \(state, bits\) with state u64\[2\]"),
    # control flow
    ("p = f32[5] parameter(0)\nROOT r = f32[4] call(p), to_apply=negate_f32",
     r"parameter 0 of to_apply computation 'negate_f32' has shape f32\[4\], expected f32\[5\]"),
    ("x = f32[4] parameter(0)\nROOT w = f32[4] while(x), condition=cond, body=body",
     r"parameter 0 of condition computation 'cond' has shape \(s32\[\], f32\[4\]\), expected f32\[4\]"),
    ("x = f32[4] parameter(0)\nROOT w = f32[4] while(x), condition=negate_f32, body=negate_f32",
     r"condition computation 'negate_f32' returns f32\[4\], expected pred\[\]"),
    ("b = s32[] parameter(0)\nx = f32[4] parameter(1)\n"
     "ROOT r = f32[4] conditional(b, x, x), true_computation=negate_f32, false_computation=abs_f32",
     r"predicate of conditional must be pred\[\], got s32\[\]"),
    ("b = pred[] parameter(0)\nx = f32[4] parameter(1)\n"
     "ROOT r = f32[4] conditional(b, x), true_computation=negate_f32, false_computation=abs_f32",
     r"conditional takes 3 operands, got 2"),
    ("b = s32[] parameter(0)\nx = f32[4] parameter(1)\n"
     "ROOT r = f32[4] conditional(b, x, x), branch_computations={negate_f32, to_s32}",
     r"parameter 0 of branch 1 computation 'to_s32' has shape f32\[\], expected f32\[4\]"),
    ("p = f32[4] parameter(0)\nROOT r = f32[4] fusion(p), kind=kLoop, calls=fused",
     r"fused computation 'fused' takes 2 parameters, expected 1"),
    ("x = f32[4] parameter(0)\nROOT r = token[] after-all(x)", r"operand 0 of after-all must be a token"),
    ("x = f32[4] parameter(0)\nROOT r = (f32[4], token[]) infeed(x)", r"operand of infeed must be a token"),
    ("x = f32[4] parameter(0)\nROOT r = f32[4] async-start(x), calls=negate_f32",
     r"async-start must produce \(\(operands\), result, \.\.\.\)"),
    ("x = f32[4] parameter(0)\nROOT r = f32[4] copy-done(x)", r"operand of copy-done must be a tuple"),
    # collectives
    (_unary("all-gather", "f32[4,3]", "f32[4,10]", ", dimensions={1}"), r"dimension 1 of f32\[4,10\] must be a multiple "
                                                                         r"of 3"),
    (_unary("all-gather", "f32[4,3]", "f32[5,12]", ", dimensions={1}"), r"must match the operand f32\[4,3\] outside"),
    (_unary("reduce-scatter", "f32[4,8]", "f32[4,3]", ", dimensions={1}, to_apply=add"),
     r"dimension 1 of f32\[4,3\] must be a multiple of 8"),
    (_unary("all-reduce", "f32[4]", "f32[4]", ", to_apply=add_s32"),
     r"accumulator type s32 of to_apply computation 'add_s32'"),
    (_unary("all-reduce-done", "f32[4]", "f32[5]"), r"all-reduce-done result f32\[5\] does not match"),
    (_unary("all-to-all", "f32[4,6]", "f32[4,6]", ", dimensions={2}"), r"all-to-all dimensions \(2,\) must name one"),
    ("x = f32[6] parameter(0)\no = s32[3] parameter(1)\np = f32[3] parameter(2)\n"
     "ROOT r = f32[6] ragged-all-to-all(x, x, o, o, o, p)", r"offset and size operands of ragged-all-to-all"),
    # more rules: ragged/scaled dot, dynamic reshape, fft, linear algebra, control flow, tokens
    ("p = f32[19,11,5] parameter(0)\nq = f32[4,5,7] parameter(1)\ng = s64[19,3] parameter(2)\n"
     "ROOT r = f32[19,11,7] ragged-dot(p, q, g), lhs_contracting_dims={2}, rhs_contracting_dims={1}, "
     "lhs_ragged_dims={1}, rhs_group_dims={0}", r"rhs group dimension 0 of f32\[4,5,7\] does not match the group "
                                                r"count 3"),
    ("p = f32[2,32] parameter(0)\nq = f32[32,5] parameter(1)\nsp = f32[2,1,1] parameter(2)\n"
     "sq = f32[1,5] parameter(3)\nROOT r = f32[2,5] scaled-dot(p, q, sp, sq), lhs_contracting_dims={1}, "
     "rhs_contracting_dims={0}", r"scale f32\[2,1,1\] must be a scalar or have the rank of its operand"),
    ("p = f32[6] parameter(0)\nn = s32[] parameter(1)\nROOT r = f32[<=6,<=6] dynamic-reshape(p, n)",
     r"dynamic-reshape takes 3 operands, got 2"),
    (_unary("fft", "c64[4,8]", "f32[4,8]", ", fft_type=IRFFT, fft_length={8}"),
     r"IRFFT operand c64\[4,8\] must end in dimensions \[5\]"),
    (_unary("fft", "c64[4,8]", "c64[4,8]", ", fft_type=DCT, fft_length={8}"), r"unknown fft_type 'DCT'"),
    ("a = f32[3,3] parameter(0)\nb = f32[4,3] parameter(1)\n"
     "ROOT r = f32[4,3] triangular-solve(a, b), transpose_a=SIDEWAYS", r"transpose_a must be NO_TRANSPOSE"),
    ("x = f32[2,3] parameter(0)\ns = f32[3] parameter(1)\ng = f32[3,2] parameter(2)\n"
     "ROOT r = (f32[2,3], f32[3], f32[3]) batch-norm-grad(x, s, s, s, g), epsilon=0.001, feature_index=1",
     r"grad_output f32\[3,2\] must have the operand's shape"),
    ("i = s32[] constant(0)\nx = f32[4] parameter(0)\nt = (s32[], f32[4]) tuple(i, x)\n"
     "ROOT w = (s32[], f32[4]) while(t), condition=cond, body=cond",
     r"body computation 'cond' returns pred\[\], expected \(s32\[\], f32\[4\]\)"),
    ("b = s32[] parameter(0)\nx = f32[4] parameter(1)\nROOT r = f32[4] conditional(b, x, x), "
     "branch_computations={negate_f32, fused_one}", r"branch 1 computation 'fused_one' returns s32\[4\], but branch 0"),
    ("p = f32[4,3] parameter(0)\nROOT r = s32[4,3] map(p), dimensions={1,0}, to_apply=to_s32",
     r"map dimensions \(1, 0\) must be all dimensions in order"),
    ("x = f32[4] parameter(0)\nROOT r = token[] outfeed(x, x)", r"operand 1 of outfeed must be a token"),
    ("x = f32[4] parameter(0)\nROOT r = f32[4] add-dependency(x, x)", r"operand 1 of add-dependency must be a token"),
    ("a = token[] parameter(0)\nROOT r = (f32[4], u32[]) recv(a)", r"recv must produce a 3-tuple"),
    ("x = (f32[4]) parameter(0)\nROOT r = token[] send-done(x)", r"operand of send-done must be a tuple of at least 3"),
    ("x = f32[4] parameter(0)\nROOT r = ((f32[4]), f32[5], s32[]) async-start(x), calls=negate_f32",
     r"async computation 'negate_f32' returns f32\[4\], expected f32\[5\]"),
    ("x = (f32[4], f32[4]) parameter(0)\nROOT r = f32[3] collective-permute-done(x)",
     r"collective-permute-done result f32\[3\] does not match its start operand"),
    (_unary("topk", "f32[]", "(f32[], s32[])", ", k=1"), r"topk needs an operand of rank >= 1"),
    ("p = f32[8] parameter(0)\nq = f32[9] parameter(1)\nz = f32[] constant(0)\n"
     "ROOT r = (f32[4], f32[4]) reduce-window(p, q, z, z), window={size=2 stride=2}, to_apply=add_pair",
     r"inputs of reduce-window must have equal dimensions"),
    (_unary("scan", "f32[4]", "f32[4]", ", dimensions={0,1}, to_apply=add"), r"scan takes exactly one dimension"),
]


@pytest.mark.parametrize("body,pattern", NEGATIVE)
def test_rule_violation_is_reported(body, pattern):
    root = _root(body)
    with pytest.raises(HloVerifyError, match=pattern) as info:
        infer_shape(root)
    assert str(info.value).startswith("instruction 'r': ") or str(info.value).startswith("instruction 'w': ")
