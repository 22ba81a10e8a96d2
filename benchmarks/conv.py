"""Convolutions: hlocc's implicit gemm (its default) and its library call against XLA:CPU, in one run.

    python benchmarks/conv.py [--quick] [--cases NAME,...] [--batches 1,16] [--dtypes f32,bf16]
                              [--layouts nchw,nhwc] [--runs 15]

A sweep of ResNet-like convolutions: the 7x7 stride-2 stem, 3x3 stride 1 and 2 (and a late-stage
512-feature 3x3 on 7x7), 1x1 (stride 1 and a stride-2 projection), a depthwise 3x3, a fully
connected layer as a 1x1 convolution of a 1x1 image, and the two convolutions of the small torch
CNN (hlocc.testing.torch_models), at each batch, dtype and layout (nchw: NCHW input and output,
OIHW kernel, PyTorch's; nhwc: NHWC and HWIO, JAX/TensorFlow's). Per case, the same HLO text
(jax.jit's, lowered) runs as:

- `default`: hlocc's default pipeline: the convolution an implicit-gemm fusion where
  passes/convolution_to_gemm.py `implicit_gemm_fuses` says (`default path` gemm: the packed gemm
  kernel reads the patches through its maps), else the library call (`default path` library: the
  two columns then time the same thing, and their ratio is the machine's noise);
- `library`: the same with that pass disabled (`HLOCC_DISABLE_HLO_PASSES`): runtime/library.py's
  numpy im2col and BLAS matmul, the path before it;
- `XLA`: jax.jit of the function (Eigen's/oneDNN's convolution on XLA:CPU).

Everything runs in this process on one thread (XLA_FLAGS, OPENBLAS_NUM_THREADS, HLOCC_CPU_THREADS
set before the imports). The three are interleaved: `--runs` rounds, each timing every variant
over a batch of calls, and each variant keeps its median round, so a shared machine's load hits
them alike. Printed per case: the milliseconds, XLA/default and XLA/library (above 1: hlocc faster),
the default's speedup over library, and the largest error of the default against XLA relative to
the result's largest magnitude. No results file is written.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["HLOCC_CPU_THREADS"] = "1"
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                           "intra_op_parallelism_threads=1").strip()

import argparse  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import hlocc  # noqa: E402
from hlocc.passes.pipeline import DISABLE_ENV  # noqa: E402

# name: (input features, spatial size, output features, kernel, stride, padding, feature groups)
CASES = {
    "stem7x7s2": (3, 56, 64, 7, 2, 3, 1),
    "3x3s1": (64, 14, 64, 3, 1, 1, 1),
    "3x3s2": (64, 14, 128, 3, 2, 1, 1),
    "1x1": (256, 14, 64, 1, 1, 0, 1),
    "1x1s2": (64, 14, 128, 1, 2, 0, 1),
    "depthwise3x3": (64, 14, 64, 3, 1, 1, 64),
    "late3x3": (512, 7, 512, 3, 1, 1, 1),
    "fc_as_1x1": (2048, 1, 1000, 1, 1, 0, 1),
    "cnn_conv1": (3, 16, 16, 3, 1, 1, 1),
    "cnn_conv2": (16, 8, 32, 3, 1, 1, 1),
}
QUICK = ["3x3s1", "1x1", "depthwise3x3", "cnn_conv2"]


LAYOUTS = {"nchw": ("NCHW", "OIHW", "NCHW"), "nhwc": ("NHWC", "HWIO", "NHWC")}


def conv_fn(stride: int, pad: int, groups: int, layout: str):
    def f(x, w):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad)] * 2, feature_group_count=groups,
                                            dimension_numbers=LAYOUTS[layout], preferred_element_type=x.dtype)
    return f


def time_round(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e3


def compile_hlocc(text: str, disabled: bool):
    saved = os.environ.get(DISABLE_ENV)
    if disabled:
        os.environ[DISABLE_ENV] = "convolution-gemm-fusion"
    try:
        return hlocc.compile(text, "cpu")
    finally:
        if saved is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = saved


def run_case(name: str, batch: int, dtype: str, layout: str, runs: int) -> str:
    cin, size, cout, k, stride, pad, groups = CASES[name]
    rng = np.random.default_rng(0)
    jdtype = jnp.bfloat16 if dtype == "bf16" else jnp.float32
    x = rng.standard_normal((batch, cin, size, size))
    w = rng.standard_normal((cout, cin // groups, k, k)) / math.sqrt(cin // groups * k * k)
    if layout == "nhwc":
        x, w = x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0)
    x, w = jnp.asarray(x, jdtype), jnp.asarray(w, jdtype)
    f = jax.jit(conv_fn(stride, pad, groups, layout))
    text = f.lower(x, w).as_text(dialect="hlo")
    xs, ws = np.asarray(x), np.asarray(w)
    default, library = compile_hlocc(text, False), compile_hlocc(text, True)
    want = np.asarray(f(x, w).block_until_ready(), np.float64)
    got = np.asarray(default(xs, ws), np.float64)
    err = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
    variants = {"default": lambda: default(xs, ws), "library": lambda: library(xs, ws),
                "xla": lambda: f(x, w).block_until_ready()}
    for fn in variants.values():
        fn()
    one = min(time_round(fn, 3) for fn in variants.values())
    calls = max(1, min(200, int(20 / max(one, 1e-3))))  # a round of each variant: ~20 ms
    times = {v: [] for v in variants}
    for _ in range(runs):
        for v, fn in variants.items():
            times[v].append(time_round(fn, calls))
    ms = {v: statistics.median(t) for v, t in times.items()}
    macs = batch * cout * (cin // groups) * k * k * ((size + 2 * pad - k) // stride + 1) ** 2
    path = "gemm" if default.runner.stats.fusions_by_emitter["gemm"] else "library"
    return (f"| {name} | {layout} | {batch} | {dtype} | {macs / 1e6:.1f} | {path} | {ms['default']:.4f} | "
            f"{ms['library']:.4f} | {ms['xla']:.4f} | {ms['xla'] / ms['default']:.2f} | "
            f"{ms['xla'] / ms['library']:.2f} | {ms['library'] / ms['default']:.2f} | {err:.1e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"cases {','.join(QUICK)}, batch 1 and 16, f32, 5 runs")
    ap.add_argument("--cases", default=None, help="comma-separated names (default: all)")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--dtypes", default=None, help="f32,bf16 (default; --quick: f32)")
    ap.add_argument("--layouts", default="nchw", help="nchw,nhwc (default nchw)")
    ap.add_argument("--runs", type=int, default=None, help="rounds per case (default 15; --quick: 5)")
    args = ap.parse_args()
    names = args.cases.split(",") if args.cases else (QUICK if args.quick else list(CASES))
    dtypes = (args.dtypes or ("f32" if args.quick else "f32,bf16")).split(",")
    runs = args.runs or (5 if args.quick else 15)
    print(f"jax {jax.__version__}, one thread each (XLA_FLAGS={os.environ['XLA_FLAGS']!r}), "
          f"median of {runs} interleaved rounds")
    print("| case | layout | batch | dtype | MMACs | default path | hlocc default ms | hlocc library ms | XLA ms | "
          "XLA/default | XLA/library | library/default | default rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for layout in args.layouts.split(","):
        for dtype in dtypes:
            for batch in (int(b) for b in args.batches.split(",")):
                for name in names:
                    print(run_case(name, batch, dtype, layout, runs), flush=True)


if __name__ == "__main__":
    main()
