"""Matrix products: hlocc's generated gemm against the libraries, in the same run, as a % of the
machine's measured FMA peak (issue 17).

    python benchmarks/gemm.py [--quick] [--dtypes f32,bf16] [--threads 1,2] [--runs 5]
                              [--shapes square|corpus|all] [--sizes 256,512,1024,2048,4096]
                              [--out benchmarks/results/gemm.md]

Rows, per shape (B x M x N x K), dtype and thread count:
- `hlocc codegen`: the dot fusion as a generated kernel (codegen/schedule/choice.py's schedule, the
  packed micro-kernel of the host's vector registers: 6 x 64 on AVX-512, 4 x 24 on AVX2), through
  `hlocc.compile(..., gemm="codegen")`, timed in this process
  with `HLOCC_CPU_THREADS`;
- `numpy (shipped)`: numpy's OpenBLAS as this environment runs it (the kernels its DYNAMIC_ARCH
  detection picks, printed in the header: SkylakeX, i.e. AVX-512, on the Emerald Rapids
  development host, so this row and the next are the same kernels there): what
  `gemm="library"` calls;
- `numpy SkylakeX`: the same OpenBLAS with `OPENBLAS_CORETYPE=SkylakeX` and `OPENBLAS_L2_SIZE`
  unset (its AVX-512 kernels), in a subprocess; "-" on a host without AVX-512 (an AVX2 machine
  such as Zen 3, where the shipped row is OpenBLAS's own Haswell/Zen kernels);
- `XLA:CPU`: jax.jit of the same product (Eigen/XNNPACK), in a subprocess whose XLA_FLAGS pin
  its threads;
- `fused epilogue`: dot + bias + tanh-GELU as one hlocc kernel, beside the bare gemm.
bf16 rows: numpy has no bf16 gemm, so its rows are its f32 gemm on the same values.

Each library runs in a persistent subprocess with OPENBLAS_NUM_THREADS / XLA's threads set to the
row's thread count; hlocc runs here. The variants of a case are interleaved: `--runs` rounds, each
running every variant once (and the FMA probe), and each keeps its minimum, so the load of a
shared machine hits them alike. The FMA probe JIT-compiles a loop of independent FMA chains, one
vector register each (24 `<16 x float>` on AVX-512, 12 `<8 x float>` on AVX2), and runs it on
each thread count: the machine's real peak at that time,
which every row is also given as a % of. The header adds one thread's `vdpbf16ps` peak
(`bf16_probe_gflops`): where it is no higher than the FMA peak (Emerald Rapids: about half), bf16
cannot beat f32 by computing faster, only by moving fewer bytes. hlocc's results are checked
against numpy in float64 (f32: relative 1e-4, bf16: 2e-2) and a mismatch is printed in the row.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]

CORPUS_SHAPES = {
    # The JAX corpus's MLP (mlp_f32: [64,128] -> [512] -> [128]) and attention (attention_f32,
    # llama_block_f32: batched q k^T and p v), and the same layers at transformer size.
    "mlp_up": (1, 64, 512, 128), "mlp_down": (1, 64, 128, 512),
    "attn_qk": (2, 16, 16, 8), "attn_pv": (2, 16, 8, 16),
    "mlp_up_large": (1, 512, 3072, 768), "mlp_down_large": (1, 512, 768, 3072),
    "attn_qk_large": (12, 128, 128, 64), "attn_pv_large": (12, 128, 64, 128),
}


def dot_text(b: int, m: int, n: int, k: int, dtype: str, epilogue: bool = False) -> str:
    lhs, rhs, out = f"{dtype}[{b},{m},{k}]", f"{dtype}[{b},{k},{n}]", f"{dtype}[{b},{m},{n}]"
    dims = "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}"
    body = f"  a = {lhs} parameter(0)\n  w = {rhs} parameter(1)\n"
    if not epilogue:
        return f"HloModule dot\nENTRY e {{\n{body}  ROOT d = {out} dot(a, w), {dims}\n}}\n"
    t = dtype
    body += f"""  bias = {t}[{n}] parameter(2)
  d = {out} dot(a, w), {dims}
  bb = {out} broadcast(bias), dimensions={{2}}
  x = {out} add(d, bb)
  c0 = {out} broadcast({t}[] constant(0.5)), dimensions={{}}
  c1 = {out} broadcast({t}[] constant(1)), dimensions={{}}
  c2 = {out} broadcast({t}[] constant(0.044715)), dimensions={{}}
  c3 = {out} broadcast({t}[] constant(0.7978845608)), dimensions={{}}
  x3 = {out} multiply(x, x)
  x3b = {out} multiply(x3, x)
  inner = {out} multiply(c2, x3b)
  s = {out} add(x, inner)
  u = {out} multiply(c3, s)
  th = {out} tanh(u)
  p = {out} add(c1, th)
  h = {out} multiply(c0, x)
  ROOT g = {out} multiply(h, p)
"""
    return f"HloModule dot_gelu\nENTRY e {{\n{body}}}\n"


def inputs(shape, dtype: str, epilogue: bool = False) -> list[np.ndarray]:
    import ml_dtypes

    b, m, n, k = shape
    rng = np.random.default_rng(0)
    np_dtype = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    args = [rng.standard_normal((b, m, k)).astype(np_dtype), rng.standard_normal((b, k, n)).astype(np_dtype)]
    if epilogue:
        args.append(rng.standard_normal(n).astype(np_dtype))
    return args


def time_min_ms(fn, runs: int) -> float:
    fn()
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3


# -- the FMA probe ------------------------------------------------------------------------------
_PROBE: list = []


def _probe_shape() -> tuple[int, int]:
    """(chains, lanes) of the FMA probe: independent FMA chains of one vector register each, as
    many as the host's micro-kernel keeps accumulators (24 zmm on AVX-512, 12 ymm on AVX2)."""
    from hlocc.codegen.target import host_vector_isa

    isa = host_vector_isa()
    return (24 if isa.registers >= 32 else 12), isa.lanes


def fma_probe_gflops(threads: int, iterations: int = 20_000_000) -> float:
    """GFLOP/s of `threads` threads each running independent vector FMA chains (`_probe_shape`)."""
    if not _PROBE:
        _PROBE.append(_compile_probe())
    probe = _PROBE[0][1]
    chains, lanes = _probe_shape()
    probe(1000)
    ts = [threading.Thread(target=probe, args=(iterations,)) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    seconds = time.perf_counter() - t0
    return threads * iterations * chains * lanes * 2 / seconds / 1e9


def _compile_probe():
    """(engine, ctypes function) of the probe loop; the engine must stay alive."""
    import llvmlite.binding as llvm
    from llvmlite import ir

    from hlocc.runtime.jit import new_host_target_machine

    chains, lanes = _probe_shape()
    f32, v16 = ir.FloatType(), ir.VectorType(ir.FloatType(), lanes)
    mod = ir.Module("fma_probe")
    fn = ir.Function(mod, ir.FunctionType(f32, [ir.IntType(64)]), "probe")
    fma = ir.Function(mod, ir.FunctionType(v16, [v16] * 3), f"llvm.fma.v{lanes}f32")
    entry, loop, done = fn.append_basic_block(), fn.append_basic_block(), fn.append_basic_block()
    b = ir.IRBuilder(entry)
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(ir.IntType(64))
    accs = [b.phi(v16) for _ in range(chains)]
    x = ir.Constant(v16, [1.0000001] * lanes)
    y = ir.Constant(v16, [0.9999999] * lanes)
    new = [b.call(fma, [a, x, y]) for a in accs]
    nxt = b.add(i, ir.Constant(ir.IntType(64), 1))
    i.add_incoming(ir.Constant(ir.IntType(64), 0), entry)
    i.add_incoming(nxt, loop)
    for j, (a, n_) in enumerate(zip(accs, new)):  # distinct chains: identical ones could be merged
        a.add_incoming(ir.Constant(v16, [float(j + 1)] * lanes), entry)
        a.add_incoming(n_, loop)
    b.cbranch(b.icmp_signed("<", nxt, fn.args[0]), loop, done)
    b.position_at_end(done)
    total = new[0]
    for v in new[1:]:
        total = b.fadd(total, v)
    b.ret(b.extract_element(total, ir.Constant(ir.IntType(32), 0)))
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(str(mod)), new_host_target_machine())
    engine.finalize_object()
    return engine, ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("probe"))


def bf16_probe_gflops(iterations: int = 3_000_000) -> float | None:
    """GFLOP/s of one thread running 24 independent `vdpbf16ps` chains (64 flops each: 32 bf16
    products and their sums), None where the host has no AVX512-BF16: the ceiling of the bf16
    micro-kernel (`pack ... k_pairs`) beside the FMA probe's, the ceiling of the f32 one."""
    import llvmlite.binding as llvm

    from hlocc.runtime.jit import host_cpu_features, new_host_target_machine

    if "+avx512bf16" not in host_cpu_features():
        return None
    v, w = "<16 x float>", "<32 x bfloat>"
    one, half = (f"<{', '.join([f'bfloat {c}'] * 32)}>" for c in ("0xR3F80", "0xR3F00"))
    body = [f"  %a{j} = phi {v} [<{', '.join([f'float {j + 1}.0'] * 16)}>, %entry], [%b{j}, %loop]"
            for j in range(24)]
    body += [f"  %b{j} = call {v} @llvm.x86.avx512bf16.dpbf16ps.512({v} %a{j}, {w} {one}, {w} {half})"
             for j in range(24)]
    sums = [f"  %s{j} = fadd {v} {'%s' + str(j - 1) if j > 1 else '%b0'}, %b{j}" for j in range(1, 24)]
    text = "\n".join([
        f"declare {v} @llvm.x86.avx512bf16.dpbf16ps.512({v}, {w}, {w})",
        "define float @probe(i64 %n) {", "entry:", "  br label %loop", "loop:",
        "  %i = phi i64 [0, %entry], [%i1, %loop]", *body, "  %i1 = add i64 %i, 1",
        "  %c = icmp slt i64 %i1, %n", "  br i1 %c, label %loop, label %done", "done:", *sums,
        f"  %r = extractelement {v} %s23, i32 0", "  ret float %r", "}"])
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), new_host_target_machine())
    engine.finalize_object()
    probe = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("probe"))
    probe(1000)
    best = float("inf")
    for _ in range(3):
        t0 = time.thread_time()
        probe(iterations)
        best = min(best, time.thread_time() - t0)
    return iterations * 24 * 64 / best / 1e9


def openblas_core() -> str:
    """The kernel family numpy's OpenBLAS chose at load (its DYNAMIC_ARCH detection), or '?'."""
    for lib in pathlib.Path(np.__file__).parent.parent.glob("numpy.libs/libscipy_openblas*.so"):
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
            fn = getattr(ctypes.CDLL(str(lib)), name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode()
    return "?"


# -- library references in persistent subprocesses ----------------------------------------------------
def reference_worker(spec: dict) -> None:
    """A subprocess that times one run of numpy (or XLA:CPU) per case key it reads on stdin, and
    prints the milliseconds: the main process interleaves every variant of a case, round by round,
    so that the machine's load hits them alike."""
    prepared = {}
    for line in sys.stdin:
        key = line.strip()
        if key not in prepared:
            shape, dtype = spec["cases"][key]
            if spec["xla"]:
                import jax
                import jax.numpy as jnp

                jargs = [jnp.asarray(a) for a in inputs(shape, dtype)]
                fn = jax.jit(jnp.matmul)
                prepared[key] = lambda fn=fn, jargs=jargs: fn(*jargs).block_until_ready()
            else:
                args = [a.astype(np.float32) for a in inputs(shape, dtype)]
                prepared[key] = lambda args=args: np.matmul(args[0], args[1])
            prepared[key]()
        t0 = time.perf_counter()
        prepared[key]()
        print((time.perf_counter() - t0) * 1e3, flush=True)


class Reference:
    """One library variant (numpy as shipped, numpy SkylakeX, XLA:CPU) on `threads` threads."""

    def __init__(self, label: str, spec: dict, threads: int, coretype: str | None, xla: bool):
        self.label, self.threads = label, threads
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
        if coretype:
            env["OPENBLAS_CORETYPE"] = coretype
            env.pop("OPENBLAS_L2_SIZE", None)
        if xla:
            flags = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1" if threads == 1 else ""
            env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
            env["JAX_PLATFORMS"] = "cpu"
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker", json.dumps(dict(spec, xla=xla))],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def time_ms(self, key: str) -> float | None:
        try:
            self.proc.stdin.write(key + "\n")
            self.proc.stdin.flush()
            return float(self.proc.stdout.readline())
        except (ValueError, OSError):
            return None

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


# -- the run ----------------------------------------------------------------------------------------
def measure(cases: dict, threads: list[int], runs: int, epilogue_keys: set[str], xla: bool
            ) -> tuple[dict, dict, dict]:
    """Per case: compile hlocc's kernels and check them, then `runs` rounds in which every variant
    (hlocc, hlocc + GELU, the FMA probe, each library) runs once per thread count; the minimum of
    each. Returns (times, notes, peaks)."""
    import hlocc
    from hlocc.codegen.target import host_vector_isa

    spec = {"cases": cases}
    skx = host_vector_isa().lanes == 16  # OpenBLAS's SkylakeX kernels need AVX-512
    refs = [Reference(label, spec, t, coretype, use_xla) for t in threads
            for label, coretype, use_xla in (("numpy", None, False), ("skx", "SkylakeX", False), ("xla", None, True))
            if use_xla <= xla and (skx or coretype is None)]
    times: dict[str, float] = {}
    notes: dict[str, str] = {}
    peaks: dict[str, float] = {}

    def keep(name: str, ms: float | None) -> None:
        if ms is not None:
            times[name] = min(times.get(name, float("inf")), ms)
    try:
        for key, (shape, dtype) in cases.items():
            runners = {}
            for epilogue in ((False, True) if key in epilogue_keys else (False,)):
                args = inputs(shape, dtype, epilogue)
                exe = hlocc.compile(dot_text(*shape, dtype, epilogue), "cpu", gemm="codegen")
                name = "hlocc+gelu" if epilogue else "hlocc"
                notes[f"{name}|{key}"] = check(exe, args, dtype, epilogue)
                runners[name] = lambda exe=exe, args=args: exe(*args)
            for _ in range(runs):
                for t in threads:
                    os.environ["HLOCC_CPU_THREADS"] = str(t)
                    for name, run in runners.items():
                        run()
                        t0 = time.perf_counter()
                        run()
                        keep(f"{name}|{key}|{t}", (time.perf_counter() - t0) * 1e3)
                    peaks[f"{key}|{t}"] = max(peaks.get(f"{key}|{t}", 0.0), fma_probe_gflops(t, 5_000_000))
                    for ref in refs:
                        if ref.threads == t:
                            keep(f"{ref.label}|{key}|{t}", ref.time_ms(key))
    finally:
        os.environ.pop("HLOCC_CPU_THREADS", None)
        for ref in refs:
            ref.close()
    return times, notes, peaks


def check(exe, args: list[np.ndarray], dtype: str, epilogue: bool) -> str:
    """'' when hlocc's result matches numpy in float64 (f32: 1e-4 relative, bf16: 2e-2), else a note."""
    f64 = [a.astype(np.float64) for a in args]
    ref = f64[0] @ f64[1]
    if epilogue:
        x = ref + f64[2]
        ref = 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
    got = np.asarray(exe(*args), np.float64)
    err = float(np.max(np.abs(got - ref)) / max(1.0, float(np.max(np.abs(ref))))) if ref.size else 0.0
    return "" if err <= (2e-2 if dtype == "bf16" else 1e-4) else f" MISMATCH {err:.1e}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="256 and the corpus's small shapes, 1 run (a smoke test)")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", choices=("square", "corpus", "all"), default="all")
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--no-xla", action="store_true")
    ap.add_argument("--out", help="also write the table (markdown) to this file")
    args = ap.parse_args()
    if args.worker:
        reference_worker(json.loads(args.worker))
        return
    sys.path.insert(0, str(ROOT / "src"))
    sizes = [256] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 1 if args.quick else args.runs
    threads = [int(t) for t in args.threads.split(",")]
    shapes = {}
    if args.shapes in ("square", "all"):
        shapes |= {f"square_{n}": (1, n, n, n) for n in sizes}
    if args.shapes in ("corpus", "all"):
        shapes |= {k: v for k, v in CORPUS_SHAPES.items() if not (args.quick and "large" in k)}
    cases = {f"{name}|{dtype}": (shape, dtype) for dtype in args.dtypes.split(",") for name, shape in shapes.items()}
    epilogue_keys = {k for k in cases if k.split("|")[0] in ("square_1024", "square_256", "mlp_up", "mlp_up_large")}

    times, notes, peaks = measure(cases, threads, runs, epilogue_keys, not args.no_xla)
    refs = times
    lines = ["GFLOP/s (% of the FMA probe's peak measured in the same rounds), minimum time of each variant over "
             f"{runs} interleaved rounds.", "",
             "| shape (BxMxNxK) | dtype | thr | FMA peak | hlocc codegen | numpy shipped | numpy SkylakeX | XLA:CPU "
             "| hlocc/SkylakeX | hlocc/shipped | dot+bias+GELU vs bare |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, (shape, dtype) in cases.items():
        flops = 2.0 * np.prod(shape)
        name = key.split("|")[0]
        for t in threads:
            peak = peaks.get(f"{key}|{t}", float("nan"))

            def rate(label: str, key=key, t=t, flops=flops, peak=peak) -> str:
                ms = times.get(f"{label}|{key}|{t}")
                return "-" if ms is None else f"{flops / ms / 1e6:.1f} ({100 * flops / ms / 1e6 / peak:.0f}%)"
            ours, skx, shipped = (times.get(f"hlocc|{key}|{t}"), refs.get(f"skx|{key}|{t}"),
                                  refs.get(f"numpy|{key}|{t}"))
            fused = times.get(f"hlocc+gelu|{key}|{t}")
            lines.append(f"| {name} {'x'.join(map(str, shape))} | {dtype} | {t} | {peak:.0f} | {rate('hlocc')}"
                         f"{notes.get(f'hlocc|{key}', '')} | {rate('numpy')} | {rate('skx')} | {rate('xla')} | "
                         f"{f'{skx / ours:.2f}' if ours and skx else '-'} | "
                         f"{f'{shipped / ours:.2f}' if ours and shipped else '-'} | "
                         + (f"{ours / fused:.2f}{notes.get(f'hlocc+gelu|{key}', '')}" if fused else "-") + " |")
    fma = fma_probe_gflops(1, 5_000_000)
    bf16 = bf16_probe_gflops()
    lines[:0] = [f"Peaks of one thread, measured now: f32 FMA {fma:.0f} GFLOP/s, vdpbf16ps "
                 + (f"{bf16:.0f} GFLOP/s" if bf16 else "absent") + f"; numpy's OpenBLAS runs its {openblas_core()} "
                 f"kernels (as shipped, without OPENBLAS_CORETYPE).", ""]
    text = "\n".join(lines)
    print(text)
    if args.out:
        pathlib.Path(args.out).write_text(
            f"# benchmarks/gemm.py {' '.join(sys.argv[1:])}\n\nMachine: {os.cpu_count()} cores; "
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. Ratios > 1: hlocc faster.\n\n{text}\n")


if __name__ == "__main__":
    main()
