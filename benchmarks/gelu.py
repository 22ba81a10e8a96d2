"""GELU: hlocc against jax.jit in the same run (issues 4 and 7).

    python benchmarks/gelu.py [--shape 6,512,4096] [--runs 20] [--dtypes f32,bf16] [--backend cpu|cuda]

For each dtype it compiles the seed's GELU fusion (examples/gelu.hlo at the given shape) with
hlocc and the same function with jax.jit on the same device (XLA:CPU for cpu, XLA:GPU for cuda,
where the input and the results stay on the GPU), checks that both agree, times warmed runs
(median), and prints the ratio (XLA time / hlocc time: above 1 means hlocc is faster), the
achieved bandwidth of each (bytes read + written / time) against a reference measured in the same
run (a numpy copy of the same bytes on the CPU; the memory's peak bandwidth on a GPU), and
hlocc's compile time per stage.
"""

from __future__ import annotations

import argparse
import pathlib
import time

import numpy as np
from programs import median_ms  # one timing rule for every benchmark (this folder is on sys.path)

ROOT = pathlib.Path(__file__).resolve().parents[1]




def gelu_text(shape: list[int], dtype: str) -> str:
    text = (ROOT / "examples" / "gelu.hlo").read_text()
    return text.replace("8,1024", ",".join(map(str, shape))).replace("{1,0}", "").replace("bf16", dtype)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="6,512,4096")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dtypes", default="f32,bf16")
    ap.add_argument("--backend", choices=("cpu", "cuda"), default="cpu")
    args = ap.parse_args()
    shape = [int(s) for s in args.shape.split(",")]

    import jax

    platform = "gpu" if args.backend == "cuda" else "cpu"
    print(f"GELU {shape}, {args.runs} runs, median; hlocc --backend {args.backend}, jax {jax.__version__} on "
          f"{jax.devices(platform)[0]}")
    reference = "peak GB/s" if args.backend == "cuda" else "copy GB/s"
    print(f"{'dtype':6} {'hlocc ms':>9} {'xla ms':>8} {'ratio':>6} {'hlocc GB/s':>10} {'xla GB/s':>9} "
          f"{reference:>9} {'compile ms':>10}")
    for dtype in args.dtypes.split(","):
        bench_one(dtype, shape, args.runs, args.backend)


def bench_one(dtype: str, shape: list[int], runs: int, backend: str = "cpu") -> None:
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    import hlocc

    np_dtype = {"f32": np.float32, "bf16": ml_dtypes.bfloat16}[dtype]
    x = np.random.default_rng(0).standard_normal(shape).astype(np_dtype)
    t0 = time.perf_counter()
    exe = hlocc.compile(gelu_text(shape, dtype), backend=backend)
    compile_ms = (time.perf_counter() - t0) * 1e3

    def gelu(v):
        c = jnp.asarray(0.7978845608028654, v.dtype)
        return v * (0.5 * (1 + jnp.tanh(c * (v + jnp.asarray(0.044715, v.dtype) * v * v * v))))

    device = jax.devices("gpu" if backend == "cuda" else "cpu")[0]
    jitted = jax.jit(gelu)  # runs where its input is
    xj = jax.device_put(x, device)
    ours = np.asarray(exe(xj if backend == "cuda" else x)).astype(np.float32)
    theirs = np.asarray(jitted(xj)).astype(np.float32)
    err = float(np.max(np.abs(ours - theirs)))
    if backend == "cuda":  # input on the GPU (DLPack, no copy), result left there
        t_ours = median_ms(lambda: exe(xj, return_device_arrays=True), runs)
    else:
        t_ours = median_ms(lambda: exe(x), runs)
    t_xla = median_ms(lambda: jitted(xj).block_until_ready(), runs)
    nbytes = 2 * x.nbytes
    if backend == "cuda":
        from hlocc.backends.cuda.driver import query_device

        t_copy = nbytes / query_device(0).peak_bandwidth * 1e3
    else:
        out = np.empty_like(x)
        t_copy = median_ms(lambda: np.copyto(out, x), runs)

    def gbs(ms: float) -> float:
        return nbytes / ms / 1e6

    print(f"{dtype:6} {t_ours:9.2f} {t_xla:8.2f} {t_xla / t_ours:6.2f} {gbs(t_ours):10.1f} {gbs(t_xla):9.1f} "
          f"{gbs(t_copy):9.1f} {compile_ms:10.1f}   max|hlocc-xla| = {err:.2e}")
    stages = {k.removeprefix("kernel:"): round(v, 1) for k, v in exe.compile_times_ms.items()}
    print(f"       compile stages (ms): {stages}")

if __name__ == "__main__":
    main()
