"""The text dump of a buffer assignment: exact for a small module, FileCheck for a loop."""

import shutil
import subprocess

import pytest
from test_buffer_assignment import CHAIN, WHILE

import hlocc
from hlocc.runtime.buffer_assignment import assign_buffers
from hlocc.runtime.schedule import schedule_module

CHAIN_DUMP = """\
BufferAssignment for module 'chain' (schedule: post-order; heap: best-fit; alignment 64)
allocation 0: size 64, parameter 0 at {}:
 value: <0 p{}> (size=64,offset=0): f32[16] live [0, 1]
allocation 1: size 64, output {}:
 value: <4 d{}> (size=64,offset=0): f32[16] live [4, 5]
allocation 2: size 128, temp arena:
 value: <1 a{}> (size=64,offset=0): f32[16] live [1, 2]
 value: <3 c{}> (size=64,offset=0): f32[16] live [3, 4]
 value: <2 b{}> (size=64,offset=64): f32[16] live [2, 3]
total bytes: parameters 64, constants 0, outputs 64, temporaries 128
peak memory: 192 bytes (temporaries 128 + outputs 64); live temporaries need at least 128"""


def test_chain_dump_is_exact():
    module = hlocc.parse_hlo(CHAIN)
    assert assign_buffers(module, schedule_module(module, "post-order")).to_string() == CHAIN_DUMP


WHILE_CHECKS = r"""
CHECK:      BufferAssignment for module 'loop' (schedule: post-order; heap: {{.*}}; alignment 64)
CHECK-NEXT: allocation 0: size 64, parameter 0 at {}:
CHECK-NEXT:  value: <0 p{}> (size=64,offset=0): f32[16] live [0, 2]
CHECK:      allocation [[OUT:[0-9]+]]: size 64, output {}:
CHECK-NEXT:  value: <{{[0-9]+}} neg{}> (size=64,offset=0)
CHECK-NEXT:  value: <{{[0-9]+}} s{1}> (size=64,offset=0)
CHECK-NEXT:  value: <{{[0-9]+}} s{1}> (size=64,offset=0)
CHECK-NEXT:  value: <{{[0-9]+}} x2{}> (size=64,offset=0)
CHECK-NEXT:  value: <{{[0-9]+}} w{1}> (size=64,offset=0)
CHECK-NEXT: allocation [[ARENA:[0-9]+]]: size {{[0-9]+}}, temp arena:
CHECK:      value: <{{[0-9]+}} i2{}> (size=4,offset=[[I2:[0-9]+]])
CHECK:      copies:
CHECK-NEXT:  before w: {allocation {{[0-9]+}}, offset 0, size 4} -> {allocation [[ARENA]], offset [[STATE:[0-9]+]], size 4}
CHECK-NEXT:  after each iteration of w: {allocation [[ARENA]], offset [[I2]], size 4} -> {allocation [[ARENA]], offset [[STATE]], size 4}
CHECK-NEXT: total bytes: parameters 64, constants 12, outputs 64, temporaries {{[0-9]+}}
CHECK-NEXT: peak memory: {{[0-9]+}} bytes
"""


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="filecheck is not installed")
def test_while_dump_filecheck(tmp_path):
    checks = tmp_path / "while.checks"
    checks.write_text(WHILE_CHECKS)
    dump = assign_buffers(hlocc.parse_hlo(WHILE)).to_string()
    proc = subprocess.run(["filecheck", str(checks)], input=dump, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr + "\n" + dump
