"""The scatter emitter (XLA's ScatterFusion): the corpus's scatter group and generated scatters
(general dimension numbers, batching dims, variadic, several element types, indices out of range,
size-0 updates) against the evaluator, on the CPU target and in SIMT simulation of the GPU target;
XLA's launch; the bijection of the update indexing (XLA's --bijection_inputs=scatter:2); no access
out of bounds."""

from __future__ import annotations

import numpy as np
import pytest
from _emitter_helpers import TARGETS, assert_bijection, corpus_module, emitters_of, run_and_compare
from test_emitter_dynamic_update_slice import guarded_child, run_guarded  # noqa: F401  (the child imports it here)

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.errors import UnsupportedError
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.types import primitive_type
from hlocc.tools.fusion_to_mlir import fused_computation

EMITTER = "scatter"

CORPUS = {  # name: unique indices
    "scatter__add.hlo": False, "scatter__add_vectorized.hlo": False, "scatter__overwrite.hlo": False,
    "scatter__scatter_s4.hlo": False, "scatter__scatter_s4_unique_indices.hlo": True,
    "scatter__scatter_s8.hlo": False, "scatter__sorted_indices.hlo": False,
    "scatter__sorted_indices_large.hlo": False, "scatter__sorted_indices_small.hlo": False,
    "scatter__sorted_unique_indices.hlo": True, "scatter__unique_indices.hlo": True, "scatter__unsigned.hlo": False,
}

BIJECTION = ["scatter__add.hlo", "scatter__add_vectorized.hlo", "scatter__scatter_s4.hlo",
             "scatter__scatter_s4_unique_indices.hlo", "scatter__scatter_s8.hlo", "scatter__sorted_indices.hlo",
             "scatter__sorted_indices_small.hlo", "scatter__sorted_unique_indices.hlo"]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_module_matches_evaluator(name, target):
    kernels = run_and_compare(corpus_module(name), target)
    assert emitters_of(kernels) == [EMITTER]
    # Repeated indices: a read-modify-write that is correct on the CPU only one thread at a time.
    assert [k.serial for k in kernels] == [not CORPUS[name]]
    assert kernels[0].output_aliases == ((0, 0),)


def _fusion(name: str):
    return fused_computation(corpus_module(name))


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", BIJECTION)
def test_update_indexing_is_a_bijection(name, target):
    emitter = emitter_for(_fusion(name), TARGETS[target]())
    assert_bijection(emitter.thread_id_to_input_indexing(0, 2), emitter.update_shape, name)


def test_indices_indexing_reads_each_thread_index_vector():
    emitter = emitter_for(_fusion("scatter__scatter_s8.hlo"), TARGETS["simt"]())
    m = emitter.thread_id_to_input_indexing(0, 1)  # s32[96,2]: (slice of the thread, component)
    points = m.points()
    read = m.apply(points)
    assert set(map(tuple, read.tolist())) == {(i, k) for i in range(96) for k in range(2)}
    assert emitter.thread_id_to_input_indexing(0, 0) is None  # where a thread writes depends on the data
    assert emitter.thread_id_to_output_indexing(0) is None


def test_gpu_launch_follows_xla():
    """Distributed updates (XLA's ScatterWithDistributedUpdates): 128 threads per block over the
    updates, vector size gcd(slice elements, loop unroll factor)."""
    gpu = TARGETS["simt"]()
    cases = {"scatter__add.hlo": (128, 2, 1), "scatter__add_vectorized.hlo": (128, 938, 4),
             "scatter__scatter_s4.hlo": (16, 1, 2), "scatter__scatter_s8.hlo": (128, 192, 1)}
    for name, (threads, blocks, vector) in cases.items():
        launch, n = emitter_for(_fusion(name), gpu).launch()
        assert (launch.threads_per_block, launch.blocks, n) == (threads, blocks, vector), name


# -- generated scatters ------------------------------------------------------------------------------------

def scatter_module(operand: str, indices: str, updates: str, dnums: str, combiner: str = "add",
                   element: str | None = None, unique: bool = False) -> str:
    element = element or operand.split("[")[0]
    body = {"add": f"ROOT r = {element}[] add(a, b)", "max": f"ROOT r = {element}[] maximum(a, b)",
            "or": f"ROOT r = {element}[] or(a, b)", "mul": f"ROOT r = {element}[] multiply(a, b)",
            "set": f"ROOT r = {element}[] copy(b)",
            "sub": f"ROOT r = {element}[] subtract(a, b)"}[combiner]
    return f"""
combiner {{
  a = {element}[] parameter(0)
  b = {element}[] parameter(1)
  {body}
}}

fusion {{
  p0 = {operand} parameter(0)
  p1 = {indices} parameter(1)
  p2 = {updates} parameter(2)
  ROOT s = {operand} scatter(p0, p1, p2), {dnums}, unique_indices={str(unique).lower()}, to_apply=combiner
}}"""


def _dims(text: str) -> tuple[int, ...]:
    inside = text.split("[")[1].split("]")[0]
    return tuple(int(d) for d in inside.split(",") if d)


def _values(text: str, rng, lo: int = -1000, hi: int = 1000) -> np.ndarray:
    pt = primitive_type(text.split("[")[0])
    dims = _dims(text)
    if pt.is_pred:
        return rng.random(dims) < 0.5
    if pt.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(pt.dtype)
    if pt.is_integer:
        if pt.bits < 8:
            lo, hi = (-8, 7) if pt.is_signed else (0, 15)
        else:
            info = np.iinfo(pt.dtype)
            lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
        return rng.integers(lo, hi, dims, endpoint=True).astype(pt.dtype)
    return rng.standard_normal(dims).astype(pt.dtype)


CANONICAL = "update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"
ROWS = "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1"

GENERATED = {  # name: (operand, indices, updates, dimension numbers, combiner, index values or None)
    # Windows of 2 rows at starts -1 (skipped), 0, 8 (the last in bounds), 9 (crosses the end: skipped),
    # 100 and INT_MIN (skipped), and repeats.
    "f32_add_out_of_range": ("f32[10,5]", "s32[9,1]", "f32[9,2,3]", CANONICAL, "add",
                             [-1, 0, 8, 9, 100, -2**31, 3, 3, 0]),
    "bf16_add": ("bf16[10,5]", "s64[6,1]", "bf16[6,2,3]", CANONICAL, "add", [2**40, -1, 1, 1, 7, 8]),
    "s4_add": ("s4[9,4]", "s8[5,1]", "s4[5,2,4]", CANONICAL, "add", [-128, 7, 0, 1, 127]),
    "u32_indices_huge": ("f32[10,5]", "u32[4,1]", "f32[4,2,3]", CANONICAL, "max", [4294967295, 2**31, 5, 8]),
    "u64_indices_huge": ("s32[10,5]", "u64[3,1]", "s32[3,2,3]", CANONICAL, "mul", [2**64 - 1, 2**63, 1]),
    "pred_or_rows": ("pred[6,7]", "s32[5,1]", "pred[5,7]", ROWS, "or", [5, 6, 0, -1, 5]),
    "s64_sub_overwrite_order": ("s64[4,3]", "s32[6,1]", "s64[6,3]", ROWS, "sub", [1, 1, 3, 1, 0, 4]),
    "f64_set_repeated": ("f64[4,3]", "s32[5,1]", "f64[5,3]", ROWS, "set", [2, 2, 0, 2, 3]),
    "c64_add": ("c64[6,2]", "s32[4,1]", "c64[4,2]", ROWS, "add", [0, 5, 5, 6]),
    # Index vector first (index_vector_dim=0), two scatter dims, a window dim before the scatter dims,
    # scatter_dims_to_operand_dims permuted.
    "general_dnums": ("f32[5,6,7]", "s32[2,3,4]", "f32[2,3,4]",
                      "update_window_dims={0}, inserted_window_dims={1,2}, scatter_dims_to_operand_dims={2,1}, "
                      "index_vector_dim=0", "add", None),
    # Implicit index vector (index_vector_dim = rank of indices), scalar windows.
    "implicit_index_vector": ("u8[11]", "s32[3,4]", "u8[3,4]",
                              "update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                              "index_vector_dim=2", "max", None),
    # Batching dims: operand dim 0 is batched with indices dim 0.
    "batching_dims": ("f32[3,8,4]", "s32[3,5,1]", "f32[3,5,2]",
                      "update_window_dims={2}, inserted_window_dims={1}, scatter_dims_to_operand_dims={2}, "
                      "index_vector_dim=2, input_batching_dims={0}, scatter_indices_batching_dims={0}", "add", None),
    # Size-1 dimensions everywhere.
    "size_one_dims": ("f32[1,4,1]", "s32[3,2]", "f32[3,1,2,1]",
                      "update_window_dims={1,2,3}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, "
                      "index_vector_dim=1", "add", [0, 2, 0, 3, 1, 0]),
    # Many updates: several blocks on both targets, the CPU's vector loop.
    "many_updates": ("f32[50,64]", "s32[300,1]", "f32[300,64]",
                     "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     "index_vector_dim=1", "add", None),
}


def generated_case(name: str, seed: int = 0) -> tuple[str, list]:
    operand, indices, updates, dnums, combiner, index_values = GENERATED[name]
    text = scatter_module(operand, indices, updates, dnums, combiner)
    rng = np.random.default_rng(seed)
    if index_values is None:
        idx = _values(indices, rng, -2, 9)
    else:
        dtype = primitive_type(indices.split("[")[0]).dtype
        idx = np.array(index_values, dtype=np.int64 if dtype != np.uint64 else np.uint64).astype(dtype)
        idx = idx.reshape(_dims(indices))
    return text, [_values(operand, rng), idx, _values(updates, rng)]


@pytest.mark.parametrize("target", ["cpu", "simt"])
@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_scatter_matches_evaluator(name, target):
    text, inputs = generated_case(name)
    kernels = run_and_compare(text, target, inputs=inputs)
    assert emitters_of(kernels) == [EMITTER]


def test_unique_indices_run_in_parallel_blocks():
    """unique_indices: a plain read-combine-insert, blocks on the thread pool (not serial)."""
    n = 4096
    text = scatter_module("f32[4096,16]", f"s32[{n},1]", f"f32[{n},16]",
                          "update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                          "index_vector_dim=1", "add", unique=True)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((4096, 16)).astype(np.float32), rng.permutation(n).astype(np.int32).reshape(n, 1),
              rng.standard_normal((n, 16)).astype(np.float32)]
    for target in ("cpu", "simt"):
        kernels = run_and_compare(text, target, inputs=inputs)
        assert emitters_of(kernels) == [EMITTER] and not kernels[0].serial


VARIADIC = """
argmax {
  s0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  s1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  higher = pred[] compare(s1, s0), direction=GT
  s = f32[] select(higher, s1, s0)
  i = s32[] select(higher, i1, i0)
  ROOT t = (f32[], s32[]) tuple(s, i)
}

fusion {
  p0 = f32[50,5] parameter(0)
  p1 = s32[50,5] parameter(1)
  p2 = s32[24,1] parameter(2)
  p3 = f32[24,1,3] parameter(3)
  p4 = s32[24,1,3] parameter(4)
  ROOT s = (f32[50,5], s32[50,5]) scatter(p0, p1, p2, p3, p4), update_window_dims={1,2},
      inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1,
      unique_indices=UNIQUE, to_apply=argmax
}"""


@pytest.mark.parametrize("unique", [True, False])
@pytest.mark.parametrize("target", ["cpu", "simt"])
def test_variadic_scatter(unique, target):
    rng = np.random.default_rng(5)
    indices = (np.arange(24) * 2 if unique else rng.integers(-1, 50, 24)).astype(np.int32).reshape(24, 1)
    inputs = [rng.standard_normal((50, 5)).astype(np.float32), rng.integers(0, 9, (50, 5)).astype(np.int32),
              indices, rng.standard_normal((24, 1, 3)).astype(np.float32),
              rng.integers(10, 99, (24, 1, 3)).astype(np.int32)]
    kernels = run_and_compare(VARIADIC.replace("UNIQUE", str(unique).lower()), target, inputs=inputs)
    assert emitters_of(kernels) == [EMITTER]
    assert kernels[0].output_aliases == ((0, 0), (1, 1)) and kernels[0].serial is not unique


def test_size_zero_updates_leave_the_operand():
    text = scatter_module("f32[10,5]", "s32[0,1]", "f32[0,2,3]", CANONICAL)
    kernel = compile_fusion(parse_hlo(text).entry, TARGETS["cpu"](), use_cache=False)
    assert kernel.emitter == EMITTER
    x = np.arange(50, dtype=np.float32).reshape(10, 5)
    (out,) = kernel(x, np.zeros((0, 1), np.int32), np.zeros((0, 2, 3), np.float32))
    np.testing.assert_array_equal(out, x)
    run_and_compare(text, "simt", inputs=[x, np.zeros((0, 1), np.int32), np.zeros((0, 2, 3), np.float32)])


def test_computed_operand_is_rejected_and_falls_back_correctly():
    """XLA never fuses into the scatter operand; the emitter rejects such a fusion (the runtime then
    runs it on the host), since its output would have to hold the whole operand first."""
    text = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}

fusion {
  p0 = f32[10,5] parameter(0)
  twice = f32[10,5] add(p0, p0)
  p1 = s32[4,1] parameter(1)
  p2 = f32[4,2,3] parameter(2)
  ROOT s = f32[10,5] scatter(twice, p1, p2), update_window_dims={1,2}, inserted_window_dims={},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
    with pytest.raises(UnsupportedError, match="computed in the fusion"):
        compile_fusion(parse_hlo(text).entry, TARGETS["cpu"](), use_cache=False)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal((10, 5)).astype(np.float32), np.array([[1], [8], [9], [1]], np.int32),
              rng.standard_normal((4, 2, 3)).astype(np.float32)]
    run_and_compare(text, "cpu", inputs=inputs)


def test_no_access_out_of_bounds(tmp_path):
    names = ["f32_add_out_of_range", "s4_add", "u64_indices_huge", "pred_or_rows", "general_dnums",
             "batching_dims", "size_one_dims", "many_updates"]
    run_guarded([generated_case(name, seed) for seed, name in enumerate(names)], tmp_path, "test_emitter_scatter")
