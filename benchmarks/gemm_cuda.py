"""GPU matrix products: hlocc's generated mma.sync gemm against cuBLAS on the same card, in the same
run (issue 17 item 4's acceptance: bf16 4096³ and 8192³, target ≥ 60% of cuBLAS with mma.sync).

    python benchmarks/gemm_cuda.py [--backend cuda|cuda-sim] [--sizes 4096,8192] [--dtypes bf16,f16]
                                   [--runs 20] [--epilogue] [--sweep]

Per square size N and dtype: `hlocc codegen` (`hlocc.compile(..., gemm="codegen")`: the dot fusion
as the mma.sync kernel codegen/schedule/gpu_choice.py chooses for the GPU's arch) and `cuBLAS`
(`gemm="library"`: nvmath-python's cuBLAS binding), both on the same device with inputs already
there and results left there (device arrays in and out, as a user in a loop). Each variant is timed
as `--runs` back-to-back calls (each hlocc call returns once its stream is done; torch's are closed
by one synchronization), best of 3 such rounds, interleaved between the variants; TFLOP/s = 2N³ /
time. The results are compared with cuBLAS's (relative 2e-2 of the largest magnitude: f32
accumulation, bf16 rounding of the output). `--epilogue` adds dot + bias + ReLU fused into the
generated kernel. Where torch sees the GPU, `torch.matmul` on the same inputs is a third variant
(PyTorch's own cuBLAS call), and every variant also gets its kernels' own time (GPU ms: CUPTI
through torch.profiler), apart from the host's.

`--sweep` times every point of the GPU schedule space (`gpu_choice.MMA_CANDIDATES`: block tile,
warp grid, K block, cp.async stages) as its own generated variant, each checked against cuBLAS:
what a GPU tuner would search, and how the default got chosen.

`--backend cuda-sim` runs the same path with the kernels in SIMT simulation on the host (a smoke test
of this script with small sizes; its times are not GPU times).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

import numpy as np

import hlocc
from hlocc.codegen.schedule import MatmulSchedule, use_schedule
from hlocc.codegen.schedule.gpu_choice import MMA_CANDIDATES

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from programs import gpu_time_ms  # noqa: E402


def dot_text(n: int, dtype: str, epilogue: bool) -> str:
    tail = (f"  bias = {dtype}[{n}] parameter(2)\n  bb = {dtype}[{n},{n}] broadcast(bias), dimensions={{1}}\n"
            f"  s = {dtype}[{n},{n}] add(d, bb)\n  z = {dtype}[] constant(0)\n"
            f"  zb = {dtype}[{n},{n}] broadcast(z), dimensions={{}}\n  ROOT r = {dtype}[{n},{n}] maximum(s, zb)\n"
            if epilogue else "")
    root = "d" if epilogue else "ROOT d"
    return (f"HloModule gemm\nENTRY e {{\n  a = {dtype}[{n},{n}] parameter(0)\n  b = {dtype}[{n},{n}] parameter(1)\n"
            f"  {root} = {dtype}[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n"
            f"{tail}}}")


def schedule_name(s: MatmulSchedule) -> str:
    """A schedule as `MCxNCxKC/WMxWN/S` (block tile, warp grid, stages)."""
    return f"{s.mc}x{s.nc}x{s.kc}/{s.warp_grid[0]}x{s.warp_grid[1]}/{s.stages}"


def swept(sweep: str | None) -> list[MatmulSchedule]:
    """The candidates `--sweep` names (the arch's own choice is also the `hlocc codegen` variant)."""
    if sweep is None:
        return []
    return list(MMA_CANDIDATES) if sweep == "all" else [MMA_CANDIDATES[int(i)] for i in sweep.split(",")]


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
        settle(result)
        best = min(best, (time.perf_counter() - t0) * 1e3 / runs)
    return best


def settle(result) -> None:
    """Wait for `result` without reading it back (a read of N² elements and their conversion on the
    host cost more than the product: 3.5 ms a call at N = 4096 over 10 calls, as measured on an H200).
    An hlocc run returns once its stream is done; torch's are asynchronous."""
    if hasattr(result, "is_cuda") and result.is_cuda:
        import torch

        torch.cuda.synchronize()


def host(result) -> np.ndarray:
    """The result on the host, as f32 (for the comparison)."""
    if hasattr(result, "is_cuda"):  # a torch tensor
        return result.float().cpu().numpy()
    return np.asarray(result, np.float32)


def torch_matmul(n: int, dtype: str, epilogue: bool, arrays: list[np.ndarray]):
    """torch.matmul on the same inputs (PyTorch's cuBLAS, its own heuristics and workspace): a second
    reference for what the card gives, where torch sees a GPU; else None."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    kind = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[dtype]
    a, b, *bias = [torch.from_numpy(x.astype(np.float32)).to("cuda", kind) for x in arrays]
    if epilogue:
        return lambda: torch.relu(torch.matmul(a, b) + bias[0])
    return lambda: torch.matmul(a, b)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", choices=("cuda", "cuda-sim"), default="cuda")
    ap.add_argument("--sizes", default="4096,8192")
    ap.add_argument("--dtypes", default="bf16")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--epilogue", action="store_true", help="also dot + bias + ReLU fused")
    ap.add_argument("--sweep", nargs="?", const="all", default=None,
                    help="the schedules of gpu_choice.MMA_CANDIDATES as variants: all, or indices (1,4,13)")
    args = ap.parse_args()
    if args.backend == "cuda-sim":
        print("cuda-sim: the GPU kernels run in simulation on the host; its times are not GPU times")
    device_results = args.backend == "cuda"
    # GPU ms and TFLOP/s: the kernels' own time (CUPTI through torch.profiler, programs.gpu_time_ms)
    print(f"{'case':<28} {'variant':<18} {'ms':>10} {'TFLOP/s':>9} {'vs cuBLAS':>10} {'GPU ms':>8} {'TFLOP/s':>8}"
          "  check")
    for dtype in args.dtypes.split(","):
        for n in map(int, args.sizes.split(",")):
            for epilogue in (False, True) if args.epilogue else (False,):
                text = dot_text(n, dtype, epilogue)
                inputs = on_device(args.backend, host_inputs(n, dtype, epilogue), dtype)
                variants = {name: hlocc.compile(text, args.backend, gemm=gemm)
                            for name, gemm in (("cuBLAS", "library"), ("hlocc codegen", "codegen"))}
                for schedule in swept(args.sweep):
                    with use_schedule(schedule):
                        variants[schedule_name(schedule)] = hlocc.compile(text, args.backend, gemm="codegen")
                calls = {name: (lambda exe=exe, inputs=inputs: exe(*inputs, return_device_arrays=device_results))
                         for name, exe in variants.items()}
                reference = device_results and torch_matmul(n, dtype, epilogue, host_inputs(n, dtype, epilogue))
                if reference:
                    calls["torch.matmul"] = reference
                results = {name: host(call()) for name, call in calls.items()}
                scale = max(1e-6, float(np.abs(results["cuBLAS"]).max()))
                times = {name: time_ms(call, args.runs) for name, call in calls.items()}
                gpu = {name: gpu_time_ms(call, args.runs) if device_results else None for name, call in calls.items()}
                case = f"{dtype} {n}^3" + (" +bias+relu" if epilogue else "")
                for name, ms in times.items():
                    ratio = times["cuBLAS"] / ms
                    errors = float(np.abs(results[name] - results["cuBLAS"]).max()) / scale
                    check = "" if name == "cuBLAS" else ("ok" if errors <= 2e-2 else f"MISMATCH {errors:.2e}")
                    kernel = (f"{gpu[name][0]:>8.3f} {2 * n ** 3 / gpu[name][0] / 1e9:>8.1f}" if gpu[name]
                              else f"{'-':>8} {'-':>8}")
                    print(f"{case:<28} {name:<18} {ms:>10.3f} {2 * n ** 3 / ms / 1e9:>9.1f} {ratio:>9.0%} {kernel}  "
                          f"{check}")


if __name__ == "__main__":
    main()
