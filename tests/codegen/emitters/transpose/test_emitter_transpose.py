"""The transpose emitter (codegen/emitters/transpose.py): XLA's transpose corpus on the CPU target
and in SIMT simulation against the evaluator, random shapes (partial tiles, size-1 dimensions,
element types), the thread -> element bijections XLA's gpu_test_correctness checks, and the
launch parameters XLA chooses on the GPU."""

from __future__ import annotations

import pytest
from _emitter_helpers import assert_bijection, corpus_module, emitters_of, run_and_compare

from hlocc.analysis.bitcast import bitcast_index
from hlocc.analysis.hero import EmitterKind, computation_emitter_kind
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.codegen.emitters.transpose import PackedTiling, ShmemTiling, TransposeEmitter
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.hlo.parser import parse_hlo
from hlocc.tools.fusion_to_mlir import fused_computation

CORPUS = [
    "transpose__epilogue.hlo",
    "transpose__fused_transpose_021.hlo",
    "transpose__fused_transpose_102.hlo",
    "transpose__fused_transpose_210.hlo",
    "transpose__mixed_indexing.hlo",
    "transpose__multiple_roots.hlo",
    "transpose__multiple_roots_mixed_rank.hlo",
    "transpose__multiple_roots_one_shmem_transpose.hlo",
    "transpose__packed_transpose_bf16.hlo",
    "transpose__packed_transpose_f16.hlo",
    "transpose__packed_transpose_multiple_heroes.hlo",
    "transpose__packed_transpose_multiple_roots.hlo",
    "transpose__packed_transpose_s16.hlo",
    "transpose__packed_transpose_s4.hlo",
    "transpose__packed_transpose_s8.hlo",
    "transpose__packed_transpose_side_output.hlo",
    "transpose__packed_transpose_two_heroes.hlo",
    "transpose__partial_tile.hlo",
    "transpose__partial_tile_s4.hlo",
    "transpose__side_output_and_hero_indexing_match.hlo",
    "transpose__side_outputs.hlo",
    "transpose__side_outputs_inplace.hlo",
    "transpose__transpose_021.hlo",
    "transpose__transpose_10.hlo",
    "transpose__transpose_102.hlo",
    "transpose__transpose_102_s4.hlo",
    "transpose__transpose_10_s4.hlo",
    "transpose__transpose_1302.hlo",
    "transpose__transpose_201_simplified_to_021.hlo",
]

LOOP_FUSIONS = {"transpose__partial_tile_s4.hlo", "transpose__transpose_10_s4.hlo"}
"""4-bit transposes that move the minor dimension are not tiled (XLA's b/415741994): loop fusions."""

TOO_LARGE_TO_ENUMERATE = {"transpose__multiple_roots_one_shmem_transpose.hlo"}
"""46M elements per output: no bijection enumeration, and its run against the evaluator (~15 s, the
evaluator's share most of it) is in the slow set; transpose__multiple_roots.hlo checks multiple
roots by default."""


def one_target_by_default(names: list, targets: list, ids: list[str], *, case_ids: list[str] | None = None) -> list:
    """(name, target) parameters: each module on one target in the default run, alternating along the
    list, and on the other in the slow set (`-m slow` completes the sweep). The targets share the
    emitter's partitioning and indexing and differ in the tiling they choose, so half of the modules
    on each still checks both in every run."""
    params = []
    for i, name in enumerate(names):
        for j, (target, tid) in enumerate(zip(targets, ids)):
            marks = [] if j == i % len(targets) and name not in TOO_LARGE_TO_ENUMERATE else [pytest.mark.slow]
            case_id = case_ids[i] if case_ids else name
            params.append(pytest.param(name, target, id=f"{case_id}-{tid}", marks=marks))
    return params


def _kind(name: str) -> EmitterKind:
    return computation_emitter_kind(fused_computation(corpus_module(name)))


@pytest.mark.parametrize("name", CORPUS)
def test_corpus_emitter_kind(name):
    expected = EmitterKind.LOOP if name in LOOP_FUSIONS else EmitterKind.TRANSPOSE
    assert _kind(name) is expected


@pytest.mark.parametrize("name, target", one_target_by_default(CORPUS, ["cpu", "simt"], ["cpu", "simt"]))
def test_corpus_matches_evaluator(name, target):
    kernels = run_and_compare(corpus_module(name), target)
    assert emitters_of(kernels) == [_kind(name).value]


def _check_bijections(emitter: TransposeEmitter) -> None:
    for k, out in enumerate(emitter.outputs):
        assert_bijection(emitter.thread_id_to_output_indexing(k), out.shape, f"output {k}")
        hero = emitter.heroes[k]
        if k in emitter.transpose_roots:
            assert_bijection(emitter.thread_id_to_input_indexing(k, 0), hero.operand(0).shape, f"input of {k}")
        else:
            for j, operand in enumerate(out.operands):
                m = emitter.thread_id_to_input_indexing(k, j)
                if operand.shape.num_elements == out.shape.num_elements and m.results:
                    assert_bijection(m, operand.shape, f"operand {j} of side output {k}")


@pytest.mark.parametrize("name, target", one_target_by_default(
    [n for n in CORPUS if n not in LOOP_FUSIONS | TOO_LARGE_TO_ENUMERATE], [cpu_target, gpu_target], ["cpu", "gpu"]))
def test_corpus_bijection(name, target):
    """Every output element is written by exactly one (thread, block, loop) point, and the hero's
    operand is read exactly once (XLA's --bijection_outputs / --bijection_inputs)."""
    emitter = emitter_for(fused_computation(corpus_module(name)), target())
    assert isinstance(emitter, TransposeEmitter)
    _check_bijections(emitter)


# -- random shapes ----------------------------------------------------------------------------------------

def _transpose_module(dtype: str, dims: tuple[int, ...], permutation: tuple[int, ...], *, prologue: str = "negate",
                      epilogue: str = "negate") -> str:
    out = tuple(dims[p] for p in permutation)
    layout = "{" + ",".join(map(str, range(len(dims) - 1, -1, -1))) + (":E(4)}" if dtype == "s4" else "}")
    shape = lambda d: f"{dtype}[{','.join(map(str, d))}]{layout}"  # noqa: E731
    lines = [f"  p0 = {shape(dims)} parameter(0)"]
    operand = "p0"
    if prologue:
        lines.append(f"  pro = {shape(dims)} {prologue}(p0)")
        operand = "pro"
    root = "ROOT " if not epilogue else ""
    lines.append(f"  {root}t = {shape(out)} transpose({operand}), dimensions={{{','.join(map(str, permutation))}}}")
    if epilogue:
        lines.append(f"  ROOT epi = {shape(out)} {epilogue}(t)")
    return "fusion {\n" + "\n".join(lines) + "\n}\n"


RANDOM_CASES = [
    # (dtype, input dims, permutation): partial tiles, size-1 dimensions, "021", "102", "210", 2-D
    ("f32", (33, 65), (1, 0)),
    ("f32", (3, 47, 35), (0, 2, 1)),
    ("f32", (17, 1, 40, 1, 19), (4, 3, 2, 1, 0)),
    ("f32", (40, 70, 2), (1, 0, 2)),
    ("f64", (31, 3, 33), (2, 1, 0)),
    ("f16", (50, 66), (1, 0)),
    ("bf16", (2, 130, 36), (0, 2, 1)),
    ("s8", (70, 3, 41), (2, 1, 0)),
    ("s8", (37, 45, 5), (1, 0, 2)),
    ("c64", (20, 34), (1, 0)),
    ("pred", (36, 18, 3), (1, 0, 2)),
]


def _case_id(case) -> str:
    dtype, dims, perm = case
    return f"{dtype}_{'x'.join(map(str, dims))}_{''.join(map(str, perm))}"


def _epilogue(dtype: str) -> str:
    return "not" if dtype == "pred" else "negate"


@pytest.mark.parametrize("case, target", one_target_by_default(RANDOM_CASES, ["cpu", "simt"], ["cpu", "simt"],
                                                                case_ids=[_case_id(c) for c in RANDOM_CASES]))
def test_random_shapes_match_evaluator(case, target):
    """Each case on one target by default, alternating (the bijections below check both targets'
    indexing of every case in the default run); `-m slow` runs the other."""
    dtype, dims, perm = case
    text = _transpose_module(dtype, dims, perm, prologue=_epilogue(dtype), epilogue=_epilogue(dtype))
    assert computation_emitter_kind(fused_computation(parse_hlo(text))) is EmitterKind.TRANSPOSE
    kernels = run_and_compare(text, target)
    assert emitters_of(kernels) == ["transpose"]


@pytest.mark.parametrize("target", [cpu_target, gpu_target], ids=["cpu", "gpu"])
@pytest.mark.parametrize("case", RANDOM_CASES, ids=_case_id)
def test_random_shapes_bijection(case, target):
    dtype, dims, perm = case
    text = _transpose_module(dtype, dims, perm, prologue="", epilogue="")
    emitter = emitter_for(fused_computation(parse_hlo(text)), target())
    assert isinstance(emitter, TransposeEmitter)
    _check_bijections(emitter)


def test_s4_minor_dimension_kept_matches_evaluator():
    text = _transpose_module("s4", (64, 16, 4), (1, 0, 2), prologue="", epilogue="")
    for target in ("cpu", "simt"):
        assert emitters_of(run_and_compare(text, target)) == ["transpose"]


# -- XLA's launch parameters on the GPU target --------------------------------------------------------------

def _emitter(text_or_name: str, target=gpu_target) -> TransposeEmitter:
    module = corpus_module(text_or_name) if text_or_name.endswith(".hlo") else parse_hlo(text_or_name)
    emitter = emitter_for(fused_computation(module), target())
    assert isinstance(emitter, TransposeEmitter)
    return emitter


def test_seed_example_launch():
    """Seed 000: 128 threads, 960 blocks and a 32x1x33 shared tile for [20,160,170] -> [170,160,20]."""
    emitter = _emitter("transpose__fused_transpose_210.hlo")
    assert isinstance(emitter.tiling, ShmemTiling)
    assert (emitter.launch.threads_per_block, emitter.launch.blocks) == (128, 960)
    assert emitter.tiling.shmem_dims == (32, 1, 33)
    assert emitter.tiling.vector == 1


def test_102_keeps_the_minor_dimension_in_the_tile():
    emitter = _emitter("transpose__fused_transpose_102.hlo")
    assert emitter.tiling.shmem_dims == (32, 33, 3)
    assert emitter.tiling.vector == 3
    assert (emitter.launch.threads_per_block, emitter.launch.blocks) == (128, 30)


def test_packed_tile_of_small_elements():
    emitter = _emitter("transpose__packed_transpose_s8.hlo")
    assert isinstance(emitter.tiling, PackedTiling)
    assert emitter.tiling.shmem_dims == (128, 128)
    assert emitter.launch.threads_per_block == 128
    # On the CPU target the same transpose uses the plain tiling (no banks to pack).
    assert isinstance(_emitter("transpose__packed_transpose_s8.hlo", cpu_target).tiling, ShmemTiling)


def test_vectorized_when_the_gpu_is_filled():
    """Vector size 2 for s8 (4 bytes / 1, halved) needs blocks * 128 >= 4 * SMs * 2048 threads, the
    shared tiles 4 times over and both swapped dimensions even. Here the T2 dimension (130 % 128 = 2
    rows in the last tile) keeps the packed emitter away."""
    text = _transpose_module("s8", (130, 2048), (1, 0), prologue="", epilogue="")
    small_gpu = lambda: gpu_target(sm_count=1)  # noqa: E731
    emitter = _emitter(text, small_gpu)
    assert isinstance(emitter.tiling, ShmemTiling)
    assert emitter.tiling.vector == 2
    assert emitter.tiling.block_sizes == (64, 64)
    assert emitter.tiling.shmem_dims == (64, 65)
    _check_bijections(emitter)
    assert _emitter(text).tiling.vector == 1  # 132 SMs: too little work to vectorise
    for target in ("cpu", "simt"):
        assert emitters_of(run_and_compare(text, target)) == ["transpose"]


def test_bitcast_index_groups_dimensions():
    from hlocc.analysis.affine_expr import dim
    from hlocc.hlo.types import PRIMITIVE_TYPES, Layout, Shape

    f32 = PRIMITIVE_TYPES["f32"]
    d = [dim(0), dim(1), dim(2)]
    same = bitcast_index((2, 2048, 128), d, Shape.array(f32, (2, 2048, 128)))
    assert same == d
    split = bitcast_index((2, 2048, 128), d, Shape.array(f32, (2, 1, 2048, 8, 16)))
    assert split[0] == d[0] and split[2] == d[1] and split[3] == d[2] // 16 and split[4] == d[2] % 16
    # A column-major shape holds the same physical order with its dimensions reversed.
    column_major = bitcast_index((4, 6), d[:2], Shape.array(f32, (6, 4), Layout((0, 1))))
    assert column_major == [d[1], d[0]]


# -- physical transposes: copies that change the layout, transposes whose layouts transpose -------------------

def _layout(order: tuple[int, ...], dtype: str) -> str:
    return "{" + ",".join(map(str, order)) + (":E(4)}" if dtype == "s4" else "}")


def _copy_module(dtype: str, dims: tuple[int, ...], in_layout: tuple[int, ...], out_layout: tuple[int, ...], *,
                 side_output: bool = False) -> str:
    """A fusion whose hero is a copy from layout `in_layout` to `out_layout` (minor-to-major orders),
    with a prologue and an epilogue, and optionally a side output in the input's layout."""
    op = _epilogue(dtype)
    shape = lambda layout: f"{dtype}[{','.join(map(str, dims))}]{_layout(layout, dtype)}"  # noqa: E731
    lines = [f"  p0 = {shape(in_layout)} parameter(0)", f"  pro = {shape(in_layout)} {op}(p0)",
             f"  c = {shape(out_layout)} copy(pro)", f"  epi = {shape(out_layout)} {op}(c)"]
    if side_output:
        lines.append(f"  side = {shape(in_layout)} {op}(pro)")
        lines.append(f"  ROOT out = ({shape(out_layout)}, {shape(in_layout)}) tuple(epi, side)")
    else:
        lines[-1] = "  ROOT" + lines[-1][1:]
    return "fusion {\n" + "\n".join(lines) + "\n}\n"


COPY_CASES = [
    # (dtype, dims, operand layout, copy layout): "10", "021", "210" and "102" physical transposes,
    # partial tiles, a non-default operand layout, small elements (packed on the GPU target)
    ("f32", (33, 65), (1, 0), (0, 1)),
    ("f32", (64, 48), (0, 1), (1, 0)),
    ("f32", (3, 47, 35), (2, 1, 0), (1, 2, 0)),
    ("f32", (31, 3, 33), (2, 1, 0), (0, 1, 2)),
    ("f32", (40, 70, 2), (2, 1, 0), (2, 0, 1)),
    # f16 compiles for 15-25 s per case here: slow; "10" on 2-byte elements is bf16 50x66's check.
    pytest.param(("f16", (96, 160), (1, 0), (0, 1)), marks=pytest.mark.slow),
    ("s8", (130, 2, 140), (2, 1, 0), (0, 1, 2)),
    ("bf16", (50, 66), (1, 0), (0, 1)),
]


def _copy_id(case) -> str:
    dtype, dims, a, b = case
    return f"{dtype}_{'x'.join(map(str, dims))}_{''.join(map(str, a))}_to_{''.join(map(str, b))}"


def _copy_params() -> list:
    """Each copy alone or with a side output by default, alternating along the list (either way it
    is the transpose hero on both targets); `-m slow` runs the other form."""
    params = []
    for i, case in enumerate(COPY_CASES):
        values, marks = (case.values[0], list(case.marks)) if hasattr(case, "values") else (case, [])
        for side_output in (False, True):
            slow = [] if side_output == bool(i % 2) else [pytest.mark.slow]
            params.append(pytest.param(values, side_output, marks=marks + slow,
                                       id=f"{_copy_id(values)}-{'side_output' if side_output else 'single'}"))
    return params


@pytest.mark.parametrize("case, side_output", _copy_params())
def test_layout_changing_copy_is_a_transpose_hero(case, side_output):
    """XLA's hero analysis treats a copy that changes the physical layout as a tiled transpose
    (FindTiledTranspose): the emitter reads and writes through the physical shapes, on the CPU target
    and in SIMT simulation, and every element is read and written exactly once."""
    text = _copy_module(*case, side_output=side_output)
    computation = fused_computation(parse_hlo(text))
    assert computation_emitter_kind(computation) is EmitterKind.TRANSPOSE
    for target in (cpu_target, gpu_target):
        emitter = emitter_for(computation, target())
        assert isinstance(emitter, TransposeEmitter)
        assert [h.opcode for h in emitter.transposes] == ["copy"]
        _check_bijections(emitter)
    for target in ("cpu", "simt"):
        assert emitters_of(run_and_compare(text, target)) == ["transpose"]


def test_layout_changing_copy_as_xla_cpu_emits_it():
    """XLA:CPU's own form of `x.T + 1`: the add, a transpose that is a bitcast, and a copy back to the
    row-major layout that does the moving."""
    text = """
fusion {
  p0 = f32[96,80]{1,0} parameter(0)
  one = f32[] constant(1)
  b = f32[96,80]{1,0} broadcast(one), dimensions={}
  add = f32[96,80]{1,0} add(p0, b)
  t = f32[80,96]{0,1} transpose(add), dimensions={1,0}
  ROOT c = f32[80,96]{1,0} copy(t)
}
"""
    emitter = emitter_for(fused_computation(parse_hlo(text)), gpu_target())
    assert isinstance(emitter, TransposeEmitter) and emitter.heroes[0].name == "c"
    assert emitter.description.dimensions == (80, 96) and emitter.description.permutation == (1, 0)
    assert (emitter.launch.threads_per_block, emitter.launch.blocks) == (128, 3 * 3)
    for target in ("cpu", "simt"):
        assert emitters_of(run_and_compare(text, target)) == ["transpose"]


@pytest.mark.parametrize("dims, perm, out_layout, physical", [
    ((48, 72), (1, 0), (1, 0), ((72, 48), (1, 0))),
    ((6, 40, 36), (0, 2, 1), (2, 0, 1), ((36, 240), (1, 0))),       # logical 021, physically [36,6,40] <- [6,40,36]
    ((40, 36, 24), (2, 1, 0), (1, 0, 2), ((40, 24, 36), (0, 2, 1))),  # logical 210, physically 021
], ids=["10", "021_as_10", "210_as_021"])
def test_transpose_with_non_default_output_layout(dims, perm, out_layout, physical):
    """A transpose whose output layout changes the move: the emitter tiles the physical transpose
    (`physical`: normalised dims and permutation) and writes the output in its layout."""
    out = tuple(dims[p] for p in perm)
    text = (f"fusion {{\n  p0 = f32[{','.join(map(str, dims))}]{{{','.join(map(str, range(len(dims) - 1, -1, -1)))}}} "
            f"parameter(0)\n  ROOT t = f32[{','.join(map(str, out))}]{{{','.join(map(str, out_layout))}}} "
            f"transpose(p0), dimensions={{{','.join(map(str, perm))}}}\n}}\n")
    computation = fused_computation(parse_hlo(text))
    assert computation_emitter_kind(computation) is EmitterKind.TRANSPOSE
    for target in (cpu_target, gpu_target):
        emitter = emitter_for(computation, target())
        assert (emitter.description.dimensions, emitter.description.permutation) == physical
        _check_bijections(emitter)
    for target in ("cpu", "simt"):
        assert emitters_of(run_and_compare(text, target)) == ["transpose"]
