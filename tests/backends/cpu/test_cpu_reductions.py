"""Reductions in CPU kernels (emitters/elemental_reduce.py, emitters/reduce_partials.py) against the
evaluator.

A float row whose contiguous reduced dimension is at least two vectors long is reduced with a vector
of partial accumulators (16 for f32, 32 for bf16), a tail loop and a loop over the lanes; a shorter
row of 4 elements or more with the largest power of two of lanes that fits and a tree over them;
shorter rows, integer and pred reductions, and reductions over a dimension that is not minor-most in the
layout stay serial loops. Both are checked at sizes around the vector (1, 15, 16, 17, 31, 32, 33,
1000, 2049) and over size-0 dimensions:

- exactly, wherever the order cannot matter: integer-valued floats (every partial sum exact), integer
  sums (wrapping), max/min/argmax, and/or, NaN and ±inf propagation, non-identity init values
  (folded in once, as in the serial loop);
- within a bound on the rounding error of the reassociated order for random floats: the kernel's
  sum against the exact (f64) sum of the same inputs, and against the evaluator's;
- and the order itself for a reducer that is neither associative nor commutative (a*b+1), which XLA
  (and hlocc) assume reducers are: the result is that of the documented order.
"""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
from _cpu_helpers import assert_exact, run_both, run_cpu

FILECHECK = shutil.which("filecheck")
SIZES = [1, 15, 16, 17, 31, 32, 33, 1000, 2049]
LANES_F32 = 16


# -- HLO text --------------------------------------------------------------------------------------------


def reducer(name: str, type_name: str, op: str) -> str:
    """`name(x, y) = op(x, y)` on scalars of `type_name`."""
    return (f"{name} {{\n  x = {type_name}[] parameter(0)\n  y = {type_name}[] parameter(1)\n"
            f"  ROOT r = {type_name}[] {op}(x, y)\n}}\n")


ARGMAX = """argmax {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, av, bv)
  i = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
"""


def module(computations: list[str], body: list[str]) -> str:
    lines = [f"  {line}" for line in body]
    lines[-1] = "  ROOT " + lines[-1].lstrip()
    return "HloModule m\n\n" + "\n".join(computations) + "\nENTRY main {\n" + "\n".join(lines) + "\n}\n"


def shape(type_name: str, dims, layout=None) -> str:
    text = f"{type_name}[{','.join(map(str, dims))}]"
    return text + ("{" + ",".join(map(str, layout)) + "}" if layout is not None else "")


def kept(dims, reduced) -> list[int]:
    return [d for i, d in enumerate(dims) if i not in reduced]


def dims_text(reduced) -> str:
    return "{" + ",".join(map(str, reduced)) + "}"


def one_reduce(type_name: str, dims, reduced, op: str, init: str, layout=None, acc_type: str | None = None) -> str:
    """reduce(convert?(p0), init) over `reduced` with the binary `op`, accumulating in `acc_type`
    (default: the input type, no convert)."""
    acc = acc_type or type_name
    body = [f"p = {shape(type_name, dims, layout)} parameter(0)"]
    operand = "p"
    if acc != type_name:
        body.append(f"c = {shape(acc, dims, layout)} convert(p)")
        operand = "c"
    body += [f"z = {acc}[] constant({init})",
             f"r = {shape(acc, kept(dims, reduced))} reduce({operand}, z), dimensions={dims_text(reduced)}, "
             f"to_apply=combine"]
    return module([reducer("combine", acc, op)], body)


def check_exact(text: str, inputs: list) -> None:
    got, ref = run_both(text, inputs)
    assert len(got) == len(ref)
    for k, (g, r) in enumerate(zip(got, ref)):
        assert_exact(g, r, inputs, f"output {k}")


def small_ints(rng, dims, dtype=np.float32, bound: int = 8) -> np.ndarray:
    """Integer values in [-bound, bound]: every partial sum of them is exact in f32."""
    return rng.integers(-bound, bound + 1, size=dims).astype(dtype)


# -- the plan: which reduces get partial accumulators ------------------------------------------------------


def plan_of(text: str):
    from hlocc.analysis.op_indexing import output_to_input
    from hlocc.codegen.emitters.reduce_partials import plan_partials
    from hlocc.hlo.parser import parse_hlo

    reduce = next(i for i in parse_hlo(text).entry.instructions if i.opcode == "reduce")
    plan = plan_partials(reduce, output_to_input(reduce)[0])
    return None if plan is None else (plan.symbol, plan.lanes)


ARGMAX_TEXT = module([ARGMAX], [
    "p = f32[4,64] parameter(0)",
    "iota = s32[4,64] iota(), iota_dimension=1",
    "lowest = f32[] constant(-inf)",
    "izero = s32[] constant(0)",
    "amax = (f32[4], s32[4]) reduce(p, iota, lowest, izero), dimensions={1}, to_apply=argmax",
])


@pytest.mark.parametrize("text, expected", [
    (one_reduce("f32", [4, 2048], [1], "add", "0"), (0, 16)),
    (one_reduce("f32", [4, 32], [1], "add", "0"), (0, 16)),  # two chunks
    # Shorter rows: the largest power of two that fits, down to SHORT_ROW_MIN (4).
    (one_reduce("f32", [4, 31], [1], "add", "0"), (0, 16)),
    (one_reduce("f32", [4, 15], [1], "add", "0"), (0, 8)),
    (one_reduce("f32", [4, 4], [1], "add", "0"), (0, 4)),
    (one_reduce("f32", [4, 3], [1], "add", "0"), None),
    (one_reduce("f64", [4, 16], [1], "add", "0"), (0, 8)),
    (one_reduce("bf16", [4, 64], [1], "add", "0"), (0, 32)),
    (one_reduce("bf16", [4, 63], [1], "add", "0"), (0, 32)),
    (one_reduce("bf16", [4, 64], [1], "add", "0", acc_type="f32"), (0, 16)),  # the reduce's operand is f32
    (ARGMAX_TEXT, (0, 16)),  # f32 values beside s32 indices: 16 tuples
    (one_reduce("s32", [4, 2048], [1], "add", "0"), None),  # integers: LLVM reassociates the serial loop
    (one_reduce("pred", [4, 2048], [1], "or", "false"), None),
    (one_reduce("f32", [2048, 4], [0], "add", "0"), None),  # a column: strided
    (one_reduce("f32", [2048, 4], [0], "add", "0", layout=[0, 1]), (0, 16)),  # ... made contiguous by the layout
    (one_reduce("f32", [4, 2048], [1], "add", "0", layout=[0, 1]), None),
    (one_reduce("f32", [4, 6, 40], [1, 2], "add", "0"), (1, 16)),  # range variable 1 walks dimension 2
    (one_reduce("f32", [3, 100, 1], [1], "add", "0"), (0, 16)),  # size-1 minor dimensions do not count
    (one_reduce("f32", [3, 0, 100], [1, 2], "add", "0"), (1, 16)),
])
def test_plan_partials(text, expected):
    assert plan_of(text) == expected


def test_chunked_map_splits_the_range_variable():
    from hlocc.analysis.op_indexing import output_to_input
    from hlocc.codegen.emitters.reduce_partials import chunked_map
    from hlocc.hlo.parser import parse_hlo

    reduce = parse_hlo(one_reduce("f32", [4, 2047], [1], "add", "0")).entry.root
    m = chunked_map(output_to_input(reduce)[0], 0, 16)
    assert str(m) == "(d0)[s0, lane] -> (d0, s0 * 16 + lane), domain: d0 in [0, 3], s0 in [0, 127], lane in [0, 15]"


# -- rows of every size: sum, max, min, argmax -----------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_row_sum_max_min_argmax(size):
    """One fusion with the four row reductions of f32[3, size] (integer values with many ties: the
    argmax's smaller-index rule decides) and an iota operand for the argmax."""
    x = shape("f32", [3, size])
    out = shape("f32", [3])
    text = module([reducer("add", "f32", "add"), reducer("max", "f32", "maximum"), reducer("min", "f32", "minimum"),
                   ARGMAX], [
        f"p = {x} parameter(0)",
        "zero = f32[] constant(0)",
        "lowest = f32[] constant(-inf)",
        "highest = f32[] constant(inf)",
        "izero = s32[] constant(0)",
        f"iota = {shape('s32', [3, size])} iota(), iota_dimension=1",
        f"sum = {out} reduce(p, zero), dimensions={{1}}, to_apply=add",
        f"max = {out} reduce(p, lowest), dimensions={{1}}, to_apply=max",
        f"min = {out} reduce(p, highest), dimensions={{1}}, to_apply=min",
        f"amax = ({out}, s32[3]) reduce(p, iota, lowest, izero), dimensions={{1}}, to_apply=argmax",
        "amax_v = f32[3] get-tuple-element(amax), index=0",
        "amax_i = s32[3] get-tuple-element(amax), index=1",
        f"t = ({out}, {out}, {out}, {out}, s32[3]) tuple(sum, max, min, amax_v, amax_i)",
    ])
    rng = np.random.default_rng(size)
    check_exact(text, [small_ints(rng, (3, size))])


def test_argmax_picks_the_first_maximum_in_every_lane_position():
    """Rows of one repeated maximum at two places: lanes, chunks and the tail all compete."""
    size = 2049
    x = np.zeros((6, size), np.float32)
    for row, (a, b) in enumerate([(0, 1), (15, 16), (17, 2048), (1000, 1001), (2032, 2033), (5, 2040)]):
        x[row, [a, b]] = 3.0
    text = module([ARGMAX], [
        f"p = {shape('f32', [6, size])} parameter(0)",
        f"iota = {shape('s32', [6, size])} iota(), iota_dimension=1",
        "lowest = f32[] constant(-inf)",
        "izero = s32[] constant(0)",
        "amax = (f32[6], s32[6]) reduce(p, iota, lowest, izero), dimensions={1}, to_apply=argmax",
    ])
    got, ref = run_both(text, [x])
    assert list(got[1]) == [0, 15, 17, 1000, 2032, 5]
    for g, r in zip(got, ref):
        assert_exact(g, r, [x])


# -- dimensions and layouts ---------------------------------------------------------------------------------


@pytest.mark.parametrize("dims, reduced, layout", [
    ([4, 6, 40], [1, 2], None),  # two reduced dims: the minor one with partials, the other a loop around it
    ([4, 6, 40], [0, 2], None),  # reduced dims on either side of a kept one
    ([5, 3, 2049], [0, 1, 2], None),  # everything: a scalar
    ([40, 33], [0], None),  # a column reduction (not minor-most): serial loops
    ([2049, 5], [0], [0, 1]),  # ... unless the layout makes it minor-most
    ([5, 100], [1], [0, 1]),  # a row reduction whose dimension the layout makes major: serial
    ([3, 100, 1], [1], None),  # the minor-most dimension is size 1: dimension 1 is the contiguous one
    ([7, 1, 64], [1, 2], [2, 0, 1]),
])
@pytest.mark.parametrize("op", ["add", "maximum"])
def test_reduced_dims_and_layouts(dims, reduced, layout, op):
    init = "0" if op == "add" else "-inf"
    text = one_reduce("f32", dims, reduced, op, init, layout)
    rng = np.random.default_rng(len(dims) * 100 + dims[-1])
    check_exact(text, [small_ints(rng, dims)])


@pytest.mark.parametrize("dims, reduced", [([3, 0], [1]), ([3, 0, 100], [1, 2]), ([3, 100, 0], [1]),
                                           ([0, 100], [1]), ([3, 1], [1]), ([3, 1, 1], [1, 2])])
def test_size_0_and_size_1_reduced_dims(dims, reduced):
    """Over no element the result is the init value (5, not an identity, shows it); over one it is
    reducer(init, x)."""
    text = one_reduce("f32", dims, reduced, "add", "5")
    rng = np.random.default_rng(0)
    check_exact(text, [small_ints(rng, dims)])


# -- init values, NaN and infinities ---------------------------------------------------------------------------


@pytest.mark.parametrize("op, init", [("add", "5"), ("maximum", "3"), ("minimum", "-3"), ("multiply", "2")])
def test_init_value_is_folded_in_once(op, init):
    """A non-identity init value counts once, as in the serial loop (XLA may fold it in more than once;
    hlocc does not need to)."""
    dims = [4, 1000]
    rng = np.random.default_rng(1)
    x = small_ints(rng, dims, bound=4)
    if op == "multiply":
        x = rng.choice(np.array([-1.0, 1.0], np.float32), size=dims)  # every partial product exact
    check_exact(one_reduce("f32", dims, [1], op, init), [x])


@pytest.mark.parametrize("op, init", [("add", "0"), ("maximum", "-inf"), ("minimum", "inf")])
def test_nan_and_infinities_propagate(op, init):
    """NaN in the first chunk, the middle, the last full chunk and the tail; +inf and -inf together
    (NaN for a sum); a row of -inf only (max: -inf, the init); a row of finite values."""
    size = 2049
    rng = np.random.default_rng(2)
    x = small_ints(rng, (8, size))
    for row, col in enumerate([0, 1000, 2047, 2048]):
        x[row, col] = np.nan
    x[4, [3, 2048]] = [np.inf, -np.inf]
    x[5, :] = -np.inf
    x[6, 2040] = np.inf
    got, ref = run_both(one_reduce("f32", [8, size], [1], op, init), [x])
    assert np.isnan(got[0][:4]).all()
    assert_exact(got[0], ref[0], [x])


# -- random floats: the reassociated sum's rounding error --------------------------------------------------------


@pytest.mark.parametrize("size", [17, 1000, 2049])
def test_random_f32_sum_within_the_reassociation_bound(size):
    """|kernel - exact| <= (terms in the longest chain) * u * sum|x|: size/16 chunk adds, 15 lane
    folds and the init (u = 2^-24; rows with much cancellation, so a relative tolerance on the
    result would not do). The evaluator's pairwise sum (numpy's) has shorter chains, so the two lie
    within twice that of each other."""
    rng = np.random.default_rng(size)
    x = (rng.standard_normal((16, size)) * np.exp(rng.uniform(-3, 3, (16, 1)))).astype(np.float32)
    got, ref = run_both(one_reduce("f32", [16, size], [1], "add", "0"), [x])
    exact = x.astype(np.float64).sum(axis=1)
    chain = size // LANES_F32 + LANES_F32 if size >= 2 * LANES_F32 else size
    bound = chain * 2.0**-24 * np.abs(x.astype(np.float64)).sum(axis=1)
    assert (np.abs(got[0] - exact) <= bound).all(), (got[0] - exact, bound)
    assert (np.abs(got[0] - ref[0]) <= 2 * bound).all(), (got[0] - ref[0], bound)


# -- narrow floats --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name", ["bf16", "f16"])
@pytest.mark.parametrize("size", [17, 1000, 2049])
def test_narrow_float_converted_to_f32_before_the_sum(type_name, size):
    """convert(bf16/f16) → f32 sum and max inside the fusion: exact on integer values, and within
    the reassociation bound on random ones."""
    dtype = ml_dtypes.bfloat16 if type_name == "bf16" else np.float16
    rng = np.random.default_rng(size)
    ints = small_ints(rng, (4, size), dtype)
    for op, init in (("add", "0"), ("maximum", "-inf")):
        check_exact(one_reduce(type_name, [4, size], [1], op, init, acc_type="f32"), [ints])
    x = rng.standard_normal((4, size)).astype(dtype)
    got = run_cpu(one_reduce(type_name, [4, size], [1], "add", "0", acc_type="f32"), [x])
    wide = x.astype(np.float64)
    bound = (size // LANES_F32 + LANES_F32) * 2.0**-24 * np.abs(wide).sum(axis=1)
    assert (np.abs(got[0] - wide.sum(axis=1)) <= bound).all()


# f16 kernels compile for 10-15 s each here: f16 over 100 and 200 elements (whole vectors and a tail,
# as 33 has) are slow; bf16 runs every size.
@pytest.mark.parametrize("type_name, size", [
    pytest.param(t, n, marks=[pytest.mark.slow] if (t, n) in {("f16", 100), ("f16", 200)} else [])
    for n in [15, 33, 64, 100, 200] for t in ["bf16", "f16"]])
def test_narrow_float_accumulation(type_name, size):
    """A bf16/f16 reducer (each add rounded to the type, 32 lanes): exact while every partial sum
    is (integers of magnitude <= 256); max exact with NaN in the tail."""
    dtype = ml_dtypes.bfloat16 if type_name == "bf16" else np.float16
    rng = np.random.default_rng(size)
    x = rng.integers(-1, 2, size=(4, size)).astype(dtype)
    check_exact(one_reduce(type_name, [4, size], [1], "add", "0"), [x])
    x = small_ints(rng, (4, size), dtype)
    x[1, -1] = np.nan
    check_exact(one_reduce(type_name, [4, size], [1], "maximum", "-inf"), [x])


# -- integers and preds ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("type_name, dtype", [("s32", np.int32), ("u8", np.uint8), ("s8", np.int8),
                                              ("u32", np.uint32), ("s64", np.int64)])
@pytest.mark.parametrize("size", [17, 130, 2049])
def test_integer_reductions_are_exact(type_name, dtype, size):
    """Sums over the whole range wrap; max and min (serial loops, which LLVM vectorizes itself)."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(size)
    x = rng.integers(info.min, info.max, size=(3, size), endpoint=True, dtype=np.int64 if info.min < 0 else np.uint64
                     ).astype(dtype)
    for op, init in (("add", "0"), ("maximum", str(info.min)), ("minimum", str(info.max))):
        check_exact(one_reduce(type_name, [3, size], [1], op, init), [x])


@pytest.mark.parametrize("size", [17, 128, 1000, 2049])
def test_pred_and_or(size):
    """pred rows (64 lanes): all true, all false, random, one false (true) in the tail, the first
    chunk, the middle."""
    rng = np.random.default_rng(size)
    x = np.ones((8, size), bool)
    x[1] = False
    x[2] = rng.random(size) < 0.5
    x[3, -1] = False
    x[4, 0] = False
    x[5, size // 2] = False
    x[6] = False
    x[6, -1] = True
    x[7] = False
    x[7, size // 3] = True
    for op, init in (("and", "true"), ("or", "false")):
        check_exact(one_reduce("pred", [8, size], [1], op, init), [x])


# -- the order of a reducer that is neither associative nor commutative --------------------------------------------


def partials_order(row: np.ndarray, init, f, lanes: int, tree: bool = False):
    """The documented order (reduce_partials.py): lanes seeded with the first chunk, the chunks, the
    tail as the row's last whole vector (the overlapped tail: element n - lanes + l into lane l, for
    the lanes past the elements the chunks took), then lane 0 folded with lanes 1, 2, ... in order
    (with `tree`, the halving tree: lane l with lane l + w/2 while w > 1), then f(init, row)."""
    acc = list(row[:lanes])
    chunks, tail = divmod(len(row), lanes)
    for c in range(1, chunks):
        acc = [f(a, row[c * lanes + lane]) for lane, a in enumerate(acc)]
    for lane in range(lanes - tail, lanes) if tail else ():
        acc[lane] = f(acc[lane], row[len(row) - lanes + lane])
    if tree:
        while len(acc) > 1:
            half = len(acc) // 2
            acc = [f(acc[k], acc[k + half]) for k in range(half)]
    result = acc[0]
    for a in acc[1:]:
        result = f(result, a)
    return f(init, result)


def serial_order(row: np.ndarray, init, f):
    for v in row:
        init = f(init, v)
    return init


STRANGE = ("strange {{\n  a = {t}[] parameter(0)\n  b = {t}[] parameter(1)\n  m = {t}[] multiply(a, b)\n"
           "  one = {t}[] constant(1)\n  ROOT r = {t}[] add(m, one)\n}}\n")


@pytest.mark.parametrize("size", [3, 5, 16, 31, 32, 33, 200])
def test_non_associative_reducer_follows_the_documented_order(size):
    """a*b+1 on f32 (inputs in [-1/2, 1/2], so values stay in [1/2, 2]): rows shorter than
    SHORT_ROW_MIN are the serial loop, rows shorter than two vectors the partials over the largest
    power of two of lanes that fits and the halving lane tree, longer rows the partial accumulators'
    order, bit for bit. (XLA assumes reducers are associative and commutative, so no order is
    "right"; this pins down hlocc's.)"""
    text = module([STRANGE.format(t="f32")], [
        f"p = {shape('f32', [3, size])} parameter(0)",
        "init = f32[] constant(0.75)",
        "r = f32[3] reduce(p, init), dimensions={1}, to_apply=strange",
    ])
    rng = np.random.default_rng(size)
    x = rng.uniform(-0.5, 0.5, size=(3, size)).astype(np.float32)

    def f(a, b):
        return np.float32(np.float32(a) * np.float32(b)) + np.float32(1)

    init = np.float32(0.75)
    if size < 4:
        expected = [serial_order(row, init, f) for row in x]
    elif size < 2 * LANES_F32:
        lanes = 1 << (size.bit_length() - 1)
        expected = [partials_order(row, init, f, lanes, tree=True) for row in x]
    else:
        expected = [partials_order(row, init, f, LANES_F32) for row in x]
    assert_exact(run_cpu(text, [x])[0], np.array(expected, np.float32), [x])


def test_non_associative_integer_reducer_is_serial():
    """Integer reductions stay serial loops at every size (LLVM reassociates integer arithmetic
    itself): a*b+1 on s32, wrapping, in element order."""
    size = 200
    text = module([STRANGE.format(t="s32")], [
        f"p = {shape('s32', [3, size])} parameter(0)",
        "init = s32[] constant(3)",
        "r = s32[3] reduce(p, init), dimensions={1}, to_apply=strange",
    ])
    x = np.random.default_rng(0).integers(-1000, 1000, size=(3, size)).astype(np.int32)

    def f(a, b):
        return int(np.uint32((int(a) * int(b) + 1) & 0xFFFFFFFF).view(np.int32))

    assert run_cpu(text, [x])[0].tolist() == [serial_order(row, 3, f) for row in x]


# -- reduce-window over high padding: masked lanes keep the accumulator ---------------------------------


WINDOW_REDUCERS = {  # op: (element type, init, input values that a padded 0 would change)
    "maximum": ("s32", "-2147483648", (-9, -1)),
    "minimum": ("s32", "2147483647", (1, 9)),
    "multiply": ("s32", "1", (2, 5)),
    "and": ("pred", "true", None),
}


@pytest.mark.parametrize("pad", ["0_1", "0_3"])
@pytest.mark.parametrize("size", [2, 4])
@pytest.mark.parametrize("op", list(WINDOW_REDUCERS))
@pytest.mark.parametrize("dims", [[5], [3, 6]], ids=["1d", "2d"])
def test_reduce_window_high_padding_reads_the_init_value(dims, op, size, pad):
    """A window over the minor dimension running into high padding: `vectorize-loads-stores-unaligned`
    makes the window loop one masked read (pad lanes masked off, read as 0); the masked-off lanes must
    leave the accumulator as it was (the padding is the init value), not fold in that 0."""
    type_name, init, values = WINDOW_REDUCERS[op]
    high = int(pad.split("_")[1])
    out = [*dims[:-1], dims[-1] + high - size + 1]
    window = "x".join(["1"] * (len(dims) - 1) + [str(size)])
    pads = "x".join(["0_0"] * (len(dims) - 1) + [pad])
    text = module([reducer("combine", type_name, op)], [
        f"p = {shape(type_name, dims)} parameter(0)",
        f"z = {type_name}[] constant({init})",
        f"r = {shape(type_name, out)} reduce-window(p, z), window={{size={window} pad={pads}}}, to_apply=combine",
    ])
    rng = np.random.default_rng(size * 10 + high)
    x = np.ones(dims, np.bool_) if values is None else rng.integers(values[0], values[1] + 1, size=dims).astype(np.int32)
    check_exact(text, [x])


# -- the IR: a vector of accumulators, vectorized ---------------------------------------------------------------------


EMITTED_CHECKS = """
CHECK: func.func @
CHECK: %[[SEED:.+]] = vector.broadcast %{{.+}} : f32 to vector<16xf32>
CHECK: %[[FIRST:.+]] = scf.for %{{.+}} iter_args(%{{.+}} = %[[SEED]]) -> (vector<16xf32>)
CHECK:   vector.insert
CHECK: %[[ACCS:.+]] = scf.for %[[C:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[ACC:.+]] = %[[FIRST]]) -> (vector<16xf32>)
CHECK:   scf.for %[[L:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[A:.+]] = %[[ACC]]) -> (vector<16xf32>)
CHECK:     tensor.extract
CHECK:     %[[OLD:.+]] = vector.extract %[[ACC]][%[[L]]] : f32 from vector<16xf32>
CHECK:     %[[NEW:.+]] = arith.addf %[[OLD]], %{{.+}} : f32
CHECK:     vector.insert %[[NEW]], %[[A]] [%[[L]]] : f32 into vector<16xf32>
CHECK: %[[TAIL:.+]] = scf.for %{{.+}} iter_args(%{{.+}} = %[[ACCS]]) -> (vector<16xf32>)
CHECK: %[[LANE0:.+]] = vector.extract %[[TAIL]][0] : f32 from vector<16xf32>
CHECK: %[[ROW:.+]] = scf.for %[[K:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[R:.+]] = %[[LANE0]]) -> (f32)
CHECK:   %[[LANE:.+]] = vector.extract %[[TAIL]][%[[K]]] : f32 from vector<16xf32>
CHECK:   arith.addf %[[R]], %[[LANE]] : f32
CHECK: arith.addf %{{.+}}, %[[ROW]] : f32
CHECK: func.return
"""

VECTORIZED_CHECKS = """
CHECK: scf.for %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (vector<16xf32>)
CHECK:   vector.transfer_read %{{.+}} : tensor<{{[0-9]+}}xf32>, vector<16xf32>
CHECK:   arith.addf %{{.+}}, %{{.+}} : vector<16xf32>
CHECK:   scf.yield %{{.+}} : vector<16xf32>
"""

LLVM_CHECKS = """
CHECK: fadd <16 x float>
"""


# Kernels compiled with a dump directory bypass the kernel cache; they are kept alive here because
# compiling after a JIT engine has been freed crashes LLVM (jit.py's hazard, seen with llvmlite 0.50).
_KEEP_ALIVE: list = []


def dump_kernel(text: str, directory) -> None:
    """Compile the module's entry as one kernel, writing the IR after every pass into `directory`."""
    from hlocc.backends.cpu.kernel import compile_fusion
    from hlocc.codegen.pipeline import PipelineOptions
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.verifier import verify_module

    hlo = parse_hlo(text)
    verify_module(hlo)
    _KEEP_ALIVE.append(compile_fusion(hlo.entry, options=PipelineOptions(dump_dir=str(directory)), use_cache=False))


def filecheck(directory, suffix: str, checks: str) -> None:
    (path,) = directory.glob(f"*{suffix}")
    spec = directory / f"{path.name}.checks"
    spec.write_text(checks)
    done = subprocess.run([FILECHECK, str(spec)], input=path.read_text(), text=True, capture_output=True)
    assert done.returncode == 0, f"{path.name}:\n{done.stderr}"


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
def test_sum_ir_has_a_vector_of_accumulators(tmp_path):
    """The sum of f32[2047]: the emitted function carries vector<16xf32> accumulators (seeded by the
    first chunk) through the chunk loop, whose lanes an inner loop reduces, and the 15-element tail
    into lanes 0-14, then folds the lanes in a loop and the init last; after vectorize-elementwise
    the chunk loop's body is one vector load and one vector add, and LLVM keeps <16 x float> adds."""
    dump_kernel(one_reduce("f32", [2047], [0], "add", "0"), tmp_path)
    filecheck(tmp_path, ".00.emitted.mlir", EMITTED_CHECKS)
    filecheck(tmp_path, ".vectorize-elementwise.mlir", VECTORIZED_CHECKS)
    filecheck(tmp_path, ".llvm-opt.ll", LLVM_CHECKS)


@pytest.mark.skipif(FILECHECK is None, reason="the `filecheck` command (PyPI filecheck) is not installed")
def test_unaligned_rows_are_vectorized(tmp_path):
    """Rows of f32[4, 2047] start at multiples of 2047: the CPU's vectorize-loads-stores-unaligned
    reads each 16-lane chunk of a row as one <16 x float> load (element-aligned), added to the
    vector partial. (The aligned-only pass left the lanes to unroll-loops, and LLVM's SLP
    vectorizer stopped recombining them when rows became a thread loop.)"""
    dump_kernel(one_reduce("f32", [4, 2047], [1], "add", "0"), tmp_path)
    filecheck(tmp_path, ".llvm-opt.ll", """
CHECK: for.body{{.*}}:
CHECK-NEXT: %[[ACC:.+]] = phi <16 x float>
CHECK: %[[X:.+]] = load <16 x float>
CHECK-NEXT: fadd <16 x float> %[[ACC]], %[[X]]
""")


class _ModuleCase:
    """A whole module for `run_guarded` (its cases need `text()` and `inputs`)."""

    def __init__(self, text: str, inputs: list):
        self._text, self.inputs = text, inputs

    def text(self) -> str:
        return self._text


_SIDE_OUTPUT_ROWS = """HloModule m
max {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] maximum(a, b) }}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  e = f32[{rows},{cols}] negate(x)
  c = f32[] constant(-inf)
  r = f32[{rows}] reduce(e, c), dimensions={{1}}, to_apply=max
  ROOT t = (f32[{rows}], f32[{rows},{cols}]) tuple(r, e)
}}
"""


def test_row_reduction_with_a_side_output_stays_in_bounds(tmp_path):
    """Rows that are no multiple of the block: the last block's spare threads must neither read the
    input nor write the side output (a max and a negation, exact in any order) (a softmax of 129 rows of 128 corrupted the heap: the row
    partials ignored the row bound, only the reduced value's write was guarded)."""
    from test_cpu_index_ops import run_guarded

    rng = np.random.default_rng(5)
    cases = [_ModuleCase(_SIDE_OUTPUT_ROWS.format(rows=rows, cols=cols),
                         [rng.standard_normal((rows, cols)).astype(np.float32)])
             for rows, cols in ((129, 128), (5, 1000), (1, 64))]
    out = run_guarded(cases, tmp_path)
    assert "rejected" not in out
