"""The verifier: structural rules (entry, root, parameter numbering, operand ownership, names),
registry facts (arity, required attributes), declared-vs-inferred shapes, and the whole corpus."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hlocc
from corpus import INVALID_ALONE, JAX_DIR, KNOWN_INVALID, XLA_DIR, corpus_files
from hlocc.errors import HloVerifyError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.opcodes import infer_shape
from hlocc.hlo.parser import parse_hlo, parse_hlo_file
from hlocc.hlo.types import Shape
from hlocc.hlo.verifier import verify_computation, verify_module

CORPUS_FILES = corpus_files(XLA_DIR) + corpus_files(JAX_DIR)
UNPARSABLE = INVALID_ALONE


@pytest.mark.skipif(not CORPUS_FILES, reason="no HLO corpus at ../shared/corpus")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_module_verifies(path):
    if path.name in UNPARSABLE:
        pytest.skip("the corpus file itself is malformed (undefined computation)")
    module = parse_hlo_file(path)
    if path.name in KNOWN_INVALID:
        with pytest.raises(HloVerifyError, match=KNOWN_INVALID[path.name]):
            verify_module(module)
    else:
        verify_module(module)


def _module(body: str, prelude: str = "") -> HloModule:
    return parse_hlo(prelude + "\nENTRY main {\n" + body + "\n}\n")


def test_valid_module_verifies():
    module = _module("p = f32[4] parameter(0)\nq = f32[4] parameter(1)\nROOT r = f32[4]{0} add(p, q)")
    verify_module(module)


@pytest.mark.parametrize("body,pattern", [
    ("p = f32[4] parameter(0)\nROOT r = f32[5] add(p, p)",
     r"computation 'main': instruction 'r': declared shape f32\[5\] is not compatible with the inferred shape "
     r"f32\[4\] of add"),
    ("p = f32[4,2] parameter(0)\nROOT r = f32[2,4] transpose(p)",
     r"instruction 'r': transpose requires attribute 'dimensions'"),
    ("p = f32[4] parameter(0)\nROOT r = f32[4] map(p)", r"map requires attribute 'to_apply'"),
    ("p = f32[4] parameter(0)\nq = f32[4] parameter(2)\nROOT r = f32[4] add(p, q)",
     r"computation 'main': parameter number 1 is missing"),
    ("p = f32[4]{0} parameter(0)\nROOT r = f32[4]{0} convert(p)\n", None),
    ("p = f32[<=4] parameter(0)\nROOT r = f32[3] negate(p)", None),
    ("p = f32[4] parameter(0)\nROOT r = f32[<=3] negate(p)", r"not compatible with the inferred shape f32\[4\]"),
    ("p = f32[4] parameter(0)\nn = f32[4] negate(p)\nROOT r = f32[4] abs(p), control-predecessors={%n}", None),
    ("p = f32[4] parameter(0)\nROOT r = f32[4] abs(p), control-predecessors={%nope}",
     r"computation 'main': instruction 'r' names control predecessor 'nope', which is not an instruction of it"),
])
def test_verifier_rules(body, pattern):
    module = _module(body)
    if pattern is None:
        verify_module(module)
        return
    with pytest.raises(HloVerifyError, match=pattern):
        verify_module(module)


def test_error_names_the_called_computation():
    prelude = "bad {\n a = f32[] parameter(0)\n ROOT r = s32[] add(a, a)\n}\n"
    module = _module("p = f32[4] parameter(0)\nROOT r = f32[4] negate(p)", prelude)
    with pytest.raises(HloVerifyError, match=r"computation 'bad': instruction 'r': declared shape s32\[\]"):
        verify_module(module)


def _computation(name: str, *instrs: HloInstruction, is_entry: bool = False) -> HloComputation:
    comp = HloComputation(name, is_entry=is_entry)
    for instr in instrs:
        comp.add_instruction(instr)
    comp.root = instrs[-1] if instrs else None
    return comp


F4 = Shape.array("f32", (4,))


def test_missing_entry():
    module = HloModule("m")
    module.add_computation(_computation("c", HloInstruction("p", "parameter", F4, parameter_number=0)))
    with pytest.raises(HloVerifyError, match=r"module 'm' has no entry computation"):
        verify_module(module)


def test_missing_root():
    comp = _computation("c", HloInstruction("p", "parameter", F4, parameter_number=0))
    comp.root = None
    with pytest.raises(HloVerifyError, match=r"computation 'c' has no root instruction"):
        verify_computation(comp)


def test_root_outside_computation():
    stranger = HloInstruction("x", "parameter", F4, parameter_number=0)
    comp = _computation("c", HloInstruction("p", "parameter", F4, parameter_number=0))
    comp.root = stranger
    with pytest.raises(HloVerifyError, match=r"computation 'c': root 'x' is not an instruction of it"):
        verify_computation(comp)


def test_operand_from_another_computation():
    other = _computation("other", HloInstruction("q", "parameter", F4, parameter_number=0))
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    add = HloInstruction("sum", "add", F4, [p, other.root])
    comp = _computation("c", p, add)
    with pytest.raises(HloVerifyError, match=r"computation 'c': instruction 'sum' uses operand 'q' of another"):
        verify_computation(comp)


def test_called_computation_outside_module():
    helper = _computation("neg", HloInstruction("a", "parameter", F4, parameter_number=0))
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    call = HloInstruction("c", "call", F4, [p], {"to_apply": helper})
    module = HloModule("m")
    module.add_computation(_computation("main", p, call, is_entry=True))
    with pytest.raises(HloVerifyError, match=r"calls computation 'neg', which is not in module 'm'"):
        verify_module(module)


def test_arity_from_registry():
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    comp = _computation("c", p, HloInstruction("r", "add", F4, [p, p, p]))
    with pytest.raises(HloVerifyError, match=r"computation 'c': instruction 'r': add takes 2 operands, got 3"):
        verify_computation(comp)


def test_duplicate_parameter_number():
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    q = HloInstruction("q", "parameter", F4, parameter_number=0)
    comp = _computation("c", p, q, HloInstruction("r", "add", F4, [p, q]))
    with pytest.raises(HloVerifyError, match=r"computation 'c': parameter number 0 is duplicated"):
        verify_computation(comp)


def test_duplicate_instruction_name():
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    comp = _computation("c", p, HloInstruction("p", "negate", F4, [p]))
    with pytest.raises(HloVerifyError, match=r"computation 'c': instruction name 'p' is used twice"):
        verify_computation(comp)


@pytest.mark.parametrize(("body", "pattern"), [
    ("a = f32[2] parameter(0)\n b = f32[2] add(a, b)\n ROOT r = f32[2] negate(b)",
     r"computation 'e': instruction 'b' depends on itself \('b' -> 'b'\)"),
    ("a = f32[2] parameter(0)\n b = f32[2] add(a, c)\n c = f32[2] add(a, b)\n ROOT r = f32[2] add(b, c)",
     r"instruction 'b' depends on itself \('b' -> 'c' -> 'b'\)"),
    ("a = f32[2] parameter(0)\n b = f32[2] negate(a), control-predecessors={c}\n c = f32[2] abs(b)\n"
     " ROOT r = f32[2] add(b, c)", r"instruction 'b' depends on itself \('b' -> 'c' -> 'b'\)"),
], ids=["self", "two", "control"])
def test_a_cycle_is_a_verify_error_on_every_backend(body, pattern):
    """Operands may name later instructions in HLO text, so a cycle parses; every backend refuses it
    by name (it crashed the compiler's post-order walks with an AssertionError or RecursionError)."""
    text = f"HloModule m\nENTRY e {{\n {body}\n}}\n"
    for backend in ("cpu", "interpreter"):
        with pytest.raises(HloVerifyError, match=pattern):
            hlocc.compile(text, backend)


def test_a_recursive_call_is_a_verify_error():
    text = ("HloModule m\nf {\n a = f32[2] parameter(0)\n ROOT r = f32[2] call(a), to_apply=g\n}\n"
            "g {\n a = f32[2] parameter(0)\n ROOT r = f32[2] call(a), to_apply=f\n}\n"
            "ENTRY e {\n a = f32[2] parameter(0)\n ROOT r = f32[2] call(a), to_apply=f\n}\n")
    with pytest.raises(HloVerifyError, match=r"module 'm': computation '(f|g)' calls itself \('(f|g)' -> '(f|g)' -> '(f|g)'\)"):
        hlocc.compile(text, "interpreter")


def test_unknown_opcode():
    p = HloInstruction("p", "parameter", F4, parameter_number=0)
    comp = _computation("c", p, HloInstruction("z", "frobnicate", F4, [p]))
    with pytest.raises(HloVerifyError, match=r"instruction 'z': unknown opcode 'frobnicate'"):
        verify_computation(comp)


# -- inferred shapes agree with the evaluator ---------------------------------------------------------
_REDUCER = "add {\n a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT r = f32[] add(a, b)\n}\n"


def _shape_text(dims) -> str:
    return "f32[" + ",".join(map(str, dims)) + "]"


@st.composite
def _cases(draw):
    """An HLO body with one parameter of random dims, whose root op is chosen at random; the root's
    declared shape is a placeholder (f32[]) so only the rule decides the result."""
    dims = draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    rank = len(dims)
    src = _shape_text(dims)
    head = f"p = {src} parameter(0)\n"
    kind = draw(st.sampled_from(["elementwise", "broadcast", "transpose", "slice", "pad", "concatenate",
                                 "reduce", "dot"]))
    if kind == "elementwise":
        op = draw(st.sampled_from(["add", "multiply", "maximum", "compare"]))
        attrs = ", direction=LT" if op == "compare" else ""
        return head + f"ROOT r = f32[] {op}(p, p){attrs}", [dims]
    if kind == "broadcast":
        extra = draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))
        out = extra + dims
        dims_attr = ",".join(str(len(extra) + i) for i in range(rank))
        return head + f"ROOT r = {_shape_text(out)} broadcast(p), dimensions={{{dims_attr}}}", [dims]
    if kind == "transpose":
        perm = draw(st.permutations(range(rank)))
        return head + f"ROOT r = f32[] transpose(p), dimensions={{{','.join(map(str, perm))}}}", [dims]
    if kind == "slice":
        parts = []
        for d in dims:
            start = draw(st.integers(0, d))
            limit = draw(st.integers(start, d))
            parts.append(f"[{start}:{limit}:{draw(st.integers(1, 3))}]")
        return head + f"ROOT r = f32[] slice(p), slice={{{', '.join(parts)}}}", [dims]
    if kind == "pad":
        pads = "x".join(f"{draw(st.integers(-1, 2))}_{draw(st.integers(0, 2))}_{draw(st.integers(0, 2))}"
                        for _ in dims)
        return head + f"z = f32[] constant(0)\nROOT r = f32[] pad(p, z), padding={pads}", [dims]
    if kind == "concatenate":
        axis = draw(st.integers(0, rank - 1))
        other = list(dims)
        other[axis] = draw(st.integers(1, 4))
        body = head + f"q = {_shape_text(other)} parameter(1)\nROOT r = f32[] concatenate(p, q), dimensions={{{axis}}}"
        return body, [dims, other]
    if kind == "reduce":
        reduced = sorted(draw(st.sets(st.integers(0, rank - 1))))
        return head + (f"z = f32[] constant(0)\nROOT r = f32[] reduce(p, z), dimensions={{{','.join(map(str, reduced))}}},"
                       " to_apply=add"), [dims]
    k = draw(st.integers(1, 4))
    n = draw(st.integers(1, 4))
    body = (f"p = f32[{dims[0]},{k}] parameter(0)\nq = f32[{k},{n}] parameter(1)\n"
            "ROOT r = f32[] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    return body, [[dims[0], k], [k, n]]


@settings(max_examples=60, deadline=None)
@given(_cases())
def test_inferred_shape_matches_evaluation(case):
    from hlocc.evaluator import evaluate

    body, arg_dims = case
    module = _module(body, _REDUCER)
    inferred = infer_shape(module.entry.root)
    module.entry.root.shape = inferred  # the evaluator may read the declared shape
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(d).astype(np.float32) for d in arg_dims]
    result = np.asarray(evaluate(module, args))
    assert result.shape == inferred.dims
    assert result.dtype == inferred.element_type.dtype


def test_a_fusion_kind_outside_xlas_four_is_a_verify_error():
    text = ("HloModule m\nfc {\n a = f32[2] parameter(0)\n ROOT n = f32[2] negate(a)\n}\n"
            "ENTRY e {\n x = f32[2] parameter(0)\n ROOT f = f32[2] fusion(x), kind=kBogus, calls=fc\n}\n")
    with pytest.raises(HloVerifyError, match=r"instruction 'f': fusion kind 'kBogus' is not one of kLoop, kInput"):
        hlocc.compile(text, "interpreter")


def test_an_error_about_parsed_text_says_where_the_instruction_is():
    text = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[5] negate(p)\n}\n"
    with pytest.raises(HloVerifyError) as error:
        verify_module(parse_hlo(text, filename="model.hlo"))
    assert str(error.value) == ("model.hlo:4:8: error: computation 'e': instruction 'n': declared shape f32[5] is "
                                "not compatible with the inferred shape f32[4] of negate\n"
                                "  ROOT n = f32[5] negate(p)\n       ^")
