"""The sm_90a wgmma matmul fed by TMA through an mbarrier ring (issue 17 item 4;
codegen/transforms/matmul/gpu_wgmma_tma.py): run exactly in the SIMT simulation (TMA boxes,
out-of-bounds zeros, the 128-byte swizzle and the barriers' transaction counts and phases modelled
by codegen/llvm/tma_simulation.py) against the evaluator on integer-valued bf16/f16 inputs, for
1 to 3 stages, K-major and MN-major operands (transposed), batch (3-d tensor maps), M, N, K of 1,
primes and 0; operands TMA cannot address fall back to the synchronous staging (asserted per
case); illegal schedules name `transform.hlocc.use_tma`; never the GPU's default; ptxas -arch=
sm_90a takes the 128 x 128 x 64 three-stage kernel with the instructions a FileCheck expects."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from _ptx_device import ptx_in_subprocess
from _wgmma_kernels import sm90a_ptx_script
from test_gpu_matmul import _args, _dot, _square

import hlocc.codegen.transforms.matmul.gpu_wgmma_tma as tma_lowering
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.schedule import MatmulSchedule, ScheduleError, use_schedule
from hlocc.codegen.schedule.gpu_choice import MMA_CANDIDATES, gpu_schedule
from hlocc.codegen.target import gpu_target
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo


def ring(stages: int, mc: int = 64, nc: int = 64, kc: int = 64) -> MatmulSchedule:
    return MatmulSchedule(mc=mc, nc=nc, kc=kc, parallel=True, warp_grid=(mc // 16, 1), warp_tile=(16, nc), wgmma=True,
                          tma=True, stages=stages)


@pytest.fixture
def fell_back(monkeypatch) -> list:
    """The matmuls that took the synchronous staging instead of TMA."""
    seen: list = []
    original = tma_lowering.lower_wgmma

    def record(op):
        seen.append(op)
        original(op)

    monkeypatch.setattr(tma_lowering, "lower_wgmma", record)
    return seen


def _run_exact(text: str, schedule: MatmulSchedule, seed: int = 0) -> None:
    module = parse_hlo(text)
    args = _args(module, seed)
    expected = Evaluator().run(module, args)
    with use_schedule(schedule):
        kernel = compile_fusion(module.entry, gpu_target(name="sm_90a"), use_cache=False)
    got = kernel(*args)[0]
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(expected, np.float64))


NT = "lhs_contracting_dims={1}, rhs_contracting_dims={1}"  # B stored (n, k): both K-major
TN = "lhs_contracting_dims={0}, rhs_contracting_dims={0}"  # A stored (k, m): A MN-major

# name: (module, whether TMA loads it)
TMA_CASES = {
    "primes_k_major": (_dot("bf16[67,40]", "bf16[131,40]", "f32[67,131]", NT), True),
    "primes_b_mn_major": (_square(67, 136, 200), True),  # B (k, n): n contiguous; K over 4 blocks
    "k_prime_a_mn_major": (_dot("bf16[37,64]", "bf16[37,136]", "f32[64,136]", TN), True),  # K = 37 outer: zeros
    "m_one": (_dot("bf16[1,128]", "bf16[131,128]", "f32[1,131]", NT), True),
    "f16": (_dot("f16[70,72]", "f16[72,64]", "f32[70,64]"), True),
    "batched": (_dot("bf16[3,5,72]", "bf16[3,72,64]", "f32[3,5,64]", "lhs_batch_dims={0}, rhs_batch_dims={0}, "
                     "lhs_contracting_dims={2}, rhs_contracting_dims={1}"), True),
    # TMA needs rows of a multiple of 16 bytes and K > 0: these take the synchronous staging
    "ones": (_square(1, 1, 1), False),
    "primes": (_square(67, 131, 37), False),
    "k_zero": (_square(5, 64, 0), False),
}


@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("case", list(TMA_CASES))
def test_tma_ring_is_exact_in_simulation(case, stages, fell_back):
    text, by_tma = TMA_CASES[case]
    _run_exact(text, ring(stages), seed=len(case) + stages)
    assert (not fell_back) == by_tma


def test_mn_major_b_over_two_boxes_is_exact(fell_back):
    """NC = 128 of a B stored (k, n): two 64-wide boxes per stage, LBO apart in the descriptor."""
    _run_exact(_square(70, 200, 136), ring(2, 64, 128), seed=5)
    assert not fell_back


@pytest.mark.slow
def test_two_warpgroups_128x128x64_three_stages_exact(fell_back):
    _run_exact(_dot("bf16[130,200]", "bf16[200,136]", "f32[130,136]"), ring(3, 128, 128), seed=3)
    assert not fell_back


@pytest.mark.parametrize("schedule,message", ids=["stages", "tile", "k_block", "shared", "no_wgmma"], argvalues=[
    (ring(0), r"transform.hlocc.use_tma: stages must be at least 1, found 0"),
    (ring(2, nc=32), r"transform.hlocc.use_tma: NC must be a multiple of 64 of at most 256 \(TMA boxes of 128-byte "
                     r"swizzled rows\), found 32"),
    (ring(2, kc=96), r"transform.hlocc.use_tma: the K block must be a multiple of 64 of at most 256"),
    (ring(4, 128, 256, 128), r"transform.hlocc.use_tma: 4 stages of the A and B tiles and their mbarriers need "
                             r"393280 bytes of shared memory, more than 232448"),
    (MatmulSchedule(mc=64, nc=64, kc=64, parallel=True, warp_grid=(4, 1), warp_tile=(16, 64), tma=True, stages=2),
     r"transform.hlocc.use_tma: the target does not use wgmma; apply transform.hlocc.use_wgmma first"),
])
def test_illegal_tma_schedules_name_the_transform_op(schedule, message):
    module = parse_hlo(_square(300, 300, 512))
    with use_schedule(schedule), pytest.raises(ScheduleError, match=message):
        compile_fusion(module.entry, gpu_target(name="sm_90a"), use_cache=False)


def test_tma_is_never_the_default():
    """It has not run on hardware: no candidate and no choice of the GPU's schedule has it."""
    assert not any(s.tma for s in MMA_CANDIDATES)
    for sizes in ([1, 4096, 4096, 4096], [1, 5, 7, 3], [1, 128, 128, 64]):
        for arch in ("sm_90a", "sm_90"):
            assert not gpu_schedule(sizes, ("bf16",) * 3, gpu_target(name=arch).max_shared_memory_bytes).tma
    assert "transform.hlocc.use_tma %tiled stages 3" in ring(3).script()
    assert "pipeline_shared_copies" not in ring(3).script()


_CHECKS = """
CHECK: .version 8.0
CHECK: .target sm_90a
CHECK: .extern .shared .align 1024 .b8
CHECK: .entry main_kernel(
CHECK: .param .align 64 .b8 main_kernel_param_3[128],
CHECK-NEXT: .param .align 64 .b8 main_kernel_param_4[128]
CHECK: mbarrier.init.shared.b64
CHECK: fence.proxy.async.shared::cta;
CHECK: bar.sync 0;
CHECK: mbarrier.try_wait.parity.shared.b64
CHECK: mbarrier.arrive.expect_tx.shared.b64
CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [{{.*}}], [{{.*}}], [{{.*}}];
CHECK: mbarrier.try_wait.parity.shared.b64
CHECK: wgmma.fence.sync.aligned;
CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, 1, 1, 1, 0, 1;
CHECK: wgmma.commit_group.sync.aligned;
CHECK: wgmma.wait_group.sync.aligned 0;
CHECK: mbarrier.arrive.shared.b64
"""


_PTX_SCHEDULE = ("MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(8, 1), warp_tile=(16, 128), "
                 "wgmma=True, tma=True, stages=3)")
_PTX_MAPS = ("maps=[[buffer, list(spec.dims), list(spec.strides), list(spec.box), spec.swizzle] "
             "for buffer, spec in kernel.tensor_maps]")


@pytest.fixture(scope="module")
def tma_ptx() -> dict:
    return ptx_in_subprocess(sm90a_ptx_script(_square(256, 256, 192), _PTX_SCHEDULE, _PTX_MAPS))


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="the `filecheck` command (PyPI filecheck) is not "
                                                              "installed")
def test_tma_ring_ptx_has_the_tma_and_mbarrier_sequence_and_ptxas_accepts_it(tma_ptx, tmp_path):
    """128 x 128 x 64, 3 stages, for sm_90a: A (m, k) K-major and B (k, n) MN-major, each by its
    own by-value tensor map; 3 x 32 KiB of stages and 6 mbarriers in dynamic shared memory."""
    kernel = tma_ptx
    assert (kernel["threads"], kernel["shared"]) == (256, 3 * (128 + 128) * 64 * 2 + 6 * 8)
    assert kernel["maps"] == [[0, [192, 256], [384], [64, 128], 128], [1, [256, 192], [512], [64, 64], 128]]
    checks = tmp_path / "checks.txt"
    checks.write_text(_CHECKS)
    result = subprocess.run(["filecheck", str(checks)], input=kernel["ptx"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert kernel["ptx"].count("wgmma.mma_async") == 4 and "call.uni" not in kernel["ptx"]
    assert kernel["ptx"].count("cvta.param.u64") == 2  # the maps read in param space, never copied to local
    assert "0 bytes spill stores, 0 bytes spill loads" in kernel["info"], kernel["info"]
