"""Stitch fusion (issue 18): hlocc's stitched plan (one kernel per softmax / layernorm) against the
unstitched one (the same compiler with `$HLOCC_DISABLE_HLO_PASSES=stitch-fusion`: XLA's fusion,
two or three kernels) and XLA:CPU, on the CPU, static shapes.

    python benchmarks/stitch.py [--runs 50] [--quick] [--json] [--case "softmax f32[16384"]

Cases: softmax and layernorm (jax.nn.softmax; mean / variance / rsqrt, scale and bias) over the
rows of f32[b, 4096] and f32[b, 127], as `jax.jit(f).lower(...).as_text(dialect="hlo")` writes them.
A row of 4096 f32 is 16 KiB (in L1/L2); b is chosen so an array is 4-8 MiB (the L3, not L2).

The three callables run interleaved in blocks of calls (programs.interleaved_median_ms: a call
right after XLA's pays for its spinning worker threads), so that the noise of a shared machine
falls on all alike; the table gives their medians, `stitch x` = unstitched / stitched
(the issue's target: >= 1.3 where the row fits in L2, never below 1) and `vs XLA` = XLA / stitched,
the kernels each plan runs, and whether both of hlocc's outputs match XLA's within the tolerances.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys
import zlib

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))
from programs import XlaReference, interleaved_median_ms  # noqa: E402

CASES = [  # (name, function, rows, row length)
    ("softmax", "softmax", 512, 4096),
    ("softmax", "softmax", 16384, 127),
    ("layernorm", "layernorm", 512, 4096),
    ("layernorm", "layernorm", 16384, 127),
]
QUICK_ROWS = 8


def _functions():
    import jax

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def layernorm(x, scale, bias):
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * scale + bias

    return {"softmax": softmax, "layernorm": layernorm}


def build(fn_name: str, rows: int, n: int) -> tuple[str, list[np.ndarray]]:
    import jax

    fn = _functions()[fn_name]
    rng = np.random.default_rng([1234, zlib.crc32(f"{fn_name}{rows}x{n}".encode())])
    shapes = [(rows, n)] if fn_name == "softmax" else [(rows, n), (n,), (n,)]
    args = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
    return jax.jit(fn).lower(*args).as_text(dialect="hlo"), args


def compile_hlocc(text: str, stitch: bool):
    """The cpu backend's executable of `text`, with or without the stitch-fusion pass (a module
    object is compiled, not text: no program cache hit, both plans are compiled here)."""
    import hlocc
    from hlocc.passes.pipeline import DISABLE_ENV

    saved = os.environ.get(DISABLE_ENV)
    if not stitch:
        os.environ[DISABLE_ENV] = "stitch-fusion"
    try:
        return hlocc.compile(hlocc.parse_hlo(text), "cpu")
    finally:
        if saved is None:
            os.environ.pop(DISABLE_ENV, None)
        else:
            os.environ[DISABLE_ENV] = saved


def run_case(name: str, fn_name: str, rows: int, n: int, runs: int) -> dict:
    from hlocc.cli import flatten
    from hlocc.comparison import compare_arrays

    text, args = build(fn_name, rows, n)
    stitched, plain = compile_hlocc(text, True), compile_hlocc(text, False)
    xla = XlaReference(text)
    buffers = xla.put(args)
    expected = xla.run(buffers)
    problems = [compare_arrays(e, g, 1e-4, 1e-5) for exe in (stitched, plain)
                for e, g in zip(expected, flatten(exe(*args)))]
    t_stitched, t_plain, t_xla = interleaved_median_ms(
        [lambda: stitched(*args), lambda: plain(*args), lambda: xla.run(buffers, to_host=False)], runs)

    def kernels(exe) -> str:
        s = exe.runner.stats
        return f"{s.kernels} ({', '.join(f'{k} {v}' for k, v in sorted(s.kernels_by_emitter.items()))})"

    return {"case": f"{name} f32[{rows},{n}]", "stitched_ms": t_stitched, "unstitched_ms": t_plain, "xla_ms": t_xla,
            "stitch_speedup": t_plain / t_stitched, "vs_xla": t_xla / t_stitched,
            "stitched_kernels": kernels(stitched), "unstitched_kernels": kernels(plain), "xla_kernels": xla.kernels(),
            "match": all(p is None for p in problems), "problem": next((p for p in problems if p), None)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_ROWS} rows per case (a smoke test)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--case", default="", help="only the cases whose name contains this (e.g. 'softmax f32[16384')")
    opts = ap.parse_args()
    cases = [c for c in CASES if opts.case in f"{c[0]} f32[{c[2]},{c[3]}]"]
    results = [run_case(name, fn, QUICK_ROWS if opts.quick else rows, n, opts.runs) for name, fn, rows, n in cases]
    if opts.json:
        print(json.dumps({"results": results}, indent=1))
        return
    print("| case | stitched ms | unstitched ms | XLA:CPU ms | stitch x | vs XLA | kernels (stitched / unstitched / "
          "XLA) | match |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['case']} | {r['stitched_ms']:.3f} | {r['unstitched_ms']:.3f} | {r['xla_ms']:.3f} | "
              f"{r['stitch_speedup']:.2f} | {r['vs_xla']:.2f} | {r['stitched_kernels']} / {r['unstitched_kernels']} / "
              f"{r['xla_kernels']} | {'ok' if r['match'] else r['problem']} |")
    geo = statistics.geometric_mean([r["stitch_speedup"] for r in results])
    print(f"\ngeomean stitch speedup (unstitched / stitched) over {len(results)} cases: {geo:.2f}")


if __name__ == "__main__":
    main()
