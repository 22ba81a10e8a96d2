"""Dynamic shapes: one hlocc compile for every size against a compile per size (issue 15's acceptance).

    python benchmarks/dynamic.py [--quick] [--rounds 7] [--runs 5] [--programs transformer,mlp,...] [--json FILE]
                                 [--backend cpu|cuda|cuda-sim]

(On a loaded machine set OPENBLAS_NUM_THREADS=1: numpy's gemm threads otherwise thrash.)

Programs (JAX functions, float32): a transformer block (d=256, 4 heads, ff=1024) over sequence
lengths, an MLP 512→2048→512 over batch sizes, softmax and layernorm on [b, 4096] and [b, 127] over
batch sizes; 20 sizes each (the sequence lengths include 17, 37, 101, 257, 511 and the powers of two
in [16, 512]). Arms, in one run, on the same sizes in the same order:

- hlocc dynamic: `hlocc.jax.jit(f, polymorphic_shapes=[...])`, one export and one plan for every
  size (compiler.DynamicExecutable; fusions the kernel compiler cannot yet compile symbolically are
  compiled per size and listed);
- jax.jit on XLA:CPU: a compile per size;
- hlocc static: `hlocc.jax.jit(f)` without polymorphic shapes, a compile per size.

`--backend cuda` runs both hlocc arms on the GPU (backends/cuda/dynamic.py: one compile for every
size there too) against jax.jit on JAX's default device (XLA:GPU where jax has one); every arm then
returns host arrays (XLA's results are copied to the host as hlocc's are), so each call is
upload, kernels, download. `cuda-sim` is the same path in the SIMT simulation (a check that it
runs, not a speed). The per-call overhead rows are the cpu backend's only.

Per program and arm: compilations (programs compiled: hlocc dynamic one plan, whose kernels are
compiled once for every size, plus one per fusion compiled per size; XLA and hlocc static one per
size; beside hlocc dynamic's, the kernels of its plan), the sweep time (the first call at every
size, compiles included, plus the dynamic arm's one-time compile), the first call at an unseen size
(the last size of the sweep, seen by no earlier call) against a steady call there — its input cold
in memory as the sweep left it — and again at up to nine sizes of UNSEEN within the sweep's range
with the input read just before (what a new size itself costs: the binding and a fresh output
buffer, not the cache misses of an input no call has read; median and interquartile range of those
ratios; beside it a second call at each of those sizes after the same pause, over a steady call —
the pause's own cost, the floor of the ratio before —, the same pause ratio for jax.jit at each of
those sizes (compiled there first, untimed: what this machine's caches charge a call that compiles
nothing, the reference for the first-call ratio) and the host time of those bindings,
DynamicProgram.last_binding_us).

Steady time, after the three sweeps: `--rounds` rounds per size, each arm in turn within a round (the
arms' order rotated round by round, so that no arm always runs after the same one), `--runs` calls
per arm per round and the minimum of those; an arm's time at a size is the median over rounds of
those minima (`steady_ms` in the JSON). Each round gives the geomean over sizes of hlocc dynamic /
hlocc static and of XLA / hlocc dynamic from that round's minima (the arms' calls close together in
time, so a slow spell of the machine falls on both); the table gives the median over rounds and,
beside it, the interquartile range: the noise a reader should allow for. (Measured arm after arm,
each arm's median of 10 calls, these ratios moved by ±0.3 between runs of one tree on this
machine.) The on-disk kernel caches are off (HLOCC_CACHE_DIR=, and the in-process one cleared
before each arm's sweep) so that every arm pays its own compiles. Last, the per-call host overhead
of a one-kernel program, static and dynamic, beside XLA:CPU's (benchmarks/overhead.py; its rows
are appended to the JSON).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import sys
import time

os.environ["HLOCC_CACHE_DIR"] = ""  # every arm compiles for itself (module doc)

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from programs import median_ms  # noqa: E402

UNSEEN = [97, 141, 203, 233, 333, 411, 457, 509, 613, 777, 851, 929, 1001]
"""Sizes for the new-size measurement with the input in cache (module doc): the largest nine within
a program's range (a single first call is one event: one preemption moves it by 2×)."""
SEQ_SIZES = [16, 17, 24, 32, 37, 48, 64, 80, 101, 128, 160, 200, 256, 257, 300, 384, 450, 500, 512, 511]
BATCH_SIZES = [1, 2, 3, 4, 7, 8, 16, 31, 32, 64, 100, 128, 200, 256, 300, 512, 600, 768, 1024, 1000]
QUICK_SIZES = [3, 16, 37]


def programs(quick: bool) -> dict:
    """name: (function, polymorphic shape spec, argument shape for size n, sizes)."""
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)

    def weights(*shape):
        return jnp.asarray(rng.standard_normal(shape).astype(np.float32) / math.sqrt(shape[0]))

    d, heads, ff = (64, 2, 128) if quick else (256, 4, 1024)
    wq, wk, wv, wo = (weights(d, d) for _ in range(4))
    w1, w2 = weights(d, ff), weights(ff, d)

    def layernorm(x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5)

    def transformer(x):
        h = layernorm(x)
        s = x.shape[0]
        q, k, v = ((h @ w).reshape(s, heads, d // heads).transpose(1, 0, 2) for w in (wq, wk, wv))
        att = jax.nn.softmax(q @ k.transpose(0, 2, 1) / math.sqrt(d // heads), axis=-1) @ v
        x = x + att.transpose(1, 0, 2).reshape(s, d) @ wo
        return x + jax.nn.gelu(layernorm(x) @ w1) @ w2

    m_in, m_hidden = (64, 256) if quick else (512, 2048)
    m1, m2 = weights(m_in, m_hidden), weights(m_hidden, m_in)

    def mlp(x):
        return jax.nn.relu(x @ m1) @ m2

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    seq = QUICK_SIZES if quick else SEQ_SIZES
    batch = QUICK_SIZES if quick else BATCH_SIZES
    return {
        "transformer": (transformer, f"s, {d}", lambda n: (n, d), seq),
        "mlp": (mlp, f"b, {m_in}", lambda n: (n, m_in), batch),
        "softmax_4096": (softmax, "b, 4096", lambda n: (n, 4096), batch),
        "softmax_127": (softmax, "b, 127", lambda n: (n, 127), batch),
        "layernorm_4096": (layernorm, "b, 4096", lambda n: (n, 4096), batch),
        "layernorm_127": (layernorm, "b, 127", lambda n: (n, 127), batch),
    }


def _blocking(fn, to_host: bool = False):
    if to_host:  # (a device backend's hlocc arms return host arrays: the same work for XLA)
        return lambda x: np.asarray(fn(x))
    return lambda x: fn(x).block_until_ready()


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def quartiles(values: list[float]) -> tuple[float, float, float]:
    """(25th percentile, median, 75th percentile)."""
    q1, q2, q3 = np.percentile(values, [25, 50, 75])
    return float(q1), float(q2), float(q3)


def sweep(make, sizes: list[int], inputs: dict[int, np.ndarray]) -> dict:
    """One arm's sweep over `sizes`: `make()` → callable (its own compile time counted), then the
    first call at each size, timed (the steady calls come later, all arms together: `steady`)."""
    from hlocc.backends.cpu.kernel import clear_kernel_cache
    from hlocc.compiler import clear_compile_cache

    clear_kernel_cache()  # no arm reuses another's kernels (the disk cache is off: module doc)
    clear_compile_cache()
    t0 = time.perf_counter()
    fn = make()
    setup_ms = (time.perf_counter() - t0) * 1e3
    first, outputs = {}, {}
    for n in sizes:
        t0 = time.perf_counter()
        outputs[n] = np.asarray(fn(inputs[n]))
        first[n] = (time.perf_counter() - t0) * 1e3
    return {"fn": fn, "setup_ms": setup_ms, "first_ms": first, "outputs": outputs,
            "sweep_ms": setup_ms + sum(first.values())}


def steady(arms: dict[str, object], sizes: list[int], inputs: dict[int, np.ndarray], rounds: int,
           runs: int) -> dict[str, dict[int, list[float]]]:
    """arm → size → the minimum ms of `runs` calls in each of `rounds` rounds; within a round every
    arm runs at the size in turn, the order rotated round by round (module doc)."""
    names = list(arms)
    out: dict[str, dict[int, list[float]]] = {a: {n: [] for n in sizes} for a in names}
    for n in sizes:
        x = inputs[n]
        for a in names:  # warm: each arm's first calls at this size are behind it
            arms[a](x)
        for r in range(rounds):
            for a in names[r % len(names):] + names[:r % len(names)]:
                fn, best = arms[a], math.inf
                for _ in range(runs):
                    t0 = time.perf_counter()
                    fn(x)
                    best = min(best, time.perf_counter() - t0)
                out[a][n].append(best * 1e3)
    return out


def ratio_spread(num: dict[int, list[float]], den: dict[int, list[float]], sizes: list[int]
                 ) -> tuple[float, float, float]:
    """Round by round, the geomean over sizes of num/den (both arms' minima of that round, taken
    close together in time); (25th percentile, median, 75th percentile) over rounds (module doc)."""
    return quartiles([geomean([num[n][r] / den[n][r] for n in sizes]) for r in range(len(num[sizes[0]]))])


def new_size_ratio(fn, sizes: list[int], shape_of, runs: int, reference=None) -> dict:
    """Over up to nine sizes no call has seen: first call / steady call, each input read once before
    its first call; the host µs of their bindings; a second call at the same size after the same
    pause (a new input read just before) / steady call — what the pause alone costs, the floor of
    the first ratio (module doc). `reference` (jax.jit's callable): the same pause ratio for XLA at
    each size, compiled there first and not timed — what the machine's caches charge a call that
    compiles nothing. Each as (25th percentile, median, 75th percentile)."""
    rng = np.random.default_rng(2)
    [(_, exe)] = fn.executables()
    ratios, binding_us, again, xla_again = [], [], [], []
    measured: list[tuple[int, np.ndarray]] = []
    for n in [n for n in UNSEEN if n not in sizes and n <= max(sizes)][-9:] or [max(sizes) - 1]:  # --quick: one
        x = rng.standard_normal(shape_of(n)).astype(np.float32)
        float(x.sum())  # in cache, as a steady call's input is
        t0 = time.perf_counter()
        fn(x)
        first = (time.perf_counter() - t0) * 1e3
        binding_us.append(exe.program.last_binding_us if exe.program is not None else float("nan"))
        y = rng.standard_normal(shape_of(n)).astype(np.float32)
        float(y.sum())
        t0 = time.perf_counter()
        fn(y)
        bound = (time.perf_counter() - t0) * 1e3
        steady_ms = median_ms(lambda x=x: fn(x), runs)
        ratios.append(first / steady_ms)
        again.append(bound / steady_ms)
        measured.append((n, x))
    if reference is not None:
        for _, x in measured:  # XLA compiles every size first (untimed): a compile between two of
            reference(x)       # hlocc's first calls would have cooled the caches of the second
        for n, x in measured:
            z = rng.standard_normal(shape_of(n)).astype(np.float32)
            float(z.sum())
            t0 = time.perf_counter()
            reference(z)
            paused = (time.perf_counter() - t0) * 1e3
            xla_again.append(paused / median_ms(lambda x=x: reference(x), runs))
    return {"first_over_steady": quartiles(ratios), "binding_us": quartiles(binding_us),
            "again_over_steady": quartiles(again), "sizes": len(ratios),
            "xla_after_pause_over_steady": quartiles(xla_again) if xla_again else (math.nan,) * 3}


def bench_program(name: str, spec, rounds: int, runs: int, backend: str = "cpu") -> dict:
    import jax

    import hlocc.jax

    f, poly, shape_of, sizes = spec
    rng = np.random.default_rng(1)
    inputs = {n: rng.standard_normal(shape_of(n)).astype(np.float32) for n in sizes}
    dynamic = sweep(lambda: hlocc.jax.jit(f, polymorphic_shapes=[poly], backend=backend), sizes, inputs)
    unseen = sizes[-1]
    unseen_steady = median_ms(lambda x=inputs[unseen]: dynamic["fn"](x), rounds * runs)
    new = new_size_ratio(dynamic["fn"], sizes, shape_of, rounds * runs,
                         _blocking(jax.jit(f), to_host=backend != "cpu"))
    # JAX dispatches asynchronously (on the CPU too): a steady call waits for its result, as hlocc's do.
    xla = sweep(lambda: _blocking(jax.jit(f), to_host=backend != "cpu"), sizes, inputs)
    static = sweep(lambda: hlocc.jax.jit(f, backend=backend), sizes, inputs)
    times = steady({"hlocc_dynamic": dynamic["fn"], "hlocc_static": static["fn"], "xla": xla["fn"]}, sizes, inputs,
                   rounds, runs)
    worst = max(float(np.max(np.abs(dynamic["outputs"][n] - xla["outputs"][n]) / (1 + np.abs(xla["outputs"][n]))))
                for n in sizes)
    [(_, exe)] = dynamic["fn"].executables()
    static_compiles = sum(e.compilations for _, e in static["fn"].executables())
    dyn_static = ratio_spread(times["hlocc_dynamic"], times["hlocc_static"], sizes)
    xla_dyn = ratio_spread(times["xla"], times["hlocc_dynamic"], sizes)
    row = {
        "program": name, "sizes": len(sizes), "rounds": rounds, "runs_per_round": runs,
        "compilations": {"hlocc_dynamic": exe.compilations, "plan_builds": exe.plan_builds,
                         "kernels": exe.program.symbolic_kernels if exe.program else None,
                         "per_size_fusions": len(exe.program.deferred) if exe.program else None,
                         "xla": len(sizes), "hlocc_static": static_compiles},
        "sweep_s": {arm: r["sweep_ms"] / 1e3 for arm, r in (("hlocc_dynamic", dynamic), ("xla", xla),
                                                            ("hlocc_static", static))},
        "first_call_unseen_ms": {"size": unseen, "hlocc_dynamic": dynamic["first_ms"][unseen],
                                 "steady": unseen_steady},
        "new_sizes": new["sizes"],
        "first_over_steady_input_in_cache": new["first_over_steady"][1],
        "first_over_steady_quartiles": new["first_over_steady"],
        "new_binding_us": new["binding_us"][1],
        "bound_after_pause_over_steady": new["again_over_steady"][1],
        "xla_after_pause_over_steady": new["xla_after_pause_over_steady"][1],
        "steady_geomean": {"dynamic_over_static": dyn_static[1], "xla_over_dynamic": xla_dyn[1]},
        "steady_geomean_round_quartiles": {"dynamic_over_static": dyn_static, "xla_over_dynamic": xla_dyn},
        "steady_ms": {arm: {n: float(np.median(t[n])) for n in sizes} for arm, t in times.items()},
        "max_rel_error_vs_xla": worst,
        "fallbacks": exe.program.fallbacks() if exe.program else [exe.plan_reason],
    }
    c, s, u = row["compilations"], row["sweep_s"], row["first_call_unseen_ms"]
    fq, aq, xq = new["first_over_steady"], new["again_over_steady"], new["xla_after_pause_over_steady"]
    print(f"| {name:15} | {c['hlocc_dynamic']:4} ({c['kernels']} kernels) | {c['xla']:3} | {c['hlocc_static']:4} | "
          f"{s['hlocc_dynamic']:7.2f} | {s['xla']:7.2f} | {s['hlocc_static']:7.2f} | "
          f"{s['xla'] / s['hlocc_dynamic']:5.2f} | "
          f"{u['hlocc_dynamic']:8.2f} / {u['steady']:7.2f} | {fq[1]:5.2f} ({fq[0]:.2f}-{fq[2]:.2f}) | "
          f"{aq[1]:5.2f} ({aq[0]:.2f}-{aq[2]:.2f}) | {xq[1]:5.2f} ({xq[0]:.2f}-{xq[2]:.2f}) | "
          f"{new['binding_us'][1]:6.0f} | "
          f"{dyn_static[1]:5.2f} ({dyn_static[0]:.2f}-{dyn_static[2]:.2f}) | "
          f"{xla_dyn[1]:5.2f} ({xla_dyn[0]:.2f}-{xla_dyn[2]:.2f}) | {worst:.1e} |", flush=True)
    return row


HEADER = ("| program | hlocc dyn compiles | xla | hlocc static | sweep s: dyn | xla | static | xla/dyn | "
          "first call at unseen size ms / steady | first/steady, input in cache (IQR over sizes) | "
          "bound size after the pause / steady (IQR) | XLA after the pause / steady (IQR) | binding µs | "
          "steady dyn/static (IQR over rounds) | "
          "steady xla/dyn (IQR over rounds) | max rel err |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="3 sizes, smaller transformer and MLP: a smoke run")
    ap.add_argument("--rounds", type=int, default=7, help="steady rounds per size, arms in turn (module doc)")
    ap.add_argument("--runs", type=int, default=5, help="calls per arm per round (their minimum counts)")
    ap.add_argument("--programs", default="all", help="comma-separated names (default: all)")
    ap.add_argument("--json", type=pathlib.Path, help="write the rows here")
    ap.add_argument("--backend", choices=["cpu", "cuda", "cuda-sim"], default="cpu",
                    help="where the hlocc arms run (module doc); XLA runs on JAX's default device")
    args = ap.parse_args()
    import jax

    specs = programs(args.quick)
    names = list(specs) if args.programs == "all" else args.programs.split(",")
    print(f"jax {jax.__version__} on {jax.default_backend()}, hlocc --backend {args.backend}, {os.cpu_count()} cpus; "
          f"steady: median over {args.rounds} rounds of the minimum of {args.runs} calls, arms interleaved per round; "
          f"{'quick' if args.quick else 'full'} sizes")
    print(HEADER)
    print("|" + "---|" * HEADER.count(" | ") + "---|")
    rows = [bench_program(name, specs[name], args.rounds, args.runs, args.backend) for name in names]
    for row in rows:
        for line in row["fallbacks"]:
            print(f"{row['program']}: {line}")
    if args.backend != "cpu":
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return
    import overhead  # per-call host overhead (issue 18 item 4)

    per_call = overhead.run(1000, 5, [c for c in overhead.CASES if c[4] == 1])
    for r in per_call:
        print(f"per-call overhead, {r['program']} f32[4] program: hlocc {r['hlocc_us']:.2f} µs (target ≤ "
              f"{r['target_us']:.0f}); XLA:CPU execute {r['xla_execute_us'] or float('nan'):.2f} µs, jit "
              f"{r['xla_jit_us'] or float('nan'):.2f} µs; numpy {r['numpy_us']:.2f} µs (best of 5 × 1000 calls)")
    rows += per_call
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
