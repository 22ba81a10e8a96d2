"""The rule machinery and the facts the rules rest on: pattern matching, splat values (±0.0
distinct), the exact-conversion table, the rule tables' integrity, and the driver's refusal of
replacements with another shape or layout."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlocc
from hlocc.hlo.types import PRIMITIVE_TYPES
from hlocc.passes.algsimp import ALGSIMP_RULES, simplify_computation
from hlocc.passes.algsimp_rules_arith import converts_exactly
from hlocc.passes.pattern import Match, Rule, RuleTable, is_neg_zero, is_pos_zero, op, splat, splat_value, var

TEXT = """
HloModule m
ENTRY main {
  x = f32[4] parameter(0)
  nz = f32[] constant(-0)
  bnz = f32[4] broadcast(nz), dimensions={}
  mixed = f32[4] constant({1, 1, 1, 2})
  ones = f32[4] constant({1, 1, 1, 1})
  a = f32[4] add(bnz, x)
  ROOT m = f32[4] multiply(a, a)
}
"""


def instructions():
    module = hlocc.parse_hlo(TEXT)
    return module, {i.name: i for i in module.entry.instructions}


def test_splat_values_distinguish_the_sign_of_zero():
    _, byname = instructions()
    value = splat_value(byname["bnz"])
    et = byname["bnz"].shape.element_type
    assert is_neg_zero(value, et) and not is_pos_zero(value, et)
    assert splat_value(byname["ones"]) == 1
    assert splat_value(byname["mixed"]) is None
    assert splat_value(byname["x"]) is None


def test_commutative_patterns_match_either_order_and_bind_consistently():
    _, byname = instructions()
    pattern = op("add", var("x"), splat(is_neg_zero))
    bound = {}
    assert pattern.match(byname["a"], bound) and bound["x"] is byname["x"]
    square = op("multiply", var("y"), var("y"))
    assert square.match(byname["m"], {})
    assert not op("multiply", var("y"), var("y")).match(byname["a"], {})


def test_rule_names_are_unique_and_every_rule_names_its_rewrite():
    names = [r.name for r in ALGSIMP_RULES.rules]
    assert len(names) == len(set(names))
    assert all("→" in n for n in names)
    with pytest.raises(ValueError, match="used twice"):
        RuleTable((Rule("r", op("add"), lambda m: None), Rule("r", op("add"), lambda m: None)))


def test_a_replacement_of_another_shape_is_refused_and_its_instructions_removed():
    module, byname = instructions()

    def wrong_shape(m: Match):
        return m.add("reshape", [m.root], shape=hlocc.Shape.array("f32", (2, 2)))

    table = RuleTable((Rule("negate(x) → something else", op("negate"), wrong_shape),))
    neg = module.entry.add("negate", [byname["x"]])
    module.entry.root = neg
    before = len(module.entry.instructions)
    assert not simplify_computation(module.entry, table)
    assert len(module.entry.instructions) == before


def test_a_replacement_with_another_layout_is_refused():
    module = hlocc.parse_hlo("""
    HloModule m
    ENTRY main {
      x = f32[2,3]{0,1} parameter(0)
      ROOT c = f32[2,3]{1,0} copy(x)
    }
    """)
    assert not simplify_computation(module.entry, ALGSIMP_RULES)
    assert module.entry.root.opcode == "copy"


def _all_values(name: str) -> np.ndarray | None:
    """Every value of a small type (all bit patterns), or None for wide types."""
    t = PRIMITIVE_TYPES[name]
    if t.dtype is None or t.is_complex or t.bits > 16 or t.bits < 8:
        return None
    bits = np.arange(1 << t.bits, dtype=np.uint16 if t.bits == 16 else np.uint8)
    return bits.view(t.dtype) if not t.is_pred else np.array([False, True])


EXHAUSTIVE = [n for n in PRIMITIVE_TYPES if _all_values(n) is not None]


@pytest.mark.parametrize("src", EXHAUSTIVE)
def test_exact_conversions_keep_every_value(src):
    """Where converts_exactly says so, every value of `src` survives a round trip through the
    destination type (checked exhaustively over all bit patterns of the 8- and 16-bit types)."""
    from hlocc.evaluator.numerics import convert

    s = PRIMITIVE_TYPES[src]
    values = _all_values(src)
    for d in PRIMITIVE_TYPES.values():
        if d.dtype is None or not converts_exactly(s, d):
            continue
        with np.errstate(invalid="ignore"):
            back = convert(convert(values, s, d), d, s)
            a, b = values.astype(np.float64), back.astype(np.float64)
        if s.is_float:
            assert np.array_equal(a, b, equal_nan=True), d.name
            assert np.array_equal(np.signbit(a), np.signbit(b)), d.name
        else:
            assert np.array_equal(values, back), d.name


def test_narrowing_conversions_are_not_exact():
    t = PRIMITIVE_TYPES
    for src, dst in [("f32", "bf16"), ("f32", "f16"), ("f64", "f32"), ("s32", "f32"), ("s32", "s16"),
                     ("u32", "s32"), ("s8", "u8"), ("f32", "s32"), ("c128", "c64"), ("f8e5m2", "f8e4m3fn")]:
        assert not converts_exactly(t[src], t[dst]), (src, dst)
    for src, dst in [("f16", "f32"), ("bf16", "f64"), ("s16", "f32"), ("u8", "s16"), ("pred", "bf16"),
                     ("s32", "f64"), ("f32", "c64"), ("f8e4m3fn", "f32")]:
        assert converts_exactly(t[src], t[dst]), (src, dst)


def test_ml_dtypes_agree_on_the_float_widths():
    for name, mantissa in (("f16", 10), ("bf16", 7), ("f32", 23), ("f64", 52)):
        assert ml_dtypes.finfo(PRIMITIVE_TYPES[name].dtype).nmant == mantissa
