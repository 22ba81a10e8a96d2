"""Table entries for elementwise ATen ops, type conversions, comparisons, `where`, and the
tensor factories (full, zeros, arange, scalar_tensor).

PyTorch's type promotion has already happened when the graph was traced: each node's FakeTensor
carries its result dtype, and the rules convert their operands to it (comparisons to the operands'
promoted type, their result being bool). Broadcasting follows PyTorch (trailing dimensions aligned,
size-1 stretched): `LoweringContext.broadcast_to`. Semantics cite ATen's (`aten/src/ATen/native/`):
`remainder` takes the divisor's sign, `div(rounding_mode="floor")` floors, `round` rounds half to
even, `gelu` is the erf form or the tanh approximation.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from hlocc.hlo.builders import gelu
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from collections.abc import Callable

    from hlocc.frontends.torch.lowering import LoweringContext
    from hlocc.hlo.types import Shape

UNARY = {  # (abs and sign: rules of their own below)
    "neg": "negate", "exp": "exponential", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "tanh": "tanh", "sigmoid": "logistic", "sin": "sine", "cos": "cosine", "tan": "tan", "floor": "floor",
    "ceil": "ceil", "round": "round-nearest-even", "log1p": "log-plus-one",
    "expm1": "exponential-minus-one", "erf": "erf", "bitwise_not": "not", "asin": "asin", "acos": "acos",
    "sinh": "sinh", "cosh": "cosh", "asinh": "asinh", "acosh": "acosh", "atanh": "atanh",
}
BINARY = {
    "add": "add", "sub": "subtract", "mul": "multiply", "div": "divide", "true_divide": "divide",
    "fmod": "remainder", "pow": "power", "bitwise_and": "and", "bitwise_or": "or", "bitwise_xor": "xor",
}
BINARY_DEFAULT = {"maximum": "maximum", "minimum": "minimum", "atan2": "atan2"}
"""Binary ops whose ATen overload is `.default` only (no `.Tensor`/`.Scalar`)."""
COMPARE = {"eq": "EQ", "ne": "NE", "lt": "LT", "le": "LE", "gt": "GT", "ge": "GE"}
LOGICAL = {"logical_and": "and", "logical_or": "or", "logical_xor": "xor"}

_BOOL_ARITHMETIC = {"add": "or", "multiply": "and"}
_FLOAT_ORDER = ["f16", "bf16", "f32", "f64"]
_INT_ORDER = ["pred", "u8", "s8", "s16", "s32", "s64"]


def _unary(opcode: str):
    def rule(cx: LoweringContext, x, *_, **__):
        return cx.add(opcode, [cx.operand(x, cx.element_type)], shape=cx.shape)
    return rule


def _abs(cx: LoweringContext, x):
    """|z| of a complex tensor is real: its operand is not converted to the result type; HLO's abs
    takes signed types only: an unsigned one is its own abs."""
    if isinstance(x, HloInstruction) and x.shape.element_type.is_complex:
        return cx.add("abs", [x], shape=cx.shape)
    operand = cx.operand(x, cx.element_type)
    return operand if cx.shape.element_type.is_unsigned else cx.add("abs", [operand], shape=cx.shape)


def _sign(cx: LoweringContext, x):
    """PyTorch's sign(NaN) is 0, HLO's NaN."""
    operand = cx.operand(x, cx.element_type)
    result = cx.add("sign", [operand], shape=cx.shape)
    if not cx.shape.element_type.is_float:
        return result
    nan = cx.add("compare", [operand, operand], {"direction": "NE"},
                 shape=cx.shape.with_element_type(primitive_type("pred")))
    return cx.add("select", [nan, cx.full(0, cx.shape), result])


def _fma(cx: LoweringContext, a, b, c):
    """prims.fma (Adam's addcmul_): a * b + c, rounded twice (HLO has no fused multiply-add)."""
    return _binary("add")(cx, _binary("multiply")(cx, a, b), c)


_SCALAR_OPMATH = frozenset({"multiply", "divide"})  # (ATen's add and sub round the number to the half type)


def _binary(opcode: str, *, divide: bool = False):
    def rule(cx: LoweringContext, a, b, *, alpha=None, rounding_mode=None):
        et, dims = cx.element_type, cx.shape.dims
        if (et in ("f16", "bf16") and opcode in _SCALAR_OPMATH and alpha in (None, 1) and rounding_mode is None
                and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))):
            # a half tensor and a Python number: in f32 with the number unrounded, rounded once, as
            # ATen's kernels (opmath) compute it (x * 3.3 in bf16 rounded 3.3 first: 1 ulp off)
            wide = cx.shape.with_element_type(primitive_type("f32"))
            return cx.convert(cx.add(opcode, [cx.operand(a, "f32", dims), cx.operand(b, "f32", dims)], shape=wide), et)
        lhs, rhs = cx.operand(a, et, dims), cx.operand(b, et, dims)
        if alpha is not None and alpha != 1:
            rhs = cx.add("multiply", [rhs, cx.full(alpha, cx.shape)])
        # bool + bool is PyTorch's logical or (True + True is True), bool * bool its and; HLO's add
        # of preds wraps (True + True was False)
        kind = _BOOL_ARITHMETIC.get(opcode, opcode) if cx.element_type == "pred" else opcode
        result = cx.add(kind, [lhs, rhs], shape=cx.shape)
        if divide and rounding_mode == "floor":
            result = _floor_division(cx, lhs, rhs, result)
        elif divide and rounding_mode == "trunc" and cx.shape.element_type.is_float:
            result = cx.add("multiply", [cx.add("sign", [result]), cx.add("floor", [cx.add("abs", [result])])])
        return result
    return rule


def _pow_scalar(cx: LoweringContext, a, exponent):
    """pow(x, c) with a Python-number exponent as ATen's CPU kernel computes it
    (`pow_tensor_scalar_optimized_kernel`): c = 2, 3 as products, ±0.5 as (r)sqrt, -1, -2 as
    reciprocals, any other c as `power` (which the CPU emits as exp(c·log x), some 20 flops)."""
    if not cx.shape.element_type.is_float or isinstance(exponent, HloInstruction):
        return _binary("power")(cx, a, exponent)
    x = cx.operand(a, cx.element_type, cx.shape.dims)
    if exponent == 0.5:
        return cx.add("sqrt", [x])
    if exponent == -0.5:
        return cx.add("rsqrt", [x])
    products = {2: 2, 3: 3, -1: 1, -2: 2}.get(exponent)
    if products is None:
        return _binary("power")(cx, a, exponent)
    y = x
    for _ in range(products - 1):
        y = cx.add("multiply", [y, x])
    return cx.add("divide", [cx.full(1, cx.shape), y]) if exponent < 0 else y


def _floor_division(cx: LoweringContext, lhs, rhs, quotient) -> HloInstruction:
    zero = cx.full(0, cx.shape)
    if cx.shape.element_type.is_float:
        return _float_floor_division(cx, lhs, rhs, quotient, zero)
    # integer division truncates: one less where the signs differ and the division is inexact
    inexact = cx.add("compare", [cx.add("remainder", [lhs, rhs]), zero], {"direction": "NE"})
    signs = cx.add("compare", [cx.add("compare", [lhs, zero], {"direction": "LT"}),
                               cx.add("compare", [rhs, zero], {"direction": "LT"})], {"direction": "NE"})
    fix = cx.add("and", [inexact, signs])
    return cx.add("select", [fix, cx.add("subtract", [quotient, cx.full(1, cx.shape)]), quotient])


def _float_floor_division(cx: LoweringContext, a, b, quotient, zero) -> HloInstruction:
    """ATen's `div_floor_floating`, not floor(a / b): the quotient of a - fmod(a, b), one less where
    the remainder's sign is not b's, floored and rounded to the nearest integer, 0 with
    a / b's sign where it is 0, a / b for b = 0. So inf // 2 is NaN (fmod(inf, 2) is NaN) and 5 // -inf is -1,
    as eager gives (floor(a / b) gave inf and -0)."""
    def op(opcode, *operands, **attrs):
        return cx.add(opcode, list(operands), attrs or None)

    def compare(x, y, direction):
        return op("compare", x, y, direction=direction)

    one, half = cx.full(1, cx.shape), cx.full(0.5, cx.shape)
    mod = op("remainder", a, b)
    div = op("divide", op("subtract", a, mod), b)
    wrong_sign = op("and", compare(mod, zero, "NE"),
                    compare(compare(b, zero, "LT"), compare(mod, zero, "LT"), "NE"))
    div = op("select", wrong_sign, op("subtract", div, one), div)
    floor = op("floor", div)
    floor = op("select", compare(op("subtract", div, floor), half, "GT"), op("add", floor, one), floor)
    floor = op("select", compare(div, zero, "NE"), floor, op("multiply", op("sign", quotient), zero))
    return op("select", compare(b, zero, "EQ"), quotient, floor)


def _remainder(cx: LoweringContext, a, b):
    """Python's modulo (the divisor's sign), as `torch.remainder`."""
    et, dims = cx.element_type, cx.shape.dims
    lhs, rhs = cx.operand(a, et, dims), cx.operand(b, et, dims)
    r = cx.add("remainder", [lhs, rhs])
    zero = cx.full(0, cx.shape)
    differ = cx.add("compare", [cx.add("compare", [r, zero], {"direction": "LT"}),
                                cx.add("compare", [rhs, zero], {"direction": "LT"})], {"direction": "NE"})
    fix = cx.add("and", [differ, cx.add("compare", [r, zero], {"direction": "NE"})])
    return cx.add("select", [fix, cx.add("add", [r, rhs]), r])


def common_type(values) -> str:
    """PyTorch's promoted type of tensors and Python scalars (category first: a float scalar makes
    an integer tensor f32; among tensors of one category the wider type)."""
    types = [v.shape.element_type.name for v in values if isinstance(v, HloInstruction)]
    floats = [t for t in types if t in _FLOAT_ORDER]
    if floats:
        return max(floats, key=_FLOAT_ORDER.index)
    if any(isinstance(v, float) for v in values):
        return "f32"
    ints = [t for t in types if t in _INT_ORDER]
    if ints:
        return max(ints, key=_INT_ORDER.index)
    return "s64" if any(isinstance(v, int) and not isinstance(v, bool) for v in values) else "pred"


def _compare(direction: str):
    def rule(cx: LoweringContext, a, b):
        et, dims = common_type([a, b]), cx.shape.dims
        return cx.add("compare", [cx.operand(a, et, dims), cx.operand(b, et, dims)], {"direction": direction},
                      shape=cx.shape)
    return rule


def _logical(opcode: str):
    def rule(cx: LoweringContext, a, b):
        return cx.add(opcode, [_truth(cx, a, cx.shape.dims), _truth(cx, b, cx.shape.dims)], shape=cx.shape)
    return rule


def _truth(cx: LoweringContext, x, dims) -> HloInstruction:
    """x != 0 as pred (a pred tensor as it is), broadcast to `dims`."""
    if isinstance(x, HloInstruction) and x.shape.element_type.name != "pred":
        x = cx.add("compare", [x, cx.full(0, x.shape)], {"direction": "NE"})
    return cx.operand(x if isinstance(x, HloInstruction) else bool(x), "pred", dims)


def _logical_not(cx: LoweringContext, x):
    return cx.add("not", [_truth(cx, x, cx.shape.dims)], shape=cx.shape)


def _where(cx: LoweringContext, condition, a, b):
    et, dims = cx.element_type, cx.shape.dims
    return cx.add("select", [_truth(cx, condition, dims), cx.operand(a, et, dims), cx.operand(b, et, dims)],
                  shape=cx.shape)


def _clamp(cx: LoweringContext, x, low=None, high=None):
    et, dims = cx.element_type, cx.shape.dims
    x = cx.operand(x, et, dims)
    if low is not None:
        x = cx.add("maximum", [x, cx.operand(low, et, dims)])
    if high is not None:
        x = cx.add("minimum", [x, cx.operand(high, et, dims)])
    return x


def _relu(cx: LoweringContext, x):
    return cx.add("maximum", [x, cx.full(0, cx.shape)], shape=cx.shape)


def _in_opmath(cx: LoweringContext, x, body: Callable[[HloInstruction, Shape], HloInstruction]) -> HloInstruction:
    """body(x, shape) of a composite activation, in f32 for f16 and bf16 inputs and rounded once
    at the end, as ATen's kernels compute them (`at::opmath_type`): in bf16, gelu's 1 + erf(x/√2)
    cancels for negative x (gelu(-3) was 45% off eager's)."""
    if cx.element_type not in ("f16", "bf16"):
        return body(x, cx.shape)
    return cx.convert(body(cx.convert(x, "f32"), cx.shape.with_element_type(primitive_type("f32"))), cx.element_type)


def _gelu(cx: LoweringContext, x, approximate: str = "none"):
    """0.5·x·(1 + erf(x/√2)), or with approximate="tanh" 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))."""
    return _in_opmath(cx, x, lambda x, shape: gelu(cx.computation, x, approximate))


def _silu(cx: LoweringContext, x):
    return _in_opmath(cx, x, lambda x, shape: cx.add("multiply", [x, cx.add("logistic", [x])]))


def _shift(left: bool):
    """<< and >> of integers (`>>` sign-filling for signed types, as C's on PyTorch's targets)."""
    def rule(cx: LoweringContext, a, b):
        et, dims = cx.element_type, cx.shape.dims
        opcode = "shift-left" if left else (
            "shift-right-arithmetic" if cx.shape.element_type.is_signed else "shift-right-logical")
        return cx.add(opcode, [cx.operand(a, et, dims), cx.operand(b, et, dims)], shape=cx.shape)
    return rule


def _round_decimals(cx: LoweringContext, x, *, decimals=0):
    """ATen's round(decimals=d): half-to-even of x·10^d, divided back (of x/10^-d, multiplied back,
    for d < 0), in f32 for halves."""
    et = cx.element_type
    wide = "f32" if et in ("f16", "bf16") else et
    y = cx.convert(x, wide)
    scale = cx.full(10.0 ** abs(decimals), y.shape)
    there, back = ("multiply", "divide") if decimals >= 0 else ("divide", "multiply")
    rounded = cx.add("round-nearest-even", [cx.add(there, [y, scale])])
    return cx.convert(cx.add(back, [rounded, scale]), et)


def _view_dtype(cx: LoweringContext, x, _dtype):
    """x.view(dtype) of an element type as wide as x's: its bits reinterpreted (HLO bitcast-convert)."""
    if x.shape.element_type.bits != cx.shape.element_type.bits:
        raise cx.error(f"view as {cx.element_type} of {x.shape.element_type.name}: only types of one width are lowered")
    return cx.add("bitcast-convert", [x], shape=cx.shape)


def _copysign(cx: LoweringContext, a, b):
    """|a| with b's sign bit (read through an integer bitcast: -0.0 and -NaN count as negative)."""
    et, dims = cx.element_type, cx.shape.dims
    magnitude = cx.add("abs", [cx.operand(a, et, dims)])
    sign_source = cx.operand(b, et, dims)
    bits = sign_source.shape.with_element_type(primitive_type(f"s{sign_source.shape.element_type.bits}"))
    negative = cx.add("compare", [cx.add("bitcast-convert", [sign_source], shape=bits), cx.full(0, bits)],
                      {"direction": "LT"})
    return cx.add("select", [negative, cx.add("negate", [magnitude]), magnitude], shape=cx.shape)


def _signbit(cx: LoweringContext, x):
    """The sign bit (floats through an integer bitcast: -0.0 and -NaN have it); integers below 0."""
    et = x.shape.element_type
    if not et.is_float:
        return cx.add("compare", [x, cx.full(0, x.shape)], {"direction": "LT"}, shape=cx.shape)
    bits = x.shape.with_element_type(primitive_type(f"s{et.bits}"))
    return cx.add("compare", [cx.add("bitcast-convert", [x], shape=bits), cx.full(0, bits)], {"direction": "LT"},
                  shape=cx.shape)


def _ldexp(cx: LoweringContext, x, exponent):
    """x · 2^exponent in the result's float type (ATen's `self * pow(2, other)`)."""
    et, dims = cx.element_type, cx.shape.dims
    scale = cx.add("power", [cx.full(2, cx.shape), cx.operand(exponent, et, dims)])
    return cx.add("multiply", [cx.operand(x, et, dims), scale])


def _trunc(cx: LoweringContext, x):
    """Rounding toward zero (HLO has no such opcode): ceil below zero, floor above; integers as they are."""
    if not cx.shape.element_type.is_float:
        return x
    negative = cx.add("compare", [x, cx.full(0, cx.shape)], {"direction": "LT"})
    return cx.add("select", [negative, cx.add("ceil", [x]), cx.add("floor", [x])], shape=cx.shape)


def _exp2(cx: LoweringContext, x):
    return cx.add("power", [cx.full(2, cx.shape), cx.operand(x, cx.element_type)], shape=cx.shape)


def _hypot(cx: LoweringContext, a, b):
    et, dims = cx.element_type, cx.shape.dims
    lhs, rhs = cx.operand(a, et, dims), cx.operand(b, et, dims)
    return cx.add("sqrt", [cx.add("add", [cx.add("multiply", [lhs, lhs]), cx.add("multiply", [rhs, rhs])])])


def _leaky_relu(cx: LoweringContext, x, negative_slope=0.01):
    positive = cx.add("compare", [x, cx.full(0, cx.shape)], {"direction": "GT"})
    return cx.add("select", [positive, x, cx.add("multiply", [x, cx.full(negative_slope, cx.shape)])], shape=cx.shape)


def _rrelu_with_noise(cx: LoweringContext, x, noise, lower=0.125, upper=1 / 3, training=False, generator=None):
    """F.rrelu outside training: leaky_relu with the mean slope (lower + upper) / 2, the noise
    passed through (the functional op's second result). Training draws the slopes: refused."""
    if training:
        raise cx.error("rrelu in training draws random numbers (hlocc does not reproduce PyTorch's generator stream)")
    out = _leaky_relu(cx, x, (lower + upper) / 2)
    return [out, noise] if isinstance(cx.val, (tuple, list)) else out


def _rrelu_with_noise_backward(cx: LoweringContext, grad, x, noise, lower, upper, training, self_is_result):
    """rrelu's gradient as ATen's: grad · noise (the slopes the forward drew) in training with a
    range of slopes, else leaky_relu's with the mean slope."""
    if training and upper - lower > 1e-6:
        return cx.add("multiply", [grad, cx.convert(noise, cx.element_type)], shape=cx.shape)
    positive = cx.add("compare", [x, cx.full(0, x.shape)], {"direction": "GT"})
    return cx.add("select", [positive, grad, cx.add("multiply", [grad, cx.full((lower + upper) / 2, cx.shape)])],
                  shape=cx.shape)


def _fake_quantize(cx: LoweringContext, x, scale, zero_point, quant_min: int, quant_max: int, axis=None,
                   enabled=None):
    """(output, mask) of fake quantization (quantization-aware training) as ATen's CPU kernels
    compute it in f32: q = round-half-even(x · (1 / scale)) + zero_point; the mask says q was in
    [quant_min, quant_max]; the output is (clamp(q) - zero_point) · scale. Scale and zero point are
    numbers, one-element tensors, or per-channel tensors along `axis`; `enabled` (a one-element
    tensor, FakeQuantize's switch) of 0 passes x through with an all-true mask."""
    et = cx.element_type
    value = cx.convert(x, "f32")
    shape = value.shape

    def parameter(v):
        if not isinstance(v, HloInstruction):
            return cx.full(v, shape)
        v = cx.convert(v, "f32")
        if axis is not None:
            return cx.add("broadcast", [v], {"dimensions": (axis % shape.rank,)}, shape=shape)
        return cx.broadcast_to(cx.reshape(v, []), shape.dims)

    scale_f, zero = parameter(scale), parameter(zero_point)
    inverse = cx.add("divide", [cx.full(1, shape), scale_f])
    q = cx.add("add", [cx.add("round-nearest-even", [cx.add("multiply", [value, inverse])]), zero])
    low, high = cx.full(quant_min, shape), cx.full(quant_max, shape)
    mask = cx.add("and", [cx.add("compare", [q, low], {"direction": "GE"}),
                          cx.add("compare", [q, high], {"direction": "LE"})])
    out = cx.add("multiply", [cx.add("subtract", [cx.add("clamp", [low, q, high]), zero]), scale_f])
    if enabled is not None:
        switch = cx.reshape(cx.convert(enabled, "f32"), [])
        on = cx.broadcast_to(cx.add("compare", [switch, cx.constant(0, "f32")], {"direction": "NE"}), shape.dims)
        out = cx.add("select", [on, out, value])
        mask = cx.add("or", [mask, cx.add("not", [on])])
    return [cx.convert(out, et), mask]


# -- complex views (rotary embeddings in complex form: view_as_complex, polar, view_as_real) ------------
def _complex(cx: LoweringContext, real, imag):
    """A complex tensor of the result's type from real and imaginary parts (HLO `complex`)."""
    part = cx.element_type.replace("c128", "f64").replace("c64", "f32")
    real, imag = cx.operand(real, part, cx.shape.dims), cx.operand(imag, part, cx.shape.dims)
    return cx.add("complex", [real, imag], shape=cx.shape)


def _part(cx: LoweringContext, z, opcode: str):
    """HLO real / imag of a complex tensor (of a real one: itself, or zeros)."""
    if not z.shape.element_type.is_complex:
        return z if opcode == "real" else cx.full(0, z.shape)
    return cx.add(opcode, [z], shape=cx.shape if cx.shape.dims == z.shape.dims else None)


def _view_as_complex(cx: LoweringContext, x):
    """x[..., 2] as complex: x[..., 0] + i·x[..., 1]."""
    from hlocc.frontends.torch.ops_shape import slice_dim

    last = x.shape.rank - 1
    real, imag = (cx.reshape(slice_dim(cx, x, last, k, 1), cx.shape.dims) for k in (0, 1))
    return cx.add("complex", [real, imag], shape=cx.shape)


def _view_as_real(cx: LoweringContext, z):
    """z as [..., 2] of its real and imaginary parts."""
    part = z.shape.with_element_type(primitive_type(cx.element_type))
    parts = [cx.reshape(cx.add(op, [z], shape=part), list(z.shape.dims) + [1]) for op in ("real", "imag")]
    return cx.add("concatenate", parts, {"dimensions": (z.shape.rank,)}, shape=cx.shape)


def _polar(cx: LoweringContext, magnitude, angle):
    """abs·cos(angle) + i·abs·sin(angle)."""
    return _complex(cx, cx.add("multiply", [magnitude, cx.add("cosine", [angle])]),
                    cx.add("multiply", [magnitude, cx.add("sine", [angle])]))


def _conj(cx: LoweringContext, z):
    """The conjugate (torch's lazy conjugate view, `_conj`, and conj_physical): real - i·imag."""
    if not z.shape.element_type.is_complex:
        return z
    part = z.shape.with_element_type(primitive_type(cx.element_type.replace("c128", "f64").replace("c64", "f32")))
    return cx.add("complex", [cx.add("real", [z], shape=part), cx.add("negate", [cx.add("imag", [z], shape=part)])],
                  shape=cx.shape)


def _elu(cx: LoweringContext, x, alpha=1, scale=1, input_scale=1):
    """ATen's elu: scale·x above zero, scale·alpha·(exp(input_scale·x) - 1) at or below (selu and
    celu are this with other constants)."""
    full = lambda v: cx.full(v, cx.shape)  # noqa: E731
    positive = cx.add("compare", [x, full(0)], {"direction": "GT"})
    below = cx.add("exponential-minus-one", [cx.add("multiply", [x, full(input_scale)])])
    below = cx.add("multiply", [below, full(alpha * scale)])
    return cx.add("select", [positive, cx.add("multiply", [x, full(scale)]), below], shape=cx.shape)


def _reciprocal(cx: LoweringContext, x):
    return cx.add("divide", [cx.full(1, cx.shape), cx.operand(x, cx.element_type)])


def _isnan(cx: LoweringContext, x):
    return cx.add("compare", [x, x], {"direction": "NE"}, shape=cx.shape)


def _isinf(cx: LoweringContext, x):
    return cx.add("compare", [cx.add("abs", [x]), cx.full(math.inf, x.shape)], {"direction": "EQ"}, shape=cx.shape)


def _metadata_assertion(cx: LoweringContext, x, *_, **__):
    """_assert_tensor_metadata (what `.to(dtype)` leaves in an exported graph): no value. The
    tensor's dtype and sizes are its FakeTensor's, which every lowered result is checked against."""
    return None


def _assert_async(cx: LoweringContext, condition, message="Expected Tensor with single nonzero value, but got zero"):
    """_assert_async (torch._check on a tensor: F.one_hot's range checks): no value; the condition
    (nonzero) becomes an extra result of the program, and the compiled graph raises
    RuntimeError(message) after a call where it is false, as eager raises (and Inductor's device
    assert). Clamping or ignoring it would give an answer where PyTorch gives none."""
    if not isinstance(condition, HloInstruction):
        condition = cx.constant(bool(condition), "pred")
    if condition.shape.element_type.name != "pred":
        condition = cx.add("compare", [condition, cx.full(0, condition.shape)], {"direction": "NE"})
    cx.lowering.assertions.append((cx.reshape(condition, []), message))
    return None


def _convert(cx: LoweringContext, x, *_, **__):
    """_to_copy / convert_element_type: a conversion to the result's type (a copy otherwise)."""
    return cx.convert(x, cx.element_type) if isinstance(x, HloInstruction) else cx.full(x, cx.shape)


def _identity(cx: LoweringContext, x, *_, **__):
    return x


def _copy(cx: LoweringContext, destination, source, *_):
    return cx.operand(source, cx.element_type, cx.shape.dims)


def _full(cx: LoweringContext, _size, value, **_):
    return cx.full(value, cx.shape)


def _filled(value):
    def rule(cx: LoweringContext, *_, **__):
        return cx.full(value, cx.shape)
    return rule


def _full_like(cx: LoweringContext, _x, value, **_):
    return cx.full(value, cx.shape)


def _scalar_tensor(cx: LoweringContext, value, **_):
    return cx.constant(value, cx.element_type)


def _arange(cx: LoweringContext, *args, **_):
    """arange(end) / arange(start, end[, step]): start + step·iota (its length is PyTorch's)."""
    start, step = (0, 1) if len(args) == 1 else (args[0], args[2] if len(args) > 2 else 1)
    line = cx.add("iota", attrs={"iota_dimension": 0}, shape=cx.shape)
    if step != 1:
        line = cx.add("multiply", [line, cx.full(step, cx.shape)])
    return cx.add("add", [line, cx.full(start, cx.shape)]) if start != 0 else line


OPS = {
    **{f"aten.{name}.default": _unary(op) for name, op in UNARY.items()},
    "aten.abs.default": _abs, "aten.sign.default": _sign,
    **{f"aten.{name}.{o}": _binary(op) for name, op in BINARY.items() for o in ("Tensor", "Scalar")},
    **{f"aten.{name}.default": _binary(op) for name, op in BINARY_DEFAULT.items()},
    **{f"aten.__{d}shift__.{o}": _shift(d == "l") for d in "lr" for o in ("Tensor", "Scalar")},
    **{f"aten.bitwise_{side}_shift.{o}": _shift(side == "left") for side in ("left", "right")
       for o in ("Tensor", "Tensor_Scalar", "Scalar_Tensor")},
    "aten.trunc.default": _trunc, "aten.round.decimals": _round_decimals, "aten.view.dtype": _view_dtype,
    "aten.exp2.default": _exp2, "aten.hypot.default": _hypot,
    "aten.copysign.Tensor": _copysign, "aten.copysign.Scalar": _copysign,
    "aten.leaky_relu.default": _leaky_relu, "aten.elu.default": _elu,
    "aten.rrelu_with_noise.default": _rrelu_with_noise, "aten.rrelu_with_noise_functional.default": _rrelu_with_noise,
    "aten.rrelu_with_noise_backward.default": _rrelu_with_noise_backward,
    "aten.signbit.default": _signbit, "aten.ldexp.Tensor": _ldexp,
    "aten.view_as_complex.default": _view_as_complex, "aten.view_as_real.default": _view_as_real,
    "aten.polar.default": _polar, "aten.complex.default": _complex, "aten._conj.default": _conj,
    "aten.conj_physical.default": _conj, "aten.real.default": lambda cx, z: _part(cx, z, "real"),
    "aten.imag.default": lambda cx, z: _part(cx, z, "imag"),
    "aten.fake_quantize_per_tensor_affine_cachemask.default": _fake_quantize,
    "aten.fake_quantize_per_channel_affine_cachemask.default":
        lambda cx, x, scale, zero_point, axis, quant_min, quant_max: _fake_quantize(
            cx, x, scale, zero_point, quant_min, quant_max, axis=axis),
    "aten._fake_quantize_per_tensor_affine_cachemask_tensor_qparams.default":
        lambda cx, x, scale, zero_point, enabled, quant_min, quant_max: _fake_quantize(
            cx, x, scale, zero_point, quant_min, quant_max, enabled=enabled),
    "aten.div.Tensor_mode": _binary("divide", divide=True), "aten.div.Scalar_mode": _binary("divide", divide=True),
    "aten.pow.Tensor_Scalar": _pow_scalar, "aten.pow.Tensor_Tensor": _binary("power"),
    "aten.pow.Scalar": _binary("power"),
    "aten.remainder.Tensor": _remainder, "aten.remainder.Scalar": _remainder,
    **{f"aten.{name}.{o}": _compare(d) for name, d in COMPARE.items() for o in ("Tensor", "Scalar")},
    **{f"aten.{name}.default": _logical(op) for name, op in LOGICAL.items()},
    "aten.logical_not.default": _logical_not,
    "aten.where.self": _where,
    "aten.clamp.default": _clamp, "aten.clamp.Tensor": _clamp,
    "aten.clamp_min.default": lambda cx, x, low: _clamp(cx, x, low, None),
    "aten.clamp_max.default": lambda cx, x, high: _clamp(cx, x, None, high),
    "aten.hardtanh.default": lambda cx, x, low=-1.0, high=1.0: _clamp(cx, x, low, high),
    "aten.relu.default": _relu, "aten.gelu.default": _gelu, "aten.silu.default": _silu,
    "aten.reciprocal.default": _reciprocal, "aten.isnan.default": _isnan, "aten.isinf.default": _isinf,
    "aten._assert_tensor_metadata.default": _metadata_assertion,
    "aten._assert_async.msg": _assert_async, "aten._assert_async.default": _assert_async,
    "aten._to_copy.default": _convert, "prims.convert_element_type.default": _convert, "prims.fma.default": _fma,
    "aten.clone.default": _identity, "aten.alias.default": _identity, "aten.detach.default": _identity,
    "aten.lift_fresh_copy.default": _identity, "aten.copy.default": _copy,
    "aten.full.default": _full, "aten.full_like.default": _full_like,
    "aten.zeros.default": _filled(0), "aten.ones.default": _filled(1), "aten.zeros_like.default": _filled(0),
    "aten.ones_like.default": _filled(1), "aten.empty.memory_format": _filled(0),
    "aten.empty_permuted.default": _filled(0), "aten.new_empty_strided.default": _filled(0),
    "aten.empty_like.default": _filled(0), "aten.new_zeros.default": _filled(0), "aten.new_ones.default": _filled(1),
    "aten.fill.Scalar": lambda cx, x, value: cx.full(value, cx.shape),
    "aten.scalar_tensor.default": _scalar_tensor,
    "aten.arange.default": _arange, "aten.arange.start": _arange, "aten.arange.start_step": _arange,
}
