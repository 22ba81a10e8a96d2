"""Emitters: hlocc's kernels for softmax, layernorm, reductions and transposes against XLA in the
same run, on the CPU (XLA:CPU) or, with `--backend cuda`, on the GPU (XLA:GPU).

    python benchmarks/emitters.py [--cases NAME,...] [--runs 20] [--quick] [--json] [--data DIR]
                                  [--backend cpu|cuda|cuda-sim]

With `--backend cuda` the inputs live on the GPU for both compilers (hlocc takes XLA's device
buffers through DLPack and leaves its results on the GPU) and the bandwidth reference is the
memory's peak (from the driver: clock × bus width) instead of a numpy copy. `cuda-sim` runs the
GPU kernels in simulation on the host against XLA:CPU: a check that the path runs, not a timing.

Each case is HLO text as JAX writes it (`jax.jit(f).lower(*args).as_text(dialect="hlo")`), or a
reduction perf case of shared/corpus/jax read from disk. The *same text* is compiled by hlocc
(backend cpu) and by XLA:CPU through jaxlib (programs.XlaCpu); both run on the same inputs, warmed
up, interleaved in blocks of calls (programs.interleaved_median_ms) so that the noise of this 2-core
machine falls on both alike, and the medians are compared:

* ratio: XLA time / hlocc time (above 1 means hlocc is faster); the table ends with their geomean;
* bytes moved: the inputs plus the outputs once each, and the bandwidth each compiler achieves as a
  percentage of the memory bandwidth: the fastest of a few numpy copies of a 256 MiB array (read +
  write), timed just before the case's own calls so that it sees about the same load (not between
  them: it would evict the inputs from the cache). Inputs that fit in the 32 MiB L3 can go above 100 %;
* emitters: the emitter that generated each of hlocc's kernels (`runner.stats.kernels_by_emitter`),
  with library calls and host fallbacks where there are any;
* max rel err: max |hlocc - xla| / max(|xla|, atol) over all output elements, and "ok" where every
  output is within the case's rtol/atol of XLA's (the corpus policy, hlocc.comparison); a mismatch
  or an hlocc failure is a row of the table, never an exception.

`--quick` shrinks the generated cases to a few KiB (for the smoke test; the corpus cases keep
their size). Corpus cases whose files are absent are skipped with the reason; their large inputs
are recreated once into --data as benchmarks/programs.py does.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from programs import (  # noqa: E402
    CORPUS,
    XlaReference,
    case_dir,
    ensure_data,
    gpu_time_ms,
    hlocc_runner,
    interleaved_median_ms,
    reference_platform,
)

COPY_BYTES = 256 << 20
QUICK_COPY_BYTES = 16 << 20
COPY_RUNS = 5


@dataclass(frozen=True)
class Case:
    """One benchmark: `build(quick, data)` gives the HLO text and the inputs (in parameter order)."""

    name: str
    description: str
    build: Callable[[bool, pathlib.Path], tuple[str, list[np.ndarray]]]
    rtol: float
    atol: float


@dataclass
class Result:
    name: str
    inputs: str  # HLO types of the parameters, e.g. "f32[4096,1024]; f32[1024]"
    description: str = ""
    compile_ms: float | None = None
    hlocc_ms: float | None = None
    xla_ms: float | None = None
    ratio: float | None = None
    bytes_moved: int = 0
    hlocc_gbs: float | None = None
    hlocc_bw_pct: float | None = None
    xla_gbs: float | None = None
    xla_bw_pct: float | None = None
    emitters: str = ""
    max_rel_err: float | None = None
    copy_gbs: float | None = None  # the memory bandwidth the percentages are of
    hlocc_gpu_ms: float | None = None  # --backend cuda: the GPU's own time per call (programs.gpu_time_ms)
    xla_gpu_ms: float | None = None
    hlocc_gpu_ops: float | None = None  # kernels, copies and sets per call
    xla_gpu_ops: float | None = None
    match: bool = False
    problem: str | None = None  # why the outputs differ, or why hlocc failed


# -- cases -------------------------------------------------------------------------------------

def layernorm(x, scale, bias, eps: float = 1e-5):
    import jax

    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * scale + bias


def jax_case(name: str, description: str, fn: Callable, shapes: Sequence[tuple[int, ...]],
             quick_shapes: Sequence[tuple[int, ...]], dtype: str, rtol: float, atol: float) -> Case:
    """A case traced from `fn` by jax.jit at `shapes` (or `quick_shapes`), standard normal inputs
    seeded by the case's name (as the corpus does, so cases do not depend on their order)."""

    def build(quick: bool, data: pathlib.Path) -> tuple[str, list[np.ndarray]]:
        import jax
        import ml_dtypes

        np_dtype = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
        rng = np.random.default_rng([1234, zlib.crc32(name.encode())])
        args = [rng.standard_normal(s, dtype=np.float32).astype(np_dtype) for s in (quick_shapes if quick else shapes)]
        fn.__name__ = name  # the module is named jit_<case>, as in the corpus
        return row_major(jax.jit(fn).lower(*args).as_text(dialect="hlo")), args

    return Case(name, description, build, rtol, atol)


def row_major(text: str) -> str:
    """HLO text with every array layout removed, i.e. row-major. JAX's text gives the result of
    `x.T` the layout that makes the transpose a bitcast (f32[n,m]{0,1}); XLA:CPU compiles the text
    through StableHLO, which keeps no layouts, and returns a row-major array, so it moves the data.
    hlocc would honour the layout, move nothing and return a strided view: without the layouts both
    compute the same thing, a physical transpose."""
    return re.sub(r"\]\{[^{}]*\}", "]", text)


def corpus_case(name: str) -> Case:
    """A perf case of shared/corpus/jax: its HLO text, and its inputs (recreated into `data`)."""
    from corpus import jax_cases

    row = next((c for c in jax_cases() if c["name"] == name), {"description": "", "rtol": "0", "atol": "0"})

    def build(quick: bool, data: pathlib.Path) -> tuple[str, list[np.ndarray]]:
        from corpus import load_npz

        hlo = CORPUS / f"{name}.hlo"
        if not hlo.is_file():
            raise FileNotFoundError(f"{hlo} not found (shared/corpus/jax is not beside this checkout)")
        ensure_data([row], data)
        inputs = load_npz(case_dir(name, data) / f"{name}.in.npz")
        return hlo.read_text(), [inputs[f"arg{i}"] for i in range(len(inputs))]

    return Case(name, f"corpus: {row['description']}", build, float(row["rtol"]), float(row["atol"]))


def all_cases() -> list[Case]:
    import jax
    import jax.numpy as jnp

    def softmax(x):
        return jax.nn.softmax(x, axis=-1)

    def transposed(perm):
        return lambda x: jnp.transpose(x, perm) + 1  # the add makes XLA materialize the transpose

    rows, cols = (4096, 1024), (64, 128)
    square, small = (4096, 4096), (128, 256)
    cube, small_cube = (64, 512, 512), (4, 32, 64)
    return [
        jax_case("softmax_f32", "softmax over the last axis", softmax, [rows], [cols], "f32", 1e-4, 1e-7),
        jax_case("softmax_bf16", "softmax over the last axis", softmax, [rows], [cols], "bf16", 2e-2, 1e-2),
        jax_case("layernorm_f32", "layernorm over the last axis, scale and bias", layernorm,
                 [rows, rows[-1:], rows[-1:]], [cols, cols[-1:], cols[-1:]], "f32", 1e-4, 1e-5),
        jax_case("reduce_row_sum_f32", "sum over axis 1", lambda x: x.sum(axis=1), [square], [small],
                 "f32", 1e-4, 1e-3),
        jax_case("reduce_col_sum_f32", "sum over axis 0", lambda x: x.sum(axis=0), [square], [small],
                 "f32", 1e-4, 1e-3),
        jax_case("reduce_row_max_f32", "max over axis 1", lambda x: x.max(axis=1), [square], [small],
                 "f32", 0, 0),
        jax_case("transpose_2d_f32", "x.T + 1", transposed((1, 0)), [square], [small], "f32", 0, 0),
        jax_case("transpose_2d_f16", "x.T + 1", transposed((1, 0)), [square], [small], "f16", 0, 0),
        jax_case("transpose_021_f32", "transpose (0,2,1) + 1", transposed((0, 2, 1)), [cube], [small_cube],
                 "f32", 0, 0),
        jax_case("transpose_210_f32", "transpose (2,1,0) + 1", transposed((2, 1, 0)), [cube], [small_cube],
                 "f32", 0, 0),
        corpus_case("perf_reduce_rows_f32"),
        corpus_case("perf_add_rmsnorm_bf16"),
    ]


# -- measuring ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryCopy:
    """A numpy copy between two arrays of `nbytes`: what the memory system gives a plain stream."""

    src: np.ndarray
    dst: np.ndarray

    @classmethod
    def of(cls, nbytes: int) -> MemoryCopy:
        src = np.ones(nbytes // 4, np.float32)
        return cls(src, np.empty_like(src))

    def best_gbs(self, runs: int) -> float:
        """GB/s of the fastest of `runs` copies (read + write): the machine's bandwidth is what it can
        give, and on a loaded machine the median copy shows the load more than the memory."""
        np.copyto(self.dst, self.src)
        best = math.inf
        for _ in range(runs):
            t0 = time.perf_counter()
            np.copyto(self.dst, self.src)
            best = min(best, time.perf_counter() - t0)
        return 2 * self.src.nbytes / best / 1e9


@dataclass(frozen=True)
class PeakBandwidth:
    """The GPU memory's peak bandwidth (the reference on `--backend cuda`)."""

    gbs: float

    @classmethod
    def of_gpu(cls) -> PeakBandwidth:
        from hlocc.backends.cuda.driver import query_device

        return cls(query_device(0).peak_bandwidth / 1e9)

    def best_gbs(self, runs: int) -> float:
        return self.gbs


def max_rel_err(ref: np.ndarray, got: np.ndarray, atol: float) -> float:
    from hlocc.comparison import storable

    r, g = storable(ref).astype(np.float64), storable(got).astype(np.float64)
    both = np.isfinite(r) & np.isfinite(g)
    if not both.any():
        return 0.0
    floor = max(atol, float(np.finfo(np.float32).tiny))
    return float(np.max(np.abs(g[both] - r[both]) / np.maximum(np.abs(r[both]), floor)))


def emitters_of(stats) -> str:
    parts = [f"{k} {v}" for k, v in sorted(stats.kernels_by_emitter.items())]
    parts += [f"lib {k} {v}" for k, v in sorted(stats.library_calls.items())]
    if stats.host_ops:
        parts.append(f"host {len(stats.host_ops)}")
    return ", ".join(parts) or "none"


def hlo_types(args: Sequence[np.ndarray]) -> str:
    names = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "s32"}
    return "; ".join(f"{names.get(a.dtype.name, a.dtype.name)}[{','.join(map(str, a.shape))}]" for a in args)


def bench_case(case: Case, text: str, inputs: list[np.ndarray], runs: int, copy: MemoryCopy | PeakBandwidth,
               backend: str = "cpu") -> Result:
    import hlocc
    from hlocc.cli import flatten
    from hlocc.comparison import compare_arrays, storable
    from hlocc.compiler import check_arguments

    args = check_arguments(hlocc.parse_hlo(text), inputs, cast=True)
    result = Result(case.name, hlo_types(args), case.description)
    xla = XlaReference(text, reference_platform(backend))
    buffers = xla.put(args)
    expected = xla.run(buffers)
    result.bytes_moved = sum(a.nbytes for a in args) + sum(o.nbytes for o in expected)
    try:
        t0 = time.perf_counter()
        exe = hlocc.compile(text, backend=backend)
        result.compile_ms = (time.perf_counter() - t0) * 1e3
        result.emitters = emitters_of(exe.runner.stats)
        outputs = flatten(exe(*args))
    except Exception as e:  # an emitter still under construction must not end the whole benchmark
        result.problem = f"hlocc failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        (result.xla_ms,) = interleaved_median_ms([lambda: xla.run(buffers)], runs)
        return result
    problems = [compare_arrays(storable(r), g, case.rtol, case.atol) for r, g in zip(expected, outputs)]
    if len(outputs) != len(expected):
        problems.append(f"{len(outputs)} outputs, XLA has {len(expected)}")
    result.match = all(p is None for p in problems)
    result.problem = next((f"out{i}: {p}" for i, p in enumerate(problems) if p), None)
    result.max_rel_err = max(max_rel_err(r, g, case.atol) for r, g in zip(expected, outputs))
    result.copy_gbs = copy.best_gbs(COPY_RUNS)
    ours = hlocc_runner(exe, args, backend, xla)
    result.hlocc_ms, result.xla_ms = interleaved_median_ms([ours, lambda: xla.run(buffers, to_host=False)], runs)
    result.ratio = result.xla_ms / result.hlocc_ms
    if backend == "cuda":
        for prefix, fn in (("hlocc", ours), ("xla", lambda: xla.run(buffers, to_host=False))):
            measured = gpu_time_ms(fn, runs)
            if measured is not None:
                setattr(result, f"{prefix}_gpu_ms", measured[0])
                setattr(result, f"{prefix}_gpu_ops", measured[1])
    result.hlocc_gbs = result.bytes_moved / result.hlocc_ms / 1e6
    result.xla_gbs = result.bytes_moved / result.xla_ms / 1e6
    result.hlocc_bw_pct = 100 * result.hlocc_gbs / result.copy_gbs
    result.xla_bw_pct = 100 * result.xla_gbs / result.copy_gbs
    return result


# -- reporting ---------------------------------------------------------------------------------

def geomean(values: Sequence[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def markdown_row(r: Result, gpu: bool = False) -> str:
    def num(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    verdict = "ok" if r.match else f"**MISMATCH** {r.problem}" if r.max_rel_err is not None else f"**{r.problem}**"
    cells = [r.name, r.inputs, num(r.hlocc_ms, ".3f"), num(r.xla_ms, ".3f"), num(r.ratio, ".2f"),
             f"{r.bytes_moved / 1e6:.1f}", num(r.copy_gbs, ".1f"), num(r.hlocc_gbs, ".1f"),
             num(r.hlocc_bw_pct, ".0f"), num(r.xla_bw_pct, ".0f"), num(r.compile_ms, ".0f"), r.emitters,
             num(r.max_rel_err, ".1e"), verdict]
    if gpu:
        ours, theirs = r.hlocc_gpu_ms, r.xla_gpu_ms
        cells[5:5] = [num(ours and ours * 1e3, ".1f"), num(theirs and theirs * 1e3, ".1f"),
                      num(ours and theirs and theirs / ours, ".2f"),
                      f"{num(r.hlocc_gpu_ops, '.0f')}/{num(r.xla_gpu_ops, '.0f')}"]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| case | inputs | hlocc ms | XLA ms | ratio | MB moved | copy GB/s | hlocc GB/s | hlocc % bw | XLA % bw "
          "| compile ms | emitters | max rel err | match |")
GPU_HEADER = HEADER.replace("| ratio |", "| ratio | hlocc GPU µs | XLA GPU µs | GPU ratio | GPU ops hlocc/XLA |")
"""--backend cuda adds the GPU's own time per call (kernels and copies, from CUPTI through torch):
the wall times there are mostly the host's launch and synchronization."""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default="all", help="all (default) or comma-separated names")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="small sizes for the generated cases")
    ap.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    ap.add_argument("--data", type=pathlib.Path, default=pathlib.Path.home() / ".cache" / "hlocc" / "jax_corpus")
    ap.add_argument("--backend", choices=("cpu", "cuda", "cuda-sim"), default="cpu")
    args = ap.parse_args()
    import jax

    cases = all_cases()
    if args.cases != "all":
        names = args.cases.split(",")
        unknown = sorted(set(names) - {c.name for c in cases})
        if unknown:
            ap.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(c.name for c in cases)}")
        cases = [c for c in cases if c.name in names]
    log = sys.stderr if args.json else sys.stdout
    copy = (PeakBandwidth.of_gpu() if args.backend == "cuda"
            else MemoryCopy.of(QUICK_COPY_BYTES if args.quick else COPY_BYTES))
    load = os.getloadavg()[0]  # other processes on these few cores make the timings noisy
    print(f"{len(cases)} cases, {args.runs} runs, median; hlocc --backend {args.backend} against XLA on "
          f"{reference_platform(args.backend)}; jax {jax.__version__}, {os.cpu_count()} cpus, load {load:.1f}",
          file=log, flush=True)
    header = GPU_HEADER if args.backend == "cuda" else HEADER
    if not args.json:
        print(header)
        print("|" + "---|" * header.count(" | ") + "---|")
    results, skipped = [], {}
    for case in cases:
        try:
            text, inputs = case.build(args.quick, args.data)
        except (OSError, subprocess.CalledProcessError) as e:  # corpus files absent, or their inputs not recreatable
            skipped[case.name] = str(e)
            print(f"skipped {case.name}: {e}", file=sys.stderr, flush=True)
            continue
        results.append(bench_case(case, text, inputs, args.runs, copy, args.backend))
        if not args.json:
            print(markdown_row(results[-1], args.backend == "cuda"), flush=True)
    mean = geomean([r.ratio for r in results if r.ratio is not None])
    if args.json:
        print(json.dumps({"jax": jax.__version__, "cpus": os.cpu_count(), "load": load, "runs": args.runs,
                          "quick": args.quick, "geomean_ratio": mean, "results": [asdict(r) for r in results],
                          "skipped": skipped}, indent=1))
    elif mean is not None:
        timed = sum(r.ratio is not None for r in results)
        print(f"\ngeomean ratio (XLA time / hlocc time) over {timed} cases: {mean:.2f}")


if __name__ == "__main__":
    main()
