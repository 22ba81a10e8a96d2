"""The `hlocc` command line, modelled on XLA's `run_hlo_module` and `hlo-opt`.

    hlocc run MODULE.hlo [--inputs IN.npz] [--output OUT.npz] [--expected REF.npz --rtol R --atol A]
                         [--backend interpreter|cpu|cuda|cuda-sim] [--seed N] [--bench N] [--json] [--stats]
                         [--no-hlo-passes] [--print-ir-after-all] [--dump-dir DIR] [--gemm library|codegen|auto]
                         [--autotune off|cached|full]
    hlocc print MODULE.hlo [--no-verify] [--no-metadata]
    hlocc opt [--passes a,b | --pipeline cpu|gpu] [--emit-llvm] FILE.mlir   (kernel IR passes, like mlir-opt)
    hlocc hlo-opt [--passes a,b | --pipeline simplify] [--print-after-all] FILE.hlo   (HLO passes)
    hlocc cache info|clear [--json]   (the persistent compilation cache in $HLOCC_CACHE_DIR)

Inputs are named arg0, arg1, ... in parameter order and are cast to the parameter types (so bf16 and
f8 stored as float32 work); outputs are written as out0, out1, ... (a tuple result flattened in
order), with types numpy cannot store (bf16, f8, sub-byte ints) widened to float32 / int8. A user
error prints one message and exits with status 1; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from hlocc.comparison import compare_arrays, storable
from hlocc.compiler import BACKENDS, DynamicExecutable, check_arguments, compile
from hlocc.errors import ElidedConstantsWarning, HloError, count_of, elided_constants_message
from hlocc.frontends import load_module_file
from hlocc.hlo.types import Shape


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["opt"]:  # mlir-opt for kernel IR; it has its own arguments
        from hlocc.tools.opt import main as opt_main

        return opt_main(argv[1:])
    if argv[:1] == ["hlo-opt"]:  # hlo-opt for HLO passes; it has its own arguments
        from hlocc.tools.hlo_opt import main as hlo_opt_main

        return hlo_opt_main(argv[1:])
    if argv[:1] == ["reduce"]:  # shrink a failing module; its own arguments
        from hlocc.tools.reduce import main as reduce_main

        return reduce_main(argv[1:])
    if argv[:1] == ["fusion-to-mlir"]:  # the emitted kernel IR of a fusion; its own arguments
        from hlocc.tools.fusion_to_mlir import main as fusion_to_mlir_main

        try:
            return fusion_to_mlir_main(argv[1:])
        except HloError as e:
            print(f"hlocc: error: {e}", file=sys.stderr)
            return 1
    parser = _argument_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except HloError as e:
        if args.debug:
            raise
        print(f"hlocc: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("hlocc: interrupted", file=sys.stderr)
        return 130
    except MemoryError as e:  # the machine's limit, not a bug: say what ran out
        if args.debug:
            raise
        print(f"hlocc: error: out of memory{f': {e}' if str(e) else ''}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # the reader went away (`hlocc run ... | head`): stop quietly
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # a bug in hlocc, not in the input: say so, without a traceback
        if args.debug:
            raise
        print(f"hlocc: internal error: {type(e).__name__}: {e} (rerun with --debug for the traceback, and please "
              "report it)", file=sys.stderr)
        return 2


def _natural(text: str) -> int:
    """An argparse type: a non-negative integer (numpy's seeds are)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got '{text}'")
    return value


def _argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hlocc", description="A compiler for XLA HLO programs.")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("opt", help="run kernel IR passes on MLIR text (hlocc opt --help)", add_help=False)
    sub.add_parser("hlo-opt", help="run HLO passes on HLO text (hlocc hlo-opt --help)", add_help=False)
    sub.add_parser("reduce", help="shrink a module that fails on a backend to a minimal failing one "
                                  "(hlocc reduce --help)", add_help=False)
    sub.add_parser("fusion-to-mlir", help="print the kernel IR an emitter generates for a fusion "
                                          "(hlocc fusion-to-mlir --help)", add_help=False)

    run = sub.add_parser("run", help="compile and run an HLO module (like run_hlo_module)")
    run.add_argument("module", type=Path, help="HLO text file")
    run.add_argument("--inputs", type=Path, help=".npz with arg0, arg1, ... (default: seeded random inputs)")
    run.add_argument("--output", type=Path, help="write outputs out0, out1, ... to this .npz")
    run.add_argument("--expected", type=Path, help="compare outputs with out0, out1, ... of this .npz")
    run.add_argument("--rtol", type=_tolerance, default=1e-5, help="relative tolerance for --expected")
    run.add_argument("--atol", type=_tolerance, default=1e-6, help="absolute tolerance for --expected")
    run.add_argument("--backend", choices=BACKENDS, default="interpreter",
                     help="interpreter: the reference evaluator; cpu: kernels JIT-compiled for the host; cuda: "
                          "PTX kernels, cuBLAS and device memory on an NVIDIA GPU; cuda-sim: the cuda path on a "
                          "simulated GPU (its kernels in SIMT simulation on the host)")
    run.add_argument("--seed", type=_natural, default=0, help="seed of the random inputs and of rng ops")
    run.add_argument("--bench", type=_natural, default=0, metavar="N", help="time N warmed runs (0: none)")
    run.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    run.add_argument("--no-verify", action="store_true",
                     help="skip the verifier (debugging only: an ill-formed module may then crash the compiler)")
    run.add_argument("--no-hlo-passes", action="store_true",
                     help="compile the module as written: no simplification or fusion (cpu and cuda backends)")
    run.add_argument("--gemm", choices=("library", "codegen", "auto"), default=None,
                     help="dots as library calls (default off the cpu), as generated dot-fusion kernels (cpu, "
                          "cuda, cuda-sim: mma.sync for bf16/f16 on the GPU), or auto (cpu, its default: "
                          "generated kernels for the small dots where they measured faster)")
    run.add_argument("--autotune", choices=("off", "cached", "full"), default="cached",
                     help="with --gemm codegen: the analytic matmul schedule (off), a winner the persistent cache "
                          "holds (cached, default) or time candidates and store the winner (full)")
    run.add_argument("--stats", action="store_true",
                     help="print what the program compiled into: fusions by emitter kind, kernels, library calls, "
                          "host fallbacks, peak memory and compile time per stage (cpu and cuda backends; "
                          "cuda also what the first run moved between host and device)")
    run.add_argument("--check-bounds", action="store_true",
                     help="cpu and cuda-sim backends: every kernel checks each load and store against its buffer; "
                          "a violation stops with an error naming the kernel, the buffer and the index")
    run.add_argument("--print-ir-after-all", action="store_true",
                     help="print the module after every HLO pass and each kernel's IR after every kernel pass "
                          "(like run_hlo_module --v=5)")
    run.add_argument("--dump-dir", type=Path, help="write each kernel's IR after every pass, the optimized module, "
                                                   "the buffer assignment and the thunks to this directory")
    run.set_defaults(func=_cmd_run)

    pr = sub.add_parser("print", help="parse, verify and print canonical HLO text")
    pr.add_argument("module", type=Path)
    pr.add_argument("--no-verify", action="store_true")
    pr.add_argument("--no-metadata", action="store_true", help="omit metadata={...}")
    pr.set_defaults(func=_cmd_print)

    cache = sub.add_parser("cache", help="the persistent compilation cache ($HLOCC_CACHE_DIR, default "
                                         "~/.cache/hlocc; HLOCC_CACHE_DIR= turns it off)")
    cache.add_argument("action", choices=("info", "clear"), help="info: where it is and what it holds; "
                                                                  "clear: remove every entry")
    cache.add_argument("--json", action="store_true", help="print one JSON object")
    cache.set_defaults(func=_cmd_cache)

    for p in (run, pr, cache):
        p.add_argument("--debug", action="store_true", help="show Python tracebacks of errors")
    return parser


# -- hlocc cache ---------------------------------------------------------------------------------
def _cmd_cache(args) -> int:
    from hlocc.runtime.cache import cache_dir_setting, max_bytes_setting, open_cache

    directory = cache_dir_setting()
    cache = open_cache(directory, max_bytes_setting(), create=False) if directory and directory.exists() else None
    if args.action == "clear" and cache is not None:
        report = {"directory": str(directory), "removed": cache.clear()}
    elif cache is not None:
        report = {"enabled": True, **cache.info()}
    else:
        why = ("off (HLOCC_CACHE_DIR is empty)" if directory is None else
               "not created yet" if not directory.exists() else "refused (see the warning)")
        report = {"enabled": False, "directory": str(directory or ""), "state": why}
    if args.json:
        print(json.dumps(report))
    elif "removed" in report:
        print(f"removed {report['removed']} entries from {report['directory']}")
    elif report["enabled"]:
        print(f"{report['directory']}: {report['entries']} entries, {report['bytes']} bytes "
              f"(bound {report['max_bytes']} bytes)")
    else:
        print(f"cache {report['directory'] or '(none)'}: {report['state']}")
    return 0


# -- hlocc print ---------------------------------------------------------------------------------
def _cmd_print(args) -> int:
    module = load_module_file(args.module)
    if not args.no_verify:
        from hlocc.hlo.verifier import verify_module

        verify_module(module)
    sys.stdout.write(module.to_string(print_metadata=not args.no_metadata))
    return 0


# -- hlocc run -----------------------------------------------------------------------------------
def _warn_elided_constants(module, path: Path) -> None:
    """A warning when the HLO text elided constants (`constant({...})`, as XLA prints large ones by
    default): they parse as zeros (hlo/literals.py), so the results are not the dumped program's."""
    names = module.elided_constants
    if names:
        print(f"hlocc: warning: {elided_constants_message(names, repr(str(path)))}", file=sys.stderr)


def _cmd_run(args) -> int:
    if args.dump_dir:
        try:
            args.dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise HloError(f"cannot write to --dump-dir '{args.dump_dir}': {e.strerror or e}") from None
    t0 = time.perf_counter()
    module = load_module_file(args.module)
    _warn_elided_constants(module, args.module)
    with warnings.catch_warnings():  # (said above, once, in the CLI's words)
        warnings.simplefilter("ignore", ElidedConstantsWarning)
        exe = compile(module, args.backend, verify=not args.no_verify, seed=args.seed,
                      hlo_passes=not args.no_hlo_passes, print_ir_after_all=args.print_ir_after_all,
                      dump_dir=str(args.dump_dir) if args.dump_dir else None, gemm=args.gemm,
                      check_bounds=args.check_bounds, autotune=args.autotune)
    compile_ms = (time.perf_counter() - t0) * 1e3
    dynamic = isinstance(exe, DynamicExecutable)  # its stats depend on the sizes of the first call
    stats = []  # --stats' text: printed before the report, or its "stats" field with --json
    if args.stats and not dynamic:
        stats.append(_stats_text(exe, args.backend))
    if not args.inputs and any(p.shape.is_symbolic for p in module.entry.parameters):  # (`<=N`: at the bound)
        symbols = sorted(frozenset().union(*(p.shape.symbols for p in module.entry.parameters)))
        raise HloError(f"'{args.module}' has symbolic dimensions ({', '.join(symbols)}): random inputs need "
                       "concrete sizes; give them with --inputs IN.npz")
    inputs = _load_inputs(args.inputs, module) if args.inputs else random_inputs(module, args.seed)
    inputs = check_arguments(module, inputs, cast=True)

    t0 = time.perf_counter()
    result = exe(*inputs)
    first_ms = (time.perf_counter() - t0) * 1e3
    if args.stats and dynamic:
        stats.append(exe.stats_text())  # with a plan for every size, its runtime stats too
        if exe.program is None:
            stats.append(_stats_text(exe.specialized(exe.bind(*inputs)), args.backend))
    if args.stats and getattr(exe.runner, "last_run", None) is not None:
        stats.append(f"device run: {exe.runner.last_run.to_string()}")
    outputs = flatten(result)
    times = []
    for _ in range(args.bench):
        t0 = time.perf_counter()
        exe(*inputs)
        times.append((time.perf_counter() - t0) * 1e3)

    leaf_shapes = module.entry.root.shape.leaves()
    if args.output:
        try:
            np.savez(args.output, **{f"out{i}": storable(o) for i, o in enumerate(outputs)})
        except OSError as e:
            raise HloError(f"cannot write outputs '{args.output}': {e.strerror or e}") from None
    mismatches = _compare(args.expected, outputs, args.rtol, args.atol) if args.expected else None

    report = {
        "module": module.name, "backend": args.backend, "compile_ms": round(compile_ms, 3),
        "run_ms": round(first_ms, 3),
        "median_ms": round(float(np.median(times)), 4) if times else round(first_ms, 3),
        "outputs": [{"name": f"out{i}", "shape": _runtime_shape_text(s, o), "first": _first_values(o)}
                    for i, (o, s) in enumerate(zip(outputs, leaf_shapes))],
    }
    if mismatches is not None:
        report["matches_expected"] = not mismatches
        report["mismatches"] = mismatches
    if args.json:
        print(json.dumps(report | ({"stats": "\n".join(stats)} if args.stats else {})))
    else:
        for text in stats:
            print(text)
        _print_report(report, bool(times))
    return 1 if mismatches else 0


def _stats_text(exe, backend: str) -> str:
    if exe.runner is None:
        return f"(--stats: the {backend} backend compiles nothing; it evaluates the module as written)"
    return exe.runner.stats.to_string()


def _print_report(report: dict, benched: bool) -> None:
    print(f"{report['module']} on {report['backend']}: compile {report['compile_ms']:.2f} ms, "
          f"run {report['run_ms']:.2f} ms" + (f", median {report['median_ms']:.4f} ms" if benched else ""))
    for out in report["outputs"]:
        print(f"  {out['name']}: {out['shape']} {out['first']}")
    if "matches_expected" in report:
        if report["matches_expected"]:
            print("  matches expected outputs")
        for m in report["mismatches"]:
            print(f"  MISMATCH {m}")


def _runtime_shape_text(shape: Shape, value) -> str:
    """The result's type at its runtime size (`f32[1,16,1,700]` for a declared `f32[1,16,1,<=1801]`)."""
    if shape.is_static or not isinstance(value, np.ndarray) or value.ndim != shape.rank:
        return shape.to_string(False)
    return Shape.array(shape.element_type, value.shape).to_string(False)


def _first_values(value, n: int = 6) -> str:
    if not isinstance(value, np.ndarray):
        return str(value)
    flat = storable(value).reshape(-1)
    text = np.array2string(flat[:n], separator=", ", precision=6, threshold=n + 1)
    return text[:-1] + ", ...]" if flat.size > n else text


def flatten(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in flatten(v)]
    return [value]


def _tolerance(text: str) -> float:
    """A tolerance option: a finite number >= 0 (NaN compared nothing: every output 'matched')."""
    value = float(text)
    if not np.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number >= 0")
    return value


def _read_npz(path: Path, what: str) -> dict[str, np.ndarray]:
    """The arrays of a .npz file (np.savez's), or an HloError naming the file and the cause."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic not in (b"PK\x03\x04", b"PK\x05\x06"):  # a zip (of no arrays: its end record alone)
            kind = "a .npy file" if magic.startswith(b"\x93NUM") else "empty" if not magic else "not a .npz file"
            raise HloError(f"cannot read {what} '{path}': it is {kind} (np.savez writes a .npz)")
        with np.load(path, allow_pickle=False) as data:
            return dict(data)
    except HloError:
        raise
    except Exception as e:  # noqa: BLE001 (a damaged zip fails in zipfile, numpy or zlib, each its own way)
        raise HloError(f"cannot read {what} '{path}': {type(e).__name__}: {e}") from None


def _load_inputs(path: Path, module) -> list[np.ndarray]:
    arrays = _read_npz(path, "inputs")
    n = module.entry.num_parameters
    missing = [f"arg{i}" for i in range(n) if f"arg{i}" not in arrays]
    if missing:
        unnamed = sorted(k for k in arrays if k.startswith("arr_"))
        hint = (f"; it holds {', '.join(unnamed)}: np.savez names positional arrays so, save them as "
                f"np.savez(path, arg0=..., arg1=...)" if unnamed else "")
        raise HloError(f"inputs '{path}' lack {', '.join(missing)} (the module takes {count_of(n, 'parameter')})"
                       + hint)
    extra = sorted(set(arrays) - {f"arg{i}" for i in range(n)})
    if extra:
        raise HloError(f"inputs '{path}' hold arrays the module does not take: {', '.join(extra)}")
    return [arrays[f"arg{i}"] for i in range(n)]


def random_inputs(module, seed: int) -> list:
    """Seeded inputs: normal floats, small non-negative integers (safe as indices), random preds;
    a ResourceError first where they would not fit in memory (drawn in 8-byte values)."""
    from hlocc.errors import ResourceError
    from hlocc.runtime.executable import CHECKED_ALLOCATION_BYTES, available_memory

    leaves = [s for p in module.entry.parameters for s in p.shape.leaves() if s.is_array]
    needed = sum(int(np.prod(s.dims, dtype=np.float64)) * (s.dtype.itemsize + 8) for s in leaves)
    available = available_memory() if needed >= CHECKED_ALLOCATION_BYTES else None
    if available is not None and needed > available:
        raise ResourceError(f"random inputs for '{module.name}' need {needed / 2**30:.2f} GiB, more than the "
                            f"{available / 2**30:.2f} GiB of memory available")
    rng = np.random.default_rng(seed)
    return [_random_value(p.shape, rng) for p in module.entry.parameters]


def _random_value(shape: Shape, rng: np.random.Generator):
    if shape.is_tuple:
        return tuple(_random_value(s, rng) for s in shape.tuple_shapes)
    if shape.is_token:
        return None
    et = shape.element_type
    dims = shape.dims
    if et.is_pred:
        return rng.random(dims) < 0.5
    if et.is_integer:
        return rng.integers(0, 4, dims).astype(shape.dtype)
    if et.is_complex:
        return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(shape.dtype)
    return rng.standard_normal(dims).astype(shape.dtype)


def _compare(path: Path, outputs: list, rtol: float, atol: float) -> list[str]:
    expected = _read_npz(path, "expected outputs")
    problems = []
    if len(expected) != len(outputs):
        problems.append(f"{len(outputs)} outputs, expected file has {len(expected)}")
    for i, got in enumerate(outputs):
        ref = expected.get(f"out{i}")
        if ref is None:
            problems.append(f"out{i}: the expected file has no array 'out{i}' (it has {', '.join(expected) or 'none'})")
            continue
        got_dtype = np.asarray(got).dtype
        if ref.dtype.kind == "V" and ref.dtype.names is None and ref.dtype.itemsize == got_dtype.itemsize \
                and got_dtype.type.__module__ == "ml_dtypes":
            ref = ref.view(got_dtype)  # np.savez keeps a bf16/f8 array as raw bytes ('|V2')
        elif ref.dtype.kind not in "biufc":
            problems.append(f"out{i}: the expected array holds {ref.dtype}, not numbers")
            continue
        why = compare_arrays(ref, got, rtol, atol)
        if why:
            problems.append(f"out{i}: {why}")
    return problems


if __name__ == "__main__":
    sys.exit(main())
