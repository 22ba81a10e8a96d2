"""Per-call host overhead of small programs (issue 18 item 4): what a call through
`Executable.__call__` costs when the kernels themselves do almost nothing (f32[4]).

    python benchmarks/overhead.py [--calls 2000] [--repeats 7] [--json FILE]

Programs (HLO text; the dynamic ones take f32[?n] and run at n=4):
- one kernel: add(p, p), static and dynamic;
- five kernels: a chain of five explicit fusions compiled as written (hlo_passes=False), static
  and dynamic;
- a while loop of three trips (static): ten kernel launches per call (four of the condition's
  kernel, three of each of the body's two).

Arms, in one run: hlocc's cpu backend through `Executable.__call__`; XLA:CPU through jax, the
compiled executable (`jax.jit(f).lower(x).compile()`) called with `block_until_ready`, and its raw
runtime executable (`runtime_executable().execute` on a device array, the result waited for);
numpy's own ops for the same computation as a floor. Each figure is the best of --repeats means over
--calls calls, in µs (the best, not the median: on a shared machine the mean of a repeat is what
the load added to it). "hlocc CPU µs" is the calling thread's CPU time per call (time.thread_time):
the Python work and the kernels, which run in the calling thread at these sizes, without the time
the thread waited for a core — the steadier figure on a loaded machine (XLA's own threads make its
CPU time incomparable, so it has none). The target is ≤ 8 µs plus ≤ 1 µs per kernel.
"""

from __future__ import annotations

import argparse
import functools
import json
import pathlib
import time

import numpy as np

ONE = """HloModule one
ENTRY e {
  p = f32[DIM]{0} parameter(0)
  ROOT a = f32[DIM]{0} add(p, p)
}"""

_OPS = ["add", "multiply", "maximum", "minimum", "add"]
FIVE = "HloModule five\n" + "".join(
    f"f{k} {{\n  p = f32[DIM]{{0}} parameter(0)\n  ROOT r = f32[DIM]{{0}} {op}(p, p)\n}}\n" for k, op in enumerate(_OPS)
) + "ENTRY e {\n  x0 = f32[DIM]{0} parameter(0)\n" + "".join(
    f"  {'ROOT ' if k == 4 else ''}x{k + 1} = f32[DIM]{{0}} fusion(x{k}), kind=kLoop, calls=f{k}\n" for k in range(5)
) + "}"

WHILE = """HloModule loop
cond {
  s = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4]{0} get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  x2 = f32[4]{0} add(x, x)
  ROOT t = (s32[], f32[4]{0}) tuple(i2, x2)
}
ENTRY e {
  x = f32[4]{0} parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]{0}) tuple(z, x)
  w = (s32[], f32[4]{0}) while(t), condition=cond, body=body
  ROOT r = f32[4]{0} get-tuple-element(w), index=1
}"""


def per_call_us(fn, calls: int, repeats: int, clock=time.perf_counter) -> float:
    """The best of `repeats` mean call times of `fn()` over `calls` calls, in µs, by `clock`."""
    for _ in range(min(calls, 200)):
        fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - t0) / calls)
    return best * 1e6


def _jax_functions():
    import jax

    def five(x):
        for op in (lambda a: a + a, lambda a: a * a, lambda a: a, lambda a: a, lambda a: a + a):
            x = op(x)
        return x

    def loop(x):
        return jax.lax.fori_loop(0, 3, lambda i, a: a + a, x)

    return {"one": lambda x: x + x, "five": five, "while": loop}


def _numpy_floors(x: np.ndarray) -> dict:
    def five():
        a = np.add(x, x)
        a = np.multiply(a, a)
        a = np.maximum(a, a)
        a = np.minimum(a, a)
        return np.add(a, a)

    def loop():
        a = x
        for _ in range(3):
            a = np.add(a, a)
        return a

    return {"one": lambda: np.add(x, x), "five": five, "while": loop}


CASES = [  # (row name, program key, HLO text, dynamic, kernel launches per call, compile options)
    ("1 kernel, static", "one", ONE.replace("DIM", "4"), False, 1, {}),
    ("1 kernel, dynamic", "one", ONE.replace("DIM", "?n"), True, 1, {}),
    ("5 kernels, static", "five", FIVE.replace("DIM", "4"), False, 5, {"hlo_passes": False}),
    ("5 kernels, dynamic", "five", FIVE.replace("DIM", "?n"), True, 5, {"hlo_passes": False}),
    # 4 runs of the condition's kernel, 3 of the body's two (the counter's and the array's)
    ("while, 3 trips", "while", WHILE, False, 10, {}),
]


def xla_arms(key: str, x: np.ndarray, calls: int, repeats: int) -> tuple[float | None, float | None]:
    """(jit executable call, raw execute) in µs; None where jax cannot be imported."""
    try:
        import jax
    except ImportError:
        return None, None
    compiled = jax.jit(_jax_functions()[key]).lower(x).compile()
    jit_us = per_call_us(lambda: compiled(x).block_until_ready(), calls, repeats)
    raw_us = None
    try:
        runtime = compiled.runtime_executable()
        on_device = [jax.device_put(x)]
        raw_us = per_call_us(lambda: runtime.execute(on_device)[0].block_until_ready(), calls, repeats)
    except (AttributeError, TypeError, RuntimeError):  # the raw API differs between jaxlib versions
        pass
    return jit_us, raw_us


def run(calls: int, repeats: int, cases=CASES) -> list[dict]:
    """A row per case: hlocc's, XLA:CPU's and numpy's per-call µs (benchmarks/dynamic.py runs the
    one-kernel cases)."""
    import hlocc

    x = np.ones(4, np.float32)
    floors = _numpy_floors(x)
    rows = []
    for name, key, text, dynamic, kernels, options in cases:
        exe = hlocc.compile(text, "cpu", **options)
        assert dynamic == (type(exe).__name__ == "DynamicExecutable")
        np.testing.assert_allclose(exe(x), floors[key]())
        hlocc_us = per_call_us(functools.partial(exe, x), calls, repeats)
        hlocc_cpu_us = per_call_us(functools.partial(exe, x), calls, repeats, time.thread_time)
        jit_us, raw_us = xla_arms(key, x, calls, repeats)
        numpy_us = per_call_us(floors[key], calls, repeats)
        rows.append({"program": name, "kernels": kernels, "hlocc_us": hlocc_us, "hlocc_cpu_us": hlocc_cpu_us,
                     "xla_jit_us": jit_us,
                     "xla_execute_us": raw_us, "numpy_us": numpy_us, "target_us": 8.0 + kernels,
                     "hlocc_over_xla_execute": hlocc_us / raw_us if raw_us else None,
                     "hlocc_over_xla_jit": hlocc_us / jit_us if jit_us else None})
    return rows


def _fmt(value: float | None, unit: str = "") -> str:
    return "n/a" if value is None else f"{value:.2f}{unit}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=2000, help="calls per timed repeat")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--json", type=pathlib.Path, help="write the rows here")
    args = ap.parse_args()
    rows = run(args.calls, args.repeats)
    print("| program | kernel launches | hlocc µs | hlocc CPU µs | target µs | XLA:CPU jit µs | XLA:CPU execute µs "
          "| numpy µs | hlocc / XLA execute | hlocc / XLA jit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['program']} | {r['kernels']} | {r['hlocc_us']:.2f} | {r['hlocc_cpu_us']:.2f} | "
              f"{r['target_us']:.0f} | "
              f"{_fmt(r['xla_jit_us'])} | {_fmt(r['xla_execute_us'])} | {r['numpy_us']:.2f} | "
              f"{_fmt(r['hlocc_over_xla_execute'], 'x')} | {_fmt(r['hlocc_over_xla_jit'], 'x')} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
