"""GPU matrix products: hlocc's generated mma.sync gemm against cuBLAS on the same card, in the same
run (issue 17 item 4's acceptance: bf16 4096³ and 8192³, target ≥ 60% of cuBLAS with mma.sync).

    python benchmarks/gemm_cuda.py [--backend cuda|cuda-sim] [--sizes 4096,8192] [--dtypes bf16,f16]
                                   [--runs 20] [--epilogue]

Per square size N and dtype: `hlocc codegen` (`hlocc.compile(..., gemm="codegen")`: the dot fusion
as the 128x128x32, 2x2-warp, 3-stage cp.async kernel of codegen/schedule/gpu_choice.py) and
`cuBLAS` (`gemm="library"`: nvmath-python's cuBLAS binding), both on the same device with inputs
already there and results left there (device arrays in and out, as a user in a loop). Each variant
is timed as `--runs` back-to-back calls closed by one read of the last result (which waits for the
stream), best of 3 such rounds, interleaved between the variants; TFLOP/s = 2N³ / time. The two
results are compared (relative 2e-2 of the largest magnitude: f32 accumulation, bf16 rounding of
the output). `--epilogue` adds dot + bias + ReLU fused into the generated kernel.

`--backend cuda-sim` runs the same path with the kernels in SIMT simulation on the host (a smoke test
of this script with small sizes; its times are not GPU times).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import hlocc


def dot_text(n: int, dtype: str, epilogue: bool) -> str:
    tail = (f"  bias = {dtype}[{n}] parameter(2)\n  bb = {dtype}[{n},{n}] broadcast(bias), dimensions={{1}}\n"
            f"  s = {dtype}[{n},{n}] add(d, bb)\n  z = {dtype}[] constant(0)\n"
            f"  zb = {dtype}[{n},{n}] broadcast(z), dimensions={{}}\n  ROOT r = {dtype}[{n},{n}] maximum(s, zb)\n"
            if epilogue else "")
    root = "d" if epilogue else "ROOT d"
    return (f"HloModule gemm\nENTRY e {{\n  a = {dtype}[{n},{n}] parameter(0)\n  b = {dtype}[{n},{n}] parameter(1)\n"
            f"  {root} = {dtype}[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
            f"{tail}}}")


def host_inputs(n: int, dtype: str, epilogue: bool) -> list[np.ndarray]:
    np_dtype = hlocc.hlo.types.PRIMITIVE_TYPES[dtype].dtype
    rng = np.random.default_rng(0)
    shapes = [(n, n), (n, n)] + ([(n,)] if epilogue else [])
    return [(rng.standard_normal(s) / np.sqrt(n) ** 0.5).astype(np_dtype) for s in shapes]


def on_device(backend: str, arrays: list[np.ndarray], dtype: str) -> list:
    """The arrays copied to the device once (through a copy program that returns device arrays)."""
    if backend != "cuda":
        return arrays
    out = []
    for a in arrays:
        dims = ",".join(map(str, a.shape))
        copy = hlocc.compile(f"HloModule put\nENTRY e {{\n  p = {dtype}[{dims}] parameter(0)\n"
                             f"  ROOT c = {dtype}[{dims}] copy(p)\n}}", backend, hlo_passes=False)
        out.append(copy(a, return_device_arrays=True))
    return out


def time_ms(call, runs: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(runs):
            result = call()
        np.asarray(result)  # one read: waits for the stream
        best = min(best, (time.perf_counter() - t0) * 1e3 / runs)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("cuda", "cuda-sim"), default="cuda")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epilogue", action="store_true", help="also dot + bias + ReLU fused")
    args = ap.parse_args()
    if args.backend == "cuda-sim":
        print("cuda-sim: the GPU kernels run in simulation on the host; its times are not GPU times")
    device_results = args.backend == "cuda"
    print(f"{'case':<28} {'variant':<16} {'ms':>10} {'TFLOP/s':>9} {'vs cuBLAS':>10}  check")
    for dtype in args.dtypes.split(","):
        for n in map(int, args.sizes.split(",")):
            for epilogue in (False, True) if args.epilogue else (False,):
                text = dot_text(n, dtype, epilogue)
                inputs = on_device(args.backend, host_inputs(n, dtype, epilogue), dtype)
                variants = {name: hlocc.compile(text, args.backend, gemm=gemm)
                            for name, gemm in (("cuBLAS", "library"), ("hlocc codegen", "codegen"))}
                calls = {name: (lambda exe=exe, inputs=inputs: exe(*inputs, return_device_arrays=device_results))
                         for name, exe in variants.items()}
                results = {name: np.asarray(call(), np.float32) for name, call in calls.items()}
                scale = max(1e-6, float(np.abs(results["cuBLAS"]).max()))
                error = float(np.abs(results["hlocc codegen"] - results["cuBLAS"]).max()) / scale
                times = {name: time_ms(call, args.runs) for name, call in calls.items()}
                case = f"{dtype} {n}^3" + (" +bias+relu" if epilogue else "")
                for name, ms in times.items():
                    ratio = times["cuBLAS"] / ms
                    check = "" if name == "cuBLAS" else ("ok" if error <= 2e-2 else f"MISMATCH {error:.2e}")
                    print(f"{case:<28} {name:<16} {ms:>10.3f} {2 * n ** 3 / ms / 1e9:>9.1f} {ratio:>9.0%}  {check}")


if __name__ == "__main__":
    main()
