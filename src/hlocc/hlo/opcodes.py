"""The opcode registry: one entry per HLO opcode holding everything hlocc knows about it.

An `OpInfo` states the op's arity, its category, the element types it accepts and its required
attributes. The modules that give an op meaning fill the entry's other fields through the
decorators below: the `hlo/shape_rules_<area>.py` modules its shape rule (registered when the
`hlocc.hlo` package is imported, see hlo/shape_inference.py), `evaluator/` its reference evaluation
(registered when `hlocc.evaluator` is imported). Adding an op means filling its entry, not editing
a chain of `if opcode == ...` in five places. `infer_shape` applies an instruction's shape rule:
the IR, the parser and the verifier call shape inference through this registry, so none of them
imports the rule modules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hlocc.errors import HloError, HloVerifyError
from hlocc.hlo.attribute_syntax import ATTRIBUTE_KINDS
from hlocc.hlo.attributes import RawAttr

if TYPE_CHECKING:
    from hlocc.hlo.ir import HloInstruction
    from hlocc.hlo.types import Shape

VARIADIC = None


@dataclass
class OpInfo:
    name: str
    arity: int | None
    category: str
    # Element types accepted by elementwise ops: "float" (floating), "floatc" (floating or complex),
    # "num" (integer, floating, complex), "numpred" (num or pred), "int" (integer), "intpred" (integer or pred),
    # "signed_num" (signed integer, floating, complex), "any".
    types: str = "any"
    required_attrs: tuple[str, ...] = ()
    shape_rule: Callable | None = field(default=None, repr=False)
    evaluate: Callable | None = field(default=None, repr=False)

    @property
    def is_elementwise(self) -> bool:
        return self.category in ("unary", "binary", "ternary")


def _entries():
    unary_float = ["acos", "acosh", "asin", "asinh", "atanh", "cbrt", "ceil", "cosh", "erf", "floor",
                   "is-finite", "round-nearest-afz", "round-nearest-even", "sinh"]
    unary_floatc = ["cosine", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
                    "rsqrt", "sine", "sqrt", "tan", "tanh"]
    for name in unary_float:
        yield OpInfo(name, 1, "unary", "float")
    for name in unary_floatc:
        yield OpInfo(name, 1, "unary", "floatc")
    yield OpInfo("abs", 1, "unary", "signed_num")
    yield OpInfo("negate", 1, "unary", "num")
    yield OpInfo("sign", 1, "unary", "signed_num")
    yield OpInfo("not", 1, "unary", "intpred")
    yield OpInfo("popcnt", 1, "unary", "int")
    yield OpInfo("count-leading-zeros", 1, "unary", "int")
    yield OpInfo("real", 1, "unary", "floatc")
    yield OpInfo("imag", 1, "unary", "floatc")
    yield OpInfo("copy", 1, "unary", "any")
    yield OpInfo("convert", 1, "unary", "any")
    yield OpInfo("reduce-precision", 1, "unary", "float", ("exponent_bits", "mantissa_bits"))
    # XLA puts no type restriction on binary arithmetic: pred is accepted (multiply(pred, pred) occurs).
    for name in ["add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "power"]:
        yield OpInfo(name, 2, "binary", "numpred")
    for name in ["and", "or", "xor"]:
        yield OpInfo(name, 2, "binary", "intpred")
    for name in ["shift-left", "shift-right-arithmetic", "shift-right-logical"]:
        yield OpInfo(name, 2, "binary", "int")
    yield OpInfo("atan2", 2, "binary", "floatc")
    yield OpInfo("complex", 2, "binary", "float")
    yield OpInfo("compare", 2, "binary", "any", ("direction",))
    yield OpInfo("stochastic-convert", 2, "binary", "float")
    yield OpInfo("select", 3, "ternary", "any")
    yield OpInfo("clamp", 3, "ternary", "num")

    data = [
        ("bitcast", 1, ()), ("bitcast-convert", 1, ()), ("broadcast", 1, ()), ("reshape", 1, ()),
        ("dynamic-reshape", VARIADIC, ()), ("transpose", 1, ("dimensions",)), ("reverse", 1, ("dimensions",)),
        ("slice", 1, ("slice",)), ("dynamic-slice", VARIADIC, ("dynamic_slice_sizes",)),
        ("dynamic-update-slice", VARIADIC, ()), ("pad", 2, ("padding",)),
        ("concatenate", VARIADIC, ("dimensions",)), ("iota", 0, ("iota_dimension",)), ("constant", 0, ()),
        ("parameter", 0, ()), ("gather", 2, ("offset_dims", "collapsed_slice_dims", "start_index_map",
                                            "index_vector_dim", "slice_sizes")),
        ("scatter", VARIADIC, ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                               "index_vector_dim", "to_apply")),
        ("get-tuple-element", 1, ("index",)), ("tuple", VARIADIC, ()),
        ("get-dimension-size", 1, ("dimensions",)), ("set-dimension-size", 2, ("dimensions",)),
    ]
    for name, arity, attrs in data:
        yield OpInfo(name, arity, "data", "any", attrs)

    compute = [
        ("reduce", VARIADIC, ("dimensions", "to_apply")), ("reduce-window", VARIADIC, ("to_apply",)),
        ("select-and-scatter", 3, ("select", "scatter")), ("dot", 2, ()), ("ragged-dot", 3, ()),
        ("scaled-dot", 4, ()), ("convolution", 2, ("dim_labels",)), ("fft", 1, ("fft_type", "fft_length")),
        ("sort", VARIADIC, ("dimensions", "to_apply")), ("topk", 1, ("k",)), ("map", VARIADIC, ("to_apply",)),
        ("scan", VARIADIC, ("dimensions", "to_apply")),
        ("cholesky", 1, ()), ("triangular-solve", 2, ()),
        ("batch-norm-training", 3, ("epsilon", "feature_index")),
        ("batch-norm-inference", 5, ("epsilon", "feature_index")),
        ("batch-norm-grad", 5, ("epsilon", "feature_index")),
        ("rng", VARIADIC, ("distribution",)), ("rng-bit-generator", 1, ("algorithm",)),
        ("rng-get-and-update-state", 0, ("delta",)),
    ]
    for name, arity, attrs in compute:
        yield OpInfo(name, arity, "compute", "any", attrs)

    control = [
        ("call", VARIADIC, ("to_apply",)), ("while", 1, ("condition", "body")), ("conditional", VARIADIC, ()),
        ("fusion", VARIADIC, ("kind", "calls")), ("custom-call", VARIADIC, ("custom_call_target",)),
        ("opt-barrier", 1, ()), ("after-all", VARIADIC, ()), ("add-dependency", 2, ()), ("domain", 1, ()),
        ("replica-id", 0, ()), ("partition-id", 0, ()),
        ("infeed", 1, ()), ("outfeed", 2, ()), ("send", 2, ()), ("send-done", 1, ()), ("recv", 1, ()),
        ("recv-done", 1, ()), ("copy-start", 1, ()), ("copy-done", 1, ()),
        ("async-start", VARIADIC, ("calls",)), ("async-update", 1, ()), ("async-done", 1, ()),
    ]
    for name, arity, attrs in control:
        yield OpInfo(name, arity, "control", "any", attrs)

    collective = [
        ("all-gather", VARIADIC), ("all-gather-start", VARIADIC), ("all-gather-done", 1),
        ("all-reduce", VARIADIC), ("all-reduce-start", VARIADIC), ("all-reduce-done", 1),
        ("all-to-all", VARIADIC), ("ragged-all-to-all", 6), ("reduce-scatter", VARIADIC),
        ("collective-broadcast", VARIADIC), ("collective-permute", VARIADIC),
        ("collective-permute-start", VARIADIC), ("collective-permute-done", 1),
    ]
    for name, arity in collective:
        yield OpInfo(name, arity, "collective", "any")


OPCODES: dict[str, OpInfo] = {info.name: info for info in _entries()}
assert len(OPCODES) == 132, len(OPCODES)


def op_info(opcode: str) -> OpInfo:
    try:
        return OPCODES[opcode]
    except KeyError:
        raise HloError(f"unknown opcode '{opcode}'") from None


def register_shape_rule(*opcodes: str):
    """Decorator: `fn(instr, operand_shapes) -> Shape` becomes the shape rule of these opcodes."""

    def wrap(fn):
        for opcode in opcodes:
            OPCODES[opcode].shape_rule = fn
        return fn

    return wrap


def register_evaluator(*opcodes: str):
    """Decorator: `fn(instr, operand_values, ctx) -> value` evaluates these opcodes."""

    def wrap(fn):
        for opcode in opcodes:
            OPCODES[opcode].evaluate = fn
        return fn

    return wrap


def infer_shape(instr: HloInstruction) -> Shape:
    """The shape `instr` must have, inferred from its operands' declared shapes and its attributes."""
    return infer_shape_from(instr, [op.shape for op in instr.operands])


def infer_shape_from(instr: HloInstruction, operand_shapes: list[Shape]) -> Shape:
    """The shape `instr` would have with operands of `operand_shapes` (e.g. while rewriting)."""
    info = OPCODES.get(instr.opcode)
    if info is None:
        raise HloVerifyError(f"instruction '{instr.name}': unknown opcode '{instr.opcode}'")
    for name, value in instr.attrs.items():
        # The parser keeps a nested list (`dimensions={{0},{1}}`) verbatim; no rule reads one.
        if isinstance(value, RawAttr) and ATTRIBUTE_KINDS.get(name) == "ints":
            raise HloVerifyError(f"instruction '{instr.name}': attribute '{name}' must be a list of integers, "
                                 f"not {value}")
    return info.shape_rule(instr, list(operand_shapes))
