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
