"""StableHLO through hlocc's entry points: `hlocc.compile` (text and `jax.export.Exported`) and the
command line (`hlocc run`/`print` on a .mlir file, or on any file whose text is StableHLO)."""

import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip("jax", reason="StableHLO import needs jax (the [jax] extra)")
jnp = jax.numpy

import hlocc  # noqa: E402
from hlocc.frontends import load_module, load_module_file  # noqa: E402


def _softmax(x):
    return jax.nn.softmax(x, axis=-1)


X = np.random.default_rng(7).standard_normal((4, 33)).astype(np.float32)


@pytest.fixture(scope="module")
def softmax_text():
    return jax.jit(_softmax).lower(X).as_text()


@pytest.mark.parametrize("backend", ["interpreter", "cpu"])
def test_compile_takes_stablehlo_text(softmax_text, backend):
    got = hlocc.compile(softmax_text, backend=backend)(X)
    np.testing.assert_allclose(got, np.asarray(jax.jit(_softmax)(X)), rtol=1e-5, atol=1e-6)


def test_compile_takes_an_exported_program():
    exported = jax.export.export(jax.jit(_softmax))(jax.ShapeDtypeStruct(X.shape, X.dtype))
    got = hlocc.compile(exported, backend="interpreter")(X)
    np.testing.assert_allclose(got, np.asarray(jax.jit(_softmax)(X)), rtol=1e-5, atol=1e-6)


def test_load_module_tells_hlo_from_stablehlo(softmax_text, tmp_path):
    hlo = load_module("HloModule m\nENTRY e { ROOT p = f32[2] parameter(0) }")
    assert hlo.entry.root.opcode == "parameter"
    assert any(i.opcode == "reduce" for c in load_module(softmax_text).computations for i in c.instructions)
    odd_name = tmp_path / "softmax.txt"  # StableHLO recognised by its text, not its suffix
    odd_name.write_text(softmax_text)
    assert load_module_file(odd_name).entry.parameters[0].shape.dims == (4, 33)


def test_cli_runs_and_prints_a_mlir_file(softmax_text, tmp_path):
    path = tmp_path / "softmax.mlir"
    path.write_text(softmax_text)
    np.savez(tmp_path / "in.npz", arg0=X)
    np.savez(tmp_path / "out.npz", out0=np.asarray(jax.jit(_softmax)(X)))
    run = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(path), "--backend", "interpreter",
                          "--inputs", str(tmp_path / "in.npz"), "--expected", str(tmp_path / "out.npz"),
                          "--rtol", "1e-5", "--atol", "1e-6"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "matches expected outputs" in run.stdout
    printed = subprocess.run([sys.executable, "-m", "hlocc.cli", "print", str(path)], capture_output=True, text=True)
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.startswith("HloModule") and "exponential" in printed.stdout


def test_cli_names_an_unknown_op_and_its_place(tmp_path):
    path = tmp_path / "bad.mlir"
    path.write_text('func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n'
                    '  %0 = "stablehlo.not_an_op"(%a) : (tensor<4xf32>) -> tensor<4xf32>\n'
                    '  return %0 : tensor<4xf32>\n}\n')
    run = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(path)], capture_output=True, text=True)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    assert "bad.mlir" in run.stderr and "not_an_op" in run.stderr, run.stderr


def test_cli_runs_a_shape_polymorphic_module_and_lists_its_specializations(tmp_path):
    exported = jax.export.export(jax.jit(_softmax))(
        jax.ShapeDtypeStruct(jax.export.symbolic_shape("b, 33"), jnp.float32))
    path = tmp_path / "softmax_b.mlir"
    path.write_text(exported.mlir_module())
    np.savez(tmp_path / "in.npz", arg0=X)
    np.savez(tmp_path / "out.npz", out0=np.asarray(jax.jit(_softmax)(X)))
    run = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(path), "--backend", "interpreter", "--stats",
                          "--inputs", str(tmp_path / "in.npz"), "--expected", str(tmp_path / "out.npz"),
                          "--rtol", "1e-5", "--atol", "1e-6"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "symbolic dimensions: b; 0 compilation(s)" in run.stdout  # the interpreter builds nothing
    assert "specialized for b=4" in run.stdout and "matches expected outputs" in run.stdout
    no_inputs = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(path)], capture_output=True, text=True)
    assert no_inputs.returncode == 1 and "Traceback" not in no_inputs.stderr
    assert "has symbolic dimensions (b): random inputs need concrete sizes" in no_inputs.stderr
