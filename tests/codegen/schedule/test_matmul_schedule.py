"""Matmul schedules (codegen/schedule/): every illegal schedule is an error naming the transform op;
the builder's scripts parse; and scheduled kernels are exact against the evaluator on
integer-valued inputs for sizes with remainders (1, primes), transposed operands, batch dims and
an epilogue, bf16 included (the FileCheck files beside this test show the IR)."""

from __future__ import annotations

import numpy as np
import pytest

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.schedule import MatmulSchedule, ScheduleError, use_schedule
from hlocc.codegen.schedule.microkernel import registers_needed
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.types import PRIMITIVE_TYPES
from hlocc.testing.gemm import gemm_fusion_text
from hlocc.tools.opt import KernelIRError, parse_module, print_module, run_opt

PAYLOAD = """func.func @f(%a: tensor<16x5xf32>, %w: tensor<5x32xf32>, %c: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 15], n in [0, 31], k in [0, 4]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 15], n in [0, 31], k in [0, 4]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 15], n in [0, 31], k in [0, 4]">]
         sizes [1, 16, 32, 5] : (tensor<16x5xf32>, tensor<5x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<16x32xf32>
}
"""
ANY = "!transform.any_op"
TILE = f"({ANY}) -> ({ANY}, {ANY}, {ANY}, {ANY})"


def script(*lines: str) -> str:
    body = "\n".join(f"    {line}" for line in lines)
    return (PAYLOAD + "builtin.module {\n  transform.named_sequence @__transform_main(%root: " + ANY + ") {\n"
            f'    %mm = transform.structured.match ops{{["xla.matmul"]}} in %root : ({ANY}) -> {ANY}\n'
            f"{body}\n    transform.yield\n  }}\n}}\n")


@pytest.mark.parametrize("lines,message", [
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [0, 8, 4] : {TILE}"],
     r"transform.hlocc.tile: sizes \[MC, NC, KC\] must be 3 positive integers, found \[0, 8, 4\]"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %root sizes [8, 8, 4] : {TILE}"],
     "transform.hlocc.tile: expects xla.matmul targets, found builtin.module"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 8, 4] : {TILE}",
      f"%u, %l3, %l4, %l5 = transform.hlocc.tile %mm sizes [8, 8, 4] : {TILE}"],
     "transform.hlocc.tile: the target xla.matmul was replaced by an earlier transform"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 8, 4] : {TILE}",
      f"%u, %l3, %l4, %l5 = transform.hlocc.tile %t sizes [8, 8, 4] : {TILE}"],
     "transform.hlocc.tile: the target xla.matmul is already tiled"),
    ([f"transform.hlocc.microkernel %mm register_block [2, 16] k_unroll 1 : {ANY}"],
     "transform.hlocc.microkernel: the target xla.matmul is not tiled; apply transform.hlocc.tile first"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [3, 16] k_unroll 1 : {ANY}"],
     "transform.hlocc.microkernel: register block 3x16 does not divide the block tile 8x16"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 0 : {ANY}"],
     "transform.hlocc.microkernel: k_unroll must be positive, found 0"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.parallelize %t : {ANY}"],
     "transform.hlocc.parallelize: the kernel has no block id to map the block loops to"),
    ([f"transform.hlocc.parallelize %mm : {ANY}"],
     "transform.hlocc.parallelize: the target is not directly inside the block loops of transform.hlocc.tile"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.pack %t operands [0, 1] : {ANY}"],
     "transform.hlocc.pack: the target has no register block; apply transform.hlocc.microkernel first"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 8] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [0, 1] : {ANY}"],
     "transform.hlocc.pack: NR = 8 is not a multiple of the 16 f32 lanes of a vector register"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [0] : {ANY}"],
     r"transform.hlocc.pack: operands must be \[1\] or \[0, 1\] \(B is always packed\), found \[0\]"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [0, 1] k_pairs : {ANY}"],
     "transform.hlocc.pack: k_pairs packs bf16 pairs for vdpbf16ps; this matmul's operands are f32 and f32"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [1] prepacked : {ANY}"],
     r"transform.hlocc.pack: a prepacked B is a rank-1 tensor of 2 zero-padded panels of 5 x 16 elements, "
     r"found tensor<5x32xf32>"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [0, 1] k_pairs prepacked : {ANY}"],
     "transform.hlocc.pack: prepacked B is f32 panels; k_pairs packs bf16 pairs"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.insert_prefetch %t distance 4 : {ANY}"],
     "transform.hlocc.insert_prefetch: the target xla.matmul is not packed; apply transform.hlocc.pack first"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 : {ANY}",
      f"transform.hlocc.pack %t operands [1] : {ANY}",
      f"transform.hlocc.insert_prefetch %t distance 0 : {ANY}"],
     "transform.hlocc.insert_prefetch: distance must be at least 1 k step, found 0"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.hoist_address %t : {ANY}"],
     "transform.hlocc.hoist_address: the target xla.matmul is not packed"),
    ([f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
      f"transform.hlocc.fuse_epilogue %t : {ANY}"],
     "transform.hlocc.fuse_epilogue: the target xla.matmul is not packed"),
])
def test_illegal_schedules_name_the_transform_op(lines, message):
    from hlocc.codegen.target import AVX512_BF16, use_vector_isa

    with use_vector_isa(AVX512_BF16), pytest.raises(KernelIRError, match=message):  # (the messages' lanes)
        run_opt(script(*lines), ["transform-interpreter"])


def test_prepacked_b_must_be_read_through_the_panel_layout():
    """A rank-1 B of the right size whose map is not `panel_layout` (here: row-major [5, 32]) is
    rejected; the panel layout itself is accepted and leaves no B buffer in the block."""
    lines = (f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 5] : {TILE}",
             f"transform.hlocc.microkernel %t register_block [2, 16] k_unroll 1 row_tails : {ANY}",
             f"transform.hlocc.pack %t operands [1] prepacked : {ANY}")
    text = script(*lines).replace("%w: tensor<5x32xf32>", "%w: tensor<160xf32>").replace(
        "tensor<5x32xf32>, tensor<16x32xf32>) ->", "tensor<160xf32>, tensor<16x32xf32>) ->")
    with pytest.raises(KernelIRError, match=r"transform.hlocc.pack: prepacked B's map must be the 16-column panel "
                                            r"layout of a rank-1 tensor, \(n floordiv 16\) \* 80 \+ k \* 16 \+ n mod 16, "
                                            r"found \(b, m, n, k\) -> \(k \* 32 \+ n\)"):
        run_opt(text.replace("-> (k, n)", "-> (k * 32 + n)"), ["transform-interpreter"])
    text = text.replace("-> (k, n)", "-> ((n floordiv 16) * 80 + k * 16 + n mod 16)")
    lowered = run_opt(text, ["transform-interpreter", "lower-matmul"])
    assert lowered.count("xla.allocate_shared") == 1 and "vector.transfer_read %w[" in lowered


def test_the_gpu_schedule_rejects_a_run_time_m():
    text = script(f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [16, 32, 5] : {TILE}",
                  f"transform.hlocc.set_operand_layout %t sg_layout [1, 1] sg_data [16, 32] inst_data [16, 8, 16] : {ANY}")
    text = text.replace("sizes [1, 16, 32, 5] :", 'sizes [1, 16, 32, 5] schedule {runtime_m = "m"} :')
    with pytest.raises(KernelIRError, match=r"transform.hlocc.set_operand_layout: a run-time M \(runtime_m\) is not "
                                            "built in the GPU schedule"):
        run_opt(text, ["transform-interpreter"])


def test_pack_rejects_blocks_whose_buffers_do_not_fit_the_scratch():
    text = script(f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [1024, 1024, 5] : {TILE}",
                  f"transform.hlocc.microkernel %t register_block [4, 16] k_unroll 1 : {ANY}",
                  f"transform.hlocc.pack %t operands [0, 1] : {ANY}")
    text = text.replace("16x5xf32", "1024x5xf32").replace("5x32xf32", "5x1024xf32").replace(
        "16x32xf32", "1024x1024xf32").replace("m in [0, 15], n in [0, 31]", "m in [0, 1023], n in [0, 1023]").replace(
        "sizes [1, 16, 32, 5]", "sizes [1, 1024, 1024, 5]")
    with pytest.raises(KernelIRError, match="transform.hlocc.pack: the packed panels and the accumulator block need "
                                            "4235264 bytes per block, more than the 4194304"):
        run_opt(text, ["transform-interpreter"])


def test_parallelize_checks_the_launch_against_the_loops():
    text = script(f"%t, %l0, %l1, %l2 = transform.hlocc.tile %mm sizes [8, 16, 4] : {TILE}",
                  f"transform.hlocc.parallelize %t : {ANY}")
    block_id = '  %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 2 : index]} : () -> index\n'
    text = text.replace("-> tensor<16x32xf32> {\n", "-> tensor<16x32xf32> {\n" + block_id, 1)
    with pytest.raises(KernelIRError, match=r"the launch has 3 blocks but the block loops run 1 x 2 x 2 = 4"):
        run_opt(text, ["transform-interpreter"])
    assert "offsets(%b, %m0, %n0)" in run_opt(text.replace("2 : index]", "3 : index]"), ["transform-interpreter"])


def test_register_budget():
    assert registers_needed(6, 64, lanes=16) == 6 * 4 + 4 + 1 == 29  # BLIS's 6x64: 24 zmm accumulators
    assert registers_needed(8, 64, lanes=16) == 37 and registers_needed(14, 32, lanes=16) == 31
    assert registers_needed(4, 24, lanes=8) == 4 * 3 + 3 + 1 == 16  # AVX2's 4x24: all 16 ymm


def test_builder_script_parses_and_round_trips():
    text = MatmulSchedule(mc=96, nc=256, kc=128, mr=6, nr=64, k_unroll=4).script()
    printed = print_module(parse_module(text))
    assert "transform.hlocc.tile %mm sizes [96, 256, 128]" in printed
    assert "transform.hlocc.microkernel %tiled register_block [6, 64] k_unroll 4 : !transform.any_op" in printed
    assert print_module(parse_module(printed)) == printed
    assert "microkernel" not in MatmulSchedule(mc=8, nc=8, kc=8).script()
    few_rows = MatmulSchedule(mc=16, nc=64, kc=512, mr=6, nr=64, pack=(1,), prepacked=True, row_tails=True).script()
    printed = print_module(parse_module(few_rows))
    assert "transform.hlocc.microkernel %tiled register_block [6, 64] k_unroll 1 row_tails : !transform.any_op" in printed
    assert "transform.hlocc.pack %tiled operands [1] prepacked : !transform.any_op" in printed
    assert print_module(parse_module(printed)) == printed
    packed = MatmulSchedule(mc=96, nc=256, kc=128, mr=6, nr=64, pack=(0, 1), k_pairs=True, prefetch=4,
                            hoist_address=True, fuse_epilogue=True, parallel=True).script()
    printed = print_module(parse_module(packed))
    for line in ("transform.hlocc.pack %tiled operands [0, 1] k_pairs : !transform.any_op",
                 "transform.hlocc.insert_prefetch %tiled distance 4 : !transform.any_op",
                 "transform.hlocc.hoist_address %tiled : !transform.any_op",
                 "transform.hlocc.fuse_epilogue %tiled : !transform.any_op",
                 "transform.hlocc.parallelize %tiled : !transform.any_op"):
        assert line in printed
    assert print_module(parse_module(printed)) == printed


def _dot(lhs: str, rhs: str, out: str, dims: str, epilogue: str = "") -> str:
    return gemm_fusion_text(lhs, rhs, out, dims, epilogue)


CASES = {
    "primes": _dot("f32[13,7]", "f32[7,11]", "f32[13,11]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "ones": _dot("f32[1,1]", "f32[1,1]", "f32[1,1]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "k_zero": _dot("f32[3,0]", "f32[0,5]", "f32[3,5]", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "transposed": _dot("f32[7,13]", "f32[11,7]{0,1}", "f32[13,11]", "lhs_contracting_dims={0}, rhs_contracting_dims={1}"),
    "batched": _dot("f32[3,5,4]", "f32[4,3,9]", "f32[3,5,9]",
                    "lhs_batch_dims={0}, rhs_batch_dims={1}, lhs_contracting_dims={2}, rhs_contracting_dims={0}"),
    "bf16_bias": _dot("bf16[10,17]", "bf16[17,19]", "bf16[10,19]",
                      "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
                      "  c = bf16[19] constant({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19})\n"
                      "  cb = bf16[10,19] broadcast(c), dimensions={1}\n"
                      "  ROOT r = bf16[10,19] add(d, cb)\n"),
}
SCHEDULES = {
    "tile_only": MatmulSchedule(mc=4, nc=8, kc=3),
    "2x4_u2": MatmulSchedule(mc=4, nc=8, kc=3, mr=2, nr=4, k_unroll=2),
    "3x8_edge": MatmulSchedule(mc=6, nc=8, kc=16, mr=3, nr=8, k_unroll=3),
    "one_block": MatmulSchedule(mc=64, nc=64, kc=64, mr=1, nr=16, k_unroll=1),
    "parallel_2x4": MatmulSchedule(mc=4, nc=8, kc=5, mr=2, nr=4, k_unroll=2, parallel=True),
    # Packed: K blocks of 3 (first, middle loop, last peeled), 16-wide panels, edge blocks.
    "packed_ab": MatmulSchedule(mc=6, nc=16, kc=3, mr=3, nr=16, k_unroll=1, pack=(0, 1), parallel=True),
    "packed_b_fused": MatmulSchedule(mc=4, nc=32, kc=4, mr=2, nr=32, k_unroll=2, pack=(1,), prefetch=2,
                                     hoist_address=True, fuse_epilogue=True),
    "packed_hoisted": MatmulSchedule(mc=5, nc=16, kc=16, mr=5, nr=16, k_unroll=3, pack=(0, 1), hoist_address=True,
                                     fuse_epilogue=True, parallel=True),
}


# Every case and every schedule at least once in the default run (case k with schedule k mod 5); the
# whole grid (30 kernels, about a minute on a loaded machine) with the slow tests.
_COVER = {(c, list(SCHEDULES)[k % len(SCHEDULES)]) for k, c in enumerate(CASES)} | \
    {(list(CASES)[k % len(CASES)], sch) for k, sch in enumerate(SCHEDULES)}
GRID = [pytest.param(c, sch, id=f"{c}-{sch}", marks=() if (c, sch) in _COVER else pytest.mark.slow)
        for c in CASES for sch in SCHEDULES]


@pytest.mark.parametrize("case,schedule", GRID)
def test_scheduled_kernels_are_exact(case, schedule):
    module = parse_hlo(CASES[case])
    rng = np.random.default_rng(len(case) + len(schedule))
    args = [rng.integers(-3, 4, p.shape.dims).astype(PRIMITIVE_TYPES[p.shape.element_type.name].dtype)
            for p in module.entry.parameters]
    expected = Evaluator().run(module, args)
    dumps: list[str] = []
    with use_schedule(SCHEDULES[schedule]):
        kernel = compile_fusion(module.entry, options=PipelineOptions(True, None, "kernel", dumps.append),
                                use_cache=False)
    scheduled = next(d for d in dumps if "After transform-interpreter" in d)
    assert "offsets(" in scheduled and "transform." not in scheduled.split("\n", 1)[1]
    assert ("register_block" in scheduled) == (SCHEDULES[schedule].mr is not None)
    assert kernel.launch_dims.blocks == SCHEDULES[schedule].blocks(
        [int(np.prod([d for d in module.entry.root.shape.dims[:-2]])), *module.entry.root.shape.dims[-2:], 0])
    np.testing.assert_array_equal(np.asarray(kernel(*args)[0], np.float64), np.asarray(expected, np.float64))


def test_empty_outputs_need_no_kernel():
    """M = 0 or N = 0: nothing to compute, so no kernel (and no schedule) at all; K = 0 is a case above."""
    import hlocc

    for lhs, rhs, out in (("f32[0,7]", "f32[7,20]", "f32[0,20]"), ("f32[5,7]", "f32[7,0]", "f32[5,0]")):
        text = _dot(lhs, rhs, out, "lhs_contracting_dims={1}, rhs_contracting_dims={0}").replace(
            ', backend_config={"__hlocc_gemm":{}}', "")
        dims = [tuple(int(d) for d in s[4:-1].split(",")) for s in (lhs, rhs, out)]
        exe = hlocc.compile(text, "cpu", gemm="codegen")
        assert np.asarray(exe(np.ones(dims[0], np.float32), np.ones(dims[1], np.float32))).shape == dims[2]


def test_analytic_schedule_follows_the_model():
    from hlocc.codegen.schedule.choice import CacheSizes, analytic_schedule, register_block
    from hlocc.codegen.target import AVX2, AVX512, use_vector_isa

    zen5 = CacheSizes(l1=48 << 10, l2=1 << 20)
    assert register_block(AVX512) == (6, 64)  # 24 zmm accumulators: the most flops per loaded value
    assert register_block(AVX2) == (4, 24)  # 12 of the 16 ymm
    with use_vector_isa(AVX2):
        assert analytic_schedule([1, 512, 512, 512], caches=zen5, threads=2) == MatmulSchedule(
            mc=128, nc=240, kc=128, mr=4, nr=24, parallel=True, pack=(0, 1), hoist_address=True, fuse_epilogue=True)
    with use_vector_isa(AVX512):
        _analytic_schedule_on_avx512(zen5)


def _analytic_schedule_on_avx512(zen5):
    from hlocc.codegen.schedule.choice import NAIVE_BELOW, analytic_schedule

    assert analytic_schedule([1, 7, 5, 3]) is None and 7 * 5 * 3 < NAIVE_BELOW
    # KC = 128, NC = a quarter of L2 over KC (512, capped by N), MC = M (516, within 768) then MC
    # halves until 2 threads have 4 blocks each (NC, at 256, is at its minimum).
    assert analytic_schedule([1, 512, 512, 512], caches=zen5, threads=2) == MatmulSchedule(
        mc=126, nc=256, kc=128, mr=6, nr=64, parallel=True, pack=(0, 1), hoist_address=True, fuse_epilogue=True)
    small = analytic_schedule([1, 64, 512, 128], caches=zen5, threads=2)
    assert (small.mc, small.nc, small.blocks([1, 64, 512, 128])) == (66, 256, 2)
    big = analytic_schedule([1, 4096, 4096, 4096], caches=zen5, threads=2)
    assert (big.mc, big.nc, big.kc, big.mr, big.nr) == (768, 512, 128, 6, 64)  # 48 blocks already
    # f64 and N under one vector keep the unpacked scalar register block; M under MR gives MR = M.
    assert not analytic_schedule([1, 64, 64, 64], ("f64",) * 3).pack
    assert not analytic_schedule([2, 5000, 8, 64]).pack
    assert analytic_schedule([2, 5, 4000, 64], caches=zen5, threads=2).mr == 5
    # M = 5 < MR: one block of 5 rows, register block 5 x 16 (legal: the block is the whole problem).
    text = PAYLOAD.replace("16x5xf32", "5x5xf32").replace("m in [0, 15]", "m in [0, 4]").replace(
        "16x32xf32", "5x32xf32").replace("sizes [1, 16, 32, 5]", "sizes [1, 5, 32, 5]")
    schedule = MatmulSchedule(mc=64, nc=256, kc=5, mr=5, nr=16)
    out = run_opt(text + schedule.script(), ["transform-interpreter"])
    assert "register_block = array<i64: 5, 16>" in out


@pytest.mark.slow  # ~10 s: compiles the analytic schedule's full-size blocks (KC 128, MC up to 768)
def test_analytic_schedule_is_exact_across_k_blocks():
    """The analytic choice on a problem with two K blocks, edge blocks in M and N, a transposed lhs."""
    module = parse_hlo(_dot("f32[300,67]{0,1}", "f32[300,131]", "f32[67,131]",
                            "lhs_contracting_dims={0}, rhs_contracting_dims={0}"))
    rng = np.random.default_rng(3)
    args = [rng.integers(-3, 4, p.shape.dims).astype(np.float32) for p in module.entry.parameters]
    from hlocc.codegen.schedule.choice import analytic_schedule

    schedule = analytic_schedule([1, 67, 131, 300], threads=2)
    assert schedule.pack == (0, 1) and schedule.kc < 300
    with use_schedule(schedule):
        kernel = compile_fusion(module.entry, use_cache=False)
    np.testing.assert_array_equal(kernel(*args)[0], Evaluator().run(module, args))


def _has_avx512_bf16() -> bool:
    import llvmlite.binding as llvm

    return "+avx512bf16" in llvm.get_host_cpu_features().flatten()


BF16_CASES = {
    "bias": CASES["bf16_bias"],
    "odd_k_transposed_batched": _dot("bf16[3,9,5]", "bf16[3,20,9]{1,2,0}", "bf16[3,5,20]",
                                     "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, "
                                     "rhs_contracting_dims={2}"),
}
BF16_SCHEDULES = {  # K blocks of 4 (pairs), an odd last block, A packed or read through its map
    "pairs_ab": MatmulSchedule(mc=6, nc=16, kc=4, mr=3, nr=16, pack=(0, 1), k_pairs=True, parallel=True),
    "pairs_b_fused": MatmulSchedule(mc=4, nc=32, kc=8, mr=2, nr=32, k_unroll=2, pack=(1,), k_pairs=True,
                                    hoist_address=True, fuse_epilogue=True, prefetch=1),
}


@pytest.mark.skipif(not _has_avx512_bf16(), reason="the host has no AVX512-BF16 (vdpbf16ps)")
@pytest.mark.parametrize("case", list(BF16_CASES))
@pytest.mark.parametrize("schedule", list(BF16_SCHEDULES))
def test_bf16_pairs_are_exact(case, schedule):
    """vdpbf16ps on bf16 pairs along K: exact on small integers (products and sums exact in f32),
    the result rounded to bf16 as the evaluator rounds the dot."""
    module = parse_hlo(BF16_CASES[case])
    rng = np.random.default_rng(7)
    args = [rng.integers(-3, 4, p.shape.dims).astype(PRIMITIVE_TYPES["bf16"].dtype) for p in module.entry.parameters]
    dumps: list[str] = []
    with use_schedule(BF16_SCHEDULES[schedule]):
        kernel = compile_fusion(module.entry, options=PipelineOptions(True, None, "kernel", dumps.append),
                                use_cache=False)
    assert "xla.dot_bf16_pairs" in next(d for d in dumps if "After lower-matmul" in d)
    np.testing.assert_array_equal(np.asarray(kernel(*args)[0], np.float64),
                                  np.asarray(Evaluator().run(module, args), np.float64))


def test_bf16_pairs_need_an_even_k_block():
    from hlocc.codegen.target import AVX512_BF16, use_vector_isa

    module = parse_hlo(CASES["bf16_bias"])
    with use_schedule(MatmulSchedule(mc=6, nc=16, kc=5, mr=3, nr=16, pack=(0, 1), k_pairs=True)), \
            use_vector_isa(AVX512_BF16):  # (refused before the host compiles anything)
        with pytest.raises(ScheduleError, match="transform.hlocc.pack: k_pairs needs an even KC"):
            compile_fusion(module.entry, use_cache=False)


@pytest.mark.slow  # compiles 14 kernels and times them against three libraries (minutes on a loaded machine)
def test_gemm_benchmark_runs(tmp_path):
    import pathlib
    import subprocess
    import sys

    root = pathlib.Path(__file__).resolve().parents[3]
    proc = subprocess.run([sys.executable, str(root / "benchmarks" / "gemm.py"), "--quick"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines()
            if line.startswith("| ") and line.split("|")[2].strip() in ("f32", "bf16")]
    assert len(rows) == 2 * 5 * 2 and not any("MISMATCH" in row for row in rows), proc.stdout  # dtypes x shapes x threads
    assert "FMA probe's peak" in proc.stdout
