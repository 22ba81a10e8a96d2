"""Whole programs: hlocc against XLA on the JAX corpus, in the same run (issues 5 and 7).

    python benchmarks/programs.py [--cases perf|all|matmul|NAME,...] [--runs 20] [--data DIR]
                                  [--backend cpu|cuda|cuda-sim] [--gemm library,auto,...]

For each case of shared/corpus/jax it compiles the module's HLO text with hlocc (`--backend`,
default cpu) and the *same text* with XLA on the same kind of device (jaxlib's client: HLO text →
StableHLO → compile, what `jax.jit` of the original function runs): XLA:CPU for cpu, XLA:GPU for
cuda (inputs and outputs stay on the GPU for both: DLPack in, device arrays out). cuda-sim runs the
GPU kernels in simulation on the host: its times are not GPU times, only a check that the cuda path
runs. It checks hlocc's outputs against the corpus's reference outputs, times warmed runs of both
(median; the two arms' calls interleaved in blocks: `interleaved_median_ms`) and prints the ratio
(XLA time / hlocc time: above 1 means hlocc is faster), the geometric mean of the ratios, and the
kernels each compiler made: hlocc's generated kernels + library calls + host fallbacks beside the
fusions and library calls in XLA's optimized module. `--gemm` takes one or more of hlocc's gemm
modes (library, codegen, auto): each case is compiled and timed once per mode, against one XLA
reference, so the modes compare in one run. `--cases matmul` picks the cases whose HLO has a dot.

The perf cases ship without inputs; they are recreated once with the corpus's own generator
(needs jax==0.10.2) into --data (default ~/.cache/hlocc/jax_corpus).
"""

from __future__ import annotations

import argparse
import math
import os
import pathlib
import re
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus" / "jax"
sys.path.insert(0, str(ROOT / "tests"))


def median_ms(fn, runs: int) -> float:
    return interleaved_median_ms([fn], runs)[0]


BLOCK_WARMUP, BLOCK_TIMED = 2, 3
"""`interleaved_median_ms`' blocks: calls of one arm in a row, the first `BLOCK_WARMUP` untimed."""


def interleaved_median_ms(fns, runs: int) -> list[float]:
    """The median of `runs` timed calls of each of `fns`, taken in blocks interleaved round by
    round: each round runs every arm `BLOCK_WARMUP + BLOCK_TIMED` times in a row and times the
    last `BLOCK_TIMED`. Rounds spread a slow spell of the machine over every arm (on a 2-vCPU VM,
    20 calls of one arm and then 20 of the other read the same hlocc kernel at 0.039 and
    0.094 ms in two runs); blocks keep one arm from timing another's aftermath. Interleaved call
    by call, the call after XLA:CPU's paid for XLA's worker threads, which keep spinning on the
    2 vCPUs for a while after its call returns: in one process, stitched softmax f32[512,4096]
    took 1.07 ms after the unstitched plan and 1.32-1.65 ms after XLA (1.00 ms in blocks)."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    rounds = -(-runs // BLOCK_TIMED)
    for _ in range(rounds):
        for fn, out in zip(fns, times):
            for k in range(BLOCK_WARMUP + BLOCK_TIMED):
                t0 = time.perf_counter()
                fn()
                if k >= BLOCK_WARMUP:
                    out.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def ensure_data(cases: list[dict], data: pathlib.Path) -> None:
    missing = [c["name"] for c in cases if not (CORPUS / f"{c['name']}.in.npz").is_file()
               and not (data / f"{c['name']}.in.npz").is_file()]
    if missing:
        data.mkdir(parents=True, exist_ok=True)
        print(f"recreating {', '.join(missing)} in {data} ...", flush=True)
        from corpus import recreate_jax_cases

        recreate_jax_cases(missing, data).check_returncode()


def case_dir(name: str, data: pathlib.Path) -> pathlib.Path:
    return CORPUS if (CORPUS / f"{name}.in.npz").is_file() else data


class XlaReference:
    """XLA through jaxlib on `platform` ("cpu" or "gpu"): compile HLO text, run on device buffers,
    count the optimized kernels."""

    def __init__(self, text: str, platform: str = "cpu"):
        import jax
        import jax._src.lib as jlib
        from jax._src.lib import _jax

        module = jlib.hlo.hlo_module_from_text(text)
        stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
        self.device = jax.devices(platform)[0]
        self.exe = self.device.client.compile_and_load(stablehlo, _jax.DeviceList((self.device,)),
                                                       _jax.CompileOptions())
        self.optimized = "\n".join(m.to_string() for m in self.exe.hlo_modules())

    def put(self, args):
        import jax

        return [jax.device_put(a, self.device) for a in args]

    def run(self, buffers, to_host: bool = True):
        outs = self.exe.execute_sharded(buffers).disassemble_into_single_device_arrays()
        for o in outs:
            o[0].block_until_ready()
        return [np.asarray(o[0]) for o in outs] if to_host else outs

    def kernels(self) -> str:
        fusions = len(re.findall(r"= [^=]*? fusion\(", self.optimized))
        library = len(re.findall(r"= [^=]*? (?:dot|convolution|custom-call|sort|topk)\(", self.optimized))
        return f"{fusions}+{library}"


XlaCpu = XlaReference  # the CPU reference (benchmarks/emitters.py)


def reference_platform(backend: str) -> str:
    """Where XLA runs for a comparison with `backend`: the GPU for cuda, the host otherwise."""
    return "gpu" if backend == "cuda" else "cpu"


def gpu_time_ms(fn: Callable[[], object], runs: int) -> tuple[float, float] | None:
    """The GPU's own time per call of `fn` (its kernels, copies and sets, as CUPTI records them
    through torch.profiler: the device's durations, not the host's launches) and the number of
    those activities per call; None where torch cannot see a GPU (torch is the test extra's).
    Host-side overhead is what the wall times add on top."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    fn()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(runs):
            fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.device_type() == torch.autograd.DeviceType.CUDA]
    if not events:
        return None
    return sum(e.duration_ns() for e in events) / 1e6 / runs, len(events) / runs


def hlocc_runner(exe, args, backend: str, xla: XlaReference):
    """A call that runs `exe` once as a user of `backend` would in a loop: on cuda with the inputs
    already on the GPU (XLA's device buffers, taken through DLPack) and the results left there."""
    if backend != "cuda":
        return lambda: exe(*args)
    on_device = xla.put(args)
    return lambda: exe(*on_device, return_device_arrays=True)


def bench_case(case: dict, data: pathlib.Path, runs: int, backend: str = "cpu",
               gemms: tuple[str | None, ...] = (None,)) -> dict[str, float]:
    """Times `case` once per gemm mode (None: hlocc's default) against one XLA reference; the ratio
    (XLA / hlocc) per mode."""
    import hlocc
    from corpus import load_npz
    from hlocc.cli import flatten
    from hlocc.comparison import compare_arrays
    from hlocc.compiler import check_arguments

    name = case["name"]
    directory = case_dir(name, data)
    if backend != "cpu":
        from corpus import GPU_NUMERICS_TOLERANCE

        case = {**case, **GPU_NUMERICS_TOLERANCE.get(name, {})}
    text = (CORPUS / f"{name}.hlo").read_text()
    inputs = load_npz(directory / f"{name}.in.npz")
    expected = load_npz(directory / f"{name}.out.npz")
    xla = None
    ratios = {}
    for gemm in gemms:
        t0 = time.perf_counter()
        exe = hlocc.compile(text, backend=backend, gemm=gemm)
        compile_ms = (time.perf_counter() - t0) * 1e3
        args = check_arguments(exe.module, [inputs[f"arg{i}"] for i in range(len(inputs))], cast=True)
        outputs = flatten(exe(*args))
        problems = [compare_arrays(expected[f"out{i}"], o, float(case["rtol"]), float(case["atol"]))
                    for i, o in enumerate(outputs)]
        ok = all(p is None for p in problems)
        if xla is None:
            xla = XlaReference(text, reference_platform(backend))
            buffers = xla.put(args)
        t_ours, t_xla = interleaved_median_ms(
            [hlocc_runner(exe, args, backend, xla), lambda xla=xla, buffers=buffers: xla.run(buffers, to_host=False)],
            runs)
        stats = exe.runner.stats
        ours = f"{stats.kernels}+{sum(stats.library_calls.values())}+{len(stats.host_ops)}"
        ratios[gemm] = t_xla / t_ours
        label = name if len(gemms) == 1 else f"{name} [{gemm}]"
        print(f"{label:28} {t_ours:9.3f} {t_xla:9.3f} {ratios[gemm]:6.2f} {ours:>9} {xla.kernels():>7} "
              f"{compile_ms:9.0f}  {'ok' if ok else 'MISMATCH ' + str([p for p in problems if p][:1])}", flush=True)
    return ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="perf", help="perf (default), all, or comma-separated names")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--data", type=pathlib.Path, default=pathlib.Path.home() / ".cache" / "hlocc" / "jax_corpus")
    ap.add_argument("--backend", choices=("cpu", "cuda", "cuda-sim"), default="cpu")
    ap.add_argument("--gemm", default="", help="hlocc gemm modes, comma-separated (library, codegen, auto); "
                                                "default: hlocc's default for the backend (auto on the cpu)")
    args = ap.parse_args()
    import jax

    from corpus import jax_cases

    cases = jax_cases()
    if args.cases == "perf":
        cases = [c for c in cases if c["perf"] == "yes"]
    elif args.cases == "matmul":
        cases = [c for c in cases if " dot(" in (CORPUS / f"{c['name']}.hlo").read_text()]
    elif args.cases != "all":
        names = args.cases.split(",")
        cases = [c for c in cases if c["name"] in names]
    ensure_data(cases, args.data)
    print(f"{len(cases)} cases, {args.runs} runs, median; hlocc --backend {args.backend} against XLA on "
          f"{reference_platform(args.backend)}; jax {jax.__version__}, {os.cpu_count()} cpus")
    if args.backend == "cuda-sim":
        print("cuda-sim: the GPU kernels run in simulation on the host; its times are not GPU times")
    print(f"{'case':28} {'hlocc ms':>9} {'xla ms':>9} {'ratio':>6} {'kernels':>9} {'xla':>7} {'compile':>9}")
    print(f"{'':28} {'':>9} {'':>9} {'':>6} {'gen+lib+host':>9} {'fus+lib':>7} {'ms':>9}")
    gemms = tuple(args.gemm.split(",")) if args.gemm else (None,)
    ratios = [bench_case(c, args.data, args.runs, args.backend, gemms) for c in cases]
    for gemm in gemms:
        of_mode = [r[gemm] for r in ratios if gemm in r]
        if of_mode:
            geomean = math.exp(sum(math.log(r) for r in of_mode) / len(of_mode))
            print(f"geomean ratio (XLA time / hlocc time) over {len(of_mode)} cases, --gemm {gemm or 'default'}: "
                  f"{geomean:.2f}")


if __name__ == "__main__":
    main()
