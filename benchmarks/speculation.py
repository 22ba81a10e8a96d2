"""Speculation (issue 18 item 1): the generic symbolic kernels against the speculated versions.

    python benchmarks/speculation.py [--runs 20] [--quick] [--programs softmax,column_sum]

Softmax, layernorm, and a column sum and mean over the batch (x.sum(axis=0), x.mean(axis=0): the
`column_tiled` version, codegen/emitters/column_reduce.py) (JAX functions, float32) compiled once
each with `hlocc.jax.jit` and
polymorphic shapes, twice: HLOCC_SPECULATION=off (every fusion's generic kernel) and on (the
versions of runtime/speculation.py, one picked per binding). The shapes: a symbolic row length
("b, n", where the `vectorized` version applies when n is a multiple of the vector width) and the
issue's [b, 4096] and [b, 127] ("b, 4096", "b, 127": a static row, no version applies, both arms
run the same kernels). Per shape: the steady time (median of --runs calls, the arms interleaved in
blocks: programs.interleaved_median_ms) of each arm and the
ratio generic / speculated, with the versions that ran (`<plan>: <kernel versions>`: the stitched
plan where the row length fits the on-chip budget, runtime/plan_speculation.py, whose one stitch
kernel has a `vectorized` version too; else the generic multi-kernel plan and its kernels'
versions). Timings on a shared machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

os.environ["HLOCC_CACHE_DIR"] = ""  # each arm compiles its own kernels

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from programs import interleaved_median_ms  # noqa: E402

# Larger inputs where the column reduction's kernel, not the call, is the time.
COLUMN_CASES = [("b, n", (4096, 1024)), ("b, n", (100000, 16))]
CASES = [("b, n", (64, 4096)), ("b, n", (64, 4095)), ("b, n", (256, 512)), ("b, n", (256, 511)),
         ("b, n", (256, 128)), ("b, n", (256, 127)), ("b, 4096", (64, 4096)), ("b, 127", (256, 127))]


def functions() -> dict:
    import jax

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def layernorm(x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5)

    def column_sum(x):  # a bias gradient: a reduction over the batch, the column_tiled version
        return x.sum(axis=0)

    def column_mean(x):  # a mean over the batch: the sum, then a divide by the runtime row count
        return x.mean(axis=0)

    return {"softmax": softmax, "layernorm": layernorm, "column_sum": column_sum, "column_mean": column_mean}


def compiled(f, spec: str, mode: str, sample: np.ndarray):
    """`f` compiled with speculation `mode` (the compile happens at the first call: `sample`)."""
    import hlocc.jax
    from hlocc.backends.cpu.kernel import clear_kernel_cache
    from hlocc.compiler import clear_compile_cache

    os.environ["HLOCC_SPECULATION"] = mode
    clear_kernel_cache()
    clear_compile_cache()
    fn = hlocc.jax.jit(f, polymorphic_shapes=[spec])
    fn(sample)
    return fn


def plans(program) -> list:
    """The program and its other plan versions (runtime/plan_speculation.py)."""
    return [program, *(program.versions.others() if program.versions is not None else [])]


def versions_run(fn) -> str:
    """`<plan version>: <kernel versions>` that ran since the last reset."""
    [(_, exe)] = fn.executables()
    program = exe.program
    plan = ",".join(v for v, c in program.versions.calls.items() if c) + ": " if program.versions else ""
    ran = sorted({f"{v}" for p in plans(program) for _, k in p.speculated() for v, c in k.calls.items() if c})
    return plan + (",".join(ran) or "-")


def reset_counts(fn) -> None:
    [(_, exe)] = fn.executables()
    for p in plans(exe.program):
        for _, k in p.speculated():
            k.calls.update(dict.fromkeys(k.calls, 0))
    if exe.program.versions is not None:
        exe.program.versions.calls.clear()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="the first two shapes only")
    ap.add_argument("--programs", default="", help="comma-separated program names (default: all)")
    args = ap.parse_args()
    cases = CASES[:2] if args.quick else CASES
    wanted = [p for p in args.programs.split(",") if p]
    rng = np.random.default_rng(0)
    print("| program | spec | shape | generic ms | speculated ms | generic/speculated | version run |")
    print("|---|---|---|---|---|---|---|")
    for name, f in functions().items():
        if wanted and name not in wanted:
            continue
        program_cases = cases + (COLUMN_CASES if name.startswith("column") and not args.quick else [])
        for spec in dict.fromkeys(s for s, _ in program_cases):
            sample = np.ones([s for sp, s in program_cases if sp == spec][0], np.float32)
            arms = {mode: compiled(f, spec, mode, sample) for mode in ("off", "on")}
            for shape in [s for sp, s in program_cases if sp == spec]:
                x = rng.standard_normal(shape).astype(np.float32)
                ref = np.asarray(arms["off"](x))
                got = np.asarray(arms["on"](x))
                np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
                for fn in arms.values():
                    reset_counts(fn)
                times = dict(zip(arms, interleaved_median_ms([lambda fn=fn, x=x: fn(x) for fn in arms.values()],
                                                              args.runs)))
                print(f"| {name} | {spec} | {shape} | {times['off']:.3f} | {times['on']:.3f} | "
                      f"{times['off'] / times['on']:.2f} | {versions_run(arms['on'])} |", flush=True)
    os.environ.pop("HLOCC_SPECULATION", None)


if __name__ == "__main__":
    main()
