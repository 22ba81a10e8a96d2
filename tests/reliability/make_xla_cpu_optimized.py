"""Regenerate `xla_cpu_optimized/NAME.hlo`: XLA:CPU's optimized HLO (after its whole pass
pipeline: `jax.jit(f).lower(*args).compile()`'s module, printed as `as_text()` does but with
large constants whole) of every non-perf case of the
JAX corpus, built by the corpus's own generator (shared/corpus/jax/gen_public.py) on the corpus's
seeded inputs. Needs jax 0.10.2 (the `[jax]` extra); the tests read the committed files.

    python tests/reliability/make_xla_cpu_optimized.py
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEN = HERE.parents[1].parent / "shared" / "corpus" / "jax" / "gen_public.py"


def main() -> None:
    import jax
    import numpy as np

    spec = importlib.util.spec_from_file_location("gen_public", GEN)
    gen = importlib.util.module_from_spec(spec)
    sys.modules["gen_public"] = gen
    spec.loader.exec_module(gen)
    from jaxlib._hlo import HloPrintOptions

    options = HloPrintOptions()  # as_text()'s defaults, but large constants printed whole
    options.print_large_constants = True
    options.print_metadata = False  # no stack frames: no local paths in the files
    out = HERE / "xla_cpu_optimized"
    out.mkdir(exist_ok=True)
    for case in gen.CASES:
        if case["perf"]:
            continue
        rng = gen.rng_for(gen.BASE_SEED, case["name"])
        with jax.enable_x64(True) if case["x64"] else gen._Null():
            fn, args = case["builder"](rng)
            compiled = jax.jit(fn).lower(*[np.asarray(a) for a in args]).compile()
        (module,) = compiled.runtime_executable().hlo_modules()
        text = module.to_string(options)
        (out / f"{case['name']}.hlo").write_text(text)
        print(case["name"], len(text))


if __name__ == "__main__":
    main()
