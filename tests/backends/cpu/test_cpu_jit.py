"""The host JIT's lifetime rules (runtime/jit.py), checked in a child process because breaking
them kills the process."""

from __future__ import annotations

import subprocess
import sys

FREE_THEN_COMPILE = """
import gc
import numpy as np
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.hlo.parser import parse_hlo

def kernel(op):
    m = parse_hlo(f"HloModule m\\nENTRY e {{\\n  p = f32[64] parameter(0)\\n  ROOT r = f32[64] {op}(p)\\n}}")
    return compile_fusion(m.entry, use_cache=False)

first = kernel("negate")
del first
gc.collect()
second, third = kernel("abs"), kernel("sqrt")
print(third(np.full(64, 4.0, np.float32))[0][:2], second(np.full(64, -1.0, np.float32))[0][:2])
"""


def test_freeing_a_kernel_leaves_the_next_compilations_alone():
    """An MCJIT engine owns its target machine: a machine shared by engines was freed with the first
    one, and the next compilation crashed (std::bad_alloc or a segfault)."""
    proc = subprocess.run([sys.executable, "-c", FREE_THEN_COMPILE], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["[2.", "2.]", "[1.", "1.]"]
