"""Parser and printer: the corpora parse and round-trip; every syntax form XLA prints is read; bad
input gives an HloParseError with the place and the cause."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest

from corpus import INVALID_ALONE, JAX_DIR, XLA_DIR, corpus_files
from hlocc.errors import HloParseError
from hlocc.hlo.attributes import PadDim, SliceDim, WindowDim
from hlocc.hlo.parser import parse_hlo, parse_shape
from hlocc.hlo.printer import print_module, structural_fingerprint
from hlocc.hlo.types import UNBOUNDED

ALL_FILES = corpus_files(XLA_DIR) + corpus_files(JAX_DIR)


def roundtrip(text: str):
    module = parse_hlo(text)
    printed = print_module(module)
    again = parse_hlo(printed)
    assert structural_fingerprint(module) == structural_fingerprint(again)
    assert print_module(again) == printed  # printing is a fixed point
    return module


@pytest.mark.parametrize("path", ALL_FILES, ids=lambda p: p.name)
def test_corpus_parses_and_roundtrips(path):
    text = path.read_text()
    if path.name in INVALID_ALONE:
        with pytest.raises(HloParseError, match="calls undefined computation"):
            parse_hlo(text, path.name)
        return
    roundtrip(text)


def test_corpus_present_or_skipped():
    if not ALL_FILES:
        pytest.skip("shared/corpus is absent")
    assert len(ALL_FILES) > 200


# -- module forms --------------------------------------------------------------------------------
def test_headerless_module_without_entry_takes_last_computation():
    m = parse_hlo("add { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT c = f32[] add(a, b) }\n"
                  "fused { p = f32[4] parameter(0)\n ROOT n = f32[4] negate(p) }")
    assert m.name == "module_fused"
    assert m.entry.name == "fused"
    assert [c.name for c in m.computations] == ["add", "fused"]


def test_entry_keyword_and_percent_names_and_signature():
    m = parse_hlo("""HloModule m, is_scheduled=true, entry_computation_layout={(f32[2]{0})->f32[2]{0}}
ENTRY %main.3 (Arg_0.1: f32[2]) -> f32[2] {
  %Arg_0.1 = f32[2]{0} parameter(0)
  ROOT %neg.2 = f32[2]{0} negate(f32[2]{0} %Arg_0.1), metadata={op_name="jit(f)/neg" source_file="x.py" source_line=3}
}""")
    assert m.entry.name == "main.3"
    assert m.header_attrs["is_scheduled"] is True
    root = m.entry.root
    assert root.opcode == "negate" and root.operands[0].name == "Arg_0.1"
    assert "op_name" in str(root.attrs["metadata"])
    roundtrip(print_module(m))


def test_root_defaults_to_last_and_forward_references():
    m = parse_hlo("ENTRY e { b = f32[] add(a, a)\n a = f32[] parameter(0) }")
    assert m.entry.root.name == "a"
    assert m.entry.instructions[0].operands[0].name == "a"


def test_stack_frame_tables_and_input_output_alias_kept():
    text = """HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {0}, must-alias) }

FileNames
1 "a.py"
FunctionNames
1 "f"
FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}
StackFrames
1 {file_location_id=1 parent_frame_id=0}

ENTRY e {
  p = f32[2] parameter(0)
  q = (f32[2]) parameter(1)
  ROOT t = (f32[2], f32[2]) tuple(p, p), metadata={op_name="x" stack_frame_id=1}
}"""
    m = roundtrip(text)
    assert m.input_output_alias == [((0,), 0, (), "may-alias"), ((1,), 1, (0,), "must-alias")]
    assert m.stack_frame_tables.startswith("FileNames")
    assert "StackFrames" in print_module(m)


def test_inline_and_nested_instruction_operands():
    m = roundtrip("ENTRY e { p = f32[4] parameter(0)\n"
                  " ROOT r = f32[] reduce(p, f32[] constant(0)), dimensions={0}, "
                  "to_apply={ a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, b) } }")
    reduce = m.entry.root
    assert reduce.operands[1].opcode == "constant"
    assert reduce.to_apply.root.opcode == "add"


def test_async_wrapped_opcode_form():
    m = roundtrip('ENTRY e { p = f32[2] parameter(0)\n'
                  ' s = ((f32[2]), f32[2], s32[]) custom-call-start(p), custom_call_target="foo"\n'
                  ' ROOT d = f32[2] custom-call-done(s) }')
    start = m.entry.instructions[1]
    assert start.opcode == "async-start" and start.wrapped_opcode == "custom-call"
    assert "custom-call-start(p)" in print_module(m)


# -- shapes --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,dims,dynamic,layout", [
    ("f32[]", (), (), None),
    ("bf16[2,3]{0,1}", (2, 3), (False, False), (0, 1)),
    ("s32[<=8,?]", (8, UNBOUNDED), (True, True), None),
    ("f32[128,256]{1,0:T(8,128)}", (128, 256), (False, False), (1, 0)),
    ("u4[4]{0:E(4)}", (4,), (False,), (0,)),
])
def test_shape_forms(text, dims, dynamic, layout):
    shape = parse_shape(text)
    assert shape.dims == dims and shape.dynamic == dynamic
    assert (shape.layout.minor_to_major if shape.layout else None) == layout
    assert parse_shape(shape.to_string()).to_string() == shape.to_string()


def test_tuple_token_and_buffer_shapes():
    shape = parse_shape("(f32[2]{0}, (s32[], token[]), /*index=2*/pred[3])")
    assert shape.is_tuple and len(shape.tuple_shapes) == 3
    assert shape.tuple_shapes[1].tuple_shapes[1].is_token
    assert parse_shape("b(f32[2,4])").is_buffer


def test_a_plain_shape_text_is_parsed_once_and_shared():
    # The parser keeps one Shape per plain shape text; a layout after blanks or a comment, or a
    # tiled one, still takes the full path and gives that layout.
    m = parse_hlo("""HloModule m
ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  a = f32[2,3]{1,0} negate(p)
  b = f32[2,3] {0,1} negate(a)
  c = f32[2,3]/*x*/{0,1} negate(b)
  d = f32[2,3]{0,1:T(2,128)} negate(c)
  ROOT t = (f32[2,3]{1,0}, f32[2,3]) tuple(a, d)
}""")
    p, a, b, c, d, t = m.entry.instructions
    assert p.shape is a.shape is t.shape.tuple_shapes[0]
    assert [x.shape.layout.minor_to_major for x in (a, b, c, d)] == [(1, 0), (0, 1), (0, 1), (0, 1)]
    assert t.shape.tuple_shapes[1].layout is None


# -- attributes ----------------------------------------------------------------------------------
def test_structured_attributes_are_typed():
    m = roundtrip("""ENTRY e {
  p = f32[1,8,8,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  c = f32[1,4,4,4] convolution(p, k), window={size=3x3 stride=2x2 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f
  s = f32[1,4,4,2] slice(c), slice={[0:1], [0:4], [0:4], [0:4:2]}
  z = f32[] constant(0)
  ROOT q = f32[1,5,9,2] pad(s, z), padding=0_0x1_0x-1_2_2x0_0
}""")
    conv = m.entry.instructions[2]
    assert conv.attrs["window"][0] == WindowDim(3, 2, 1, 1, 1, 1, False)
    assert conv.attrs["dim_labels"].input_feature == 3 and conv.attrs["dim_labels"].kernel_output_feature == 3
    assert m.entry.instructions[3].attrs["slice"][3] == SliceDim(0, 4, 2)
    assert m.entry.root.attrs["padding"][2] == PadDim(-1, 2, 2)


def test_dot_gather_and_generic_attributes():
    m = roundtrip("""ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  d = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={highest,default}, backend_config={"x":{"y":"}"}}, sharding={devices=[2,1,1]<=[2]}, frontend_attributes={a="b"}
  i = s32[3,1] parameter(2)
  ROOT g = f32[3,2,4] gather(a, i), offset_dims={1,2}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={2,1,4}, indices_are_sorted=true
}""")
    dot = m.entry.instructions[2]
    assert dot.attrs["lhs_contracting_dims"] == (2,) and dot.attrs["operand_precision"] == ("highest", "default")
    assert str(dot.attrs["backend_config"]) == '{"x":{"y":"}"}}'
    assert m.entry.root.attrs["indices_are_sorted"] is True


# -- literals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("type_name,text,expected", [
    ("f32", "{1, -2.5, 1e-3, inf, -inf}", np.array([1, -2.5, 1e-3, np.inf, -np.inf], np.float32)),
    ("bf16", "{0.1, 3.5, -0}", np.array([0.1, 3.5, -0.0], ml_dtypes.bfloat16)),
    ("s8", "{-128, 127, 0}", np.array([-128, 127, 0], np.int8)),
    ("u64", "{18446744073709551615, 0, 1}", np.array([2**64 - 1, 0, 1], np.uint64)),
    ("pred", "{true, false, true}", np.array([True, False, True])),
    ("s4", "{-8, 7, 1}", np.array([-8, 7, 1], ml_dtypes.int4)),
    ("f8e4m3fn", "{448, -0.5, 0}", np.array([448, -0.5, 0], ml_dtypes.float8_e4m3fn)),
])
def test_array_literals_exact(type_name, text, expected):
    m = roundtrip(f"ENTRY e {{ ROOT c = {type_name}[{expected.size}] constant({text}) }}")
    lit = m.entry.root.literal
    assert lit.dtype == expected.dtype
    assert lit.tobytes() == expected.tobytes()


def test_nan_complex_tuple_and_elided_literals():
    m = roundtrip("""ENTRY e {
  n = f32[3] constant({nan, -nan, nan(0x7f)})
  c = c64[2] constant({(1, -2), (0.5, 0)})
  t = (s32[], f32[2]) constant((7, {1, 2}))
  z = f32[2,2] constant({...})
  ROOT r = f32[2,2] constant({{1, 2}, {3, 4}})
}""")
    n = m.entry.instructions[0].literal
    assert np.isnan(n).all() and math.copysign(1, n[1]) < 0
    assert m.entry.instructions[1].literal.tolist() == [1 - 2j, 0.5 + 0j]
    t = m.entry.instructions[2].literal
    assert int(t[0]) == 7 and t[1].tolist() == [1.0, 2.0]
    assert m.entry.instructions[3].literal.shape == (2, 2)
    assert m.entry.root.literal.tolist() == [[1, 2], [3, 4]]


def test_literals_with_xla_index_comments():
    """XLA prints literals of rank 3 and more with `/*i0=0*/` comments before each sub-array (a JAX
    convolution with a constant kernel): they are skipped; an unterminated one is an error."""
    m = roundtrip("""ENTRY e {
  ROOT k = f32[2,1,2] constant({ { /*i0=0*/ { 1, 2 } }, { /*i0=1*/ {/* i1=0 */ 3, 4 } } })
}""")
    assert m.entry.root.literal.tolist() == [[[1, 2]], [[3, 4]]]
    with pytest.raises(HloParseError, match="unterminated comment in literal"):
        parse_hlo("HloModule m\nENTRY e {\n  ROOT k = f32[1,1,2] constant({ { /*i0=0 { 1, 2 } } })\n}")


def test_float_printing_is_exact_for_every_f32():
    rng = np.random.default_rng(0)
    values = rng.standard_normal(200).astype(np.float32) * np.float32(1e3) ** rng.integers(-12, 12, 200)
    values = values.astype(np.float32)
    body = ", ".join(repr(float(v)) for v in values)
    m = parse_hlo(f"ENTRY e {{ ROOT c = f32[200] constant({{{body}}}) }}")
    again = parse_hlo(print_module(m))
    assert again.entry.root.literal.tobytes() == values.tobytes()


# -- errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,line,column,message", [
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] frobnicate(p) }", 2, 18, "unknown opcode 'frobnicate'"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] add(p) }", 2, 18, "'add' takes 2 operands, but instruction 'r' has 1"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] negate(p), colour=red }", 2, 29, "unknown attribute 'colour'"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] negate(q) }", 2, 25, "undefined operand 'q'"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[2] negate(p)", 2, 27, "expected '}' to close computation 'e', found end of input"),
    ("ENTRY e { p = f32[2 parameter(0) }", 1, 21, "expected ',' or ']' in shape dimensions"),
    ("ENTRY e { p = f33[2] parameter(0) }", 1, 15, "expected a shape"),
    ("ENTRY e { ROOT c = f32[3] constant({1, 2}) }", 1, 41, "literal has 2 elements in dimension 0"),
    ("ENTRY e { ROOT c = s8[1] constant({300}) }", 1, 36, "out of range for s8"),
    ("ENTRY e { p = f32[2]{0,1} parameter(0) }", 1, 21, "not a permutation"),
    ("ENTRY e { p = f32[2] parameter(0)\n p = f32[2] parameter(1) }", 2, 2, "defined twice"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT s = f32[1] slice(p), slice={[0:1}", 2, 39, "expected ']'"),
    ("ENTRY e { p = f32[2] parameter(0)\n ROOT r = f32[] reduce(p, p), dimensions={0}, to_apply=nowhere }", 2, 56,
     "calls undefined computation 'nowhere'"),
    ("", 1, 1, "expected a computation, found end of input"),
    ("HloModule m, colour=1\nENTRY e { ROOT p = f32[] parameter(0) }", 1, 14, "unknown module attribute 'colour'"),
])
def test_parse_errors_name_place_and_cause(text, line, column, message):
    with pytest.raises(HloParseError) as info:
        parse_hlo(text, "t.hlo")
    err = info.value
    assert message in err.reason
    assert (err.line, err.column) == (line, column), str(err)
    text_lines = str(err).split("\n")
    assert text_lines[0].startswith(f"t.hlo:{line}:{column}: error: ")
    assert text_lines[2] == " " * (column - 1) + "^"


def test_truncated_corpus_files_fail_cleanly():
    files = [p for p in ALL_FILES if p.name not in INVALID_ALONE][:40]
    if not files:
        pytest.skip("shared/corpus is absent")
    for path in files:
        text = path.read_text()
        for cut in (len(text) // 3, len(text) // 2, len(text) - 3):
            try:
                parse_hlo(text[:cut])
            except HloParseError as e:
                assert e.line >= 1 and e.column >= 1


@pytest.mark.parametrize("line", ["c = convert(p)", "c = iota(), iota_dimension=0", "c = bitcast(p)",
                                  "c = custom-call(p), custom_call_target=\"foo\""])
def test_omitted_shape_that_operands_do_not_imply_is_an_error(line):
    """Shapes may be omitted where the operands imply them; elsewhere the parser says so (a fuzzed
    module once crashed with an AttributeError here)."""
    from hlocc.errors import HloError

    text = f"HloModule m\nENTRY e {{\n  p = f32[4] parameter(0)\n  ROOT {line}\n}}"
    with pytest.raises(HloError, match=r"instruction 'c': .* needs a declared result shape"):
        parse_hlo(text)


def test_a_literal_shorter_than_its_dynamic_bound_is_a_parse_error():
    """Found by the grammar fuzzer: `s8[2,<=4] constant({{1}, {2}})` crashed with numpy's ValueError.
    A literal at the bound still parses."""
    with pytest.raises(HloParseError, match=r"1 elements in dynamic dimension 1 of s8\[2,<=4\].*bound \(4\)"):
        parse_hlo("HloModule m\nENTRY e {\n  ROOT v = s8[2,<=4] constant({{1}, {2}})\n}\n")
    module = parse_hlo("HloModule m\nENTRY e {\n  ROOT v = s8[2,<=2] constant({{1, 3}, {2, 4}})\n}\n")
    np.testing.assert_array_equal(module.entry.root.literal, [[1, 3], [2, 4]])


@pytest.mark.parametrize("shape, literal", [("pred[?]", "{...}"), ("f32[?]", "{1, 2}"), ("f32[2,?n]", "{...}")])
def test_a_constant_of_an_unbounded_or_symbolic_size_is_a_parse_error(shape, literal):
    """Found by the grammar fuzzer: `pred[?] constant({...})` made zeros of size -1 (numpy's ValueError)."""
    with pytest.raises(HloParseError, match=rf"a constant of {re.escape(shape)} has no size to hold: its "
                                            r"dimensions must be static or bounded \(<=N\)"):
        parse_hlo(f"HloModule m\nENTRY e {{\n  ROOT v = {shape} constant({literal})\n}}\n")
