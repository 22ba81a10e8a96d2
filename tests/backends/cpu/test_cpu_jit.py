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


COMPILE_FORK_COMPILE = """
import os, sys
import numpy as np
os.environ["HLOCC_CACHE_DIR"] = ""
import hlocc

def program(op):
    return hlocc.compile(f"HloModule m\\nENTRY e {{\\n  p = f32[64] parameter(0)\\n  ROOT r = f32[64] {op}(p)\\n}}", "cpu")

program("negate")  # the LLVM worker thread runs in this process now
pid = os.fork()
if pid == 0:  # the child compiles on a worker of its own
    result = program("sqrt")(np.full(64, 9.0, np.float32))
    os._exit(0 if float(result[0]) == 3.0 else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
"""


def test_a_forked_child_compiles_with_a_worker_of_its_own():
    """Kernels' LLVM stages run on a worker thread (`compile_object_later`); fork copies only the
    calling thread, so a child (a DataLoader worker, a multiprocessing pool) must start its own or
    its compiles wait forever."""
    if not hasattr(__import__("os"), "fork"):
        import pytest

        pytest.skip("no fork on this platform")
    # (without the child's own worker the child waits forever: the timeout fails the test)
    proc = subprocess.run([sys.executable, "-c", COMPILE_FORK_COMPILE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["0"], proc.stdout + proc.stderr[-2000:]


def _loops_module(count: int) -> str:
    """`count` loops of 8 trips, each summing 8 floats in order (a strict float sum: LLVM cannot
    vectorize it, its unroller unrolls it whole)."""
    body = []
    for n in range(count):
        enter = "entry" if n == 0 else f"e{n - 1}"
        body.append(f"""  br label %h{n}
h{n}:
  %i{n} = phi i64 [0, %{enter}], [%j{n}, %b{n}]
  %s{n} = phi float [0.0, %{enter}], [%t{n}, %b{n}]
  %c{n} = icmp slt i64 %i{n}, 8
  br i1 %c{n}, label %b{n}, label %e{n}
b{n}:
  %p{n} = getelementptr float, ptr %a, i64 %i{n}
  %v{n} = load float, ptr %p{n}
  %t{n} = fadd float %s{n}, %v{n}
  %j{n} = add i64 %i{n}, 1
  br label %h{n}
e{n}:
  %q{n} = getelementptr float, ptr %a, i64 {100 + n}
  store float %s{n}, ptr %q{n}""")
    return "define void @f(ptr %a) {\nentry:\n" + "\n".join(body) + "\n  ret void\n}\n"


def test_llvm_unrolls_the_loops_of_a_kernel_with_few_but_not_of_one_with_many():
    """(runtime/jit.py UNROLL_MAX_LOOPS: a symbolic kernel's 160 loops tripled its LLVM time.)"""
    from hlocc.runtime.jit import UNROLL_MAX_LOOPS, compile_object

    text = _loops_module(3)
    unrolled = compile_object(text, keep_ir=True, loops=3).optimized_ir
    kept = compile_object(text, keep_ir=True, loops=UNROLL_MAX_LOOPS + 1).optimized_ir
    assert " phi " not in unrolled and unrolled.count("fadd") >= 7  # one sum of 8: the three are equal
    assert kept.count(" phi ") >= 3 and kept.count("fadd") == 3
