"""The whole-program plan on disk: what a warm compile of the same HLO text needs to skip parsing
the input, verifying it and running the HLO passes (issue 16; the kernels come from the kernel
cache, kernel_cache.py).

The key is text: the SHA-256 of the input text, the compile options that change what is built
(verify, seed, HLO passes on or off, gemm mode, bounds checks), the target, and the host CPU and
versions (`environment_key`, the kernels' too). The entry, in the persistent cache (runtime/cache.py:
plain data, checksum, atomic writes, ownership checks, LRU bound, `hlocc cache info|clear`), holds
the module after the HLO pipeline, prologue and epilogue included, as HLO text, and a plan that
names its format. A hit parses that text and compiles it with no HLO passes: the prologue and
epilogue run again (on an optimized module they change nothing), the schedule follows the stored
instruction order as it followed the order the passes left, and buffer assignment and the thunks
are rebuilt from it (milliseconds; the kernels are the cached ones).

*Differs from XLA*, whose persistent cache (JAX's) stores the whole serialized executable: hlocc's
kernels live in the kernel cache, shared between programs, and the schedule and buffer assignment
are cheap to recompute from the optimized module; storing them as data would add a second format
to keep in step with the runtime for little gain.
"""

from __future__ import annotations

import hashlib
import time

from hlocc.backends.cpu.kernel_cache import environment_key
from hlocc.codegen.target import Target
from hlocc.errors import HloError
from hlocc.hlo.ir import HloModule
from hlocc.hlo.parser import parse_hlo
from hlocc.hlo.printer import print_module
from hlocc.runtime.cache import timed_get, timed_put, warn_once

KEY_VERSION = "hlocc-cpu-program 1"
PLAN_FORMAT = "optimized-hlo-text 1"


def program_key(text: str, target: Target, **options) -> str:
    """The key of the program compiled from `text` with `options` for `target` (module doc)."""
    digest = hashlib.sha256(text.encode()).hexdigest()
    settings = " ".join(f"{k}={options[k]!r}" for k in sorted(options))
    return f"{KEY_VERSION}\ntext: {digest}\noptions: {settings}\ntarget: {target!r}\n{environment_key()}"


def load_program(key: str, times: dict[str, float]) -> HloModule | None:
    """The optimized module stored under `key`, parsed, or None (a miss, no cache, or a bad entry:
    warned about once, and the caller compiles from the input)."""
    found = timed_get(key, times, "program_cache_lookup")
    if found is None:
        return None
    cache, entry = found
    t0 = time.perf_counter()
    entry = cache.get(key)
    times["program_cache_lookup"] = (time.perf_counter() - t0) * 1e3
    if entry is None:
        return None
    if entry.plan.get("format") != PLAN_FORMAT:
        warn_once(f"hlocc cache: entry {cache.path(key)} holds a program plan of format "
                  f"{entry.plan.get('format')!r}, not {PLAN_FORMAT!r}; compiling again")
        return None
    t0 = time.perf_counter()
    try:
        module = parse_hlo(entry.payload.decode())
    except (UnicodeDecodeError, HloError) as e:
        warn_once(f"hlocc cache: entry {cache.path(key)}: its module does not parse ({e}); compiling again")
        return None
    times["parse"] = (time.perf_counter() - t0) * 1e3
    return module


def store_program(key: str, optimized: HloModule, times: dict[str, float]) -> None:
    """Store the module the HLO pipeline left (module doc), when the persistent cache is on."""
    timed_put(key, {"format": PLAN_FORMAT}, print_module(optimized).encode(), times, "program_cache_store")


__all__ = ["load_program", "program_key", "store_program"]
