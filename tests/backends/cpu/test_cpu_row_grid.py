"""Rows that are not a multiple of the vector (emitters/loop.py's row grid, vectorize_loads_stores.py's vectorize_masked_lanes):
a loop fusion that reads an operand per row (`x - m[i]`) or across the row (`x + b[j]`) keeps each
thread's vector inside one row, the row's last vector masked; a thread whose vector runs past the
output (a partial last block, a symbolic row's tail) is one masked vector loop. Checked against the
reference evaluator, static and symbolic, in the bounds-checked mode, and the grid each fusion gets."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hlocc
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.elemental.storage import array_leaves
from hlocc.codegen.emitters.loop import LoopEmitter
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.specialize import specialize

CHECKED = replace(cpu_target(), check_bounds=True)

ROW_BROADCAST = """HloModule m
ENTRY e {{
  x = f32[{b},{n}] parameter(0)
  m = f32[{b}] parameter(1)
  mb = f32[{b},{n}] broadcast(m), dimensions={{0}}
  d = f32[{b},{n}] subtract(x, mb)
  ROOT r = f32[{b},{n}] exponential(d)
}}"""

BIAS = """HloModule m
ENTRY e {{
  x = f32[{b},{n}] parameter(0)
  c = f32[{n}] parameter(1)
  cb = f32[{b},{n}] broadcast(c), dimensions={{1}}
  ROOT r = f32[{b},{n}] add(x, cb)
}}"""

# bf16, f16 and s32 outputs of one fusion (16 lanes: the s32 output's vector), both broadcasts
MIXED = """HloModule m
ENTRY e {{
  x = bf16[{b},{n}] parameter(0)
  m = bf16[{b}] parameter(1)
  i = s32[{b},{n}] parameter(2)
  c = s32[{n}] parameter(3)
  mb = bf16[{b},{n}] broadcast(m), dimensions={{0}}
  d = bf16[{b},{n}] subtract(x, mb)
  h = f16[{b},{n}] convert(d)
  cb = s32[{b},{n}] broadcast(c), dimensions={{1}}
  s = s32[{b},{n}] multiply(i, cb)
  ROOT t = (bf16[{b},{n}], f16[{b},{n}], s32[{b},{n}]) tuple(d, h, s)
}}"""

# a read that is neither: the transpose's column (strided in both grids)
TRANSPOSED = """HloModule m
ENTRY e {{
  x = f32[{n},{b}] parameter(0)
  m = f32[{b}] parameter(1)
  t = f32[{b},{n}] transpose(x), dimensions={{1,0}}
  mb = f32[{b},{n}] broadcast(m), dimensions={{0}}
  ROOT d = f32[{b},{n}] subtract(t, mb)
}}"""


def _arguments(module, rng):
    args = []
    for p in module.entry.parameters:
        dims, dtype = p.shape.dims, p.shape.dtype
        if p.shape.element_type.is_float:
            args.append((rng.standard_normal(dims) * 4).astype(np.float32).astype(dtype))
        else:
            args.append(rng.integers(-50, 50, dims).astype(dtype))
    return args


def _check_static(template: str, b: int, n: int, target=None) -> None:
    module = parse_hlo(template.format(b=b, n=n))
    kernel = compile_fusion(module.entry, target, use_cache=False)
    args = _arguments(module, np.random.default_rng(n))
    expected = hlocc.compile(module, backend="interpreter")(*args)
    expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
    for got, want in zip(kernel(*args), expected):
        want = np.asarray(want)
        if "exponential" in template:  # the kernel's exp expansion against numpy's: within an ulp or so
            np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"b={b} n={n}")
        else:
            np.testing.assert_array_equal(got, want, err_msg=f"b={b} n={n}")


def _rows(template: str, b: int, n: int, target=None) -> bool:
    """Whether the loop emitter gives the fusion the row grid."""
    fusion = parse_hlo(template.format(b=b, n=n)).entry
    emitter = LoopEmitter(fusion, target or cpu_target())
    return emitter._row_grid_pays(array_leaves(fusion.root.shape), emitter.launch()[1])


def test_which_fusions_get_the_row_grid():
    # a value per row: rows where a flat vector would hold many pieces of rows (odd n: 16 pieces)
    assert all(_rows(ROW_BROADCAST, 64, n) for n in (5, 7, 17, 31, 33, 127, 129, 1001))
    # ... not where LLVM assembles it from 2 or 4 pieces at no more cost than a row's partial vector
    assert not any(_rows(ROW_BROADCAST, 64, n) for n in (1, 2, 3, 4, 8, 12, 16, 24, 32, 40, 128, 1000))
    # a run of each row: rows unless the row length divides the vector (the same lanes in every vector)
    assert all(_rows(BIAS, 64, n) for n in (3, 6, 7, 12, 24, 31, 100))
    assert not any(_rows(BIAS, 64, n) for n in (2, 4, 8, 16, 32))
    assert _rows(MIXED, 8, 17)
    # one row; a transposed read (strided either way); a GPU thread's elements (no SIMD vector)
    assert not _rows(ROW_BROADCAST, 1, 31) and not _rows(TRANSPOSED, 64, 31)
    assert not _rows(ROW_BROADCAST, 4096, 31, gpu_target())


@pytest.mark.parametrize("n, lanes", [(3, 4), (6, 8), (12, 16), (31, 16)])
def test_a_row_shorter_than_the_vector_gets_a_vector_of_its_length(n, lanes):
    """Rows of 3 f32 take 4-lane vectors (one lane masked), not 16 lanes with 13 masked."""
    from hlocc.tools.fusion_to_mlir import fusion_to_mlir

    lowered = fusion_to_mlir(BIAS.format(b=64, n=n), "cpu", ["inline", "lower-xla-loops-to-scf", "flatten-tensors",
                                                             "cse", "vectorize-loads-stores-unaligned"])
    assert f"vector<{lanes}xf32>" in lowered and (lanes == 16 or "vector<16xf32>" not in lowered), lowered


@pytest.mark.parametrize("n", [7, 17, 33])
def test_row_broadcast(n):
    _check_static(ROW_BROADCAST, 37, n)


@pytest.mark.parametrize("n", [3, 31])
def test_bias_across_rows(n):
    _check_static(BIAS, 37, n)


def test_narrow_and_integer_types_and_outputs():
    _check_static(MIXED, 9, 17)


def test_bounds_checked_static_rows_and_partial_block():
    """Checked kernels: a row grid with partial rows and a partial last block, and a flat grid whose
    last thread's vector is partial (9 x 7 = 63 elements)."""
    _check_static(ROW_BROADCAST, 5, 17, CHECKED)
    _check_static(MIXED, 3, 33, CHECKED)
    _check_static(BIAS.replace("add(x, cb)", "add(x, x)"), 9, 7, CHECKED)


@pytest.mark.slow
@pytest.mark.parametrize("n", [1, 7, 8, 15, 16, 17, 24, 31, 32, 33, 100, 127, 128, 129, 1000])
def test_rows_at_every_length(n):
    for template in (ROW_BROADCAST, BIAS):
        _check_static(template, 3, n)
        _check_static(template, 66, n, CHECKED)


SYMBOLIC = {
    # the minor dim static, the rows symbolic: the row grid's whole chunks and masked tails
    "rows_static_n": ROW_BROADCAST.format(b="?b", n=31),
    # both symbolic: the symbolic grid's chunks; its tail is a masked loop
    "rows_and_n": ROW_BROADCAST.format(b="?b", n="?n").replace("exponential(d)", "multiply(d, d)"),
    "bias_static_n": BIAS.format(b="?b", n=24),
}


@pytest.mark.parametrize("name", list(SYMBOLIC))
def test_symbolic_rows_checked(name):
    """One checked kernel for every size: right, and nothing read or written outside a buffer."""
    module = parse_hlo(SYMBOLIC[name])
    kernel = compile_fusion(module.entry, CHECKED, use_cache=False)
    rng = np.random.default_rng(3)
    for b, n in [(0, 5), (1, 1), (1, 16), (2, 7), (37, 17), (5, 33)]:
        binding = {"b": b, "n": n}
        special = specialize(module, {s: binding[s] for s in kernel.symbols})
        args = _arguments(special, rng)
        want = np.asarray(hlocc.compile(special, backend="interpreter")(*args))
        (got,) = kernel(*args, dims=[binding[s] for s in kernel.symbols])
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=str(binding))
