"""Smoke test of benchmarks/stitch.py: at a few rows per case it prints a row per case with the
stitched plan as one kernel and matching outputs (no timing is asserted: the machine is shared)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_each_case_is_one_stitch_kernel_and_matches_xla():
    pytest.importorskip("jax", reason="the benchmark compares with XLA:CPU through jax")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "stitch.py"), "--quick", "--runs", "1", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)["results"]
    assert [r["case"] for r in results] == ["softmax f32[8,4096]", "softmax f32[8,127]", "layernorm f32[8,4096]",
                                            "layernorm f32[8,127]"]
    assert all(r["match"] and r["stitched_kernels"] == "1 (stitch 1)" for r in results), results
    assert all(r["unstitched_kernels"] != r["stitched_kernels"] for r in results), results
