"""Report how hlocc does on the shared corpora: parsed / round-tripped / verified / evaluated /
matched counts, the evaluator's time per module, and what is unsupported and why.

    python scripts/corpus_report.py [--corpus ../shared/corpus] [--backend interpreter] [--verbose]
"""

from __future__ import annotations

import argparse
import csv
import time
from collections import Counter
from pathlib import Path

import numpy as np

import hlocc
from hlocc.cli import flatten, random_inputs
from hlocc.comparison import compare_arrays
from hlocc.compiler import check_arguments
from hlocc.errors import HloError, UnsupportedError
from hlocc.evaluator import Evaluator
from hlocc.hlo.printer import print_module, structural_fingerprint
from hlocc.hlo.verifier import verify_module

MAX_INPUT_ELEMENTS = 1 << 23
MAX_WORK = 3e8  # elements produced by all instructions (the evaluator's time is about proportional)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "corpus")
    ap.add_argument("--backend", default="interpreter")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    counts: Counter = Counter()
    unsupported: dict[str, list[str]] = {}
    eval_seconds = 0.0
    cases = {}
    index = args.corpus / "jax" / "index.tsv"
    if index.exists():
        with index.open() as f:
            cases = {row["name"]: row for row in csv.DictReader(f, delimiter="\t")}
    for path in sorted((args.corpus / "xla").glob("*.hlo")) + sorted((args.corpus / "jax").glob("*.hlo")):
        counts["files"] += 1
        try:
            module = hlocc.parse_hlo_file(path)
        except HloError as e:
            print(f"parse failed: {path.name}: {str(e).splitlines()[0]}")
            continue
        counts["parsed"] += 1
        if structural_fingerprint(hlocc.parse_hlo(print_module(module))) == structural_fingerprint(module):
            counts["round-tripped"] += 1
        try:
            verify_module(module)
            counts["verified"] += 1
        except HloError as e:
            print(f"verify failed: {path.name}: {e}")
            continue
        case = cases.get(path.stem) if path.parent.name == "jax" else None
        in_npz = path.with_name(path.stem + ".in.npz")
        if case and in_npz.exists():
            with np.load(in_npz) as data:
                raw = [data[f"arg{i}"] for i in range(len(data))]
        elif case:
            counts["skipped (perf case without data)"] += 1
            continue
        else:
            sizes = [s.num_elements for p in module.entry.parameters for s in p.shape.leaves() if s.is_array]
            work = sum(s.num_elements for i in module.all_instructions() for s in i.shape.leaves() if s.is_array)
            if sum(sizes) > MAX_INPUT_ELEMENTS or work > MAX_WORK:
                counts["skipped (too large for the evaluator)"] += 1
                continue
            if not all(p.shape.is_static for p in module.entry.parameters):
                counts["skipped (dynamic entry shapes)"] += 1
                continue
            raw = random_inputs(module, 1)
        try:
            exe = hlocc.compile(module, backend=args.backend, verify=False)
            inputs = check_arguments(module, raw, cast=True)
            t0 = time.perf_counter()
            result = Evaluator(1, max_while_iterations=100_000).run(module, inputs) if args.backend == "interpreter" \
                else exe(*inputs)
            dt = time.perf_counter() - t0
        except UnsupportedError as e:
            unsupported.setdefault(str(e).split(" (instruction")[0], []).append(path.name)
            continue
        except HloError as e:
            print(f"evaluation failed: {path.name}: {e}")
            continue
        eval_seconds += dt
        counts["evaluated"] += 1
        if args.verbose:
            print(f"{dt * 1e3:9.2f} ms  {path.name}")
        if case:
            with np.load(path.with_name(path.stem + ".out.npz")) as data:
                expected = [data[f"out{i}"] for i in range(len(data))]
            outs = flatten(result)
            bad = [compare_arrays(r, g, float(case["rtol"]), float(case["atol"])) for r, g in zip(expected, outs)]
            if len(outs) == len(expected) and not any(bad):
                counts["matched XLA:CPU"] += 1
            else:
                print(f"MISMATCH {path.name}: {[b for b in bad if b]}")
    print("\n".join(f"{k:>36}: {v}" for k, v in counts.items()))
    print(f"{'evaluation time (s)':>36}: {eval_seconds:.2f}")
    for why, files in sorted(unsupported.items()):
        print(f"{why}: {', '.join(files)}")


if __name__ == "__main__":
    main()
