"""XLA:GPU's library custom calls as HLO computations. A module XLA:GPU has optimized
(`compile().as_text()` on a GPU, or `--xla_dump_to`) holds its matrix products as calls into
cuBLAS: `custom-call(lhs, rhs[, c][, bias]), custom_call_target="__cublas$gemm"` (or
`"__cublas$lt$matmul"`), the product in the backend_config's `gemm_backend_config`:

    alpha · dot(lhs, rhs) [+ beta · c] [+ bias along the last output dimension] [then the epilogue's
    activation: RELU, or GELU (the tanh form, which is what XLA's gemm rewriter fuses)]

with `dot_dimension_numbers` as a dot's, and a result that is the product or a tuple of it and a
workspace (`s8[n]`, which nothing reads). Its convolutions are calls into cuDNN,
`custom-call(input, filter[, bias[, side_input]])` with the convolution's `window`, `dim_labels`
and group counts as attributes, `custom_call_target="__cudnn$convForward"` (or
`"__cudnn$convBiasActivationForward"`), the result a tuple of it and a scratch buffer:

    activation(conv_result_scale · convolution(input, filter) [+ side_input_scale · side_input]
               [+ bias along the output's feature dimension])

`expansion` is that computation, built from standard HLO ops (once per instruction), so that such a
module runs on every backend: the evaluator calls it, and `call-inliner` inlines it as it inlines a
`call` (the dot or convolution then takes the backend's own path like any other). Epilogues with an
auxiliary output (GELU_AUX, the backward's input), the f8 scaling operands and cuDNN's backward
convolutions (whose attributes describe the forward one) are refused by name."""

from __future__ import annotations

import json
import weakref
from typing import Any

from hlocc.errors import UnsupportedError
from hlocc.hlo.builders import full, gelu
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.types import primitive_type

PRED = primitive_type("pred")

GEMM_TARGETS = frozenset({"__cublas$gemm", "__cublas$lt$matmul"})
CONV_TARGETS = frozenset({"__cudnn$convForward", "__cudnn$convBiasActivationForward"})
REFUSED_TARGETS = frozenset({"__cudnn$convBackwardInput", "__cudnn$convBackwardFilter", "__cudnn$convForwardGraph"})
_ACTIVATIONS = ("kNone", "kRelu", "kRelu6", "kTanh", "kSigmoid", "kElu", "kLeakyRelu")
_EPILOGUES = {"DEFAULT": (False, None), "BIAS": (True, None), "RELU": (False, "relu"),
              "BIAS_RELU": (True, "relu"), "GELU": (False, "gelu"), "BIAS_GELU": (True, "gelu")}


def is_library_call(instr: HloInstruction) -> bool:
    return instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in (
        GEMM_TARGETS | CONV_TARGETS | REFUSED_TARGETS)


def backend_config(instr: HloInstruction) -> dict[str, Any]:
    """The backend_config's JSON (written as a JSON object, or as a string holding one)."""
    raw = instr.attrs.get("backend_config")
    text = getattr(raw, "text", raw)
    try:
        value = json.loads(text) if isinstance(text, str) else None
        if isinstance(value, str):
            value = json.loads(value)
    except json.JSONDecodeError as e:
        raise UnsupportedError(f"custom-call '{instr.name}': its backend_config is not JSON ({e})") from None
    if not isinstance(value, dict):
        raise UnsupportedError(f"custom-call '{instr.name}': it has no backend_config")
    return value


_EXPANSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # instruction -> its computation


def expansion(instr: HloInstruction) -> HloComputation | None:
    """The computation a library custom call stands for (parameters: its operands), or None where
    `instr` is not one (see the module docstring). Built once per instruction: the evaluator asks at
    every evaluation (each trip of a loop)."""
    if not is_library_call(instr):
        return None
    if instr not in _EXPANSIONS:
        _EXPANSIONS[instr] = _expand(instr)
    return _EXPANSIONS[instr]


def _expand(instr: HloInstruction) -> HloComputation:
    target = instr.attrs["custom_call_target"]
    where = f"custom-call '{instr.name}' ({target})"
    if target in REFUSED_TARGETS:
        raise UnsupportedError(f"{where}: cuDNN's backward and graph convolutions are not supported")
    if target in CONV_TARGETS:
        return _convolution(instr, where)
    config = backend_config(instr).get("gemm_backend_config")
    if not isinstance(config, dict):
        raise UnsupportedError(f"{where}: its backend_config has no gemm_backend_config")
    epilogue = config.get("epilogue", "DEFAULT")
    if epilogue not in _EPILOGUES:
        raise UnsupportedError(f"{where}: epilogue {epilogue} is not supported (only "
                               f"{', '.join(sorted(_EPILOGUES))})")
    has_bias, activation = _EPILOGUES[epilogue]
    alpha, alpha_imag, beta = (float(config.get(k, d)) for k, d in (("alpha_real", 1), ("alpha_imag", 0),
                                                                     ("beta", 0)))
    expected = 2 + (beta != 0) + has_bias
    if len(instr.operands) != expected:
        raise UnsupportedError(f"{where}: {len(instr.operands)} operands where beta={beta:g} and epilogue "
                               f"{epilogue} take {expected} (f8 scaling operands are not supported)")
    shape = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    numbers = config.get("dot_dimension_numbers", {})
    dims = {f"{side}_{kind}_dims": tuple(int(d) for d in numbers.get(f"{side}_{kind}_dimensions", ()))
            for side in ("lhs", "rhs") for kind in ("contracting", "batch")}

    comp = HloComputation(f"{instr.name}.{target.strip('_').replace('$', '_')}")
    params = [comp.add_instruction(HloInstruction(f"p{k}", "parameter", o.shape, parameter_number=k))
              for k, o in enumerate(instr.operands)]
    result = comp.add("dot", params[:2], dims, shape=shape)
    if alpha != 1 or alpha_imag != 0:
        result = comp.add("multiply", [result, full(comp, complex(alpha, alpha_imag) if alpha_imag else alpha,
                                                      result.shape)])
    if beta != 0:
        c = params[2]
        scaled = c if beta == 1 else comp.add("multiply", [c, full(comp, beta, c.shape)])
        result = comp.add("add", [result, scaled])
    if has_bias:
        bias = params[-1]
        result = comp.add("add", [result, comp.add("broadcast", [bias], {"dimensions": (result.shape.rank - 1,)},
                                                   shape=result.shape)])
    if activation == "relu":
        result = comp.add("maximum", [result, full(comp, 0, result.shape)])
    elif activation == "gelu":
        result = gelu(comp, result, "tanh")
    if instr.shape.is_tuple:  # the workspace (and nothing else): zeros nobody reads
        extra = [full(comp, 0, s) for s in instr.shape.tuple_shapes[1:]]
        result = comp.add("tuple", [result, *extra], shape=instr.shape)
    comp.root = result
    return comp


def _convolution(instr: HloInstruction, where: str) -> HloComputation:
    config = backend_config(instr).get("cudnn_conv_backend_config", {})
    activation = config.get("activation_mode", "kNone")
    if activation not in _ACTIVATIONS:
        raise UnsupportedError(f"{where}: activation {activation} is not supported")
    scale, side_scale = float(config.get("conv_result_scale", 1)), float(config.get("side_input_scale", 0))
    fused = instr.attrs["custom_call_target"] == "__cudnn$convBiasActivationForward"
    if len(instr.operands) not in ((3, 4) if fused else (2,)):
        raise UnsupportedError(f"{where}: {len(instr.operands)} operands")
    if "dim_labels" not in instr.attrs:
        raise UnsupportedError(f"{where}: it has no dim_labels")
    shape = instr.shape.tuple_shapes[0] if instr.shape.is_tuple else instr.shape
    comp = HloComputation(f"{instr.name}.cudnn_conv")
    params = [comp.add_instruction(HloInstruction(f"p{k}", "parameter", o.shape, parameter_number=k))
              for k, o in enumerate(instr.operands)]
    attrs = {k: instr.attrs[k] for k in ("window", "dim_labels", "feature_group_count", "batch_group_count")
             if k in instr.attrs}
    result = comp.add("convolution", params[:2], attrs, shape=shape)
    if scale != 1:
        result = comp.add("multiply", [result, full(comp, scale, result.shape)])
    if len(params) == 4 and side_scale != 0:
        side = params[3] if side_scale == 1 else comp.add("multiply", [params[3], full(comp, side_scale, shape)])
        result = comp.add("add", [result, side])
    if fused:
        feature = instr.attrs["dim_labels"].output_feature
        result = comp.add("add", [result, comp.add("broadcast", [params[2]], {"dimensions": (feature,)},
                                                   shape=result.shape)])
    result = _activation(comp, result, activation, float(config.get("leakyrelu_alpha", 0)))
    if instr.shape.is_tuple:
        result = comp.add("tuple", [result, *(full(comp, 0, s) for s in instr.shape.tuple_shapes[1:])],
                          shape=instr.shape)
    comp.root = result
    return comp


def _activation(comp: HloComputation, x: HloInstruction, mode: str, alpha: float) -> HloInstruction:
    """cuDNN's activation modes on x."""
    zero = lambda: full(comp, 0, x.shape)  # noqa: E731
    if mode == "kRelu":
        return comp.add("maximum", [x, zero()])
    if mode == "kRelu6":
        return comp.add("clamp", [zero(), x, full(comp, 6, x.shape)])
    if mode == "kTanh":
        return comp.add("tanh", [x])
    if mode == "kSigmoid":
        return comp.add("logistic", [x])
    if mode in ("kElu", "kLeakyRelu"):
        negative = comp.add("exponential-minus-one", [x]) if mode == "kElu" else \
            comp.add("multiply", [x, full(comp, alpha, x.shape)])
        positive = comp.add("compare", [x, zero()], {"direction": "GT"},
                            shape=x.shape.with_element_type(PRED))
        return comp.add("select", [positive, x, negative])
    return x


__all__ = ["CONV_TARGETS", "GEMM_TARGETS", "REFUSED_TARGETS", "backend_config", "expansion", "is_library_call"]
