"""`gather` inside loop fusions on the CPU backend, compared with the evaluator exactly.

Gathers are emitted elementally (emitters/base.py, `_gather`): for an output index the batch dims
pick an index vector of the start indices, each component is clamped to [0, operand_dim -
slice_size] and added to the offset dims. The cases cover general dimension numbers (index_vector_dim
anywhere or implicit, permuted start_index_map, collapsed, offset and batching dims in any place),
every integer index type with out-of-range, negative and extreme starts, size-1 and size-0
dimensions, non-default layouts, gathers between elementwise ops and of computed operands and
indices, and how the partitioner splits values that gathers read. A seeded generator of random
gathers runs a few seeds by default and many more under `-m slow`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from _cpu_helpers import T, run_cpu
from test_cpu_index_ops import Case, Gen, check, run_guarded, seeds, shape
from test_partitioner import check_invariants

from hlocc.codegen.partitioner import partition_computation
from hlocc.evaluator.numerics import int_bounds
from hlocc.hlo.parser import parse_hlo

INDEX_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "s4", "u4"]


def braces(values) -> str:
    return "{" + ",".join(map(str, values)) + "}"


@dataclass
class Gather:
    """Dimension numbers of one gather and the shapes they give."""

    operand: list[int]
    indices: list[int]
    offset_dims: list[int]
    collapsed: list[int]
    start_index_map: list[int]
    index_vector_dim: int  # len(indices): the index vector is implicit (one component)
    slice_sizes: list[int]
    operand_batching: tuple[int, ...] = ()
    indices_batching: tuple[int, ...] = ()

    @property
    def batch(self) -> list[int]:
        """The indices' dims other than the index vector's, in order."""
        return [n for d, n in enumerate(self.indices) if d != self.index_vector_dim]

    @property
    def output(self) -> list[int]:
        removed = {*self.collapsed, *self.operand_batching}
        window = iter(s for d, s in enumerate(self.slice_sizes) if d not in removed)
        batch = iter(self.batch)
        rank = len(self.batch) + len(self.operand) - len(removed)
        return [next(window) if d in self.offset_dims else next(batch) for d in range(rank)]

    def attributes(self) -> str:
        text = (f"offset_dims={braces(self.offset_dims)}, collapsed_slice_dims={braces(self.collapsed)}, "
                f"start_index_map={braces(self.start_index_map)}, index_vector_dim={self.index_vector_dim}, "
                f"slice_sizes={braces(self.slice_sizes)}")
        if self.operand_batching:
            text += (f", operand_batching_dims={braces(self.operand_batching)}, "
                     f"start_indices_batching_dims={braces(self.indices_batching)}")
        return text

    def line(self, name: str, element_type: str, operand: str, indices: str, layout=None) -> str:
        return f"{name} = {shape(element_type, self.output, layout)} gather({operand}, {indices}), {self.attributes()}"

    def start_values(self, g: Gen, index_type: str) -> np.ndarray:
        """Start indices: a third in range, the others negative, past the end or the type's extremes."""
        lo, hi = int_bounds(T[index_type])
        dims = self.indices
        holder = np.uint64 if lo == 0 else np.int64
        values = np.zeros(dims, holder)
        vector_axis = None if self.index_vector_dim == len(dims) else self.index_vector_dim
        for position in np.ndindex(*dims):
            k = position[vector_axis] if vector_axis is not None else 0
            d = self.start_index_map[k]
            top = self.operand[d] - self.slice_sizes[d]
            v = g.choice([g.int(0, top), g.int(0, top), g.int(-6, -1), g.int(top + 1, top + 6), lo, hi])
            values[position] = min(max(v, lo), hi)
        return values.astype(T[index_type].dtype)


def gather_case(gather: Gather, element_type: str, index_type: str, g: Gen, layouts: bool = False) -> Case:
    def layout(dims):
        return g.layout(len(dims)) if layouts else None

    params = [shape(element_type, gather.operand, layout(gather.operand)), shape(index_type, gather.indices, layout(gather.indices))]
    body = [gather.line("r", element_type, "p0", "p1", layout(gather.output))]
    return Case(params, body, [g.array(element_type, gather.operand), gather.start_values(g, index_type)])


# -- the forms of gather -----------------------------------------------------------------------------------------

FORMS = {
    # Embedding lookup: a row of a [V, D] table per id of a [B, S] batch (implicit index vector).
    "embedding": Gather([50, 16], [3, 7], [2], [0], [0], 2, [1, 16]),
    # The canonical form (indices [N, K], no collapsed dims, start_index_map 0..K-1).
    "canonical": Gather([9, 8], [6, 2], [1, 2], [], [0, 1], 1, [3, 2]),
    # XLA's corpus gather: start_index_map permuted.
    "start_index_map_permuted": Gather([30, 20], [10, 2], [1, 2], [], [1, 0], 1, [4, 8]),
    # The index vector in the middle of the indices, offset dims between batch dims.
    "vector_dim_in_the_middle": Gather([9, 11, 5], [4, 2, 3], [1, 3], [0], [2, 0], 1, [1, 4, 3]),
    # The index vector last (explicit), one window dim not indexed at all.
    "vector_dim_last": Gather([7, 6, 5], [5, 3, 2], [2, 3], [1], [1, 0], 2, [2, 1, 5]),
    # Three components, every dim collapsed: a point gather.
    "point": Gather([4, 5, 6], [3, 8], [], [0, 1, 2], [2, 0, 1], 0, [1, 1, 1]),
    # No index components: every batch position reads the same window.
    "no_components": Gather([5, 4], [3, 0], [1, 2], [], [], 1, [2, 4]),
    # Batching dims: operand dim 0 follows indices dim 1 (XLA's batched gather).
    "batching": Gather([3, 10, 4], [5, 3], [2], [1], [1], 2, [1, 1, 4], (0,), (1,)),
    # Offset dims first, batch dims last (the batch dims vary fastest within a thread's vector).
    "batch_minor": Gather([12, 6], [4, 5], [0], [0], [0], 2, [1, 6]),
    # A slice the size of the operand dim: every start clamps to 0.
    "full_slice": Gather([4, 6], [5, 2], [1, 2], [], [0, 1], 1, [4, 3]),
    # Size-1 dims everywhere.
    "size_one": Gather([1, 5, 1], [1, 1, 2], [1, 2, 3], [], [0, 2], 2, [1, 2, 1]),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_form(name):
    g = Gen(len(name))
    check(gather_case(FORMS[name], "f32", "s32", g))


@pytest.mark.parametrize("name", ["embedding", "vector_dim_in_the_middle", "batching", "batch_minor"])
def test_form_in_other_layouts(name):
    g = Gen(len(name) + 1)
    for _ in range(3):
        check(gather_case(FORMS[name], "f32", "s32", g, layouts=True))


@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_index_types(index_type):
    """Every integer type for the indices, with negative, past-the-end and extreme starts (u64 starts
    of 2^63 and more are large, not negative: they clamp to the end)."""
    g = Gen(len(index_type))
    check(gather_case(FORMS["start_index_map_permuted"], "f32", index_type, g))
    check(gather_case(FORMS["embedding"], "s8", index_type, g))


@pytest.mark.parametrize("index_type,start", [("u64", 2**64 - 1), ("u64", 2**63 + 5), ("u32", 2**32 - 1),
                                              ("s64", -(2**63)), ("s64", 2**63 - 1), ("s8", -128), ("u8", 255)])
def test_extreme_starts(index_type, start):
    pt = T[index_type]
    ids = np.full((2, 3), start, dtype=np.uint64 if pt.is_unsigned else np.int64).astype(pt.dtype)
    lookup = Gather([10, 4], [2, 3], [2], [0], [0], 2, [1, 4])
    check(Case(["s32[10,4]", shape(index_type, [2, 3])], [lookup.line("r", "s32", "p0", "p1")],
               [np.arange(40, dtype=np.int32).reshape(10, 4), ids]))


@pytest.mark.parametrize("element_type", ["bf16", "f16", "f64", "pred", "s4", "u8", "s64", "f8e4m3fn"])
def test_element_types(element_type):
    g = Gen(len(element_type))
    check(gather_case(FORMS["vector_dim_in_the_middle"], element_type, "s32", g))


SIZE_ZERO = {
    "no_batch": Gather([6, 4], [0, 1], [1, 2], [], [0], 1, [2, 4]),
    "empty_slice": Gather([6, 4], [3, 2], [1, 2], [], [0, 1], 1, [2, 0]),
    "empty_operand_dim": Gather([0, 4], [3, 1], [1, 2], [], [1], 1, [0, 2]),
    "no_batch_implicit": Gather([6, 4], [2, 0], [2], [0], [0], 2, [1, 4]),
}


@pytest.mark.parametrize("name", list(SIZE_ZERO))
def test_size_zero(name):
    check(gather_case(SIZE_ZERO[name], "f32", "s32", Gen(len(name))))


def test_scalar_operand():
    check(Case(["f32[]", "s32[3,0]"], ["r = f32[3] gather(p0, p1), offset_dims={}, collapsed_slice_dims={}, "
                                      "start_index_map={}, index_vector_dim=1, slice_sizes={}"],
               [np.float32(2.5), np.zeros((3, 0), np.int32)]))


SCALAR_OUTPUT = Gather([2, 7, 7], [3], [], [0, 1, 2], [1, 2, 0], 0, [1, 1, 1])


def scalar_output_case(g: Gen) -> Case:
    return gather_case(SCALAR_OUTPUT, "s32", "u64", g)


def test_scalar_output():
    """A rank-0 result (one point of the operand), against numpy's indexing."""
    for seed in range(4):
        case = scalar_output_case(Gen(seed))
        operand, starts = case.inputs
        clamped = np.minimum(starts.astype(np.uint64), [6, 6, 1]).astype(np.int64)  # start_index_map={1,2,0}
        (got,) = run_cpu(case.text(), case.inputs)
        assert got.shape == () and got == operand[clamped[2], clamped[0], clamped[1]]


def test_scalar_output_matches_evaluator():
    check(scalar_output_case(Gen(0)))


# -- gathers among other ops ---------------------------------------------------------------------------------------

EMBEDDING = FORMS["embedding"]


def test_elementwise_before_and_after():
    """A computed table (multiply, convert) and computed ids (add, clamp of a converted float), the
    gathered rows scaled and compared."""
    body = ["t = f32[50,16] multiply(p0, p0)", "h = bf16[50,16] convert(t)",
            "one = s32[] constant(3)", "b = s32[3,7] broadcast(one), dimensions={}", "s = s32[3,7] add(p1, b)",
            "f = f32[3,7] convert(s)", "lo = f32[] constant(-2)", "hi = f32[] constant(60)",
            "c = f32[3,7] clamp(lo, f, hi)", "i = s64[3,7] convert(c)",
            EMBEDDING.line("g", "bf16", "h", "i"), "w = bf16[3,7,16] broadcast(p2), dimensions={2}",
            "m = bf16[3,7,16] multiply(g, w)", "z = bf16[] constant(0)", "zb = bf16[3,7,16] broadcast(z), dimensions={}",
            "k = pred[3,7,16] compare(m, zb), direction=GT", "r = (bf16[3,7,16], pred[3,7,16]) tuple(m, k)"]
    g = Gen(11)
    check(Case(["f32[50,16]", "s32[3,7]", "bf16[16]"], body,
               [g.array("f32", [50, 16]), EMBEDDING.start_values(g, "s32"), g.array("bf16", [16])]))


def test_value_read_by_a_gather_and_directly():
    """The table is read gathered and at its own index: the partitioner gives it a function."""
    rows = Gather([6, 5], [6], [1], [0], [0], 1, [1, 5])
    body = ["e = f32[6,5] negate(p0)", "i = s32[6] reverse(p1), dimensions={0}", rows.line("g", "f32", "e", "i"),
            "r = f32[6,5] add(g, e)"]
    g = Gen(3)
    check(Case(["f32[6,5]", "s32[6]"], body, [g.array("f32", [6, 5]), rows.start_values(g, "s32")]))


def test_gather_of_gathered_indices():
    """Ids looked up in a table of ids, then rows of the embedding at them (two levels of runtime starts)."""
    ids = Gather([20], [3, 7], [], [0], [0], 2, [1])
    body = [ids.line("j", "s32", "p2", "p1"), EMBEDDING.line("r", "f32", "p0", "j")]
    g = Gen(5)
    remap = np.array(g.rng.integers(-10, 60, 20), np.int32)
    check(Case(["f32[50,16]", "s32[3,7]", "s32[20]"], body,
               [g.array("f32", [50, 16]), ids.start_values(g, "s32"), remap]))


def test_gather_then_index_ops():
    """A gather under a transpose, a slice, a dynamic-slice and a pad."""
    body = [EMBEDDING.line("g", "f32", "p0", "p1"), "t = f32[16,7,3] transpose(g), dimensions={2,1,0}",
            "s = f32[8,7,3] slice(t), slice={[1:16:2], [0:7], [0:3]}",
            "d = f32[4,5,3] dynamic-slice(s, p2, p2, p2), dynamic_slice_sizes={4,5,3}",
            "z = f32[] constant(7)", "r = f32[6,5,4] pad(d, z), padding=1_1x0_0x0_1"]
    g = Gen(9)
    check(Case(["f32[50,16]", "s32[3,7]", "s32[]"], body,
               [g.array("f32", [50, 16]), EMBEDDING.start_values(g, "s32"), np.int32(2)]))


def test_abs_of_indices():
    """XLA's zero_clamp_abs_index test: abs(INT_MIN) stays negative and clamps to 0."""
    lookup = Gather([8, 9], [5], [1, 2], [], [0], 1, [2, 3])
    ids = np.array([-2147483648, -3, 0, 5, 100], np.int32)
    check(Case(["s32[8,9]", "s32[5]"], ["a = s32[5] abs(p1)", lookup.line("r", "s32", "p0", "a")],
               [np.arange(72, dtype=np.int32).reshape(8, 9), ids]))


# -- random gathers ----------------------------------------------------------------------------------------------

def random_gather(g: Gen) -> Gather:
    """Random dimension numbers: batching dims sometimes, a permuted subset of the other dims
    indexed, a subset collapsed, 0-2 batch dims of the indices in any order around an index vector
    dim anywhere (or implicit for one component), offset dims anywhere in the output."""
    rank = g.int(1, 3)
    operand = g.dims(rank, hi=9)
    order = [int(d) for d in g.rng.permutation(rank)]
    operand_batching = tuple(sorted(order[:1])) if rank > 1 and g.rng.random() < 0.25 else ()
    rest = [d for d in range(rank) if d not in operand_batching]
    start_index_map = [d for d in rest if g.rng.random() < 0.7] or [rest[0]]
    start_index_map = [start_index_map[int(i)] for i in g.rng.permutation(len(start_index_map))]
    collapsed = sorted(d for d in rest if g.rng.random() < 0.4)
    slice_sizes = [1 if d in collapsed or d in operand_batching else g.choice([1, operand[d], g.int(1, operand[d])])
                   for d in range(rank)]
    window = rank - len(collapsed) - len(operand_batching)
    # The indices' batch dims: one per batching dim (its operand dim's size) and 0-2 more (at least one
    # output dim: see test_scalar_output_matches_evaluator), shuffled; then the index vector dim
    # anywhere (or implicit: one past the last).
    free = g.int(0 if window or operand_batching else 1, 2)
    batch_kinds = [("batching", od) for od in operand_batching] + [("free", g.int(1, 5)) for _ in range(free)]
    batch_kinds = [batch_kinds[int(i)] for i in g.rng.permutation(len(batch_kinds))]
    indices = [operand[v] if kind == "batching" else v for kind, v in batch_kinds]
    implicit = len(start_index_map) == 1 and g.rng.random() < 0.4
    vector_dim = len(indices) if implicit else g.int(0, len(indices))
    indices_batching = tuple(batch_kinds.index(("batching", od)) for od in operand_batching)
    if not implicit:
        indices.insert(vector_dim, len(start_index_map))
        indices_batching = tuple(p if p < vector_dim else p + 1 for p in indices_batching)
    out_rank = len(batch_kinds) + window
    offset_dims = sorted(int(d) for d in g.rng.choice(out_rank, window, replace=False))
    return Gather(operand, indices, offset_dims, collapsed, start_index_map, vector_dim, slice_sizes,
                  operand_batching, indices_batching)


RANDOM_INDEX_TYPES = ["s32", "s64", "u8", "u32", "s8", "u64", "s16"]


def random_case(seed: int) -> Case:
    g = Gen(seed)
    return gather_case(random_gather(g), g.type(), g.choice(RANDOM_INDEX_TYPES), g, layouts=True)


@pytest.mark.parametrize("seed", seeds(range(8), range(8, 80)))
def test_random_gather(seed):
    check(random_case(seed))


# -- the partitioner ---------------------------------------------------------------------------------------------

def partition(body: list[str]):
    text = "fusion {\n" + "\n".join(f"  {line}" for line in body[:-1]) + f"\n  ROOT {body[-1]}\n}}\n"
    pc = partition_computation(parse_hlo(text).entry)
    check_invariants(pc)
    return [sg.name for sg in pc.subgraphs]


ROWS = Gather([8, 4], [8], [1], [0], [0], 1, [1, 4])


def test_partition_computed_operand_and_indices_join_the_gather():
    body = ["p = f32[8,4] parameter(0)", "i = s32[8] parameter(1)", "e = f32[8,4] negate(p)", "j = s32[8] negate(i)",
            ROWS.line("g", "f32", "e", "j"), "r = f32[8,4] multiply(g, g)"]
    assert partition(body) == ["fusion_r"]


def test_partition_gathers_with_different_indices_split_their_operand():
    # Both operand maps are `(d0, d1){r0} -> (r0, d1)`; only the indices differ.
    body = ["p = f32[8,4] parameter(0)", "i = s32[8] parameter(1)", "k = s32[8] parameter(2)", "e = f32[8,4] negate(p)",
            ROWS.line("a", "f32", "e", "i"), ROWS.line("b", "f32", "e", "k"), "r = f32[8,4] add(a, b)"]
    assert partition(body) == ["fusion_r", "fusion_e"]


def test_partition_value_read_gathered_and_directly_splits():
    body = ["p = f32[8,4] parameter(0)", "i = s32[8] parameter(1)", "e = f32[8,4] negate(p)",
            ROWS.line("g", "f32", "e", "i"), "r = f32[8,4] add(g, e)"]
    assert partition(body) == ["fusion_r", "fusion_e"]


def test_partition_gathered_indices_join():
    ids = Gather([20], [8], [], [0], [0], 1, [1])
    body = ["p = f32[8,4] parameter(0)", "i = s32[8] parameter(1)", "t = s32[20] parameter(2)",
            ids.line("j", "s32", "t", "i"), ROWS.line("r", "f32", "p", "j")]
    assert partition(body) == ["fusion_r"]


def test_partition_gathers_at_different_indices_split():
    # Two paths reach the same gather through different maps (itself and reversed).
    body = ["p = f32[8,4] parameter(0)", "i = s32[8] parameter(1)", ROWS.line("g", "f32", "p", "i"),
            "v = f32[8,4] reverse(g), dimensions={0}", "r = f32[8,4] add(g, v)"]
    assert partition(body) == ["fusion_r", "fusion_g"]


# -- no access out of bounds --------------------------------------------------------------------------------------

def test_no_access_out_of_bounds(tmp_path):
    """Every buffer against a guard page, after its end and then before its start: starts far out of
    range must clamp before they address the operand."""
    g = Gen(17)
    cases = [gather_case(FORMS[name], "f32", "s32", g) for name in ("embedding", "vector_dim_in_the_middle", "point",
                                                                  "batching", "full_slice", "batch_minor")]
    cases += [gather_case(FORMS["start_index_map_permuted"], "u8", t, g) for t in ("u64", "s64", "s8", "u4")]
    cases += [random_case(seed) for seed in range(6)]
    out = run_guarded(cases, tmp_path)
    assert "rejected" not in out


def test_starts_exercise_clamping():
    """The cases' starts are often negative or past the end, so the comparisons above check clamping."""
    starts = FORMS["start_index_map_permuted"].start_values(Gen(0), "s32")
    assert (starts < 0).any() and (starts[:, 0] > 20 - 8).any()
