"""Compile time: hlocc against XLA:CPU compiling the same HLO text in the same run (issue 16).

    python benchmarks/compile.py [--cases all|none|NAME,...] [--probes NAME,...] [--no-warm]
                                 [--profile NAME] [--sample NAME] [--json OUT]

For each JAX corpus module (shared/corpus/jax/*.hlo; inputs are not needed) and each XLA corpus
scaling probe (`--probes`, default the 6800-op `loop__large_loop_slow_compile_time`), it measures:

- cold: `hlocc.compile(text, "cpu")` in this process with the in-memory caches emptied and a new,
  empty persistent cache directory for the module (what a user's first compile of a new program
  costs, writing the cache included);
- warm-disk: the same in a new process reading that directory (the in-memory caches emptied before
  each module; the process imports hlocc's CPU backend before timing, as a JAX user's process has
  imported jax): the program plan (the optimized module) and the kernels' object code from disk;
- memory hit: the same text compiled again in the cold process (the in-memory cache);
- XLA:CPU: jaxlib compiling the same text (HLO text → StableHLO → compile, `programs.XlaReference`),
  after one compile to warm it up.

It prints one row per module (ops, milliseconds, ratio to XLA's compile), the geometric mean of the
ratios and the medians, then the cold compile's time per stage summed over the JAX modules and for
each probe: parse, verify, each HLO pass, schedule + buffer assignment, kernel emission, each kernel
pass, LLVM translation, LLVM optimisation, LLVM code generation and loading, cache lookups. The
machine's load disturbs every figure: compare within one run.

`--profile NAME` runs one more cold compile of NAME under cProfile and prints its top entries.
cProfile charges every Python call, which inflates code made of many small functions (on priority
fusion it put a loop first that a change then showed to be a minor cost); `--sample NAME` instead
samples the stack every millisecond of CPU (SIGPROF) and prints each function's share of the
samples, own and inclusive. Time in C (LLVM, numpy) is under-sampled: Python sees the signal only
when the call returns.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import os
import pathlib
import pstats
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "benchmarks"))

DEFAULT_PROBES = "loop__large_loop_slow_compile_time"


def module_path(name: str) -> pathlib.Path:
    for sub in ("jax", "xla"):
        path = CORPUS / sub / f"{name}.hlo"
        if path.is_file():
            return path
    raise SystemExit(f"no corpus module {name}")


def op_count(text: str) -> int:
    from hlocc.hlo.parser import parse_hlo

    return sum(len(c.instructions) for c in parse_hlo(text).computations)


def clear_memory_caches() -> None:
    """Forget every compiled program and kernel this process holds (not the disk cache)."""
    from hlocc.backends.cpu.kernel import clear_kernel_cache
    from hlocc.compiler import clear_compile_cache

    clear_kernel_cache()
    clear_compile_cache()


def hlocc_compile_ms(text: str) -> tuple[float, dict[str, float]]:
    import hlocc

    t0 = time.perf_counter()
    exe = hlocc.compile(text, backend="cpu")
    return (time.perf_counter() - t0) * 1e3, exe.compile_times_ms


def xla_compile_ms(text: str) -> float:
    from programs import XlaReference

    t0 = time.perf_counter()
    XlaReference(text)
    return (time.perf_counter() - t0) * 1e3


def use_cache_dir(root: str, name: str) -> None:
    """Each module its own persistent cache directory: a cold compile finds nothing another module
    (or the warm-up) left."""
    os.environ["HLOCC_CACHE_DIR"] = os.path.join(root, name)


def warm_worker(root: str, names: list[str]) -> None:
    """In a new process: each module compiled once, from its disk cache under `root`; prints
    {name: ms} as JSON."""
    import hlocc.backends.cpu.executable  # noqa: F401  (the imports a user's process has already paid)

    out = {}
    for name in names:
        clear_memory_caches()
        use_cache_dir(root, name)
        out[name] = hlocc_compile_ms(module_path(name).read_text())[0]
    print(json.dumps(out))


def stage_of(key: str) -> str:
    """The breakdown's row for a compile_times_ms key."""
    if key.startswith("hlo:"):
        return "hlo pass " + key[4:]
    if key.startswith("kernel:"):
        stage = key[7:]
        names = {"emit": "emit", "to_llvm": "llvm translation", "llvm_parse": "llvm translation",
                 "llvm_opt": "llvm optimisation", "llvm_codegen": "llvm codegen", "load": "load",
                 "cache_lookup": "disk cache lookup", "cache_store": "disk cache store",
                 "verify": "kernel IR verification", "fingerprint": "kernel fingerprint"}
        return names.get(stage, "kernel pass " + stage)
    return {"schedule": "schedule", "buffer-assignment": "buffer assignment", "verify": "hlo verify",
            "program_cache": "program cache hit", "program_cache_lookup": "program plan lookup (disk)",
            "program_cache_store": "program plan store (disk)"}.get(key, key)


def breakdown(times: list[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for t in times:
        for key, ms in t.items():
            if key in ("hlo-passes", "thunks", "total"):  # sums of other rows
                continue
            total[stage_of(key)] = total.get(stage_of(key), 0.0) + ms
    return total


def print_breakdown(title: str, stages: dict[str, float]) -> None:
    total = sum(stages.values())
    print(f"\n{title}: {total:.0f} ms")
    for stage, ms in sorted(stages.items(), key=lambda kv: -kv[1]):
        if ms >= 0.05 * total / 10:
            print(f"  {stage:36} {ms:9.1f} ms {100 * ms / total:5.1f} %")


def sampled(compile_once, top: int = 30) -> str:
    """Run `compile_once()` under a SIGPROF stack sampler (1 ms of CPU); the top functions by
    their own and their inclusive share of the samples, as text."""
    import collections
    import signal

    own: collections.Counter = collections.Counter()
    inclusive: collections.Counter = collections.Counter()

    def where(frame) -> str:
        return f"{pathlib.Path(frame.f_code.co_filename).name}:{frame.f_code.co_name}"

    def on_sample(signum, frame) -> None:
        if frame is None:
            return
        own[where(frame)] += 1
        seen = set()
        while frame is not None:
            key = where(frame)
            if key not in seen:
                seen.add(key)
                inclusive[key] += 1
            frame = frame.f_back

    previous = signal.signal(signal.SIGPROF, on_sample)
    signal.setitimer(signal.ITIMER_PROF, 0.001, 0.001)
    try:
        compile_once()
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, previous)
    total = max(1, sum(own.values()))
    lines = [f"{total} samples; own share:"]
    lines += [f"  {100 * n / total:5.1f} %  {k}" for k, n in own.most_common(top)]
    lines.append("inclusive share:")
    lines += [f"  {100 * n / total:5.1f} %  {k}" for k, n in inclusive.most_common(top)]
    return "\n".join(lines)


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="all",
                    help="all (default), none (the probes alone) or comma-separated JAX corpus names")
    ap.add_argument("--probes", default=DEFAULT_PROBES, help="XLA corpus modules compiled as scaling probes")
    ap.add_argument("--no-warm", action="store_true", help="skip the warm-from-disk process")
    ap.add_argument("--profile", metavar="NAME", help="cProfile one more cold compile of NAME")
    ap.add_argument("--sample", metavar="NAME", help="sample the stack of one more cold compile of NAME")
    ap.add_argument("--json", type=pathlib.Path, help="write every figure to this file")
    ap.add_argument("--warm-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.warm_worker:
        root, names = args.warm_worker.split(":")
        warm_worker(root, names.split(","))
        return
    cache_dir = tempfile.mkdtemp(prefix="hlocc-compile-bench-")
    use_cache_dir(cache_dir, "warmup")  # read at each compile
    names = (sorted(p.stem for p in (CORPUS / "jax").glob("*.hlo")) if args.cases == "all"
             else [] if args.cases == "none" else args.cases.split(","))
    probes = [p for p in args.probes.split(",") if p]
    import jax

    import hlocc

    # Warm both compilers up (imports, LLVM and XLA initialisation) on a module outside the table.
    warmup = (CORPUS / "jax" / "bias_add_tanh.hlo").read_text()
    hlocc.compile(warmup, backend="cpu")
    xla_compile_ms(warmup)
    clear_memory_caches()
    print(f"{len(names)} JAX modules + {len(probes)} probes; hlocc --backend cpu against XLA:CPU (jax "
          f"{jax.__version__}), {os.cpu_count()} cpus; cache {cache_dir}")
    print(f"{'module':36} {'ops':>6} {'xla ms':>8} {'cold ms':>9} {'ratio':>6} {'warm ms':>8} {'ratio':>6} "
          f"{'hit ms':>7} {'cold µs/op':>10}")
    rows: dict[str, dict] = {}
    for name in names + probes:
        text = module_path(name).read_text()
        ops = op_count(text)
        xla = xla_compile_ms(text)
        clear_memory_caches()
        use_cache_dir(cache_dir, name)
        cold, times = hlocc_compile_ms(text)
        hit, _ = hlocc_compile_ms(text)
        rows[name] = dict(ops=ops, xla_ms=xla, cold_ms=cold, hit_ms=hit, stages=times, probe=name in probes)
        print(f"{name:36} {ops:6d} {xla:8.1f} {cold:9.1f} {cold / xla:6.2f} {'':>8} {'':>6} {hit:7.2f} "
              f"{1e3 * cold / ops:10.1f}", flush=True)
    if not args.no_warm:
        proc = subprocess.run([sys.executable, __file__, "--warm-worker", f"{cache_dir}:{','.join(names + probes)}"],
                              capture_output=True, text=True, env=os.environ)
        if proc.returncode != 0:
            print(proc.stderr[-3000:])
        else:
            for name, ms in json.loads(proc.stdout.strip().splitlines()[-1]).items():
                rows[name]["warm_ms"] = ms
    print("\nsummary (JAX modules; probes apart):")
    print(f"{'module':36} {'ops':>6} {'xla ms':>8} {'cold ms':>9} {'ratio':>6} {'warm ms':>8} {'ratio':>6} "
          f"{'hit ms':>7}")
    for name, r in rows.items():
        warm = r.get("warm_ms")
        warm_cols = f"{warm:8.1f} {warm / r['xla_ms']:6.2f}" if warm is not None else f"{'':>8} {'':>6}"
        print(f"{name:36} {r['ops']:6d} {r['xla_ms']:8.1f} {r['cold_ms']:9.1f} {r['cold_ms'] / r['xla_ms']:6.2f} "
              f"{warm_cols} {r['hit_ms']:7.2f}")
    jax_rows = [r for r in rows.values() if not r["probe"]]
    if jax_rows:
        print(f"\ncold: geomean ratio to XLA {geomean([r['cold_ms'] / r['xla_ms'] for r in jax_rows]):.2f}, "
              f"median {statistics.median(r['cold_ms'] for r in jax_rows):.1f} ms "
              f"(XLA median {statistics.median(r['xla_ms'] for r in jax_rows):.1f} ms)")
        warm = [r for r in jax_rows if "warm_ms" in r]
        if warm:
            print(f"warm from disk, new process: geomean ratio to XLA "
                  f"{geomean([r['warm_ms'] / r['xla_ms'] for r in warm]):.2f}, "
                  f"median {statistics.median(r['warm_ms'] for r in warm):.1f} ms")
        print(f"memory hit: median {statistics.median(r['hit_ms'] for r in jax_rows):.2f} ms, "
              f"max {max(r['hit_ms'] for r in jax_rows):.2f} ms")
    per_op = sorted((r["ops"], 1e3 * r["cold_ms"] / r["ops"], name) for name, r in rows.items() if r["ops"] >= 10)
    if per_op:  # compile time per op, smallest to largest module (a flat column is a linear compiler)
        picks = sorted({*range(0, len(per_op), max(1, len(per_op) // 6)), len(per_op) - 1})
        print("cold µs/op by module size: " + ", ".join(f"{per_op[k][2]} ({per_op[k][0]} ops) {per_op[k][1]:.0f}"
                                                       for k in picks))
        print_breakdown("cold compile by stage, all JAX modules", breakdown([r["stages"] for r in jax_rows]))
    for name in probes:
        print_breakdown(f"cold compile by stage, {name}", breakdown([rows[name]["stages"]]))
    if args.profile:
        text = module_path(args.profile).read_text()
        clear_memory_caches()
        os.environ["HLOCC_CACHE_DIR"] = ""
        profile = cProfile.Profile()
        profile.enable()
        hlocc.compile(text, backend="cpu")
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
        print(f"\ncProfile of a cold compile of {args.profile} (top 25 by own time):")
        print(out.getvalue())
    if args.sample:
        text = module_path(args.sample).read_text()
        clear_memory_caches()
        os.environ["HLOCC_CACHE_DIR"] = ""
        print(f"\nsampled cold compile of {args.sample}:")
        print(sampled(lambda: hlocc.compile(text, backend="cpu")))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
