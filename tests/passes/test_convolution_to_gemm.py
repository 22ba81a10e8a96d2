"""`convolution-to-gemm` (im2col + dot): the rewritten module computes what the convolution did.

Random convolutions in integers (exact: the same sums in another order) over 1 to 3 spatial
dimensions, every dimension order, strides, low/high padding (negative too), lhs and rhs dilation,
window reversal and feature groups; the corpus's convolutions in floats; what is left alone."""

from __future__ import annotations

import numpy as np
import pytest

import hlocc
from corpus import JAX_DIR, XLA_DIR
from hlocc.cli import random_inputs
from hlocc.evaluator import Evaluator
from hlocc.hlo.verifier import verify_module
from hlocc.passes.pipeline import run_passes


def rewrite(text: str) -> hlocc.HloModule:
    module = hlocc.parse_hlo(text)
    run_passes(module, ["convolution-to-gemm"])
    verify_module(module)
    return module


def random_convolution(seed: int) -> str | None:
    """A random valid s32 convolution module, or None when the draw has an empty output."""
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 4))
    groups = int(rng.choice([1, 1, 2, 3]))
    n, cg, fg = int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    spatial = [int(rng.integers(2, 7 if d < 3 else 5)) for _ in range(d)]
    kernel = [int(rng.integers(1, 4)) for _ in range(d)]
    stride = [int(rng.integers(1, 3)) for _ in range(d)]
    pad = [(int(rng.integers(-1, 3)), int(rng.integers(-1, 3))) for _ in range(d)]
    lhs_dilate = [int(rng.choice([1, 1, 2])) for _ in range(d)]
    rhs_dilate = [int(rng.choice([1, 1, 2])) for _ in range(d)]
    reversal = [int(rng.integers(0, 2)) for _ in range(d)]
    out = []
    for s, k, st, (lo, hi), ld, rd in zip(spatial, kernel, stride, pad, lhs_dilate, rhs_dilate):
        padded = (s - 1) * ld + 1 + lo + hi
        effective = (k - 1) * rd + 1
        if padded < effective:
            return None
        out.append((padded - effective) // st + 1)

    def labels(fixed: str) -> tuple[str, list[int]]:
        """A random order of `fixed` (two letters) and the spatial digits; the position of each."""
        items = list(fixed) + [str(i) for i in range(d)]
        order = [items[i] for i in rng.permutation(len(items))]
        return "".join(order), [order.index(x) for x in items]

    lhs_labels, lhs_pos = labels("bf")
    rhs_labels, rhs_pos = labels("io")
    out_labels, out_pos = labels("bf")

    def dims(pos: list[int], sizes: list[int]) -> str:
        result = [0] * len(pos)
        for p, size in zip(pos, sizes):
            result[p] = size
        return ",".join(map(str, result))

    lhs = dims(lhs_pos, [n, cg * groups, *spatial])
    rhs = dims(rhs_pos, [cg, fg * groups, *kernel])
    result = dims(out_pos, [n, fg * groups, *out])
    x = "x".join
    window = (f"size={x(map(str, kernel))} stride={x(map(str, stride))} "
              f"pad={x(f'{lo}_{hi}' for lo, hi in pad)} lhs_dilate={x(map(str, lhs_dilate))} "
              f"rhs_dilate={x(map(str, rhs_dilate))} rhs_reversal={x(map(str, reversal))}")
    return (f"HloModule conv\n\nENTRY e {{\n  a = s32[{lhs}] parameter(0)\n  b = s32[{rhs}] parameter(1)\n"
            f"  ROOT c = s32[{result}] convolution(a, b), window={{{window}}}, "
            f"dim_labels={lhs_labels}_{rhs_labels}->{out_labels}, feature_group_count={groups}\n}}\n")


@pytest.mark.parametrize("seed", range(60))
def test_random_convolutions_are_exact(seed):
    text = random_convolution(seed)
    if text is None:
        pytest.skip("the drawn window leaves no output")
    module = hlocc.parse_hlo(text)
    rewritten = rewrite(text)
    assert not any(i.opcode == "convolution" for i in rewritten.all_instructions()), rewritten.to_string()
    assert any(i.opcode == "dot" for i in rewritten.all_instructions())
    args = random_inputs(module, seed)
    np.testing.assert_array_equal(Evaluator().run(rewritten, args), Evaluator().run(module, args), err_msg=text)


def test_enough_random_convolutions_are_valid():
    assert sum(random_convolution(seed) is not None for seed in range(60)) >= 40


CORPUS_CONVOLUTIONS = [XLA_DIR / "tests__isolated_convolution.hlo",
                       XLA_DIR / "hlo_to_mhlo__operand_convert_for_convolution__0.hlo",
                       XLA_DIR / "hlo_to_mhlo__operand_convert_for_convolution__2.hlo",
                       JAX_DIR / "conv2d_nchw_maxpool.hlo"]


@pytest.mark.parametrize("path", CORPUS_CONVOLUTIONS, ids=lambda p: p.name)
def test_corpus_convolutions(path):
    if not path.is_file():
        pytest.skip(f"corpus not found at {path}")
    module = hlocc.parse_hlo_file(path)
    rewritten = rewrite(module.to_string())
    assert not any(i.opcode == "convolution" for i in rewritten.all_instructions())
    args = random_inputs(module, 0)
    got, want = Evaluator().run(rewritten, args), Evaluator().run(module, args)
    np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-4, atol=1e-4)


def test_batch_groups_are_left_alone():
    text = """HloModule m
ENTRY e {
  a = f32[4,5,2] parameter(0)
  b = f32[3,2,2] parameter(1)
  ROOT c = f32[2,3,2] convolution(a, b), window={size=3}, dim_labels=b0f_0io->b0f, batch_group_count=2
}"""
    assert [i.opcode for i in rewrite(text).entry.instructions].count("convolution") == 1
