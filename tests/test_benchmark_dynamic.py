"""Smoke test of benchmarks/dynamic.py: a --quick run prints a row per program with one plan for the
dynamic arm and outputs equal to XLA's (no timing is asserted: the machine is shared and noisy)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # the jax.jit and hlocc-static arms compile every program per size
def test_quick_run_has_a_row_per_program():
    pytest.importorskip("jax", reason="the benchmark builds its programs with JAX")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dynamic.py"), "--quick", "--runs", "1",
                           "--programs", "mlp,softmax_127"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ") and not line.startswith("| program")]
    assert [row.split("|")[1].strip() for row in rows] == ["mlp", "softmax_127"], proc.stdout
    for row in rows:
        cells = [c.strip() for c in row.strip(" |").split("|")]
        assert len(cells) == 16 and cells[1].startswith("1 (") and cells[1].endswith("kernels)"), row  # one compile
        assert float(row.rstrip(" |").split("|")[-1]) < 1e-4, row  # max relative error against XLA


@pytest.mark.slow  # the SIMT simulation of every arm's kernels
def test_quick_run_on_cuda_sim_compiles_the_dynamic_arm_once():
    """`--backend cuda-sim`: the hlocc arms on the cuda backend's dynamic plan (one compile), the
    results equal to XLA's, no per-call overhead rows (those are the cpu backend's)."""
    pytest.importorskip("jax", reason="the benchmark builds its programs with JAX")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "dynamic.py"), "--quick", "--backend", "cuda-sim",
                           "--rounds", "1", "--runs", "1", "--programs", "softmax_127"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hlocc --backend cuda-sim" in proc.stdout and "per-call overhead" not in proc.stdout
    [row] = [line for line in proc.stdout.splitlines() if line.startswith("| softmax_127")]
    cells = [c.strip() for c in row.strip(" |").split("|")]
    assert cells[1].startswith("1 (") and float(cells[-1]) < 1e-4, row
