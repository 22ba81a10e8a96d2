"""The PTX of the cuda backend, checked without a GPU: every kernel that the corpora compile into
is generated for sm_80 and sm_90 and assembled by ptxas (issue 7's acceptance; the default run
takes one arch per module, alternating, and `-m slow` the other), and every elementwise op on every
element type goes through NVPTX instruction selection (an intrinsic that NVPTX cannot select aborts
the whole process, so that sweep runs in a subprocess).

ptxas comes from the machine's CUDA toolkit or the `nvidia-cuda-nvcc-cu12` wheel (a test extra);
without either, these tests skip with that reason. The FileCheck tests of the NVPTX lowering
itself (shared memory, barriers, shuffles, atomics, ids, launch bounds) are
tests/backends/cuda/ptx_*.hlo (beside this file).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

import hlocc
from corpus import JAX_DIR, KNOWN_INVALID, XLA_DIR, corpus_files
from hlocc.backends.cuda.executable import prepare_for_device
from hlocc.backends.cuda.ptx import PtxError, PtxKernel, compile_ptx, find_ptxas, validate_ptx
from hlocc.runtime.executable import build_executable

ARCHS = ("sm_80", "sm_90")
PTXAS = find_ptxas()
needs_ptxas = pytest.mark.skipif(PTXAS is None, reason="no ptxas: install the CUDA toolkit or the test extra "
                                                       "'nvidia-cuda-nvcc-cu12' (or set HLOCC_PTXAS)")

EMITTER_KINDS = {"loop", "reduction", "transpose", "scatter", "dus", "concatenate", "input_slices"}
"""The kinds of shared/corpus/xla/index.tsv whose modules are emitter tests."""


def _emitter_modules() -> list[str]:
    index = XLA_DIR / "index.tsv"
    if not index.is_file():
        return []
    with index.open() as f:
        return [row["file"] for row in csv.DictReader(f, delimiter="\t")
                if row["kind"] in EMITTER_KINDS and row["file"] not in KNOWN_INVALID]


def ptx_kernels(module: hlocc.HloModule, hlo_passes: bool, archs: tuple[str, ...] = ARCHS) -> list[PtxKernel]:
    """Every kernel the cuda backend's whole-program compiler makes of `module`, compiled for each of
    `archs` (none for a module that is one library call, a dot)."""
    kernels: list[PtxKernel] = []

    def compile_kernel(computation, name, noalias):
        for arch in archs:
            kernels.append(compile_ptx(computation, arch, noalias=noalias))
        return kernels[-1]

    prepare_for_device(module, hlo_passes)  # as the cuda backend compiles it
    executable = build_executable(module, compile_kernel, hlo_passes=hlo_passes)
    assert not executable.stats.host_ops or hlo_passes, f"host fallbacks: {executable.stats.host_ops}"
    assert kernels or executable.stats.library_calls, "neither a kernel nor a library call"
    return kernels


def assert_ptxas_accepts(kernels: list[PtxKernel]) -> None:
    def check(kernel: PtxKernel) -> str | None:
        try:
            validate_ptx(kernel.ptx, kernel.arch, PTXAS)
        except PtxError as e:
            return f"{kernel.name} ({kernel.emitter} emitter, {kernel.arch}): {e}"
        return None

    with ThreadPoolExecutor(4) as pool:
        rejected = [r for r in pool.map(check, [k for k in kernels if k.has_work]) if r]
    assert not rejected, "\n".join(rejected)


def one_arch_by_default(values: list, ids: list[str]) -> list:
    """(value, arch) parameters: half of the modules (every other pair along the list) for one arch
    in the default run, alternating sm_80 and sm_90, and each module for both archs in the slow set.
    Compiling every module for both took minutes of the default run; the two archs share the whole
    lowering but the NVPTX target's features, and the modules share most of their kernels' forms, so
    the default run still checks both archs on every kind of module, while `-m slow` completes the
    sweep."""
    params = []
    for i, (value, name) in enumerate(zip(values, ids)):
        default, other = ARCHS[i % 2], ARCHS[1 - i % 2]
        slow_default = [pytest.mark.slow] if name in SLOW_BOTH_ARCHS or i % 4 >= 2 else []
        params.append(pytest.param(value, default, id=f"{name}-{default}", marks=slow_default))
        params.append(pytest.param(value, other, id=f"{name}-{other}", marks=pytest.mark.slow))
    return params


SLOW_BOTH_ARCHS = {"loop__large_loop_slow_compile_time.hlo"}
"""Slow for either arch: XLA's compile-time stress test took ~80 s of the default run here (its CPU
run is slow too, tests/backends/cpu/test_cpu_corpus.py), while the loop emitter's PTX is checked on
every other loop module."""


@needs_ptxas
@pytest.mark.parametrize("name, arch", one_arch_by_default(_emitter_modules(), _emitter_modules()))
def test_xla_emitter_module_ptx(name, arch):
    """The emitter tests of XLA's corpus, compiled as written (the entry as one fusion)."""
    module = hlocc.parse_hlo_file(XLA_DIR / name)
    assert_ptxas_accepts(ptx_kernels(module, hlo_passes=False, archs=(arch,)))


@needs_ptxas
@pytest.mark.parametrize("path, arch", one_arch_by_default(corpus_files(JAX_DIR),
                                                           [p.stem for p in corpus_files(JAX_DIR)]))
def test_jax_program_ptx(path, arch):
    """Whole JAX programs through the HLO passes: every fusion's kernel."""
    kernels = ptx_kernels(hlocc.parse_hlo_file(path), hlo_passes=True, archs=(arch,))
    assert_ptxas_accepts(kernels)


def test_corpora_present_for_ptx():
    """The parametrized corpus tests above must not silently collect nothing."""
    if not XLA_DIR.is_dir() or not JAX_DIR.is_dir():
        pytest.skip("corpus not found (shared/ is not beside this checkout)")
    assert len(_emitter_modules()) >= 130
    assert len(corpus_files(JAX_DIR)) >= 25


# -- every elementwise op through NVPTX instruction selection ------------------------------------

_SWEEP = textwrap.dedent('''
    import json, re, sys
    from hlocc.backends.cuda.ptx import compile_ptx, emit_ptx
    from hlocc.errors import UnsupportedError
    from hlocc.hlo.opcodes import OPCODES
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.verifier import verify_module

    SKIP = {"convert", "compare", "select", "clamp", "reduce-precision", "stochastic-convert", "complex",
            "bitcast-convert"}

    def module(s, ops):
        """ops: [(name, result shape, expression)] as results of one kLoop fusion of (a, b)."""
        body = [f"a = {s} parameter(0)", f"b = {s} parameter(1)"] + [f"{n} = {r} {e}" for n, r, e in ops]
        shapes = ", ".join(r for _, r, _ in ops)
        text = "HloModule m\\n\\nfused {\\n  " + "\\n  ".join(body)
        text += f"\\n  ROOT t = ({shapes}) tuple({', '.join(n for n, _, _ in ops)})\\n}}\\n"
        text += f"ENTRY main {{\\n  a = {s} parameter(0)\\n  b = {s} parameter(1)\\n"
        text += f"  ROOT f = ({shapes}) fusion(a, b), kind=kLoop, calls=fused\\n}}\\n"
        return parse_hlo(text)

    out = {}
    for type_name in sys.argv[1].split(","):
        s = f"{type_name}[37]"
        ops = []
        for name, info in sorted(OPCODES.items()):
            if not info.is_elementwise or name in SKIP or info.arity not in (1, 2):
                continue
            expr = f"{name}(" + ("a" if info.arity == 1 else "a, b") + ")"
            for result in (s, "pred[37]"):  # the op's result type: the operands' or pred
                try:
                    verify_module(module(s, [(f"r{len(ops)}", result, expr)]))
                except Exception:
                    continue
                ops.append((f"r{len(ops)}", result, expr))
                break
        ops += [("c", "f32[37]", "convert(a)"), ("d", s, "convert(c)")]
        while True:  # leave out what no kernel computes yet (e.g. maximum of complex numbers)
            try:
                kernel = compile_ptx(module(s, ops).entry.root.fused_computation, "sm_90")
                break
            except UnsupportedError as e:
                name = re.search(r"instruction '([^']+)'", str(e)).group(1)
                ops = [op for op in ops if op[0] != name]
        print(type_name, len(ops), "ops", flush=True)
        out[type_name] = {"ops": len(ops), "sm_90": kernel.ptx, "sm_80": emit_ptx(kernel.llvm_ir, "sm_80")}
    json.dump(out, open(sys.argv[2], "w"))
''')

SWEEP_TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "s4", "u4", "f16", "bf16", "f32", "f64",
               "f8e4m3fn", "f8e5m2", "c64", "c128"]
# One type of each kind runs by default (the sweep is the default suite's longest test); the rest in the slow run.
CORE_SWEEP = ["pred", "s32", "u8", "s4", "bf16", "f32", "f8e4m3fn", "c64"]


@needs_ptxas
@pytest.mark.parametrize("types", [
    pytest.param(CORE_SWEEP, id="core"),
    pytest.param([t for t in SWEEP_TYPES if t not in CORE_SWEEP], id="rest", marks=pytest.mark.slow),
])
def test_every_elementwise_op_through_nvptx(tmp_path, types):
    """Each type's every unary and binary elementwise op in one kernel, compiled in a subprocess for
    sm_90 (and its LLVM IR for sm_80): instruction selection must not abort, and ptxas must accept."""
    out = tmp_path / "ptx.json"
    done = subprocess.run([sys.executable, "-c", _SWEEP, ",".join(types), str(out)], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, (f"the NVPTX sweep died (exit {done.returncode}) after:\n{done.stdout[-2000:]}\n"
                                  f"{done.stderr[-3000:]}")
    results = json.loads(out.read_text())
    assert set(results) == set(types)
    least = {"f32": 40, "s32": 20, "f64": 40, "s64": 20}
    assert all(results[t]["ops"] >= n for t, n in least.items() if t in results), {t: r["ops"] for t, r in results.items()}
    rejected = []
    for type_name, r in results.items():
        for arch in ARCHS:
            try:
                validate_ptx(r[arch], arch, PTXAS)
            except PtxError as e:
                rejected.append(f"{type_name} {arch}: {e}")
    assert not rejected, "\n".join(rejected)


# -- errors ----------------------------------------------------------------------------------------

def test_unknown_arch_is_a_clear_error():
    module = hlocc.parse_hlo("HloModule m\n\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT n = f32[4] negate(p)\n}\n")
    with pytest.raises(PtxError, match="unknown GPU arch 'sm_5': expected sm_70 or newer"):
        compile_ptx(module.entry, "sm_5")


@needs_ptxas
def test_ptxas_rejection_names_the_arch_and_the_cause():
    bad = ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus; }\n"
    with pytest.raises(PtxError, match="ptxas rejected the PTX for sm_80: .*bogus"):
        validate_ptx(bad, "sm_80", PTXAS)
