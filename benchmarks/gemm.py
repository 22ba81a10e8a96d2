"""Matrix products: hlocc's generated gemm against numpy (and XLA:CPU through jax, when installed) in
the same run (issue 17).

    python benchmarks/gemm.py [--sizes 256,512,1024] [--dtypes f32,bf16] [--runs 10]
                              [--epilogue none|bias_relu] [--schedule MC,NC,KC,MR,NR,U] [--quick]

For each square size and dtype it compiles one dot (with the epilogue, when asked) with
`gemm="library"` (numpy's BLAS called by hlocc's runtime) and `gemm="codegen"` (the dot fusion as a
generated kernel, with codegen/schedule/choice.py's schedule or the one given), checks that they
agree with numpy, times warmed runs (median) and prints milliseconds and GFLOP/s of each. bf16
inputs go to numpy as float32 (numpy has no bf16 gemm). Thread counts are the environment's: run
with `OPENBLAS_NUM_THREADS=1 HLOCC_CPU_THREADS=1` for one core. On a loaded machine the figures
are indicative only; compare within one run.

Not yet (issue 17): the FMA-throughput probe (% of peak), OpenBLAS with OPENBLAS_CORETYPE=SkylakeX,
the JAX corpus shapes, 1 vs 2 threads in one run, `--backend cuda`.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from programs import median_ms  # one timing rule for every benchmark (this folder is on sys.path)


def gemm_text(n: int, dtype: str, epilogue: str) -> str:
    body = f"""  a = {dtype}[{n},{n}] parameter(0)
  b = {dtype}[{n},{n}] parameter(1)
"""
    if epilogue == "bias_relu":
        body += f"""  bias = {dtype}[{n}] parameter(2)
  d = {dtype}[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = {dtype}[{n},{n}] broadcast(bias), dimensions={{1}}
  s = {dtype}[{n},{n}] add(d, bb)
  z = {dtype}[{n},{n}] broadcast({dtype}[] constant(0)), dimensions={{}}
  ROOT r = {dtype}[{n},{n}] maximum(s, z)
"""
    else:
        body += f"  ROOT d = {dtype}[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
    return f"HloModule gemm_{n}_{dtype}\nENTRY e {{\n{body}}}\n"


def numpy_reference(args: list[np.ndarray], epilogue: str) -> np.ndarray:
    out = args[0].astype(np.float32) @ args[1].astype(np.float32)
    if epilogue == "bias_relu":
        out = np.maximum(out + args[2].astype(np.float32), 0)
    return out


def bench_one(n: int, dtype: str, epilogue: str, runs: int, schedule) -> None:
    import hlocc
    from hlocc.codegen.schedule import use_schedule
    from hlocc.hlo.types import PRIMITIVE_TYPES

    rng = np.random.default_rng(0)
    np_dtype = PRIMITIVE_TYPES[dtype].dtype
    args = [rng.standard_normal((n, n)).astype(np_dtype) for _ in range(2)]
    if epilogue == "bias_relu":
        args.append(rng.standard_normal(n).astype(np_dtype))
    flops = 2.0 * n ** 3
    expected = numpy_reference(args, epilogue)
    f32_args = [a.astype(np.float32) for a in args]
    rows = [("numpy", median_ms(lambda: numpy_reference(f32_args, epilogue), runs), 0.0)]
    text = gemm_text(n, dtype, epilogue)
    for gemm in ("library", "codegen"):
        t0 = time.perf_counter()
        if gemm == "codegen" and schedule is not None:
            from hlocc.backends.cpu import kernel as cpu_kernel

            cpu_kernel._CACHE.clear()  # a forced schedule is not in the kernel cache's key
            with use_schedule(schedule):
                exe = hlocc.compile(text, "cpu", gemm=gemm)
        else:
            exe = hlocc.compile(text, "cpu", gemm=gemm)
        compile_ms = (time.perf_counter() - t0) * 1e3
        got = np.asarray(exe(*args), np.float32)
        tol = 2e-2 if dtype == "bf16" else 1e-3
        error = float(np.max(np.abs(got - expected)) / max(1.0, float(np.max(np.abs(expected)))))
        status = "ok" if error <= tol else f"MISMATCH (relative error {error:.2e})"
        rows.append((f"hlocc {gemm} [{status}]", median_ms(lambda exe=exe: exe(*args), runs), compile_ms))
    try:
        import jax
        import jax.numpy as jnp

        ja = [jnp.asarray(a) for a in args]
        fn = jax.jit(lambda a, b, *rest: jnp.maximum(a @ b + rest[0], 0) if rest else a @ b)
        rows.append(("XLA:CPU (jax)", median_ms(lambda: fn(*ja).block_until_ready(), runs), 0.0))
    except ImportError:
        pass
    for name, ms, compile_ms in rows:
        extra = f"  compile {compile_ms:8.1f} ms" if compile_ms else ""
        print(f"{n:5} {dtype:5} {name:34} {ms:9.3f} ms {flops / ms / 1e6:8.1f} GFLOP/s{extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="256,512,1024")
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--epilogue", choices=("none", "bias_relu"), default="none")
    ap.add_argument("--schedule", default="", help="MC,NC,KC,MR,NR,U (default: the compiler's choice)")
    ap.add_argument("--quick", action="store_true", help="one small size, 2 runs (a smoke test)")
    args = ap.parse_args()
    from hlocc.codegen.schedule import MatmulSchedule

    schedule = MatmulSchedule(*map(int, args.schedule.split(","))) if args.schedule else None
    sizes = [48] if args.quick else [int(s) for s in args.sizes.split(",")]
    runs = 2 if args.quick else args.runs
    print(f"gemm C = A @ B (square), epilogue {args.epilogue}, median of {runs} runs")
    for n in sizes:
        for dtype in args.dtypes.split(","):
            bench_one(n, dtype, args.epilogue, runs, schedule)


if __name__ == "__main__":
    main()
