"""The XLA corpus's loop-emitter modules (index.tsv kind `loop`) on the CPU backend against the evaluator,
on seeded random inputs (`hlocc.cli.random_inputs`, as `hlocc run` uses). Modules are compiled as
written (no HLO passes), so each test exercises the emitter on the fusion XLA's test has.

Results match exactly, except where the module computes a transcendental function (within a few
ulps: expand-float-ops' approximations) or a reduction (the corpus tolerance: the summation order
differs). A module that needs what no kernel computes yet (HOST_FALLBACK, empty now) runs through the
runtime's host fallback: it must still match, and the fallback must be listed with its reason in the
executable's stats.
"""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest
from _cpu_helpers import assert_exact, assert_ulps, flatten

import hlocc
from corpus import KNOWN_INVALID, XLA_DIR, require
from hlocc.cli import random_inputs
from hlocc.comparison import compare_arrays
from hlocc.hlo.parser import parse_hlo_file


def _loop_modules() -> list[str]:
    index = XLA_DIR / "index.tsv"
    if not index.is_file():
        return []
    with index.open() as f:
        return [row["file"] for row in csv.DictReader(f, delimiter="\t") if row["kind"] == "loop"]


MAX_OUTPUT_BYTES = 256 << 20

HOST_FALLBACK: dict[str, str] = {}  # what no CPU kernel computes yet: the host fallback's reason must name it
SLOW = {"loop__mof_reshapes.hlo", "loop__large_loop_slow_compile_time.hlo"}  # ~10 s / minutes to compile
BROKEN: dict[str, tuple[type[Exception], str]] = {}  # bugs outside the emitters (see test_cpu_elementwise.py)
TRANSCENDENTAL = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "cbrt",
                  "sine", "cosine", "tan", "tanh", "erf", "atan2", "power", "acos", "asin", "acosh", "asinh",
                  "atanh", "cosh", "sinh"}
TRANSCENDENTAL_ULPS = 4


def _params():
    params = []
    for name in _loop_modules():
        marks = []
        if name in SLOW:
            marks.append(pytest.mark.slow)
        if name in BROKEN:
            error, reason = BROKEN[name]
            marks.append(pytest.mark.xfail(strict=True, raises=error, reason=reason))
        params.append(pytest.param(name, marks=marks, id=name.removesuffix(".hlo")))
    return params


def _opcodes(module) -> set[str]:
    ops = set()
    for comp in module.computations:
        ops |= {i.opcode for i in comp.instructions}
    return ops


def test_corpus_has_loop_modules():
    require(XLA_DIR)
    assert len(_loop_modules()) >= 40


@pytest.mark.parametrize("name", _params())
def test_loop_module(name):
    require(XLA_DIR)
    if name in KNOWN_INVALID:
        pytest.skip(f"not valid HLO on its own (corpus.KNOWN_INVALID): {KNOWN_INVALID[name].replace(chr(92), '')}")
    path = XLA_DIR / name
    module = parse_hlo_file(path)
    output_bytes = sum(leaf.byte_size() for leaf in module.entry.root.shape.leaves())
    if output_bytes > MAX_OUTPUT_BYTES and name not in SLOW:
        pytest.skip(f"outputs of {output_bytes / 2**20:.0f} MiB (over {MAX_OUTPUT_BYTES >> 20} MiB)")
    inputs = random_inputs(module, 0)
    exe = hlocc.compile(module, backend="cpu", hlo_passes=False)
    host = [why for _, _, why in exe.runner.stats.host_ops]
    if name in HOST_FALLBACK:
        assert any(re.search(HOST_FALLBACK[name], why) for why in host), host
    else:
        assert not host, host
    got = flatten(exe(*inputs))
    ref = flatten(hlocc.compile(parse_hlo_file(path), backend="interpreter")(*inputs))
    assert len(got) == len(ref)
    opcodes = _opcodes(module)
    for k, (g, r) in enumerate(zip(got, ref)):
        g, r = np.asarray(g), np.asarray(r)
        what = f"{name} output {k}"
        if r.dtype.kind not in "fV" and "float" not in r.dtype.name:
            assert_exact(g, r, [], what)
        elif opcodes & {"reduce", "reduce-window"}:
            problem = compare_arrays(r, g, rtol=1e-5, atol=1e-6)
            assert problem is None, f"{what}: {problem}"
        elif opcodes & TRANSCENDENTAL:
            assert_ulps(g, r, TRANSCENDENTAL_ULPS, [], what)
        else:
            assert_exact(g, r, [], what)
