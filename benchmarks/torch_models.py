"""PyTorch models: eager, torch.compile with Inductor (CPU) and torch.compile with hlocc, in one run
(issue 19).

    python benchmarks/torch_models.py [--quick] [--models mlp,cnn,...] [--batch 16] [--runs 20] [--grad]
                                      [--device cpu|cuda] [--out benchmarks/results/torch_models.md]

For each model of hlocc.testing.torch_models (forward, f32, every arm under torch.no_grad unless
--grad: then with grad mode on, the parameters requiring grad, so Inductor and hlocc compile the
forward graph of a training graph pair through aot_autograd) it measures the cold compile (the first
call of the compiled model: dynamo, aot_autograd and the backend's compilation; each backend with an
empty cache directory of its own, so nothing compiled before in another process is reused) and the
steady time (median of warmed calls, the three arms' calls interleaved), checks the results against
eager, and prints the steady-time ratios (inductor ms / hlocc ms: above 1 means hlocc is faster)
with their geomean. --quick: small batch, three runs, the models without `transformers`. `--device
cuda`: the models and inputs on the GPU, Inductor's GPU code against hlocc's cuda backend
(`options={"backend": "cuda"}`: tensors in and out through DLPack), each timed call synchronized.
"""

from __future__ import annotations

import os

# One BLAS thread (before numpy loads): hlocc's dots call numpy's OpenBLAS, whose thread pool on a
# busy or small machine turns a 0.3 ms matmul into 20 ms; torch gets --threads (1) for the same reason.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import contextlib
import math
import pathlib
import tempfile
import time
import warnings

from programs import interleaved_median_ms  # one timing rule for every benchmark (this folder is on sys.path)

os.environ["HLOCC_CACHE_DIR"] = tempfile.mkdtemp(prefix="hlocc-bench-cache-")
os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-bench-cache-")

import torch  # noqa: E402

import hlocc.torch  # noqa: E402
from hlocc.testing import torch_models as tm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
ALL = ["mlp", "cnn", "transformer_block", "text_classifier", "gpt2", "bert"]


def _compile(model, x, backend, device="cpu"):
    torch._dynamo.reset()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    if backend == "eager":
        fn = model
        compile_ms = 0.0
    else:
        options = {"strict": True, **({"backend": "cuda"} if device == "cuda" else {})}
        fn = torch.compile(model, backend=hlocc.torch.backend if backend == "hlocc" else "inductor",
                           **({"options": options} if backend == "hlocc" else {}))
        t0 = time.perf_counter()
        fn(x)
        sync()
        compile_ms = (time.perf_counter() - t0) * 1e3
    out = fn(x)

    def call():
        fn(x)
        sync()
    return compile_ms, call, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--models", default=None)
    ap.add_argument("--batch", type=int, default=None)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch's intra-op threads and hlocc's kernel threads (HLOCC_CPU_THREADS), 1 by default: "
                         "on a shared or small machine a thread pool waiting for busy cores makes times noise")
    ap.add_argument("--grad", action="store_true",
                    help="run every arm with grad mode on (default: under torch.no_grad, an inference graph)")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: models on the GPU, Inductor's GPU code against hlocc's cuda backend")
    ap.add_argument("--out", default=None, help="also write the table (markdown) to this file")
    args = ap.parse_args()
    models = args.models.split(",") if args.models else (ALL[:4] if args.quick else ALL)
    batch = args.batch or (4 if args.quick else 16)
    runs = args.runs or (3 if args.quick else 20)
    torch.set_num_threads(args.threads)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: this torch has no CUDA device")
    # hlocc's kernels get the same number of threads as eager and Inductor: its launcher splits a
    # large kernel over every core, which on a busy 2-core machine waits for a core that another
    # process holds (a 0.1 ms GELU measured at 0.5-2 ms), and would not be a like-for-like comparison.
    os.environ["HLOCC_CPU_THREADS"] = str(args.threads)

    header = (f"torch {torch.__version__}, {torch.get_num_threads()} torch thread(s), HLOCC_CPU_THREADS="
              f"{os.environ['HLOCC_CPU_THREADS']}, OPENBLAS_NUM_THREADS="
              f"{os.environ['OPENBLAS_NUM_THREADS']}, batch {batch}, f32 forward "
              f"{'with grad mode on' if args.grad else 'under torch.no_grad'} (every arm), "
              f"median of {runs} runs; compile = first call, cold caches; device {args.device}")
    rows = ["| model | eager ms | inductor ms | hlocc ms | inductor/hlocc | eager/hlocc | inductor compile s | "
            "hlocc compile s | max abs err |", "|---|---|---|---|---|---|---|---|---|"]
    print(header)
    ratios = []
    for name in models:
        model = tm.build(name).to(args.device)
        x = tm.example_input(name, batch=batch).to(args.device)
        with (contextlib.nullcontext() if args.grad else torch.no_grad()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _, eager, want = _compile(model, x, "eager", args.device)
            ind_compile, inductor, _ = _compile(model, x, "inductor", args.device)
            our_compile, ours, got = _compile(model, x, "hlocc", args.device)
            # the arms' calls interleaved, one of each per round (programs.py): a slow spell of the
            # machine falls on all three (arm after arm, transformer_block's Inductor/hlocc ratio
            # read 0.57 and 1.08 in two runs on one VM)
            eager_ms, ind_ms, our_ms = interleaved_median_ms([eager, inductor, ours], runs)
        err = (got - want).abs().max().item()
        ratios.append(ind_ms / our_ms)
        rows.append(f"| {name} | {eager_ms:.3f} | {ind_ms:.3f} | {our_ms:.3f} | {ind_ms / our_ms:.2f} | "
                    f"{eager_ms / our_ms:.2f} | {ind_compile / 1e3:.1f} | {our_compile / 1e3:.1f} | {err:.1e} |")
        print(rows[-1], flush=True)
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios))
    summary = f"geomean inductor/hlocc steady-time ratio: {geomean:.2f} (above 1: hlocc faster)"
    print(summary)
    if args.out:
        path = pathlib.Path(args.out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([f"# benchmarks/torch_models.py {' '.join(os.sys.argv[1:])}", "", header, "",
                                   *rows, "", summary, ""]))


if __name__ == "__main__":
    main()
