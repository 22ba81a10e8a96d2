"""Symbolic dimension sizes (hlo/symbolic.py) and their text in HLO shapes and attributes."""

import pytest

from hlocc.errors import HloError, HloVerifyError
from hlocc.hlo.parser import parse_hlo, parse_shape
from hlocc.hlo.printer import print_module
from hlocc.hlo.symbolic import DimExpr, InconclusiveDimensionError, floordiv, mod, parse_dim_expr, substitute, symbol
from hlocc.hlo.verifier import verify_module

b, c, s = symbol("b"), symbol("c"), symbol("s")


def test_canonical_form_makes_equal_expressions_equal():
    assert b + c == c + b and hash(b + c) == hash(c + b)
    assert (b + c) * 2 == 2 * c + 2 * b
    assert b - b == 0 and isinstance(b - b, int)
    assert floordiv(2 * s, 2) == s
    assert mod(4 * s + 2, 2) == 0
    assert floordiv(s, 2) != s


def test_multiples_of_a_constant_divisor_leave_floordiv_and_mod():
    """`floordiv(k*q + r, k) = q + floordiv(r, k)` and `mod(k*q + r, k) = mod(r, k)`, exactly."""
    assert floordiv(2 * s + 1, 2) == s
    assert floordiv(s - 2, 2) + 1 == floordiv(s, 2)  # a pooling window count, as JAX and ATen write it
    assert floordiv(4 * s + 6, 4) == s + 1 + floordiv(2, 4)
    assert mod(2 * s + 3, 2) == 1 and mod(-s, 2) == mod(s, 2)
    assert floordiv(s + 1, 2) != floordiv(s, 2)
    for value in range(-7, 12):  # the rewritten forms agree with Python's // and % everywhere
        for expr, want in ((floordiv(-s, 2), -value // 2), (floordiv(3 * s - 4, 3), (3 * value - 4) // 3),
                           (mod(5 * s + 7, 3), (5 * value + 7) % 3), (floordiv(s - 2, 2) + 1, (value - 2) // 2 + 1)):
            assert substitute(expr, {"s": value}) == want, (expr, value)



def test_nested_divisions_by_constants_are_one_division():
    """`floordiv(floordiv(x, m) + r, n) = floordiv(x + m*r, m*n)` for m, n > 0 and any integer r,
    and `mod(mod(x, k), n) = mod(x, n)` where n divides k: a ResNet stem's conv (stride 2, pad 3)
    then max-pool (stride 2, pad 1) has the pool size PyTorch's shape environment writes."""
    conv = floordiv(s + 2 * 3 - 7, 2) + 1
    assert conv == floordiv(s + 1, 2)
    assert floordiv(conv + 2 * 1 - 3, 2) + 1 == floordiv(s + 3, 4)
    assert floordiv(floordiv(s + 1, 2) + 1, 2) == floordiv(s + 3, 4)
    assert parse_dim_expr("floordiv(floordiv(s+1,2)+1,2)") == parse_dim_expr("floordiv(s+3,4)")
    assert floordiv(floordiv(floordiv(s, 2), 3), 5) == floordiv(s, 30)
    assert floordiv(floordiv(s, 2) + b - 1, 3) == floordiv(s + 2 * b - 2, 6)
    assert mod(mod(s, 8), 2) == mod(s, 2) and mod(mod(s, 3), 2) != mod(s, 2)
    nested = [floordiv(floordiv(s + 1, 2) + 1, 2), floordiv(floordiv(s, 3) - 2, 4), floordiv(floordiv(-s, 2) + b, 3),
              floordiv(3 * floordiv(s, 2) + 1, 2), mod(mod(s + 1, 8), 4)]
    for sv in range(-9, 20):  # against Python's // and % at every value, negative ones included
        for bv in (1, 4):
            want = [((sv + 1) // 2 + 1) // 2, (sv // 3 - 2) // 4, ((-sv) // 2 + bv) // 3, (3 * (sv // 2) + 1) // 2,
                    ((sv + 1) % 8) % 4]
            assert [substitute(e, {"s": sv, "b": bv}) for e in nested] == want, (sv, bv)

@pytest.mark.parametrize("text", ["b", "b + c", "2*s", "floordiv(s, 2)", "mod(s, 3) + 1", "b^2*c - 3*b", "-b + 5"])
def test_print_parse_round_trip(text):
    value = parse_dim_expr(text)
    assert str(value) == text
    assert parse_dim_expr(str(value)) == value


def test_evaluate_and_substitute():
    assert (b * c + 3).evaluate({"b": 2, "c": 5}) == 13
    assert floordiv(s, 2).evaluate({"s": 7}) == 3
    assert substitute(b + c, {"c": 2 * b}) == 3 * b
    assert substitute(floordiv(s, 2), {"s": 9}) == 4


def test_comparisons_assume_variables_at_least_one():
    assert b >= 1 and b + 1 > b and not (b < 1)
    with pytest.raises(InconclusiveDimensionError):
        _ = b > c


def test_xla_dynamic_dims_print_as_before():
    for text in ["f32[?,128]", "s32[<=5,2]", "f32[3,?]{0,1}"]:
        assert str(parse_shape(text)) == text


def test_symbolic_shape_text():
    shape = parse_shape("f32[?b,?(b+c),?(2*s),?(floordiv(s,2)),4]")
    assert shape.dims[:4] == (b, b + c, 2 * s, floordiv(s, 2))
    assert shape.symbols == {"b", "c", "s"} and shape.is_symbolic and not shape.is_static
    assert str(shape) == "f32[?b,?(b+c),?(2*s),?(floordiv(s,2)),4]"


MODULE = """HloModule m

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}

ENTRY e {
  p0 = f32[?b,128] parameter(0)
  p1 = f32[?c,128] parameter(1)
  cat = f32[?(b+c),128] concatenate(p0, p1), dimensions={0}
  ex = f32[?(b+c),128] exponential(cat)
  z = f32[] constant(0)
  red = f32[?(b+c)] reduce(ex, z), dimensions={1}, to_apply=add
  rs = f32[?(b+c),2,64] reshape(ex)
  t = f32[128,?(b+c)] transpose(ex), dimensions={1,0}
  d = f32[?(b+c),?(b+c)] dot(ex, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  sl = f32[?(b-1),64] slice(p0), slice={[1:?(b)], [0:64]}
  pd = f32[?(b+3),128] pad(p0, z), padding=1_2x0_0
  dp = f32[?(2*b),128] pad(p0, z), padding=?(b)_0x0_0
  io = s32[?(2*b)] iota(), iota_dimension=0
  bc = f32[?b,128,3] broadcast(p0), dimensions={0,1}
  cv = f16[?b,128] convert(p0)
  cmp = pred[?b,128] compare(p0, p0), direction=LT
  sel = f32[?b,128] select(cmp, p0, p0)
  cs = f32[?b,128] reduce-window(p0, z), window={size=?(b)x1 pad=?(b-1)_0x0_0}, to_apply=add
  ROOT tu = (f32[?(b+c),128], f32[?(b+c)], f32[?(b+c),?(b+c)], f32[?(b-1),64]) tuple(ex, red, d, sl)
}
"""


def test_shape_rules_propagate_symbols_and_text_round_trips():
    module = parse_hlo(MODULE)
    verify_module(module)
    text = module.to_string()
    assert parse_hlo(text).to_string() == text
    assert "padding=?(b)_0x0_0" in text and "pad=?(b-1)_0x0_0" in text


@pytest.mark.parametrize("line, why", [
    ("ROOT bad = f32[?c,128] exponential(p0)", "not compatible"),
    ("ROOT bad = f32[?b,64] reshape(p0)", "element count"),
])
def test_shape_rules_reject_wrong_symbols(line, why):
    text = "HloModule m\n\nENTRY e {\n  p0 = f32[?b,128] parameter(0)\n  " + line + "\n}\n"
    with pytest.raises(HloVerifyError, match=why):
        verify_module(parse_hlo(text))


def test_floordiv_and_mod_terms_are_bounded_for_comparisons():
    """A floordiv/mod term is replaced by its bound in the direction its sign needs (as JAX's
    shape polymorphism does): `x[:b // 2 + 1]` and jnp.roll's `mod(-2, b)` slice decide at import."""
    b = symbol("b")
    assert b - mod(-2, b) >= 0 and b - mod(b + 3, b) >= 1
    assert floordiv(b, 2) + 1 <= b and not floordiv(b, 2) > b
    assert (b - floordiv(b, 2)).lower_bound() == 1 and (2 * b - mod(b, 3)).lower_bound() == 0
    assert (floordiv(b, 2) - b).lower_bound() is None
    with pytest.raises(InconclusiveDimensionError):
        _ = floordiv(b, 2) >= 1  # 0 at b = 1



def test_a_term_is_bounded_by_the_terms_it_divides():
    """For variables >= 1 a monomial is at least each monomial dividing it: `a*b - b` >= 0, so
    `b <= a*b` holds (JAX's min(a*b, b) for `flat[:b]`); `a*b <= b` stays open (a = 1 vs 2)."""
    a = symbol("a")
    assert (a * b - b).lower_bound() == 0 and (2 * a * b - a - b).lower_bound() == 0
    assert (a * a * b - a * b + 2).lower_bound() == 2 and (a * b + b - 2 * b + 1).lower_bound() == 1
    assert (a * b - 2 * b).lower_bound() is None and (a * a * b - a * b - b).lower_bound() is None
    assert (a * b - c).lower_bound() is None and (a * b - floordiv(b, 2)).lower_bound() == 1
    assert b <= a * b and not (a * b < b)
    with pytest.raises(InconclusiveDimensionError):
        _ = a * b <= b

def test_symbolic_int_list_attributes_print_and_parse_back():
    text = ("HloModule m\n\nENTRY e {\n  p = f32[?b,5] parameter(0)\n  i = s32[] constant(1)\n"
            "  ROOT d = f32[?b,1] dynamic-slice(p, i, i), dynamic_slice_sizes={?(b),1}\n}\n")
    module = parse_hlo(text)
    verify_module(module)
    assert "dynamic_slice_sizes={?(b),1}" in module.to_string()
    assert parse_hlo(module.to_string()).to_string() == module.to_string()


def test_division_by_a_monomial_that_divides_every_term_is_exact():
    """`floordiv(s^2, s)` is `s` (a reshape of f32[s*s, 48] into [s, s*s/s, 48] keeps its count);
    terms that the divisor does not divide keep the floordiv."""
    s, t = symbol("s"), symbol("t")
    assert floordiv(s * s, s) == s and mod(s * s, s) == 0
    assert floordiv(2 * s * s * t + 4 * s, 2 * s) == s * t + 2 and mod(2 * s * s * t + 4 * s, 2 * s) == 0
    for a, b in ((s * s + 1, s), (s, s * t), (6 * s, 4 * s)):
        q, r = floordiv(a, b), mod(a, b)
        assert isinstance(q, DimExpr) and "floordiv" in str(q) and "mod" in str(r)
        for v in (1, 2, 5):
            binding = {"s": v, "t": v + 1}
            assert q.evaluate(binding) == a.evaluate(binding) // b.evaluate(binding)


GUARDED = '''HloModule m
// guard: mod(n, 2) == 0 and n >= 2: "Expected an even size for 'n', got {0} (\\"n\\" in the spec)" % (n)
// guard: true: "never fails"

ENTRY e {
  x = f32[?n] parameter(0)
  ROOT r = f32[?n] negate(x)
}
'''


def test_guards_survive_printing_and_parsing_and_are_checked():
    """The printer wrote guards as comments the parser skipped: a printed module ran at sizes its
    guards refuse (a JAX shape assertion's b >= 1 gave an empty result at b = 0)."""
    import numpy as np

    import hlocc
    from hlocc.errors import ArgumentError

    module = parse_hlo(GUARDED)
    assert [str(g.predicate) for g in module.guards] == ["mod(n, 2) == 0 and n >= 2", "true"]
    assert print_module(module) == GUARDED
    exe = hlocc.compile(GUARDED, backend="cpu")
    assert exe(np.arange(4, dtype=np.float32)).tolist() == [0, -1, -2, -3]
    with pytest.raises(ArgumentError, match=r"^Expected an even size for 'n', got 3 \("):
        exe(np.arange(3, dtype=np.float32))


@pytest.mark.parametrize("line, message", [
    ('// guard: n >= 1 "no colon"', r"2:11: error: guard 'n >= 1 \"no colon\"': expected '<predicate>: \"<message>\"'"),
    ('// guard: n => 1: "x"', r"cannot read the comparison 'n => 1'"),
    ('// guard: n >= 1: "x" % n', r"expected '% \(<size>, ...\)' after the message, found '% n'"),
    ('// guard: n >= 1: "x', r"the message is not a JSON string"),
])
def test_a_malformed_guard_line_is_a_parse_error_at_its_place(line, message):
    with pytest.raises(HloError, match=message):
        parse_hlo(f"HloModule m\n{line}\nENTRY e {{\n  ROOT x = f32[?n] parameter(0)\n}}\n")
