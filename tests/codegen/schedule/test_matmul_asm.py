"""The assembly of the packed micro-kernel (issue 17 step 3): its inner loop is the register block
the schedule asked for, on zmm registers, with no spill.

The kernel is emitted for AVX-512 (`use_vector_isa`) and its LLVM IR, taken before the host's JIT
would compile it, is optimised at O3 and emitted as assembly for a fixed AVX-512 CPU (znver4), so
the check does not depend on the host (an AVX2 host could not even JIT the bf16 kernel's
vdpbf16ps). `test_avx2_block_fits_the_ymm_registers` checks the AVX2 form the same way (znver3). The inner loop of a 6 x 64 block
is 4 loads of the B micro-panel, 6 broadcasts of A and 24 `vfmadd231ps` on zmm accumulators; a
spill would show as an access to a stack slot, `N(%rsp)` (the packed panels are on the stack too,
but are addressed through an index register: `N(%rsp,%reg)`).
"""

import shutil
import subprocess

import llvmlite.binding as llvm
import pytest

from hlocc.backends.cpu import kernel as cpu_kernel
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.schedule import MatmulSchedule, use_schedule
from hlocc.codegen.target import AVX2, AVX512_BF16, VectorIsa, use_vector_isa
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.jit import optimize

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


class _Translated(Exception):
    """Raised in place of the host's compilation: the LLVM IR is dumped by then."""


def _no_host_compile(*args, **kwargs):
    raise _Translated


def _assembly(schedule: MatmulSchedule, tmp_path, text: str = DOT, isa: VectorIsa = AVX512_BF16,
              cpu: str = "znver4") -> str:
    options = PipelineOptions(False, str(tmp_path), "mm", lambda s: None)
    with use_schedule(schedule), use_vector_isa(isa), pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu_kernel, "compile_object", _no_host_compile)
        with pytest.raises(_Translated):
            cpu_kernel.compile_fusion(parse_hlo(text).entry, options=options, use_cache=False)
    (ir_file,) = tmp_path.glob("*llvm.ll")
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_triple(llvm.get_process_triple())
    tm = target.create_target_machine(cpu=cpu, opt=3)
    module = llvm.parse_assembly(ir_file.read_text())
    optimize(module, tm)
    return tm.emit_assembly(module)


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


def _steps(instructions: list[str], per_step: int, loop: list[str]) -> int:
    """How many k steps the loop holds (LLVM may unroll it): `instructions` are that many times
    `per_step`."""
    assert instructions and len(instructions) % per_step == 0, "\n".join(loop)
    return len(instructions) // per_step


def test_inner_loop_is_the_register_block_without_spills(tmp_path):
    schedule = MatmulSchedule(mc=30, nc=128, kc=96, mr=6, nr=64, pack=(0, 1), hoist_address=True, parallel=True)
    loop = _inner_loop(_assembly(schedule, tmp_path))
    fmas = [x for x in loop if x.startswith("vfmadd231ps")]
    unroll = _steps(fmas, 24, loop)
    assert all(x.count("%zmm") == 3 for x in fmas), "\n".join(loop)
    assert len({x.split()[-1] for x in fmas}) == 24, "24 distinct accumulators:\n" + "\n".join(loop)
    assert sum(x.startswith("vbroadcastss") for x in loop) == 6 * unroll, "\n".join(loop)
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
    _steps([x for x in loop if x.startswith("vfmadd231ps")], fmas, loop)
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
    unroll = _steps(dots, 24, loop)
    assert all(x.count("%zmm") == 3 for x in dots), "\n".join(loop)
    assert len({x.split()[-1] for x in dots}) == 24, "24 distinct accumulators:\n" + "\n".join(loop)
    assert sum(x.startswith(("vpbroadcastd", "vbroadcastss")) for x in loop) == 6 * unroll, "\n".join(loop)
    assert not [x for x in loop if "(%rsp)" in x], "spill in the inner loop:\n" + "\n".join(loop)
    if shutil.which("filecheck") is not None:
        checks = tmp_path / "loop.checks"
        checks.write_text(BF16_INNER_LOOP_CHECKS)
        proc = subprocess.run(["filecheck", str(checks)], input="\n".join(loop), capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr + "\n" + "\n".join(loop)


def test_avx2_block_fits_the_ymm_registers(tmp_path):
    """On AVX2 (16 ymm of 8 lanes) the model's 4 x 24 block: 12 `vfmadd231ps` on 12 distinct ymm
    accumulators, 3 loads of B and 4 broadcasts of A, and no spill."""
    from hlocc.codegen.schedule.choice import register_block

    mr, nr = register_block(AVX2)
    assert (mr, nr) == (4, 24)
    schedule = MatmulSchedule(mc=28, nc=120, kc=96, mr=mr, nr=nr, pack=(0, 1), hoist_address=True, parallel=True)
    loop = _inner_loop(_assembly(schedule, tmp_path, DOT.replace("f32[30,128]", "f32[28,120]")
                                 .replace("f32[30,96]", "f32[28,96]").replace("f32[96,128]", "f32[96,120]"),
                                 isa=AVX2, cpu="znver3"))
    fmas = [x for x in loop if x.startswith("vfmadd231ps")]
    unroll = _steps(fmas, 12, loop)
    assert all(x.count("%ymm") == 3 for x in fmas), "\n".join(loop)
    assert len({x.split()[-1] for x in fmas}) == 12, "12 distinct accumulators:\n" + "\n".join(loop)
    assert sum(x.startswith("vbroadcastss") for x in loop) == 4 * unroll, "\n".join(loop)
    assert not [x for x in loop if "%zmm" in x], "\n".join(loop)
    assert not [x for x in loop if "(%rsp)" in x], "spill in the inner loop:\n" + "\n".join(loop)


def test_vdpbf16ps_is_refused_where_the_target_has_none():
    from hlocc.codegen.schedule.handles import ScheduleError

    schedule = MatmulSchedule(mc=30, nc=128, kc=384, mr=4, nr=24, pack=(0, 1), k_pairs=True)
    with use_schedule(schedule), use_vector_isa(AVX2), pytest.raises(ScheduleError, match="k_pairs.*avx2"):
        cpu_kernel.compile_fusion(parse_hlo(BF16_DOT).entry, use_cache=False)
