"""Grammar-aware generation of HLO text for the parser and verifier fuzzer: a hypothesis strategy
that writes modules which read as HLO (every instruction `name = shape opcode(operands), attrs`)
but whose content is random: any opcode of the registry with any operand count, declared shapes
of any type, rank, dynamic bound and layout (or none, to be inferred), the opcode's required
attributes and others, each value of its syntactic kind (attribute_syntax.ATTRIBUTE_KINDS) with
small, zero, negative and huge numbers, computations called with any signature. Parsing and
verifying one must give a module or an HloError, nothing else."""

from __future__ import annotations

from hypothesis import strategies as st

from hlocc.hlo.attribute_syntax import ATTRIBUTE_KINDS
from hlocc.hlo.opcodes import OPCODES

TYPES = ("pred", "s8", "s32", "s64", "u8", "u32", "f16", "bf16", "f32", "f64", "c64", "f8e4m3fn", "s4")
NUMBERS = st.one_of(st.integers(-2, 5), st.sampled_from([-1, 0, 2**31, 2**63, 10**30]))
ENUMS = ("EQ", "NE", "LT", "GT", "LE", "GE", "FLOAT", "TOTALORDER", "SIGNED", "UNSIGNED", "kLoop", "kInput",
         "kOutput", "kCustom", "rng_uniform", "rng_normal", "rng_default", "rng_philox", "FFT", "IFFT", "RFFT",
         "IRFFT", "NO_TRANSPOSE", "TRANSPOSE", "ADJOINT", "API_VERSION_ORIGINAL", "bogus")
COMPUTATIONS = ("add2", "pred2", "pred4", "one", "none", "tuple1")
HELPERS = """add2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
pred2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = pred[] compare(a, b), direction=LT
}
pred4 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT r = pred[] compare(a, b), direction=GT
}
one {
  a = f32[2] parameter(0)
  ROOT r = f32[2] negate(a)
}
none {
  ROOT r = pred[] constant(true)
}
tuple1 {
  a = (s32[], f32[2]) parameter(0)
  ROOT r = (s32[], f32[2]) copy(a)
}
"""


@st.composite
def shapes(draw, depth: int = 0) -> str:
    kind = draw(st.integers(0, 9))
    if kind == 0 and depth < 2:
        return "(" + ", ".join(draw(st.lists(shapes(depth + 1), max_size=3))) + ")"
    if kind == 1:
        return "token[]"
    rank = draw(st.integers(0, 4))
    dims = [draw(st.sampled_from(["0", "1", "2", "3", "5", "<=4", "?", "-1", "2147483648"])) for _ in range(rank)]
    text = f"{draw(st.sampled_from(TYPES))}[{','.join(dims)}]"
    if rank and draw(st.booleans()):
        layout = draw(st.permutations(range(rank)))
        if draw(st.integers(0, 5)) == 0:
            layout = layout[:-1] + [rank + 1]
        text += "{" + ",".join(map(str, layout)) + "}"
    return text


def _ints(draw) -> str:
    return "{" + ",".join(str(draw(NUMBERS)) for _ in range(draw(st.integers(0, 4)))) + "}"


def attribute_value(draw, kind: str) -> str:
    """A value of attribute syntax `kind` (attribute_syntax.py module doc)."""
    n = lambda: draw(NUMBERS)  # noqa: E731
    if kind == "ints":
        return _ints(draw)
    if kind == "int":
        return str(n())
    if kind == "bool":
        return draw(st.sampled_from(["true", "false"]))
    if kind == "float":
        return draw(st.sampled_from(["0.001", "1e-5", "0", "-1", "1e999"]))
    if kind == "slice":
        return "{" + ",".join(f"[{n()}:{n()}:{n()}]" for _ in range(draw(st.integers(0, 3)))) + "}"
    if kind == "padding":
        return "x".join(f"{n()}_{n()}_{abs(n())}" for _ in range(draw(st.integers(1, 3))))
    if kind == "window":
        rank = draw(st.integers(0, 3))
        fields = [f"{name}={'x'.join(str(abs(n())) for _ in range(rank))}" for name in
                  draw(st.lists(st.sampled_from(["size", "stride", "lhs_dilate", "rhs_dilate"]), max_size=3,
                                unique=True))]
        if draw(st.booleans()):
            fields.append("pad=" + "x".join(f"{n()}_{n()}" for _ in range(rank)))
        return "{" + " ".join(fields) + "}"
    if kind == "dim_labels":
        return draw(st.sampled_from(["b01f_01io->b01f", "bf01_oi01->bf01", "b0f_0io->b0f", "bf_io->bf",
                                     "b01f_01io->bf01", "b0f_01io->b0f", "bb_ii->bf"]))
    if kind == "enum":
        return draw(st.sampled_from(ENUMS))
    if kind == "enums":
        return "{" + ",".join(draw(st.lists(st.sampled_from(["default", "high", "highest"]), max_size=3))) + "}"
    if kind == "string":
        return draw(st.sampled_from(['"TopK"', '"Sharding"', '"foo"', '""']))
    if kind == "computation":
        return draw(st.sampled_from(COMPUTATIONS))
    if kind == "computations":
        return "{" + ",".join(draw(st.lists(st.sampled_from(COMPUTATIONS), max_size=3))) + "}"
    if kind in ("shape",):
        return draw(shapes())
    if kind == "shapes":
        return "{" + ",".join(draw(st.lists(shapes(), max_size=2))) + "}"
    return "{}"  # raw


@st.composite
def instruction(draw, name: str, earlier: list[str]) -> str:
    opcode = draw(st.sampled_from(sorted(OPCODES)))
    info = OPCODES[opcode]
    count = info.arity if info.arity is not None and draw(st.integers(0, 9)) else draw(st.integers(0, 4))
    operands = [draw(st.sampled_from(earlier)) for _ in range(count)] if earlier else []
    names = set(info.required_attrs) if draw(st.integers(0, 5)) else set()
    names |= set(draw(st.lists(st.sampled_from(sorted(ATTRIBUTE_KINDS)), max_size=2)))
    attrs = "".join(f", {a}={attribute_value(draw, ATTRIBUTE_KINDS[a])}" for a in sorted(names))
    shape = draw(shapes()) + " " if draw(st.integers(0, 7)) else ""
    if opcode == "parameter":
        body = str(draw(st.integers(0, 3)))
    elif opcode == "constant":
        body = draw(st.sampled_from(["0", "1.5", "{1, 2}", "{{1}, {2}}", "(1, 2)", "nan", "true", "{...}", "{}"]))
    else:
        body = ", ".join(operands)
    return f"  {name} = {shape}{opcode}({body}){attrs}"


@st.composite
def hlo_texts(draw) -> str:
    """One module (module doc): 1-3 parameters, then 1-6 random instructions, the last the root."""
    lines, names = [], []
    for i in range(draw(st.integers(1, 3))):
        lines.append(f"  p{i} = {draw(shapes())} parameter({i})")
        names.append(f"p{i}")
    for i in range(draw(st.integers(1, 6))):
        lines.append(draw(instruction(f"v{i}", names)))
        names.append(f"v{i}")
    lines[-1] = "  ROOT " + lines[-1].lstrip()
    return "HloModule fuzz\n" + HELPERS + "ENTRY e {\n" + "\n".join(lines) + "\n}\n"


__all__ = ["HELPERS", "attribute_value", "hlo_texts", "instruction", "shapes"]
