"""`hlocc run` of bounded modules (`<=N`; runtime/bounded.py) on the cpu backend: random inputs at
the bound, `--inputs` at any size up to it, results reported and written at their runtime shapes,
a size above the bound one message naming the argument, the dimension and the bound."""

from __future__ import annotations

import json

import numpy as np

from corpus import XLA_DIR, require
from hlocc.cli import main, random_inputs
from hlocc.frontends import load_module_file

BROADCAST = XLA_DIR / "hlo_to_mhlo__import_bounded_dynamism__0.hlo"  # f32[1,1,<=1801] -> f32[1,16,1,<=1801]
SET_SIZE = """HloModule set_size
ENTRY e (x: f32[4,6], n: s32[]) -> f32[4,<=6] {
  x = f32[4,6] parameter(0)
  n = s32[] parameter(1)
  ROOT s = f32[4,<=6] set-dimension-size(x, n), dimensions={1}
}
"""


def _broadcast(x):
    return np.broadcast_to(x[:, :, None, :], (1, 16, 1, x.shape[2]))


def test_random_inputs_run_at_the_bound(tmp_path, capsys):
    require(XLA_DIR)
    out = tmp_path / "out.npz"
    assert main(["run", str(BROADCAST), "--backend", "cpu", "--output", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outputs"][0]["shape"] == "f32[1,16,1,1801]"
    [x] = random_inputs(load_module_file(BROADCAST), 0)
    with np.load(out) as got:
        np.testing.assert_array_equal(got["out0"], _broadcast(x))


def test_inputs_at_a_runtime_size(tmp_path, capsys):
    require(XLA_DIR)
    x = np.random.default_rng(0).standard_normal((1, 1, 700)).astype(np.float32)
    np.savez(tmp_path / "in.npz", arg0=x)
    out = tmp_path / "out.npz"
    assert main(["run", str(BROADCAST), "--backend", "cpu", "--check-bounds", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(out), "--stats"]) == 0
    text = capsys.readouterr().out
    assert "out0: f32[1,16,1,700] [" in text and "one plan for every size" in text
    with np.load(out) as got:
        np.testing.assert_array_equal(got["out0"], _broadcast(x))


def test_a_size_above_the_bound_is_one_message(tmp_path, capsys):
    require(XLA_DIR)
    np.savez(tmp_path / "in.npz", arg0=np.zeros((1, 1, 1802), np.float32))
    assert main(["run", str(BROADCAST), "--backend", "cpu", "--inputs", str(tmp_path / "in.npz")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hlocc: error: argument 0 dimension 2: size 1802 exceeds its bound 1801 (f32[1,1,<=1801])")
    assert "Traceback" not in err


def test_a_computed_size_from_the_inputs(tmp_path, capsys):
    module = tmp_path / "m.hlo"
    module.write_text(SET_SIZE)
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    np.savez(tmp_path / "in.npz", arg0=x, arg1=np.int32(3))
    out = tmp_path / "out.npz"
    assert main(["run", str(module), "--backend", "cpu", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(out)]) == 0
    assert "out0: f32[4,3] [" in capsys.readouterr().out
    with np.load(out) as got:
        np.testing.assert_array_equal(got["out0"], x[:, :3])
    np.savez(tmp_path / "in.npz", arg0=x, arg1=np.int32(9))
    assert main(["run", str(module), "--backend", "cpu", "--inputs", str(tmp_path / "in.npz")]) == 1
    assert "hlocc: error: set-dimension-size 's' dimension 1: size 9 is outside [0, 6] (its bound)" in \
        capsys.readouterr().err
