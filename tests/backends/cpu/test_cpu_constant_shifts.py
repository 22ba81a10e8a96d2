"""Shifts by a constant amount (codegen/elemental/ops.py folds the range check when the amount is an
`arith.constant`, as threefry's rotations are): each amount around the width (0, 1, width - 1,
width, width + 1, all ones) for the three shifts on signed and unsigned types of three widths,
compiled for the CPU and compared bit for bit with the evaluator."""

from __future__ import annotations

import numpy as np
import pytest
from _cpu_helpers import assert_exact, run_both

TYPES = {"s8": np.int8, "u32": np.uint32, "s64": np.int64}
SHIFTS = ("shift-left", "shift-right-logical", "shift-right-arithmetic")


def amounts(bits: int, signed: bool) -> list[int]:
    return [0, 1, bits - 1, bits, bits + 1, -1 if signed else (1 << bits) - 1]


def shift_module(type_name: str) -> str:
    bits = np.dtype(TYPES[type_name]).itemsize * 8
    lines, results = [f"HloModule shifts_{type_name}", "ENTRY main {", f"  x = {type_name}[67] parameter(0)"], []
    for k, amount in enumerate(amounts(bits, type_name.startswith("s"))):
        lines += [f"  c{k} = {type_name}[] constant({amount})",
                  f"  b{k} = {type_name}[67] broadcast(c{k}), dimensions={{}}"]
        for j, op in enumerate(SHIFTS):
            lines.append(f"  r{k}_{j} = {type_name}[67] {op}(x, b{k})")
            results.append(f"r{k}_{j}")
    shapes = ", ".join([f"{type_name}[67]"] * len(results))
    lines += [f"  ROOT t = ({shapes}) tuple({', '.join(results)})", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("type_name", sorted(TYPES))
def test_constant_shift_amounts_match_the_evaluator(type_name):
    dtype = TYPES[type_name]
    info = np.iinfo(dtype)
    edges = np.array([0, 1, -1 if info.min else 2, info.min, info.max, info.max // 3], dtype=dtype)
    x = np.concatenate([edges, np.random.default_rng(0).integers(info.min, info.max, 61, dtype=dtype,
                                                                  endpoint=True)])
    got, ref = run_both(shift_module(type_name), [x], kernels_only=True)
    assert len(got) == len(ref) == 18
    for n, (g, r) in enumerate(zip(got, ref)):
        assert_exact(g, r, [x], f"{SHIFTS[n % 3]} by amount #{n // 3} on {type_name}")
