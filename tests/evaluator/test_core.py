"""The evaluator's driver: results too large for the machine fail with a clear error, values die
after their last use, and sub-computations reuse their cached schedule."""

from __future__ import annotations

import numpy as np
import pytest

from hlocc.evaluator import EvaluationError, Evaluator
from hlocc.hlo.parser import parse_hlo


def test_result_over_the_memory_limit_is_a_clear_error():
    module = parse_hlo("ENTRY e { c = f32[] constant(1)\n ROOT b = f32[65536,65536,64] broadcast(c), dimensions={} }")
    with pytest.raises(EvaluationError, match=r"'b' \(broadcast\) needs 1024.0 GiB for its result, over the "
                                              r"evaluator's memory limit of 1.0 GiB"):
        Evaluator(max_result_bytes=1 << 30).run(module, [])


def test_values_are_freed_after_their_last_use():
    module = parse_hlo("""ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  b = f32[4] exponential(a)
  c = f32[4] add(a, b)
  ROOT d = f32[4] add(c, p)
}""")
    ev = Evaluator()
    schedule = ev._schedule(module.entry)
    dies = {instr.name: sorted(module.entry.instructions[[id(i) for i in module.entry.instructions].index(k)].name
                               for k in dead) for instr, dead in schedule}
    assert dies == {"a": [], "b": [], "c": ["a", "b"], "d": ["c", "p"]}
    x = np.array([0, 1, 2, 3], np.float32)
    np.testing.assert_allclose(ev.run(module, [x]), -x + np.exp(-x) + x, rtol=1e-6)


ALIASING_RESULTS = """
negated { t = f32[6] parameter(0)
  ROOT r = f32[6] negate(t) }
passed { q = f32[6] parameter(0)
  ROOT r = f32[6] bitcast(q) }
ENTRY e {
  p = f32[6] parameter(0)
  k = pred[] parameter(1)
  r = f32[2,3] reshape(p)
  s = f32[3] slice(p), slice={[1:4]}
  t = f32[3,2] transpose(r), dimensions={1,0}
  b = s32[6] bitcast-convert(p)
  c = f32[6] conditional(k, p, p), true_computation=passed, false_computation=negated
  n = f32[6] negate(p)
  m = f32[3] slice(n), slice={[0:3]}
  ROOT o = (f32[6], f32[2,3], f32[3], f32[3,2], s32[6], f32[6], f32[6], f32[3]) tuple(p, r, s, t, b, c, n, m)
}"""


def test_results_do_not_share_memory_with_arguments():
    """The caller may overwrite its inputs after the call (as with the compiled backends and XLA):
    a parameter passed through, reshaped, sliced, transposed, bitcast or returned by a conditional
    branch comes back as a copy; a result computed by the module (`n`, and `m`, a view of it) is
    returned as it is."""
    import hlocc

    inp = np.arange(6, dtype=np.float32)
    out = hlocc.compile(ALIASING_RESULTS, backend="interpreter")(inp, np.array(True))
    expected = [np.array(o, copy=True) for o in out]
    inp[:] = -1
    for got, want in zip(out, expected):
        np.testing.assert_array_equal(got, want)
    assert out[7].base is out[6]  # not copied: it shares memory with no argument


def test_results_do_not_share_memory_with_constants():
    """Writing to a result that is a module constant must not change the next call's result."""
    module = parse_hlo("ENTRY e { ROOT c = f32[3] constant({1, 2, 3}) }")
    Evaluator().run(module, [])[:] = 7
    np.testing.assert_array_equal(Evaluator().run(module, []), [1, 2, 3])
