"""Smoke test of benchmarks/emitters.py: it runs at small sizes and prints a row per case (no timing
is asserted: the machine is shared and noisy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CASES = ["softmax_f32", "transpose_021_f32"]


def run_benchmark(*args: str) -> str:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "emitters.py"), "--quick", "--runs", "1",
                           "--cases", ",".join(CASES), *args], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_table_has_a_row_per_case():
    pytest.importorskip("jax", reason="the benchmark compares with XLA:CPU through jax")
    out = run_benchmark()
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| case ")]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows] == CASES
    assert all(row.count(" | ") == 13 for row in rows), out  # 14 columns, the last one the verdict
    assert "geomean ratio (XLA time / hlocc time) over 2 cases" in out


@pytest.mark.slow
def test_json_lists_the_results():
    pytest.importorskip("jax", reason="the benchmark compares with XLA:CPU through jax")
    report = json.loads(run_benchmark("--json"))
    assert [r["name"] for r in report["results"]] == CASES
    assert all(r["bytes_moved"] > 0 and r["xla_ms"] > 0 and r["copy_gbs"] > 0 for r in report["results"])
