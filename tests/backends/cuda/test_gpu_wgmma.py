"""The sm_90a GPU matmul (issue 17 item 4): dot fusions scheduled with `transform.hlocc.use_wgmma`
lowered to wgmma.mma_async on 128-byte-swizzled shared tiles (codegen/transforms/matmul/
gpu_wgmma.py), run exactly in the SIMT simulation (the warpgroup step reads the tiles through the
descriptors by PTX's documented layouts: warpgroup_simulation.py) against the evaluator on
integer-valued bf16/f16 inputs (M, N, K of 1, primes, K = 0; transposed operands; batch; a fused
epilogue); rejected with the transform op's name when the schedule is illegal and with the arch
when it is not sm_90a; never the GPU's default; and assembled by ptxas for sm_90a with the
instructions a FileCheck expects. The default run uses one warpgroup over a 64 x 16 x 64 block
tile; two warpgroups and the 128 x 128 x 64 tile run with the slow tests."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
from _ptx_device import ptx_in_subprocess
from _wgmma_kernels import sm90a_ptx_script
from test_gpu_matmul import CASES, _args, _dot, _square

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.backends.cuda.ptx import PtxError, compile_ptx
from hlocc.codegen.schedule import MatmulSchedule, ScheduleError, use_schedule
from hlocc.codegen.schedule.gpu_choice import MMA_CANDIDATES, gpu_schedule
from hlocc.codegen.target import gpu_target
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo

ONE_GROUP = MatmulSchedule(mc=64, nc=16, kc=64, parallel=True, warp_grid=(4, 1), warp_tile=(16, 16), wgmma=True)
TWO_GROUPS = MatmulSchedule(mc=128, nc=24, kc=64, parallel=True, warp_grid=(8, 1), warp_tile=(16, 24), wgmma=True)
WIDE = MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(8, 1), warp_tile=(16, 128), wgmma=True)


def _run_exact(text: str, schedule: MatmulSchedule, seed: int = 0) -> None:
    module = parse_hlo(text)
    args = _args(module, seed)
    expected = Evaluator().run(module, args)
    with use_schedule(schedule):
        kernel = compile_fusion(module.entry, gpu_target(name="sm_90a"), use_cache=False)
    assert kernel.launch_dims.threads_per_block == schedule.threads
    got = kernel(*args)[0]
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(expected, np.float64))


WGMMA_CASES = {
    "ones": _square(1, 1, 1),
    "primes": _square(67, 131, 37),
    **{name: CASES[name] for name in ("k_zero", "f16", "transposed", "batched", "bf16_bias_relu")},
}


@pytest.mark.parametrize("case", list(WGMMA_CASES))
def test_wgmma_kernels_are_exact_in_simulation(case):
    _run_exact(WGMMA_CASES[case], ONE_GROUP, seed=len(case))


@pytest.mark.slow
@pytest.mark.parametrize("schedule", [TWO_GROUPS, WIDE], ids=["two_groups", "128x128x64"])
@pytest.mark.parametrize("m,n,k", [(67, 131, 137), (130, 136, 200), (1, 131, 257)])
def test_larger_wgmma_tiles_are_exact_in_simulation(schedule, m, n, k):
    _run_exact(_square(m, n, k), schedule, seed=m + n + k)


@pytest.mark.slow
def test_wgmma_with_a_transposed_batched_operand_over_k_blocks():
    text = _dot("bf16[2,70,9]", "bf16[2,130,70]", "f32[2,9,130]", "lhs_batch_dims={0}, rhs_batch_dims={0}, "
                "lhs_contracting_dims={1}, rhs_contracting_dims={2}")
    _run_exact(text, TWO_GROUPS, seed=9)


def _fails(text: str, schedule: MatmulSchedule, message: str) -> None:
    module = parse_hlo(text)
    with use_schedule(schedule), pytest.raises(ScheduleError, match=message):
        compile_fusion(module.entry, gpu_target(name="sm_90a"), use_cache=False)


@pytest.mark.parametrize("schedule,message", ids=["not_warpgroups", "shared", "ring", "no_layout"], argvalues=[
    (MatmulSchedule(mc=32, nc=16, kc=64, parallel=True, warp_grid=(2, 2), warp_tile=(16, 8), wgmma=True),
     r"transform.hlocc.use_wgmma: wgmma needs whole warpgroups along m \(sg_layout \[4G, 1\], sg_data \[16, NC\]\), "
     r"found sg_layout \[2, 2\] sg_data \[16, 8\]"),
    # a K block of 208 is staged as 256 (whole 128-byte rows): 512 x 256 x 2 bytes
    (MatmulSchedule(mc=256, nc=256, kc=208, parallel=True, warp_grid=(16, 1), warp_tile=(16, 256), wgmma=True),
     r"transform.hlocc.use_wgmma: the staged A and B tiles need 262144 bytes of shared memory, more than 232448"),
    (MatmulSchedule(mc=64, nc=16, kc=64, parallel=True, warp_grid=(4, 1), warp_tile=(16, 16), stages=3, wgmma=True),
     r"transform.hlocc.use_wgmma: a cp.async ring \(pipeline_shared_copies\) is not built for wgmma"),
    (MatmulSchedule(mc=64, nc=16, kc=64, parallel=True, wgmma=True),
     r"transform.hlocc.use_wgmma: the target has no warp layout; apply transform.hlocc.set_operand_layout first"),
])
def test_illegal_wgmma_schedules_name_the_transform_op(schedule, message):
    _fails(_square(300, 300, 512), schedule, message)


def test_wgmma_is_never_the_default_and_needs_sm_90a():
    """It has not run on hardware: the GPU's choice never takes it, for any arch; a kernel with it
    compiles only for sm_90a."""
    assert not any(s.wgmma for s in MMA_CANDIDATES)
    for sizes in ([1, 4096, 4096, 4096], [1, 5, 7, 3]):
        assert not gpu_schedule(sizes, ("bf16",) * 3, gpu_target(name="sm_90a").max_shared_memory_bytes).wgmma
    assert "transform.hlocc.use_wgmma %tiled" in ONE_GROUP.script()
    fusion = parse_hlo(_square(8, 8, 8)).entry
    with use_schedule(ONE_GROUP), pytest.raises(PtxError, match=r"uses wgmma, which only sm_90a has \(compile it "
                                                                 r"for sm_90a, not sm_90\)"):
        compile_ptx(fusion, "sm_90")


_CHECKS = """
CHECK: .version 8.0
CHECK: .target sm_90a
CHECK: .maxntid 256
CHECK: .shared .align 1024 .b8
CHECK: st.shared.b16
CHECK: fence.proxy.async.shared::cta;
CHECK-NEXT: bar.sync 0;
CHECK: wgmma.fence.sync.aligned;
CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
CHECK: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16
CHECK: wgmma.commit_group.sync.aligned;
CHECK: wgmma.wait_group.sync.aligned 0;
CHECK: bar.sync 0;
"""


_PTX_SCHEDULE = "MatmulSchedule(mc=128, nc=128, kc=64, parallel=True, warp_grid=(8, 1), warp_tile=(16, 128), wgmma=True)"


@pytest.fixture(scope="module")
def wgmma_ptx() -> dict:
    return ptx_in_subprocess(sm90a_ptx_script(_square(200, 304, 96), _PTX_SCHEDULE))


@pytest.mark.skipif(shutil.which("filecheck") is None, reason="the `filecheck` command (PyPI filecheck) is not "
                                                              "installed")
def test_wgmma_schedule_ptx_has_the_wgmma_sequence_and_ptxas_accepts_it(wgmma_ptx, tmp_path):
    """128 x 128 x 64 over two warpgroups for sm_90a (200 x 304 x 96: 2 x 3 blocks, 2 K blocks of 4
    k steps): 256 threads, the A and B tiles (32 KiB) 1024-byte aligned in static shared memory."""
    kernel = wgmma_ptx
    assert (kernel["threads"], kernel["blocks"], kernel["shared"]) == (256, 6, (128 + 128) * 64 * 2)
    checks = tmp_path / "checks.txt"
    checks.write_text(_CHECKS)
    result = subprocess.run(["filecheck", str(checks)], input=kernel["ptx"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert kernel["ptx"].count("wgmma.mma_async") == 4 and "call.uni" not in kernel["ptx"]
    assert "spill" not in kernel["info"] or "0 bytes spill stores" in kernel["info"], kernel["info"]
