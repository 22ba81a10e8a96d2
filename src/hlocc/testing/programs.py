"""Random HLO programs, valid by construction, as a hypothesis strategy (`programs()`).

A `Builder` keeps the values defined so far (name, element type, dimensions) and each op family
adds one instruction whose attributes it draws so that the result is well formed, computing the
result shape the way shape inference does; the verifier then checks every program (a program it
rejects is a bug of the generator or of shape inference). Families: every elementwise unary and
binary op on the element types it accepts (opcode registry), compare, select, clamp, convert;
broadcast, reshape, transpose, slice, pad, concatenate, reverse, iota; gather, scatter,
dynamic-slice, dynamic-update-slice; reduce, reduce-window; dot, convolution; sort; while,
conditional; tuples (the root is a tuple of live values). Sizes are drawn from 0, 1, 2, 3, 5, 7, 8
and 13; every array gets a random layout, also where a value is only forwarded (tuple elements,
loop state, branch parameters and results). `inputs(program, seed)` draws arguments with special
values mixed in (NaN, ±inf, -0.0, the smallest denormal, integer extremes).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from hlocc.testing.differential import _array, random_arguments  # noqa: F401  (re-exported)

FLOATS = ("f32", "f16", "bf16", "f64")
INTS = ("s32", "s8", "u8", "u32", "s64")
TYPES = FLOATS + INTS + ("pred",)
SIZES = (0, 1, 2, 3, 5, 7, 8, 13)
MAX_ELEMENTS = 2048

UNARY = {
    "float": ("negate", "abs", "exponential", "log", "sqrt", "rsqrt", "tanh", "sine", "cosine", "floor", "ceil",
              "sign", "round-nearest-even", "round-nearest-afz", "logistic", "exponential-minus-one",
              "log-plus-one", "cbrt", "tan", "atanh", "erf"),
    "int": ("negate", "abs", "not", "popcnt", "count-leading-zeros", "sign"),
    "pred": ("not",),
}
BINARY = {
    "float": ("add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2"),
    "int": ("add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or", "xor",
            "shift-left", "shift-right-arithmetic", "shift-right-logical"),
    "pred": ("and", "or", "xor", "maximum", "minimum"),
}
COMBINERS = ("add", "maximum", "minimum", "multiply")


def kind_of(dtype: str) -> str:
    return "float" if dtype in FLOATS else ("pred" if dtype == "pred" else "int")


@dataclass
class Value:
    name: str
    dtype: str
    dims: tuple[int, ...]
    text: str = ""  # the shape as declared, with its layout

    @property
    def size(self) -> int:
        return int(np.prod(self.dims, dtype=np.int64))


@dataclass
class Program:
    """A module's text and its parameters' (type, dims), for `inputs`."""

    text: str
    params: list[Value]
    ops: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # hypothesis prints the failing example: the module itself
        return f"Program(\n{self.text})"


class Builder:
    def __init__(self, draw):
        self.draw = draw
        self.lines: list[str] = []
        self.params: list[Value] = []
        self.values: list[Value] = []
        self.computations: dict[str, str] = {}
        self.ops: list[str] = []
        self.count = 0

    # -- shapes and names ------------------------------------------------------------------------
    def shape(self, dtype: str, dims, layout: bool = True) -> str:
        text = f"{dtype}[{','.join(map(str, dims))}]"
        if layout and len(dims) > 1:
            text += "{" + ",".join(map(str, self.draw(st.permutations(range(len(dims)))))) + "}"
        return text

    def dims(self, rank: int | None = None) -> tuple[int, ...]:
        rank = self.draw(st.integers(0, 3)) if rank is None else rank
        dims = tuple(self.draw(st.sampled_from(SIZES)) for _ in range(rank))
        while int(np.prod(dims, dtype=np.int64)) > MAX_ELEMENTS:
            dims = dims[1:]
        return dims

    def emit(self, dtype: str, dims, body: str, op: str) -> Value:
        value = Value(f"v{self.count}", dtype, tuple(dims), self.shape(dtype, dims))
        self.count += 1
        self.lines.append(f"  {value.name} = {value.text} {body}")
        self.values.append(value)
        self.ops.append(op)
        return value

    def param(self, dtype: str, dims) -> Value:
        value = Value(f"p{len(self.params)}", dtype, tuple(dims), self.shape(dtype, dims))
        self.lines.append(f"  {value.name} = {value.text} parameter({len(self.params)})")
        self.params.append(value)
        self.values.append(value)
        return value

    def constant(self, dtype: str, number) -> str:
        name = f"c{self.count}"
        self.count += 1
        literal = ("true" if number else "false") if dtype == "pred" else str(number)
        self.lines.append(f"  {name} = {dtype}[] constant({literal})")
        return name

    # -- operands --------------------------------------------------------------------------------
    def value(self, dtype: str | None = None, dims=None, kinds=None) -> Value:
        """An existing value matching the constraints, or a new parameter."""
        fits = [v for v in self.values if (dtype is None or v.dtype == dtype)
                and (dims is None or v.dims == tuple(dims)) and (kinds is None or kind_of(v.dtype) in kinds)]
        if fits and self.draw(st.integers(0, 3)):
            return self.draw(st.sampled_from(fits))
        if dtype is None:
            dtype = self.draw(st.sampled_from([t for t in TYPES if kinds is None or kind_of(t) in kinds]))
        return self.param(dtype, self.dims() if dims is None else dims)

    def computation(self, combiner: str, dtype: str) -> str:
        name = f"{combiner.replace('-', '_')}_{dtype}"
        if name not in self.computations:
            root = (f"compare(a, b), direction={combiner}" if combiner in ("LT", "GT") else f"{combiner}(a, b)")
            out = "pred" if combiner in ("LT", "GT") else dtype
            self.computations[name] = (f"{name} {{\n  a = {dtype}[] parameter(0)\n  b = {dtype}[] parameter(1)\n"
                                       f"  ROOT r = {out}[] {root}\n}}\n")
        return name


# -- op families -----------------------------------------------------------------------------------

def unary(b: Builder) -> Value:
    x = b.value()
    op = b.draw(st.sampled_from(UNARY[kind_of(x.dtype)]))
    if op in ("abs", "negate", "sign") and x.dtype.startswith("u"):
        op = "not"
    if op == "abs" and kind_of(x.dtype) == "int" and b.draw(st.booleans()):
        op = "negate"
    return b.emit(x.dtype, x.dims, f"{op}({x.name})", op)


def binary(b: Builder) -> Value:
    x = b.value()
    y = b.value(x.dtype, x.dims)
    op = b.draw(st.sampled_from(BINARY[kind_of(x.dtype)]))
    return b.emit(x.dtype, x.dims, f"{op}({x.name}, {y.name})", op)


def compare(b: Builder) -> Value:
    x = b.value()
    y = b.value(x.dtype, x.dims)
    direction = b.draw(st.sampled_from(["EQ", "NE", "LT", "LE", "GT", "GE"]))
    extra = ", type=TOTALORDER" if kind_of(x.dtype) == "float" and b.draw(st.booleans()) else ""
    return b.emit("pred", x.dims, f"compare({x.name}, {y.name}), direction={direction}{extra}", "compare")


def select(b: Builder) -> Value:
    x = b.value()
    y = b.value(x.dtype, x.dims)
    if b.draw(st.booleans()) and x.dtype != "pred":
        lo = b.constant(x.dtype, 0) if kind_of(x.dtype) != "float" else b.constant(x.dtype, -1.5)
        return b.emit(x.dtype, x.dims, f"clamp({lo}, {x.name}, {y.name})", "clamp")
    p = b.value("pred", x.dims)
    return b.emit(x.dtype, x.dims, f"select({p.name}, {x.name}, {y.name})", "select")


def convert(b: Builder) -> Value:
    x = b.value()
    to = b.draw(st.sampled_from(TYPES))
    return b.emit(to, x.dims, f"convert({x.name})", "convert")


def broadcast(b: Builder) -> Value:
    x = b.value()
    extra = b.dims(b.draw(st.integers(0, 2)))
    rank = len(x.dims) + len(extra)
    if rank > 4 or x.size * int(np.prod(extra, dtype=np.int64)) > MAX_ELEMENTS:
        return unary(b)
    positions = sorted(b.draw(st.permutations(range(rank)))[:len(x.dims)])
    out = list(extra)
    for p, d in zip(positions, x.dims):
        out.insert(p, d)
    return b.emit(x.dtype, out, f"broadcast({x.name}), dimensions={{{','.join(map(str, positions))}}}", "broadcast")


def reshape(b: Builder) -> Value:
    x = b.value()
    n = x.size
    factors = [f for f in range(1, n + 1) if n and n % f == 0] or [0]
    first = b.draw(st.sampled_from(factors))
    out = [first, n // first] if first else [0, b.draw(st.sampled_from([0, 1, 3]))]
    if b.draw(st.booleans()):
        out = [d for d in out if d != 1] or [n]
    return b.emit(x.dtype, out, f"reshape({x.name})", "reshape")


def transpose(b: Builder) -> Value:
    x = b.value()
    perm = b.draw(st.permutations(range(len(x.dims))))
    return b.emit(x.dtype, [x.dims[p] for p in perm], f"transpose({x.name}), dimensions={{{','.join(map(str, perm))}}}",
                  "transpose")


def slice_(b: Builder) -> Value:
    x = b.value()
    parts, out = [], []
    for d in x.dims:
        start = b.draw(st.integers(0, d))
        limit = b.draw(st.integers(start, d))
        stride = b.draw(st.integers(1, 3))
        parts.append(f"[{start}:{limit}:{stride}]")
        out.append(-(-(limit - start) // stride))
    return b.emit(x.dtype, out, f"slice({x.name}), slice={{{','.join(parts)}}}", "slice")


def pad(b: Builder) -> Value:
    x = b.value()
    if not x.dims:
        return unary(b)
    parts, out = [], []
    for d in x.dims:
        lo, hi, interior = (b.draw(st.integers(-2, 3)), b.draw(st.integers(-2, 3)), b.draw(st.integers(0, 2)))
        size = d + max(d - 1, 0) * interior
        lo = max(lo, -size)
        hi = max(hi, -(size + lo))
        parts.append(f"{lo}_{hi}_{interior}")
        out.append(size + lo + hi)
    if int(np.prod(out, dtype=np.int64)) > MAX_ELEMENTS:
        return unary(b)
    value = b.constant(x.dtype, 0 if x.dtype == "pred" else 7)
    return b.emit(x.dtype, out, f"pad({x.name}, {value}), padding={'x'.join(parts)}", "pad")


def concatenate(b: Builder) -> Value:
    x = b.value()
    if not x.dims:
        return unary(b)
    dim = b.draw(st.integers(0, len(x.dims) - 1))
    parts = [x]
    for _ in range(b.draw(st.integers(1, 2))):
        dims = list(x.dims)
        dims[dim] = b.draw(st.sampled_from(SIZES[:5]))
        parts.append(b.value(x.dtype, dims))
    out = list(x.dims)
    out[dim] = sum(p.dims[dim] for p in parts)
    if int(np.prod(out, dtype=np.int64)) > MAX_ELEMENTS:
        return unary(b)
    names = ", ".join(p.name for p in parts)
    return b.emit(x.dtype, out, f"concatenate({names}), dimensions={{{dim}}}", "concatenate")


def reverse(b: Builder) -> Value:
    x = b.value()
    dims = [d for d in range(len(x.dims)) if b.draw(st.booleans())]
    return b.emit(x.dtype, x.dims, f"reverse({x.name}), dimensions={{{','.join(map(str, dims))}}}", "reverse")


def iota(b: Builder) -> Value:
    dims = b.dims(b.draw(st.integers(1, 3)))
    dtype = b.draw(st.sampled_from(("s32", "f32", "u8", "bf16")))
    return b.emit(dtype, dims, f"iota(), iota_dimension={b.draw(st.integers(0, len(dims) - 1))}", "iota")


def reduce(b: Builder) -> Value:
    x = b.value(kinds=("float", "int"))
    dims = sorted(d for d in range(len(x.dims)) if b.draw(st.booleans()))
    combiner = b.draw(st.sampled_from(COMBINERS))
    init = b.constant(x.dtype, {"add": 0, "multiply": 1, "maximum": 0, "minimum": 0}[combiner])
    out = [d for i, d in enumerate(x.dims) if i not in dims]
    comp = b.computation(combiner, x.dtype)
    return b.emit(x.dtype, out, f"reduce({x.name}, {init}), dimensions={{{','.join(map(str, dims))}}}, to_apply={comp}",
                  "reduce")


def reduce_window(b: Builder) -> Value:
    x = b.value(kinds=("float", "int"))
    if not x.dims:
        return unary(b)
    sizes, strides, pads, out = [], [], [], []
    for d in x.dims:
        size = b.draw(st.integers(1, 3))
        stride = b.draw(st.integers(1, 2))
        lo, hi = b.draw(st.integers(0, 1)), b.draw(st.integers(0, 1))
        if d + lo + hi < size:
            size = 1
        sizes.append(size)
        strides.append(stride)
        pads.append(f"{lo}_{hi}")
        out.append((d + lo + hi - size) // stride + 1)
    combiner = b.draw(st.sampled_from(("add", "maximum", "minimum")))
    init = b.constant(x.dtype, 0)
    comp = b.computation(combiner, x.dtype)
    window = f"size={'x'.join(map(str, sizes))} stride={'x'.join(map(str, strides))} pad={'x'.join(pads)}"
    return b.emit(x.dtype, out, f"reduce-window({x.name}, {init}), window={{{window}}}, to_apply={comp}",
                  "reduce-window")


def dot(b: Builder) -> Value:
    dtype = b.draw(st.sampled_from(("f32", "f32", "s32", "bf16", "f64")))
    batch = b.draw(st.sampled_from((0, 0, 1, 2, 3)))
    m, k, n = (b.draw(st.sampled_from(SIZES)) for _ in range(3))
    lhs_dims = ([batch] if batch else []) + [m, k]
    rhs_dims = ([batch] if batch else []) + [k, n]
    lhs, rhs = b.value(dtype, lhs_dims), b.value(dtype, rhs_dims)
    bd = "lhs_batch_dims={0}, rhs_batch_dims={0}, " if batch else ""
    c = 2 if batch else 1
    out = ([batch] if batch else []) + [m, n]
    return b.emit(dtype, out, f"dot({lhs.name}, {rhs.name}), {bd}lhs_contracting_dims={{{c}}}, "
                              f"rhs_contracting_dims={{{c - 1}}}", "dot")


def convolution(b: Builder) -> Value:
    dtype = b.draw(st.sampled_from(("f32", "f32", "f64")))
    batch, width, cin, cout = (b.draw(st.sampled_from((1, 2, 3, 5))) for _ in range(4))
    size = b.draw(st.integers(1, 3))
    width = max(width, size)
    lhs, rhs = b.value(dtype, [batch, width, cin]), b.value(dtype, [size, cin, cout])
    out = [batch, width - size + 1, cout]
    return b.emit(dtype, out, f"convolution({lhs.name}, {rhs.name}), window={{size={size}}}, dim_labels=b0f_0io->b0f",
                  "convolution")


def dynamic_slice(b: Builder) -> Value:
    x = b.value()
    if not x.dims:
        return unary(b)
    sizes = [b.draw(st.integers(0, d)) for d in x.dims]
    starts = [b.constant("s32", b.draw(st.integers(-2, d + 2))) for d in x.dims]
    if b.draw(st.booleans()):  # an operand a dynamic-update-slice writes
        update = b.value(x.dtype, sizes)
        return b.emit(x.dtype, x.dims, f"dynamic-update-slice({x.name}, {update.name}, {', '.join(starts)})",
                      "dynamic-update-slice")
    return b.emit(x.dtype, sizes, f"dynamic-slice({x.name}, {', '.join(starts)}), "
                                  f"dynamic_slice_sizes={{{','.join(map(str, sizes))}}}", "dynamic-slice")


def gather_scatter(b: Builder) -> Value:
    rows, cols, k = (b.draw(st.sampled_from((1, 2, 3, 5, 8))) for _ in range(3))
    dtype = b.draw(st.sampled_from(("f32", "s32", "f64")))
    x = b.value(dtype, [rows, cols])
    indices = b.param("s32", [k, 1])
    if b.draw(st.booleans()):
        return b.emit(dtype, [k, cols], f"gather({x.name}, {indices.name}), offset_dims={{1}}, "
                                        f"collapsed_slice_dims={{0}}, start_index_map={{0}}, index_vector_dim=1, "
                                        f"slice_sizes={{1,{cols}}}", "gather")
    updates = b.value(dtype, [k, cols])
    comp = b.computation(b.draw(st.sampled_from(("add", "maximum"))), dtype)
    return b.emit(dtype, [rows, cols], f"scatter({x.name}, {indices.name}, {updates.name}), "
                                       f"update_window_dims={{1}}, inserted_window_dims={{0}}, "
                                       f"scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply={comp}",
                  "scatter")


def sort(b: Builder) -> Value:
    x = b.value(kinds=("float", "int"))
    if not x.dims:
        return unary(b)
    dim = b.draw(st.integers(0, len(x.dims) - 1))
    comp = b.computation(b.draw(st.sampled_from(("LT", "GT"))), x.dtype)
    return b.emit(x.dtype, x.dims, f"sort({x.name}), dimensions={{{dim}}}, is_stable=true, to_apply={comp}", "sort")


def while_loop(b: Builder) -> Value:
    """A loop doubling x `trips` times. Every position the state passes through (the init tuple,
    the while, the body's and condition's parameters, the body's get-tuple-element and root, the
    result's get-tuple-element) declares a layout of its own: where they differ, the value is
    forwarded with another layout than its bytes have (passes/layout_copies.py)."""
    x = b.value(kinds=("float", "int"))
    trips = b.draw(st.integers(0, 4))
    state, init_t, cond_t, param_t, x_t, y_t, out_t = (b.shape(x.dtype, x.dims) for _ in range(7))
    name = f"loop{b.count}"
    b.computations[name] = (
        f"{name}_cond {{\n  s = (s32[], {cond_t}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        f"  n = s32[] constant({trips})\n  ROOT lt = pred[] compare(i, n), direction=LT\n}}\n"
        f"{name}_body {{\n  s = (s32[], {param_t}) parameter(0)\n  i = s32[] get-tuple-element(s), index=0\n"
        f"  x = {x_t} get-tuple-element(s), index=1\n  y = {y_t} add(x, x)\n  one = s32[] constant(1)\n"
        f"  j = s32[] add(i, one)\n  ROOT r = (s32[], {state}) tuple(j, y)\n}}\n")
    zero = b.constant("s32", 0)
    init = b.emit_tuple([zero, x.name], f"(s32[], {init_t})")
    loop = b.emit_tuple_op(f"while({init}), condition={name}_cond, body={name}_body", f"(s32[], {state})", "while")
    value = Value(f"v{b.count}", x.dtype, x.dims, out_t)
    b.count += 1
    b.lines.append(f"  {value.name} = {out_t} get-tuple-element({loop}), index=1")
    b.values.append(value)
    b.ops.append("get-tuple-element")
    return value


def conditional(b: Builder) -> Value:
    """negate or square x by a pred; the branches' parameters and roots and the conditional each
    declare a layout of their own (see `while_loop`)."""
    x = b.value("f32")
    a_in, a_out, b_in, b_out, t = (b.shape("f32", x.dims) for _ in range(5))
    name = f"branch{b.count}"
    b.computations[name] = (f"{name}_a {{\n  x = {a_in} parameter(0)\n  ROOT r = {a_out} negate(x)\n}}\n"
                            f"{name}_b {{\n  x = {b_in} parameter(0)\n  ROOT r = {b_out} multiply(x, x)\n}}\n")
    p = b.param("pred", ())
    value = Value(f"v{b.count}", "f32", x.dims, t)
    b.count += 1
    b.lines.append(f"  {value.name} = {t} conditional({p.name}, {x.name}, {x.name}), true_computation={name}_a, "
                   f"false_computation={name}_b")
    b.values.append(value)
    b.ops.append("conditional")
    return value


def _emit_tuple(self: Builder, names: list[str], shape: str) -> str:
    return self.emit_tuple_op(f"tuple({', '.join(names)})", shape, "tuple")


def _emit_tuple_op(self: Builder, body: str, shape: str, op: str) -> str:
    name = f"t{self.count}"
    self.count += 1
    self.lines.append(f"  {name} = {shape} {body}")
    self.ops.append(op)
    return name


Builder.emit_tuple = _emit_tuple
Builder.emit_tuple_op = _emit_tuple_op

FAMILIES = {
    "unary": unary, "binary": binary, "compare": compare, "select": select, "convert": convert,
    "broadcast": broadcast, "reshape": reshape, "transpose": transpose, "slice": slice_, "pad": pad,
    "concatenate": concatenate, "reverse": reverse, "iota": iota, "reduce": reduce, "reduce-window": reduce_window,
    "dot": dot, "convolution": convolution, "dynamic-slice": dynamic_slice, "gather-scatter": gather_scatter,
    "sort": sort, "while": while_loop, "conditional": conditional,
}


@st.composite
def programs(draw, families: tuple[str, ...] = tuple(FAMILIES), max_ops: int = 5) -> Program:
    """A random valid module (module doc) of 1..max_ops instructions from `families`."""
    b = Builder(draw)
    for _ in range(draw(st.integers(1, max_ops))):
        FAMILIES[draw(st.sampled_from(families))](b)
    outputs = [b.values[-1]] + [v for v in b.values[:-1] if v.name.startswith("v") and draw(st.integers(0, 4)) == 0]
    if len(outputs) == 1 and draw(st.booleans()):
        root = f"  ROOT out = {b.shape(outputs[0].dtype, outputs[0].dims)} copy({outputs[0].name})"
    else:  # each element declares a layout of its own (a forwarded value, see `while_loop`)
        shapes = ", ".join(b.shape(v.dtype, v.dims) for v in outputs)
        root = f"  ROOT out = ({shapes}) tuple({', '.join(v.name for v in outputs)})"
    text = ("HloModule random\n" + "".join(b.computations.values()) + "ENTRY main {\n" + "\n".join(b.lines)
            + "\n" + root + "\n}\n")
    return Program(text, list(b.params), b.ops)


def inputs(program: Program, seed: int) -> list[np.ndarray]:
    """Arguments for `program`'s parameters: random values with special values mixed in."""
    rng = np.random.default_rng(seed)
    return [_array(rng, p.dtype, p.dims) for p in program.params]


__all__ = ["FAMILIES", "Builder", "Program", "Value", "inputs", "programs", "random_arguments"]
