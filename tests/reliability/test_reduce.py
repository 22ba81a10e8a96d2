"""`hlocc reduce` (tools/reduce.py): a failing module shrinks to a minimal one that fails the same
way; a module that does not fail is an error. The planted failure is a fixed bug brought back: with
the `layout-copies` pass switched off (fixture `forwarded_layout_bug`), a value forwarded through a
tuple whose element declares another layout is read permuted (test_found_bugs.py's
forwarded_value_read_with_another_layout), here buried in unrelated work."""

from __future__ import annotations

import pytest

from hlocc.cli import main
from hlocc.compiler import clear_compile_cache
from hlocc.errors import HloError
from hlocc.hlo.parser import parse_hlo
from hlocc.passes.layout_copies import LayoutCopies
from hlocc.tools.reduce import candidates, reduce_module

NOISY = """HloModule noisy
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] add(a, b)
}
ENTRY main {
  p0 = f32[4,6]{1,0} parameter(0)
  p1 = f32[4,6]{1,0} parameter(1)
  p2 = s32[5] parameter(2)
  e = f32[4,6]{1,0} exponential(p0)
  s = f32[4,6]{1,0} add(e, p1)
  n = f32[4,6]{0,1} negate(s)
  t = (f32[4,6]{1,0}) tuple(n)
  g = f32[4,6]{1,0} get-tuple-element(t), index=0
  x = f32[4,6]{1,0} exponential(g)
  z = f32[] constant(0)
  r = f32[4] reduce(p1, z), dimensions={1}, to_apply=add
  i = s32[5] multiply(p2, p2)
  ROOT out = (f32[4]{0}, f32[4,6]{1,0}, s32[5]{0}) tuple(r, x, i)
}
"""

FINE = """HloModule fine
ENTRY main {
  p0 = f32[4] parameter(0)
  ROOT n = f32[4] negate(p0)
}
"""


@pytest.fixture
def forwarded_layout_bug(monkeypatch, tmp_path):
    """The compiler without `layout-copies`; compiled programs are forgotten before and after, and
    the persistent cache is a fresh directory, so none compiled with the bug outlives the test (nor
    one compiled without it, in memory or on disk, serves it)."""
    monkeypatch.setattr(LayoutCopies, "run", lambda self, module: False)
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path / "cache"))
    clear_compile_cache()
    yield
    clear_compile_cache()


def test_reduce_shrinks_the_planted_failure(forwarded_layout_bug):
    reduced, outcome = reduce_module(NOISY, "cpu")
    assert outcome.kind == "mismatch"
    entry = parse_hlo(reduced).entry
    # All that is left: a value forwarded through a tuple whose element declares another layout,
    # read back by a kernel (the planted bug).
    assert sorted(i.opcode for i in entry.instructions) == ["exponential", "get-tuple-element", "parameter",
                                                             "tuple"], reduced
    (param,) = entry.parameters
    assert not param.shape.same_layout(entry.root.operands[0].shape)


def test_candidates_are_valid_smaller_modules():
    for text in candidates(NOISY):
        parse_hlo(text)
        assert len(text) < len(NOISY) + 200


def test_a_module_that_does_not_fail_is_an_error(tmp_path, capsys):
    with pytest.raises(HloError, match="does not fail on backend 'cpu'"):
        reduce_module(FINE, "cpu")
    path = tmp_path / "fine.hlo"
    path.write_text(FINE)
    assert main(["reduce", str(path), "--backend", "cpu"]) == 1
    assert "nothing to reduce" in capsys.readouterr().err


def test_cli_writes_the_reduced_module(tmp_path, capsys, forwarded_layout_bug):
    path, out = tmp_path / "noisy.hlo", tmp_path / "reduced.hlo"
    path.write_text(NOISY)
    assert main(["reduce", str(path), "--backend", "cpu", "-o", str(out)]) == 0
    assert "cpu: mismatch" in capsys.readouterr().err
    assert len(parse_hlo(out.read_text()).entry.instructions) == 4


def test_the_planted_failure_is_fixed():
    """With `layout-copies` on, the module the reducer shrinks does not fail (so the tests above
    stand for a real, fixed bug)."""
    with pytest.raises(HloError, match="does not fail on backend 'cpu'"):
        reduce_module(NOISY, "cpu")
