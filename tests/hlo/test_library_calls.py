"""XLA:GPU's cuBLAS and cuDNN custom calls (`__cublas$gemm`, `__cudnn$convForward`, ...: hlo/library_calls.py) run
on every backend: the evaluator calls their expansion, the call inliner inlines it (the dot then
takes the gemm path)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import hlocc
from hlocc.errors import UnsupportedError


def _gemm_module(config: dict, operands: str, params: str, result: str = "f32[4,6]{1,0}",
                 target: str = "__cublas$lt$matmul") -> str:
    quoted = json.dumps(json.dumps({"gemm_backend_config": config}))
    return f"""
HloModule gemm
ENTRY main {{
{params}
  ROOT g = {result} custom-call({operands}), custom_call_target="{target}", backend_config={quoted}
}}
"""


DIMS = {"lhs_contracting_dimensions": ["1"], "rhs_contracting_dimensions": ["0"],
        "lhs_batch_dimensions": [], "rhs_batch_dimensions": []}
AB = "  a = f32[4,5]{1,0} parameter(0)\n  b = f32[5,6]{1,0} parameter(1)"


def _gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_cublas_gemms_with_alpha_beta_bias_and_activations(backend):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 5), np.float32), rng.standard_normal((5, 6), np.float32)
    c, bias = rng.standard_normal((4, 6), np.float32), rng.standard_normal(6).astype(np.float32)
    product = a @ b
    cases = [
        ({"alpha_real": 1, "beta": 0, "epilogue": "DEFAULT"}, "a, b", AB, [a, b], product),
        ({"alpha_real": 0.5, "beta": 2, "epilogue": "DEFAULT"}, "a, b, c", AB + "\n  c = f32[4,6]{1,0} parameter(2)",
         [a, b, c], 0.5 * product + 2 * c),
        ({"alpha_real": 1, "beta": 0, "epilogue": "BIAS_RELU"}, "a, b, bias", AB + "\n  bias = f32[6] parameter(2)",
         [a, b, bias], np.maximum(product + bias, 0)),
        ({"alpha_real": 1, "beta": 0, "epilogue": "GELU"}, "a, b", AB, [a, b], _gelu(product)),
    ]
    for config, operands, params, args, want in cases:
        text = _gemm_module({**config, "dot_dimension_numbers": DIMS}, operands, params)
        exe = hlocc.compile(text, backend=backend)
        np.testing.assert_allclose(exe(*args), want, rtol=1e-5, atol=1e-5, err_msg=config["epilogue"])
    # The legacy target, its result a tuple with a workspace; a batched product
    text = _gemm_module({"alpha_real": 1, "beta": 0, "dot_dimension_numbers": {
        "lhs_contracting_dimensions": ["2"], "rhs_contracting_dimensions": ["1"],
        "lhs_batch_dimensions": ["0"], "rhs_batch_dimensions": ["0"]}}, "a, b",
        "  a = f32[3,4,5]{2,1,0} parameter(0)\n  b = f32[3,5,6]{2,1,0} parameter(1)",
        result="(f32[3,4,6]{2,1,0}, s8[128]{0})", target="__cublas$gemm")
    x, y = rng.standard_normal((3, 4, 5), np.float32), rng.standard_normal((3, 5, 6), np.float32)
    got = hlocc.compile(text, backend=backend)(x, y)
    np.testing.assert_allclose(got[0], x @ y, rtol=1e-5, atol=1e-5)


def test_on_cpu_the_gemm_is_a_library_gemm_not_a_host_fallback():
    text = _gemm_module({"alpha_real": 1, "beta": 0, "dot_dimension_numbers": DIMS}, "a, b", AB)
    exe = hlocc.compile(text, backend="cpu")
    exe(np.ones((4, 5), np.float32), np.ones((5, 6), np.float32))
    stats = exe.runner.stats
    assert stats.library_calls["gemm"] + stats.kernels_by_emitter["gemm"] == 1 and not stats.host_ops


def test_an_aux_epilogue_is_refused_by_name():
    text = _gemm_module({"alpha_real": 1, "beta": 0, "epilogue": "GELU_AUX", "dot_dimension_numbers": DIMS},
                        "a, b", AB)
    with pytest.raises(UnsupportedError, match="epilogue GELU_AUX is not supported"):
        hlocc.compile(text, backend="interpreter")(np.ones((4, 5), np.float32), np.ones((5, 6), np.float32))


def _conv_module(target: str, config: dict, operands: str, params: str) -> str:
    backend = json.dumps({"operation_queue_id": "0", "cudnn_conv_backend_config": config})
    return f"""
HloModule conv, is_scheduled=true
ENTRY main {{
  x = f32[2,6,6,4]{{3,2,1,0}} parameter(0)
  w = f32[3,3,4,5]{{3,2,1,0}} parameter(1)
{params}
  conv = (f32[2,6,6,5]{{3,2,1,0}}, u8[0]{{0}}) custom-call({operands}), window={{size=3x3 pad=1_1x1_1}}, dim_labels=b01f_01io->b01f, custom_call_target="{target}", backend_config={backend}
  ROOT r = f32[2,6,6,5]{{3,2,1,0}} get-tuple-element(conv), index=0
}}
"""


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_cudnn_convolutions_with_scale_side_input_bias_and_activation(backend):
    jax = pytest.importorskip("jax", reason="the reference convolution is jax's")
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 6, 6, 4), np.float32), rng.standard_normal((3, 3, 4, 5), np.float32)
    bias, side = rng.standard_normal(5).astype(np.float32), rng.standard_normal((2, 6, 6, 5), np.float32)
    conv = np.asarray(jax.lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)),
                                                   dimension_numbers=("NHWC", "HWIO", "NHWC")))
    plain = _conv_module("__cudnn$convForward", {"activation_mode": "kNone", "conv_result_scale": 1}, "x, w", "")
    np.testing.assert_allclose(hlocc.compile(plain, backend=backend)(x, w), conv, rtol=1e-5, atol=1e-5)
    fused = _conv_module("__cudnn$convBiasActivationForward",
                         {"activation_mode": "kRelu", "conv_result_scale": 0.5, "side_input_scale": 2},
                         "x, w, bias, side", "  bias = f32[5]{0} parameter(2)\n  side = f32[2,6,6,5]{3,2,1,0} parameter(3)")
    np.testing.assert_allclose(hlocc.compile(fused, backend=backend)(x, w, bias, side),
                               np.maximum(0.5 * conv + 2 * side + bias, 0), rtol=1e-5, atol=1e-5)


def test_cudnn_backward_convolutions_are_refused_by_name():
    text = _conv_module("__cudnn$convBackwardInput", {"activation_mode": "kNone"}, "x, w", "")
    with pytest.raises(UnsupportedError, match="cuDNN's backward and graph convolutions are not supported"):
        hlocc.compile(text, backend="cpu")
