"""runtime/small_gemm.py: the few-rows kernel generated from its schedule (prepacked B, run-time M,
row tails, direct stores; the FileCheck file tests/codegen/schedule/pack_prepacked.mlir shows its
IR) exact on integer-valued inputs at every row count (every row-tail height, a partial last
panel, k of 0 and 1) and within tolerance on others, the other lowerings of a run-time M exact
too, and a dynamic program's gemm by a constant taking it at the row counts it is for and BLAS at
the others."""

import numpy as np
import pytest

import hlocc
from hlocc.codegen.schedule import MatmulSchedule
from hlocc.runtime import library, small_gemm

ROW_COUNTS = sorted({0, 1, 2, 3, 4, 5, 6, 7, 13, small_gemm.MAX_ROWS})  # around 4 and 6: the AVX2 and AVX-512 register blocks


def _reference(a, w):
    return (a.astype(np.float64) @ w.astype(np.float64)).astype(np.float32)


def _run(function, a: np.ndarray, packed: np.ndarray, n: int) -> np.ndarray:
    """The kernel's out[m, n], checked to leave the memory past it alone (NaN there before)."""
    m = a.shape[0]
    buffer = np.full(m * n + small_gemm.host_block()[1], np.nan, np.float32)
    function(np.ascontiguousarray(a).ctypes.data, packed.ctypes.data, buffer.ctypes.data, m)
    assert np.isnan(buffer[m * n:]).all()
    return buffer[:m * n].reshape(m, n)


def _integers(rng, shape) -> np.ndarray:
    return rng.integers(-4, 5, shape).astype(np.float32)


@pytest.mark.parametrize("k, n", [(37, 70), (1, 64), (0, 20),
                                  pytest.param(64, 129, marks=pytest.mark.slow),
                                  pytest.param(5, 3, marks=pytest.mark.slow)])
def test_packed_kernel_is_exact_at_every_row_count(k, n):
    rng = np.random.default_rng(k * 1000 + n)
    w = _integers(rng, (k, n))
    packed = small_gemm.pack(w)
    panel = small_gemm.host_block()[1]
    assert packed.shape == (-(-n // panel), k, panel)
    function = small_gemm.kernel(k, n).function
    for m in ROW_COUNTS:
        a = _integers(rng, (m, k))
        np.testing.assert_array_equal(_run(function, a, packed, n), a @ w, err_msg=f"m = {m}")
    a = rng.standard_normal((small_gemm.MAX_ROWS, k)).astype(np.float32)
    w = rng.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_allclose(_run(function, a, small_gemm.pack(w), n), _reference(a, w), rtol=1e-5,
                               atol=1e-5 * np.sqrt(k))


def test_a_kernel_in_the_persistent_cache_loads_without_compiling(tmp_path, monkeypatch):
    """A new process (here: a second compile of the same (k, n)) takes the object code from
    HLOCC_CACHE_DIR instead of lowering the schedule again, and it computes the same products."""
    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path / "cache"))
    k, n = 1, 64
    script = small_gemm.schedule(k).script()
    first = small_gemm.compile_kernel(k, n, script)
    assert any((tmp_path / "cache").rglob("*")), "nothing was stored"

    def no_lowering(*args):
        raise AssertionError("compiled again despite the cache")

    monkeypatch.setattr(small_gemm, "kernel_module", no_lowering)
    second = small_gemm.compile_kernel(k, n, script)
    rng = np.random.default_rng(7)
    w, a = _integers(rng, (k, n)), _integers(rng, (5, k))
    packed = small_gemm.pack(w)
    np.testing.assert_array_equal(_run(second.function, a, packed, n), a @ w)
    np.testing.assert_array_equal(_run(first.function, a, packed, n), a @ w)


@pytest.mark.parametrize("schedule", [
    pytest.param(None, id="naive"),  # rows past the run-time M skipped
    # unpacked register blocks: rows past M clamped, their sums not stored
    pytest.param(lambda rows, panel: MatmulSchedule(mc=16, nc=32, kc=7, mr=4, nr=16), id="register_block",
                 marks=pytest.mark.slow),
    # packed A beside the prepacked B, K in blocks of 3 (Cacc between them), hoisted addresses, prefetch
    pytest.param(lambda rows, panel: MatmulSchedule(mc=16, nc=panel, kc=3, mr=rows, nr=panel, pack=(0, 1),
                                                    prepacked=True, row_tails=True, hoist_address=True, prefetch=2),
                 id="packed_a_k_blocks", marks=pytest.mark.slow),
    # two row blocks of 12 (the m loop to the run-time M), K blocks: the fused epilogue through Cacc
    pytest.param(lambda rows, panel: MatmulSchedule(mc=12, nc=panel, kc=4, mr=rows, nr=panel, pack=(1,),
                                                    prepacked=True, fuse_epilogue=True), id="two_row_blocks"),
    # direct stores without row tails: the rows of a tile past M are not stored
    pytest.param(lambda rows, panel: MatmulSchedule(mc=16, nc=panel, kc=7, mr=rows, nr=panel, pack=(1,),
                                                    prepacked=True, fuse_epilogue=True),
                 id="direct_stores_guarded", marks=pytest.mark.slow),
])
def test_other_lowerings_of_a_run_time_m_are_exact(schedule):
    """Schedules of the host's register block (the prepacked panels are the host's)."""
    k, n = 7, 70
    rng = np.random.default_rng(7)
    w = _integers(rng, (k, n))
    packed = small_gemm.pack(w)
    schedule = schedule and schedule(*small_gemm.host_block())
    kernel = small_gemm.compile_kernel(k, n, None if schedule is None else schedule.script())  # (keeps its code)
    for m in [0, 1, 5, 7, 13, small_gemm.MAX_ROWS]:
        a = _integers(rng, (m, k))
        np.testing.assert_array_equal(_run(kernel.function, a, packed, n), a @ w, err_msg=f"m = {m}")


def test_inner_loops_are_register_blocks_without_spills():
    """The optimised kernel as assembly for a CPU of the host's vector width (znver4 for AVX-512,
    znver3 for AVX2; tests/codegen/schedule/test_matmul_asm.py's way): the full-height loop of the
    host's register block (6 x 64 on AVX-512: 4 panel loads, 6 broadcasts and 24 FMAs on distinct
    zmm accumulators; 4 x 24 on AVX2: 3, 4 and 12 on ymm), and no loop that holds FMAs (the row
    tails' too) touches a stack slot."""
    import llvmlite.binding as llvm

    from hlocc.codegen.target import host_vector_isa

    lanes = host_vector_isa().lanes
    if lanes not in (8, 16):
        pytest.skip(f"a host of {lanes}-lane vectors: no assembly form to check")
    rows, panel = small_gemm.host_block()
    register, cpu = ("%zmm", "znver4") if lanes == 16 else ("%ymm", "znver3")
    kernel = small_gemm.compile_kernel(512, 2048, small_gemm.schedule(512).script(), keep_ir=True)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    machine = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(cpu=cpu, opt=3)
    blocks, current = [], []
    for line in machine.emit_assembly(llvm.parse_assembly(kernel.optimized_ir)).splitlines():
        if line.startswith(".LBB") and line.rstrip().endswith(":"):
            blocks.append(current)
            current = []
        elif not line.lstrip().startswith(("#", ".p2align")):
            current.append(line.strip())
            if line.strip().startswith("j"):  # a block ends at its jump (the loop's back edge)
                blocks.append(current)
                current = []
    loops = [b for b in [*blocks, current] if any(x.startswith("vfmadd231ps") for x in b)]
    assert loops and not [x for b in loops for x in b if "(%rsp)" in x], "spill in an inner loop"
    full = max(loops, key=lambda b: len({x.split()[-1] for x in b if x.startswith("vfmadd231ps")}))  # most accumulators
    fmas = [x for x in full if x.startswith("vfmadd231ps")]
    accumulators = rows * panel // lanes
    assert fmas and len(fmas) % accumulators == 0, "\n".join(full)
    steps = len(fmas) // accumulators  # (LLVM may unroll the k loop)
    assert len({x.split()[-1] for x in fmas}) == accumulators and all(x.count(register) == 3 for x in fmas), \
        "\n".join(full)
    assert sum(x.startswith("vbroadcastss") for x in full) == rows * steps, "\n".join(full)
    assert sum(x.startswith("vmovups") and register in x.split(",")[-1] for x in full) == panel // lanes * steps, \
        "\n".join(full)


def _dot_module(k: int, n: int, w: np.ndarray, transposed: bool) -> str:
    """f32[?b,k] @ a constant (given as [n, k] and contracted on its dim 1 where `transposed`)."""
    values = w.T if transposed else w
    literal = "{" + ", ".join("{" + ", ".join(f"{v!r}" for v in row) + "}" for row in values.tolist()) + "}"
    w_shape = f"f32[{n},{k}]" if transposed else f"f32[{k},{n}]"
    return (f"HloModule m\nENTRY e {{\n  p = f32[?b,{k}] parameter(0)\n  w = {w_shape} constant({literal})\n"
            f"  ROOT d = f32[?b,{n}] dot(p, w), lhs_contracting_dims={{1}}, "
            f"rhs_contracting_dims={{{1 if transposed else 0}}}\n}}\n")


@pytest.mark.parametrize("transposed, hot", [(False, 1), (True, 1), (False, small_gemm.HOT_CALLS)],
                         ids=["kernel", "kernel_transposed", "blas_until_hot"])
def test_dynamic_gemm_by_a_constant_runs_packed_at_few_rows(monkeypatch, transposed, hot):
    """The packed steps run the kernel once their (k, n) is hot (at once with HOT_CALLS = 1), BLAS
    before: the same products either way, and no compile for a shape called a few times."""
    monkeypatch.setattr(small_gemm, "MIN_WEIGHT_BYTES", 0)  # a small constant stands in for weights
    monkeypatch.setattr(small_gemm, "HOT_CALLS", hot)
    monkeypatch.setattr(small_gemm, "_KERNELS", {})
    monkeypatch.setattr(small_gemm, "_CALLS", {})
    k, n = 24, 70
    rng = np.random.default_rng(1)
    w = rng.standard_normal((k, n)).astype(np.float32)
    exe = hlocc.compile(_dot_module(k, n, w, transposed), "cpu", gemm="library")
    for b in [0, 1, 2, small_gemm.host_block()[0] + 1, small_gemm.MAX_ROWS, small_gemm.MAX_ROWS + 1, 3, 1]:
        x = rng.standard_normal((b, k)).astype(np.float32)
        np.testing.assert_allclose(exe(x), _reference(x, w), rtol=1e-5, atol=1e-5)
        calls = exe.program._bound[((b, k),)].calls
        packed = [s for s in calls.launches if isinstance(getattr(s, "__self__", None), library.PackedGemm)]
        assert len(packed) == (2 <= b <= small_gemm.MAX_ROWS), b
    assert ((k, n) in small_gemm._KERNELS) == (hot == 1)
