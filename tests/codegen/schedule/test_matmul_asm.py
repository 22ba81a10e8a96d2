"""The assembly of the packed micro-kernel (issue 17 step 3): its inner loop is the register block
the schedule asked for, on zmm registers, with no spill.

The kernel's optimised LLVM IR (as the CPU backend compiles it) is emitted as assembly for a fixed
AVX-512 CPU (znver4), so the check does not depend on the host. The inner loop of a 6 x 64 block
is 4 loads of the B micro-panel, 6 broadcasts of A and 24 `vfmadd231ps` on zmm accumulators; a
spill would show as an access to a stack slot, `N(%rsp)` (the packed panels are on the stack too,
but are addressed through an index register: `N(%rsp,%reg)`).
"""

import shutil
import subprocess

import llvmlite.binding as llvm
import pytest

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.schedule import MatmulSchedule, use_schedule
from hlocc.hlo.parser import parse_hlo

DOT = """HloModule m
ENTRY fused {
  a = f32[30,96] parameter(0)
  b = f32[96,128] parameter(1)
  ROOT d = f32[30,128] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, backend_config={"__hlocc_gemm":{}}
}"""

# The loop whose body holds the FMAs: its label, 24 FMAs on zmm registers and no stack access in
# slot in between, then the branch back to its own label.
INNER_LOOP_CHECKS = """
CHECK:         .LBB[[LOOP:[0-9_]+]]:
CHECK-NOT:     (%rsp)
CHECK-COUNT-24: vfmadd231ps %zmm{{[0-9]+}}, %zmm{{[0-9]+}}, %zmm{{[0-9]+}}
CHECK-NOT:     (%rsp)
CHECK:         j{{ne|b|l}} .LBB[[LOOP]]
"""


def _assembly(schedule: MatmulSchedule, tmp_path, text: str = DOT) -> str:
    with use_schedule(schedule):
        compile_fusion(parse_hlo(text).entry, options=PipelineOptions(False, str(tmp_path), "mm", lambda s: None),
                       use_cache=False)
    (ir_file,) = tmp_path.glob("*llvm-opt.ll")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    tm = target.create_target_machine(cpu="znver4", opt=3)
    return tm.emit_assembly(llvm.parse_assembly(ir_file.read_text()))


def _inner_loop(asm: str, instruction: str = "vfmadd231ps") -> list[str]:
    """The lines of the basic block (label to jump) that holds the most `instruction`s."""
    blocks, current = [], []
    for line in asm.splitlines():
        if line.startswith(".LBB") and line.rstrip().endswith(":"):
            blocks.append(current)
            current = [line]
        elif not line.lstrip().startswith(("#", ".p2align")):
            current.append(line.strip())
            if line.strip().startswith("j"):
                blocks.append(current)
                current = []
    blocks.append(current)
    return max(blocks, key=lambda b: sum(instruction in x for x in b))


def test_inner_loop_is_the_register_block_without_spills(tmp_path):
    schedule = MatmulSchedule(mc=30, nc=128, kc=96, mr=6, nr=64, pack=(0, 1), hoist_address=True, parallel=True)
    loop = _inner_loop(_assembly(schedule, tmp_path))
    fmas = [x for x in loop if x.startswith("vfmadd231ps")]
    assert len(fmas) == 24 and all(x.count("%zmm") == 3 for x in fmas), "\n".join(loop)
    assert len({x.split()[-1] for x in fmas}) == 24, "24 distinct accumulators:\n" + "\n".join(loop)
    assert sum(x.startswith("vbroadcastss") for x in loop) == 6, "\n".join(loop)
    assert not [x for x in loop if "(%rsp)" in x], "spill in the inner loop:\n" + "\n".join(loop)
    if shutil.which("filecheck") is not None:
        checks = tmp_path / "loop.checks"
        checks.write_text(INNER_LOOP_CHECKS)
        proc = subprocess.run(["filecheck", str(checks)], input="\n".join(loop), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr + "\n" + "\n".join(loop)


@pytest.mark.parametrize("mr,nr,fmas", [(12, 32, 24), (8, 48, 24)])
def test_other_register_blocks_keep_their_accumulators_in_registers(tmp_path, mr, nr, fmas):
    schedule = MatmulSchedule(mc=mr * (30 // mr) or mr, nc=128 // nr * nr or nr, kc=96, mr=mr, nr=nr, pack=(0, 1))
    loop = _inner_loop(_assembly(schedule, tmp_path))
    assert sum(x.startswith("vfmadd231ps") for x in loop) == fmas, "\n".join(loop)
    assert not [x for x in loop if "(%rsp)" in x], "spill in the inner loop:\n" + "\n".join(loop)


BF16_DOT = DOT.replace("f32[", "bf16[").replace("96", "384")  # 192 pair steps: a loop LLVM keeps

BF16_INNER_LOOP_CHECKS = """
CHECK:         .LBB[[LOOP:[0-9_]+]]:
CHECK-NOT:     (%rsp)
CHECK-COUNT-24: vdpbf16ps %zmm{{[0-9]+}}, %zmm{{[0-9]+}}, %zmm{{[0-9]+}}
CHECK-NOT:     (%rsp)
CHECK:         j{{ne|b|l}} .LBB[[LOOP]]
"""


def test_bf16_pairs_inner_loop_is_vdpbf16ps_without_spills(tmp_path):
    """`pack ... k_pairs`: each step of the 6 x 64 block is 4 loads of (k, k + 1) pairs of B, 6
    broadcasts of A's pair (32 bits) and 24 vdpbf16ps on zmm accumulators (f32: the sum is
    rounded to bf16 once, by the epilogue)."""
    schedule = MatmulSchedule(mc=30, nc=128, kc=384, mr=6, nr=64, pack=(0, 1), k_pairs=True, hoist_address=True,
                              parallel=True)
    loop = _inner_loop(_assembly(schedule, tmp_path, BF16_DOT), "vdpbf16ps")
    dots = [x for x in loop if x.startswith("vdpbf16ps")]
    assert len(dots) == 24 and all(x.count("%zmm") == 3 for x in dots), "\n".join(loop)
    assert len({x.split()[-1] for x in dots}) == 24, "24 distinct accumulators:\n" + "\n".join(loop)
    assert sum(x.startswith(("vpbroadcastd", "vbroadcastss")) for x in loop) == 6, "\n".join(loop)
    assert not [x for x in loop if "(%rsp)" in x], "spill in the inner loop:\n" + "\n".join(loop)
    if shutil.which("filecheck") is not None:
        checks = tmp_path / "loop.checks"
        checks.write_text(BF16_INNER_LOOP_CHECKS)
        proc = subprocess.run(["filecheck", str(checks)], input="\n".join(loop), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr + "\n" + "\n".join(loop)
