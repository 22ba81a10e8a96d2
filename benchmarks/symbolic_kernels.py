"""Kernels with runtime dims against kernels specialised to each size: the steady time of one
symbolic CPU kernel (compiled once, issue 15 item 5) over several sizes, against the static kernel
compiled for exactly that size, in the same run and interleaved call by call (the noise of this
shared machine falls on both alike).

    python benchmarks/symbolic_kernels.py [--runs 50] [--sizes 7,64,257] [--cases NAME,...]

For each case (an elementwise fusion with a broadcast, a row max, softmax's exp-normalise, a
broadcast along a symbolic row length `n` and a row sum, on rows of 4096 and 127 f32; `n` takes
the row length) and batch size: the symbolic and the static kernel's median
milliseconds, their ratio (symbolic / static: 1.0 is parity, the target is <= 1.15), the
emitter of each, and the compile time of the symbolic kernel (once) and of the static ones (each
size). The table ends with the geomean ratio per row length.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time

import numpy as np

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.specialize import specialize

REDUCERS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}"""

CASES = {
    "scale_shift": """
ENTRY e {
  x = f32[?b,N] parameter(0)
  g = f32[N] parameter(1)
  gb = f32[?b,N] broadcast(g), dimensions={1}
  m = f32[?b,N] multiply(x, gb)
  ROOT r = f32[?b,N] add(m, x)
}""",
    "row_max": """
ENTRY e {
  x = f32[?b,N] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[?b] reduce(x, z), dimensions={1}, to_apply=max
}""",
    "exp_normalise": """
ENTRY e {
  x = f32[?b,N] parameter(0)
  m = f32[?b] parameter(1)
  mb = f32[?b,N] broadcast(m), dimensions={0}
  s = f32[?b,N] subtract(x, mb)
  ROOT e = f32[?b,N] exponential(s)
}""",
    "minor_broadcast": """
ENTRY e {
  x = f32[?b,?n] parameter(0)
  g = f32[?n] parameter(1)
  gb = f32[?b,?n] broadcast(g), dimensions={1}
  ROOT r = f32[?b,?n] multiply(x, gb)
}""",
    "row_sum": """
ENTRY e {
  x = f32[?b,N] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[?b] reduce(x, z), dimensions={1}, to_apply=add
}""",
}


def module_text(case: str, n: int) -> str:
    return "HloModule m\n" + REDUCERS + CASES[case].replace("N]", f"{n}]")


def buffers(kernel, binding, rng) -> list[np.ndarray]:
    from hlocc.hlo.symbolic import evaluate

    out = []
    for shape in [*kernel.param_shapes, *kernel.output_shapes]:
        dims = [evaluate(d, binding) for d in shape.physical_dims]
        out.append(rng.standard_normal(dims).astype(np.float32))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--sizes", default="7,64,257")
    p.add_argument("--cases", default=",".join(CASES))
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rng = np.random.default_rng(0)
    ratios: dict[int, list[float]] = {}
    print(f"{'case':<14} {'N':>5} {'b':>5} {'symbolic ms':>12} {'static ms':>10} {'ratio':>6}  emitters (sym/static)  "
          "compile ms (sym once / static)")
    for case in args.cases.split(","):
        for n in (4096, 127):
            module = parse_hlo(module_text(case, n))
            t0 = time.perf_counter()
            symbolic = compile_fusion(module.entry, use_cache=False)
            sym_compile = (time.perf_counter() - t0) * 1e3
            for b in sizes:
                binding = {"b": b, "n": n}
                dims = [binding[v] for v in symbolic.symbols]
                t0 = time.perf_counter()
                static = compile_fusion(specialize(module, {v: binding[v] for v in symbolic.symbols}).entry,
                                        use_cache=False)
                static_compile = (time.perf_counter() - t0) * 1e3
                bufs = buffers(symbolic, binding, rng)
                addresses = [x.ctypes.data for x in bufs]
                sym_times, static_times = [], []
                for _ in range(3):
                    symbolic.run_addresses(addresses, dims)
                    static.run_addresses(addresses)
                for _ in range(args.runs):
                    t0 = time.perf_counter()
                    symbolic.run_addresses(addresses, dims)
                    t1 = time.perf_counter()
                    static.run_addresses(addresses)
                    sym_times.append(t1 - t0)
                    static_times.append(time.perf_counter() - t1)
                sym_ms, static_ms = statistics.median(sym_times) * 1e3, statistics.median(static_times) * 1e3
                ratio = sym_ms / static_ms
                ratios.setdefault(n, []).append(ratio)
                print(f"{case:<14} {n:>5} {b:>5} {sym_ms:>12.4f} {static_ms:>10.4f} {ratio:>6.2f}  "
                      f"{symbolic.emitter}/{static.emitter:<14} {sym_compile:>8.0f} / {static_compile:.0f}", flush=True)
    for n, rs in ratios.items():
        print(f"geomean ratio symbolic/static, rows of {n}: {math.exp(statistics.fmean(map(math.log, rs))):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
