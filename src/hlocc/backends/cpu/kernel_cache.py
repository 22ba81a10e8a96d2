"""What the CPU backend's kernel caches key on and store (runtime/cache.py is the store).

A kernel's key is text: the fused computation's canonical fingerprint (`computation_fingerprint`:
opcodes, shapes with layouts, operand positions, attributes, literals; no instruction or
computation names, so repeated layers and repeated subgraphs share it), the target (launch
parameters derive from it), the translation options (noalias, fast-math), the kernel pipeline,
the host CPU's name and features, and the versions of hlocc (with a build id of its sources, so a
changed checkout misses), xDSL, llvmlite and LLVM. The in-process cache is keyed by the same text.

An entry's value is the kernel's object code and its plan, plain data as JSON: its entry and
block-loop symbol names, launch dimensions, emitter, output aliases and whether its blocks run
serially, and for a kernel with runtime dims its dimension variables (the block count is then a
size expression as text). The buffer shapes are the fused computation's, which the key fixes
(symbolic shapes print with their variables, so a symbolic kernel has a key of its own).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from typing import Any

from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.llvm import TranslateOptions
from hlocc.codegen.pipeline import pipeline_for
from hlocc.codegen.schedule.choice import forced_schedule_key
from hlocc.codegen.target import Target
from hlocc.errors import HloError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.printer import computation_fingerprint
from hlocc.hlo.symbolic import DimExpr, parse_dim_expr
from hlocc.runtime.cache import environment_key, timed_get, timed_put, warn_once

KEY_VERSION = "hlocc-cpu-kernel 1"


@dataclass(frozen=True)
class KernelPlan:
    """How to run a kernel's object code (module doc)."""

    name: str
    symbol: str
    launch: LaunchDims
    emitter: str
    output_aliases: tuple[tuple[int, int], ...]
    serial: bool
    symbols: tuple[str, ...] = ()  # the dimension variables of a kernel with runtime dims

    def to_json(self) -> dict[str, Any]:
        blocks = self.launch.blocks
        return {"name": self.name, "symbol": self.symbol, "threads_per_block": self.launch.threads_per_block,
                "blocks": str(blocks) if isinstance(blocks, DimExpr) else blocks, "emitter": self.emitter,
                "output_aliases": [list(a) for a in self.output_aliases], "serial": self.serial,
                "symbols": list(self.symbols)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> KernelPlan:
        """The plan in `data`; a ValueError says what is missing or mistyped."""
        try:
            aliases = tuple((int(o), int(p)) for o, p in data["output_aliases"])
            symbols = tuple(str(s) for s in data.get("symbols", ()))
            # A kernel with runtime dims may still have a static grid (a full reduce's one
            # block): `to_json` writes only a symbolic count as text.
            raw = data["blocks"]
            blocks = parse_dim_expr(raw) if isinstance(raw, str) else int(raw)
            plan = KernelPlan(str(data["name"]), str(data["symbol"]),
                              LaunchDims(int(data["threads_per_block"]), blocks), str(data["emitter"]),
                              aliases, bool(data["serial"]), symbols)
        except (KeyError, TypeError, ValueError, HloError) as e:
            raise ValueError(f"malformed kernel plan ({e!r})") from e
        if not plan.symbol.endswith("_blocks"):
            raise ValueError(f"malformed kernel plan (symbol {plan.symbol!r})")
        return plan


def kernel_key(fusion: HloComputation, target: Target, translate_options: TranslateOptions,
               times: dict[str, float] | None = None) -> str:
    t0 = time.perf_counter()
    key = (f"{KEY_VERSION}\nfusion: {computation_fingerprint(fusion)}\ntarget: {target!r}\n"
           f"options: {options_key(translate_options)}\n"
           f"pipeline: {','.join(pipeline_for(target.kind, target.has_fma, target.check_bounds))}\n"
           f"{environment_key()}")
    forced = forced_schedule_key()
    if forced:
        key += f"\nschedule: {forced}"
    if times is not None:
        times["fingerprint"] = times.get("fingerprint", 0.0) + (time.perf_counter() - t0) * 1e3
    return key


def options_key(options: TranslateOptions) -> str:
    """The translation options as text that is the same in every process (no set iteration order)."""
    return (f"allow_libm={options.allow_libm} noalias={options.noalias} "
            f"fast_math={','.join(sorted(options.fast_math))}")


def kernel_symbol(key: str) -> str:
    """The block loop's symbol for a key: unique in the process-wide engine."""
    return f"k{hashlib.sha256(key.encode()).hexdigest()[:24]}_blocks"


def load_cached_kernel_plan(key: str, times: dict[str, float]) -> tuple[KernelPlan, bytes] | None:
    """The plan and object code the persistent cache holds for `key`, or None."""
    found = timed_get(key, times, "cache_lookup")
    if found is None:
        return None
    cache, entry = found
    try:
        plan = KernelPlan.from_json(entry.plan)
    except ValueError as e:
        warn_once(f"hlocc cache: entry {cache.path(key)}: {e}; compiling again")
        return None
    if plan.symbol != kernel_symbol(key):
        warn_once(f"hlocc cache: entry {cache.path(key)} names another kernel; compiling again")
        return None
    return plan, entry.payload


def store_kernel(key: str, plan: KernelPlan, data: bytes, times: dict[str, float]) -> None:
    timed_put(key, plan.to_json(), data, times, "cache_store")


__all__ = ["KernelPlan", "kernel_key", "kernel_symbol", "load_cached_kernel_plan", "options_key", "store_kernel"]
