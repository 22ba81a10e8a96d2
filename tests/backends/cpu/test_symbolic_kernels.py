"""Kernels with runtime dims (issue 15, item 5): a fused computation with symbolic shapes compiles
ONCE into a CPU kernel that runs at every binding of its dimension variables, bit-exact to the
reference evaluator on the module specialised to that binding (hlo/specialize.py); in the
bounds-checked mode nothing is read or written outside a buffer; what is not built yet raises
UnsupportedError saying "symbolic ... not built"."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hlocc
from hlocc.backends.cpu.kernel import clear_kernel_cache, compile_fusion, kernels_in_cache
from hlocc.backends.cpu.kernel_cache import kernel_key
from hlocc.codegen.llvm import TranslateOptions
from hlocc.codegen.target import cpu_target
from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.specialize import specialize

CHECKED = replace(cpu_target(), check_bounds=True)
SIZES = [0, 1, 2, 7, 15, 16, 17, 37, 101, 1000]  # 0 and 1, primes, vector width ± 1 (f32: 16), large

ADD_BROADCAST = """HloModule m
ENTRY e {
  p0 = f32[?b,128] parameter(0)
  p1 = f32[128] parameter(1)
  bc = f32[?b,128] broadcast(p1), dimensions={1}
  a = f32[?b,128] add(p0, bc)
  ROOT m = f32[?b,128] multiply(a, a)
}"""

# a symbolic minor dimension: the launch map divides by the runtime size
MINOR = """HloModule m
ENTRY e {
  p0 = f32[3,?n] parameter(0)
  p1 = f32[?n] parameter(1)
  bc = f32[3,?n] broadcast(p1), dimensions={1}
  s = f32[3,?n] subtract(p0, bc)
  io = s32[3,?n] iota(), iota_dimension=1
  f = f32[3,?n] convert(io)
  c = pred[3,?n] compare(s, f), direction=GT
  ROOT r = f32[3,?n] select(c, s, f)
}"""

# two variables, a transpose, a reshape that merges a static and a symbolic dim, a constant
TRANSPOSE_RESHAPE = """HloModule m
ENTRY e {
  p0 = f32[?b,?n,4] parameter(0)
  t = f32[4,?n,?b] transpose(p0), dimensions={2,1,0}
  k = f32[] constant(0.5)
  kb = f32[4,?n,?b] broadcast(k), dimensions={}
  m = f32[4,?n,?b] multiply(t, kb)
  ROOT r = f32[4,?(b*n)] reshape(m)
}"""

# transposes of the minor dim: the tiled grid (analysis/launch.py tiled_symbolic_grid), partial
# tiles in both directions at most sizes
TRANSPOSE_MINOR = """HloModule m
ENTRY e {
  p0 = f32[?b,40] parameter(0)
  t = f32[40,?b] transpose(p0), dimensions={1,0}
  k = f32[] constant(1)
  kb = f32[40,?b] broadcast(k), dimensions={}
  ROOT a = f32[40,?b] add(t, kb)
}"""

TRANSPOSE_021 = """HloModule m
ENTRY e {
  p0 = f32[?b,?n,24] parameter(0)
  t = f32[?b,24,?n] transpose(p0), dimensions={0,2,1}
  ROOT m = f32[?b,24,?n] multiply(t, t)
}"""

# multi-output, s8 and pred outputs (narrow elements), a negate and an exp
MULTI_OUTPUT = """HloModule m
ENTRY e {
  p0 = f32[?b,7] parameter(0)
  n = f32[?b,7] negate(p0)
  x = f32[?b,7] exponential(n)
  z = f32[] constant(0)
  zb = f32[?b,7] broadcast(z), dimensions={}
  g = pred[?b,7] compare(p0, zb), direction=GT
  i = s8[?b,7] convert(p0)
  ROOT t = (f32[?b,7], pred[?b,7], s8[?b,7]) tuple(x, g, i)
}"""

# a row reduction computed elementally in a loop fusion, over a symbolic row length
ROW_SUM = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p0 = f32[?b,?n] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[?b] reduce(p0, z), dimensions={1}, to_apply=add
}"""


def _arguments(module, binding, rng):
    special = specialize(module, binding)
    args = []
    for p in special.entry.parameters:
        dims = p.shape.dims
        args.append(rng.standard_normal(dims).astype(np.float32) * 4 if p.shape.element_type.name == "f32"
                    else rng.integers(-5, 5, dims).astype(p.shape.dtype))
    return special, args


def _check(text: str, bindings, target=None, rtol=0.0, atol=1e-6):
    """Compile once, run at every binding, compare to the evaluator on the specialised module
    (bit-exact unless a tolerance is given: a reassociated float sum)."""
    module = parse_hlo(text)
    kernel = compile_fusion(module.entry, target)
    assert kernel.symbols == tuple(sorted(set().union(*(i.shape.symbols for i in module.entry.instructions))))
    rng = np.random.default_rng(0)
    for binding in bindings:
        special, args = _arguments(module, binding, rng)
        expected = hlocc.compile(special, backend="interpreter")(*args)
        expected = list(expected) if isinstance(expected, (list, tuple)) else [expected]
        got = kernel(*args, dims=[binding[s] for s in kernel.symbols])
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert g.shape == e.shape, binding
            if rtol:
                np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, err_msg=str(binding))
            else:
                np.testing.assert_array_equal(g, e, err_msg=str(binding))
    return kernel


@pytest.mark.parametrize("text", [ADD_BROADCAST, MULTI_OUTPUT], ids=["add_broadcast", "multi_output"])
def test_batch_symbolic_kernel_runs_every_size(text):
    _check(text, [{"b": n} for n in SIZES], rtol=1e-6 if "exponential" in text else 0.0)


def test_symbolic_minor_dimension():
    _check(MINOR, [{"n": n} for n in SIZES])


def test_two_variables_transpose_reshape():
    _check(TRANSPOSE_RESHAPE, [{"b": b, "n": n} for b, n in [(1, 1), (2, 3), (7, 17), (16, 5), (0, 3), (3, 0)]])


def test_transposes_of_the_minor_dimension_in_tiles():
    _check(TRANSPOSE_MINOR, [{"b": n} for n in SIZES])
    _check(TRANSPOSE_021, [{"b": b, "n": n} for b, n in [(1, 1), (2, 17), (3, 16), (1, 33), (0, 5), (2, 0)]])


def test_row_reduction_with_symbolic_row_length():
    # the vector partials reassociate the sum: within a few ulps of the row's magnitude (|x| <= ~16)
    _check(ROW_SUM, [{"b": b, "n": n} for b, n in [(1, 1), (3, 17), (5, 16), (2, 101), (37, 15), (4, 0)]],
           rtol=1e-5, atol=1e-4)


def test_one_compilation_for_all_sizes():
    """The second compile of the same symbolic fusion is the cached kernel: one LLVM compile."""
    text = ADD_BROADCAST.replace("multiply(a, a)", "multiply(a, p0)")  # a key of its own in this process
    before = len(kernels_in_cache())
    kernel = _check(text, [{"b": n} for n in (3, 64, 1000)])
    assert len(kernels_in_cache()) == before + 1
    assert compile_fusion(parse_hlo(text).entry) is kernel


@pytest.mark.parametrize("text", [ADD_BROADCAST, MINOR, TRANSPOSE_RESHAPE, ROW_SUM, TRANSPOSE_021],
                         ids=["add_broadcast", "minor", "transpose_reshape", "row_sum", "transpose_021"])
def test_bounds_checked_at_random_sizes(text):
    """Checked kernels raise BoundsCheckError on any access outside a buffer: none at any size."""
    module = parse_hlo(text)
    names = sorted({s for p in module.entry.parameters for s in p.shape.symbols})
    rng = np.random.default_rng(1)
    bindings = [{s: int(v) for s, v in zip(names, rng.integers(0, 40, len(names)))} for _ in range(6)]
    _check(text, bindings + [dict.fromkeys(names, 1)], CHECKED, rtol=1e-5 if text is ROW_SUM else 0.0, atol=1e-4)


def test_wrong_number_of_dims_is_an_argument_error():
    kernel = compile_fusion(parse_hlo(ADD_BROADCAST).entry)
    with pytest.raises(ArgumentError, match=r"takes the values of 1 dimension variable\(s\) \(b\), got 2"):
        kernel.run_addresses([0, 0, 0], [1, 2])


def test_launch_is_computed_from_the_dims():
    kernel = compile_fusion(parse_hlo(ADD_BROADCAST).entry)
    per_block = kernel.launch_dims.threads_per_block * 16  # f32 vectors of 16 on the CPU target
    assert kernel.launch_for([0]).blocks == 1
    assert kernel.launch_for([1000]).blocks == -(-1000 * 128 // per_block)


def test_unsupported_emitter_names_symbolic():
    dot = """HloModule m
ENTRY e {
  p0 = f32[?b,4] parameter(0)
  p1 = f32[4,3] parameter(1)
  ROOT d = f32[?b,3] dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""
    with pytest.raises(UnsupportedError, match=r"symbolic loop emitter not built: 'd' \(dot\)"):
        compile_fusion(parse_hlo(dot).entry)


def test_symbolic_kernel_from_the_disk_cache(tmp_path, monkeypatch):
    """The plan on disk keeps the variables and the symbolic block count: a kernel loaded from
    the persistent cache (no emission) runs every size as the fresh one does."""
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path / "cache"))
    clear_kernel_cache()
    text = MINOR.replace("direction=GT", "direction=LT")  # a key of its own
    fresh = _check(text, [{"n": 5}])
    assert "emit" in fresh.times_ms
    clear_kernel_cache()
    loaded = _check(text, [{"n": n} for n in (0, 1, 17, 100)])
    assert "emit" not in loaded.times_ms and loaded.symbols == ("n",)
    assert loaded.launch_dims == fresh.launch_dims
    clear_kernel_cache()


def test_the_key_tells_symbolic_shapes_apart():
    target, options = cpu_target(), TranslateOptions()
    keys = {kernel_key(parse_hlo(t).entry, target, options)
            for t in (ADD_BROADCAST, ADD_BROADCAST.replace("?b", "?c"), ADD_BROADCAST.replace("?b", "5"))}
    assert len(keys) == 3


def test_symbolic_shapes_on_the_gpu_target_take_the_same_table_of_dims():
    # the GPU form compiles symbolically too (run in SIMT simulation here; its PTX takes the
    # values by value: tests/backends/cuda/test_dynamic_device.py)
    from hlocc.codegen.emitters.registry import emitter_for
    from hlocc.codegen.target import gpu_target
    from hlocc.hlo.symbolic import DimExpr

    kernel = emitter_for(parse_hlo(ADD_BROADCAST).entry, gpu_target()).emit()
    assert kernel.symbols == ("b",) and isinstance(kernel.launch.blocks, DimExpr)


# a column reduction (over the symbolic major dim) and a bf16 row max over a symbolic row length
COLUMN_SUM = ROW_SUM.replace("f32[?b] reduce(p0, z), dimensions={1}", "f32[?n] reduce(p0, z), dimensions={0}")
BF16_ROW_MAX = """HloModule m
max {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT m = bf16[] maximum(a, b)
}
ENTRY e {
  p0 = f32[?b,?n] parameter(0)
  h = bf16[?b,?n] convert(p0)
  z = bf16[] constant(-inf)
  ROOT r = bf16[?b] reduce(h, z), dimensions={1}, to_apply=max
}"""


@pytest.mark.parametrize("text", [COLUMN_SUM, BF16_ROW_MAX], ids=["column_sum", "bf16_row_max"])
def test_more_reductions(text):
    _check(text, [{"b": b, "n": n} for b, n in [(1, 1), (3, 17), (33, 16), (2, 101), (17, 31)]], rtol=1e-5, atol=1e-4)


# concatenation of two symbolic dims, and a pad of a symbolic dim (low, high and interior)
CONCAT = """HloModule m
ENTRY e {
  p0 = f32[?b,3] parameter(0)
  p1 = f32[?c,3] parameter(1)
  c = f32[?(b+c),3] concatenate(p0, p1), dimensions={0}
  k = f32[] constant(2)
  kb = f32[?(b+c),3] broadcast(k), dimensions={}
  ROOT m = f32[?(b+c),3] multiply(c, kb)
}"""
PAD = """HloModule m
ENTRY e {
  p0 = f32[?b,5] parameter(0)
  z = f32[] constant(-1)
  ROOT p = f32[?(2*b+2),7] pad(p0, z), padding=2_1_1x1_1
}"""


def test_concatenate_of_symbolic_dims():
    _check(CONCAT, [{"b": b, "c": c} for b, c in [(1, 1), (0, 3), (4, 0), (7, 17), (16, 1)]])


def test_pad_of_a_symbolic_dim():
    _check(PAD, [{"b": b} for b in (1, 2, 7, 17)])
    _check(PAD, [{"b": b} for b in (3, 16)], CHECKED)


# a full reduce over a symbolic dim: a scalar output (static grid of one block) from symbolic inputs
FULL_SUM = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[?b,64] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[] reduce(p, c), dimensions={0,1}, to_apply=add
}"""


def test_full_reduce_to_a_scalar(tmp_path, monkeypatch):
    """The scalar's index does not use the vector lane, which its tail guard still reads (the grid
    once dropped it: an ill-formed map); its plan has symbols but a static block count, which the
    disk cache must load back."""
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path / "cache"))
    clear_kernel_cache()
    bindings = [{"b": b} for b in (0, 1, 5, 17, 101)]
    fresh = _check(FULL_SUM, bindings, rtol=1e-5, atol=1e-3)
    assert "emit" in fresh.times_ms and fresh.launch_dims.blocks == 1
    clear_kernel_cache()
    loaded = _check(FULL_SUM, bindings, rtol=1e-5, atol=1e-3)
    assert "emit" not in loaded.times_ms and loaded.symbols == ("b",)
    clear_kernel_cache()
    _check(FULL_SUM, bindings, CHECKED, rtol=1e-5, atol=1e-3)
