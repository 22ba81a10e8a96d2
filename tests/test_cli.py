"""The `hlocc` command line: its contract (DESIGN.md "Contracts") and one clear message per user
error, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from corpus import JAX_DIR, require
from hlocc.backends.cuda.driver import cuda_available
from hlocc.cli import main
from hlocc.errors import HloError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "gelu.hlo"
ADD = "HloModule add\nENTRY e {\n  x = f32[3] parameter(0)\n  y = f32[3] parameter(1)\n  ROOT s = f32[3] add(x, y)\n}\n"
INT_ADD = ADD.replace("f32", "s32")

PAIR = "ENTRY e {\n  x = bf16[2] parameter(0)\n  n = bf16[2] negate(x)\n  ROOT t = (bf16[2], bf16[2]) tuple(x, n)\n}\n"


def write(tmp_path, text, name="m.hlo"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_run_example_prints_summary(capsys):
    assert main(["run", str(ROOT / "examples" / "gelu.hlo")]) == 0
    out = capsys.readouterr().out
    assert "gelu_example on interpreter" in out
    assert "out0: bf16[8,1024] [" in out


def test_run_inputs_output_and_json(tmp_path, capsys):
    module = write(tmp_path, ADD)
    np.savez(tmp_path / "in.npz", arg0=np.array([1, 2, 3], np.float32), arg1=np.array([10, 20, 30], np.float32))
    assert main(["run", str(module), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                 "--json", "--bench", "3"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"compile_ms", "median_ms"} <= report.keys()
    assert report["outputs"][0]["shape"] == "f32[3]"
    with np.load(tmp_path / "out.npz") as out:
        np.testing.assert_array_equal(out["out0"], [11, 22, 33])


def test_tuple_results_flatten_and_bf16_is_written_as_float32(tmp_path):
    module = write(tmp_path, PAIR)
    np.savez(tmp_path / "in.npz", arg0=np.array([1.5, -2], np.float32))  # bf16 stored as float32
    assert main(["run", str(module), "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    with np.load(tmp_path / "o.npz") as out:
        assert out["out0"].dtype == np.float32 and out["out1"].tolist() == [-1.5, 2.0]


def test_bf16_arrays_saved_by_numpy_as_raw_bytes_are_inputs_and_expected_outputs(tmp_path, capsys):
    """np.savez keeps a bf16 array as '|V2' bytes that np.load cannot name (an internal error: numpy's
    'No cast function available'): the bytes are read as the parameter's (or output's) type."""
    module = write(tmp_path, PAIR)
    np.savez(tmp_path / "in.npz", arg0=np.array([1.5, -2], ml_dtypes.bfloat16))
    np.savez(tmp_path / "good.npz", out0=np.array([1.5, -2], ml_dtypes.bfloat16),
             out1=np.array([-1.5, 2], ml_dtypes.bfloat16))
    np.savez(tmp_path / "bad.npz", out0=np.array([1.5, -2], ml_dtypes.bfloat16),
             out1=np.array([-1.5, 3], ml_dtypes.bfloat16))
    base = ["run", str(module), "--inputs", str(tmp_path / "in.npz"), "--expected"]
    assert main(base + [str(tmp_path / "good.npz")]) == 0
    assert "matches expected outputs" in capsys.readouterr().out
    assert main(base + [str(tmp_path / "bad.npz")]) == 1
    assert "MISMATCH out1: 1 of 2 elements out of tolerance" in capsys.readouterr().out


def test_expected_comparison_passes_and_fails(tmp_path, capsys):
    module = write(tmp_path, ADD)
    np.savez(tmp_path / "in.npz", arg0=np.ones(3, np.float32), arg1=np.ones(3, np.float32))
    np.savez(tmp_path / "good.npz", out0=np.full(3, 2, np.float32))
    np.savez(tmp_path / "bad.npz", out0=np.full(3, 2.5, np.float32))
    base = ["run", str(module), "--inputs", str(tmp_path / "in.npz"), "--expected"]
    assert main(base + [str(tmp_path / "good.npz")]) == 0
    assert main(base + [str(tmp_path / "bad.npz")]) == 1
    assert "MISMATCH out0: 3 of 3 elements out of tolerance" in capsys.readouterr().out


def test_expected_outputs_under_other_names_or_nan_tolerances_never_match(tmp_path, capsys):
    """A reference without `out0` (its array named `result`) and `--rtol nan` compared nothing and
    printed 'matches expected outputs'."""
    module = write(tmp_path, ADD)
    np.savez(tmp_path / "in.npz", arg0=np.ones(3, np.float32), arg1=np.ones(3, np.float32))
    np.savez(tmp_path / "renamed.npz", result=np.full(3, 2, np.float32))
    base = ["run", str(module), "--inputs", str(tmp_path / "in.npz"), "--expected"]
    assert main(base + [str(tmp_path / "renamed.npz")]) == 1
    assert "MISMATCH out0: the expected file has no array 'out0' (it has result)" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(base + [str(tmp_path / "renamed.npz"), "--rtol", "nan"])
    assert "argument --rtol: 'nan' is not a finite number >= 0" in capsys.readouterr().err


def test_unreadable_npz_files_are_named_errors(tmp_path, capsys):
    """An empty file, a .npy, a truncated .npz and text were internal errors (EOFError, a TypeError,
    BadZipFile, numpy's 'pickled data')."""
    module = write(tmp_path, ADD)
    np.savez(tmp_path / "ok.npz", arg0=np.ones(3, np.float32), arg1=np.ones(3, np.float32))
    np.save(tmp_path / "plain.npy", np.ones(3, np.float32))
    (tmp_path / "empty.npz").write_bytes(b"")
    (tmp_path / "trunc.npz").write_bytes((tmp_path / "ok.npz").read_bytes()[:200])
    (tmp_path / "text.npz").write_text("not a zip at all")
    for name, why in (("empty.npz", "it is empty"), ("plain.npy", "it is a .npy file"),
                      ("trunc.npz", "BadZipFile"), ("text.npz", "it is not a .npz file")):
        assert main(["run", str(module), "--inputs", str(tmp_path / name)]) == 1
        assert f"cannot read inputs '{tmp_path / name}': {why}" in capsys.readouterr().err


def test_npz_values_that_survive_the_dtype_are_converted(tmp_path, capsys):
    """numpy's default int64 for an s32 parameter and float64 for an f32 one: converted."""
    np.savez(tmp_path / "in.npz", arg0=np.array([1, 2, 3]), arg1=np.array([4, 5, 6]))
    assert main(["run", str(write(tmp_path, INT_ADD)), "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(tmp_path / "out.npz")]) == 0
    assert np.load(tmp_path / "out.npz")["out0"].tolist() == [5, 7, 9]
    np.savez(tmp_path / "f.npz", arg0=np.array([0.1, 2, 3]), arg1=np.array([1.0, 2, 3]))
    assert main(["run", str(write(tmp_path, ADD, "f.hlo")), "--inputs", str(tmp_path / "f.npz"),
                 "--output", str(tmp_path / "fout.npz")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "fout.npz")["out0"], np.float32([1.1, 4, 6]))
    # one rule for every float type: rounding passes, and so do inf and NaN (the f32's was the bf16's rule)
    np.savez(tmp_path / "b.npz", arg0=np.array([0.1, np.inf]))
    assert main(["run", str(write(tmp_path, PAIR, "b.hlo")), "--inputs", str(tmp_path / "b.npz"),
                 "--output", str(tmp_path / "bout.npz")]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "bout.npz")["out0"], np.float32([0.10009765625, np.inf]))


def test_corpus_case_through_the_cli(capsys):
    require(JAX_DIR)
    case = JAX_DIR / "int_arith_bitwise"
    assert main(["run", f"{case}.hlo", "--inputs", f"{case}.in.npz", "--expected", f"{case}.out.npz",
                 "--rtol", "0", "--atol", "0"]) == 0
    assert "matches expected outputs" in capsys.readouterr().out


@pytest.mark.parametrize("args,inputs,message", [
    pytest.param(["--backend", "cuda"], None, "use --backend cpu, or --backend cuda-sim to run the GPU kernels in simulation",
                 marks=pytest.mark.skipif(cuda_available()[0], reason="a GPU is here: the cuda backend runs")),
    ([], {"arg0": np.ones(4, np.float32), "arg1": np.ones(3, np.float32)}, "argument 0: expected shape f32[3], got an array of shape [4]"),
    ([], {"arg0": np.ones(3, np.float32)}, "lack arg1 (the module takes 2 parameters)"),
    (["--module-text", PAIR], {}, "lack arg0 (the module takes 1 parameter)"),
    ([], {"arr_0": np.ones(3, np.float32), "arr_1": np.ones(3, np.float32)},
     "lack arg0, arg1 (the module takes 2 parameters); it holds arr_0, arr_1: np.savez names positional arrays so, "
     "save them as np.savez(path, arg0=..., arg1=...)"),
    ([], {"arg0": np.ones(3, np.float32), "arg1": np.ones(3, np.float32), "arg7": np.ones(1)}, "does not take: arg7"),
    # a .npz value the parameter's dtype cannot hold is named, never truncated or wrapped
    (["--module-text", INT_ADD], {"arg0": np.array([1, 2, 3]), "arg1": np.array([1, 2.5, 3])},
     "argument 1: expected dtype s32 (int32), got float64 whose value 2.5 at index [1] it cannot hold"),
    (["--module-text", INT_ADD], {"arg0": np.array([1, 2, 3]), "arg1": np.array([1, 2**40, 3])},
     "argument 1: expected dtype s32 (int32), got int64 whose value 1099511627776 at index [1] it cannot hold"),
    # integers of the other signedness are checked by range (a round trip wrapped both ways: 4294967295 ran as -1)
    (["--module-text", INT_ADD], {"arg0": np.array([1, 2, 3]), "arg1": np.array([1, 2, 4294967295], np.uint32)},
     "argument 1: expected dtype s32 (int32), got uint32 whose value 4294967295 at index [2] it cannot hold"),
    # a finite value beyond a float type's range, the same for every float type (an f32 made it inf)
    ([], {"arg0": np.array([1, np.nan, 1e40]), "arg1": np.ones(3)},
     "argument 0: expected dtype f32 (float32), got float64 whose value 1e+40 at index [2] it cannot hold"),
    (["--module-text", PAIR], {"arg0": np.array([-np.inf, -1e40])},
     "argument 0: expected dtype bf16 (bfloat16), got float64 whose value -1e+40 at index [1] it cannot hold"),
    (["--module-text", PAIR.replace("bf16", "f4e2m1fn")], {"arg0": np.array([6.5, 7])},
     "argument 0: expected dtype f4e2m1fn (float4_e2m1fn), got float64 whose value 7.0 at index [1] it cannot hold"),
    # found by the JAX-program hunt: these were internal errors (a ValueError, a FileNotFoundError, numpy's
    # ValueError for a negative seed) or a silent conversion (a ComplexWarning, the imaginary part dropped)
    ([], {"arg0": np.array(["a", "b", "c"]), "arg1": np.ones(3, np.float32)}, "argument 0: expected dtype f32 (float32), got <U1, which is not numbers"),
    ([], {"arg0": np.ones(3, np.complex64), "arg1": np.ones(3, np.float32)}, "complex64 (converting would drop the imaginary part)"),
    (["--output", "/nonexistent-dir/o.npz"], None, "cannot write outputs '/nonexistent-dir/o.npz': No such file or directory"),
    (["--backend", "cpu", "--dump-dir", "/proc/hlocc-dump"], None, "cannot write to --dump-dir '/proc/hlocc-dump'"),
])
def test_user_errors_are_one_message(tmp_path, capsys, args, inputs, message):
    text = ADD
    if args[:1] == ["--module-text"]:  # (this test's own switch: another module than ADD)
        text, args = args[1], args[2:]
    module = write(tmp_path, text)
    if inputs is not None:
        np.savez(tmp_path / "in.npz", **inputs)
        args = args + ["--inputs", str(tmp_path / "in.npz")]
    assert main(["run", str(module), *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("hlocc: error: ") and message in err
    assert "Traceback" not in err


def test_random_inputs_too_large_and_a_negative_seed_are_user_errors(tmp_path, capsys):
    huge = write(tmp_path, "HloModule huge\nENTRY e {\n  p = f32[1000000000000] parameter(0)\n"
                           "  ROOT n = f32[1000000000000] negate(p)\n}\n")
    assert main(["run", str(huge)]) == 1  # numpy's MemoryError drawing 8 TB of inputs, before
    assert "random inputs for 'huge' need 11175.87 GiB, more than the" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(write(tmp_path, ADD)), "--seed", "-1"])
    assert "argument --seed: expected a non-negative integer, got '-1'" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # (it ran untimed)
        main(["run", str(write(tmp_path, ADD)), "--bench", "-3"])
    assert "argument --bench: expected a non-negative integer, got '-3'" in capsys.readouterr().err


def test_malformed_and_missing_files_exit_1_without_traceback(tmp_path):
    bad = write(tmp_path, "ENTRY e {\n  x = f32[2] parameter(0)\n  ROOT y = f32[2] add(x, z)\n}\n")
    for path, message in ((bad, "m.hlo:3:26: error: instruction 'y' uses undefined operand 'z'"),
                          (tmp_path / "missing.hlo", "cannot read")):
        proc = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(path)], capture_output=True, text=True)
        assert proc.returncode == 1
        assert message in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize("tool", ["fusion-to-mlir", "reduce", "hlo-opt", "opt"])
def test_every_tool_names_a_missing_or_binary_file(tool, tmp_path, capsys):
    """(They were tracebacks: the file was opened outside the error handling, and `reduce` read it
    without catching a UnicodeDecodeError.)"""
    binary = tmp_path / "b.hlo"
    binary.write_bytes(b"\x85\x00\xff")
    for path, message in ((tmp_path / "missing.hlo", "No such file or directory"), (binary, "not UTF-8")):
        assert main([tool, str(path)]) == 1
        err = capsys.readouterr().err
        assert "error: " in err and message in err and str(path) in err


def test_json_with_stats_is_one_json_object(capsys):
    """(--stats printed its text before the JSON object, so stdout did not parse.)"""
    assert main(["run", str(EXAMPLE), "--backend", "cpu", "--json", "--stats"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["stats"].startswith("fusions by emitter kind: loop 1\nkernels: 1 (loop 1)")


def test_a_byte_order_mark_is_not_part_of_the_text(tmp_path, capsys):
    """Editors on Windows save UTF-8 with a BOM; it was read as part of the first token."""
    hlo = tmp_path / "m.hlo"
    hlo.write_bytes(b"\xef\xbb\xbfHloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT n = f32[2] negate(p)\n}\n")
    assert main(["print", str(hlo)]) == 0
    assert capsys.readouterr().out.startswith("HloModule m\n")
    mlir = "module {\n func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n  return %a : tensor<2xf32>\n }\n}\n"
    for name in ("m.mlir", "m.txt"):  # StableHLO by its suffix, and by its text
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + mlir.encode())
        assert main(["print", str(tmp_path / name)]) == 0
        assert "ROOT" in capsys.readouterr().out


def test_a_malformed_setting_is_a_named_error_not_a_fallback(tmp_path, capsys, monkeypatch):
    """HLOCC_CACHE_MAX_BYTES=abc was an internal error, and inside a fusion's compile a reason to run
    the fusion on the host."""
    from hlocc.backends.cpu.launcher import num_workers

    monkeypatch.setenv("HLOCC_CACHE_DIR", str(tmp_path))
    module = write(tmp_path, ADD.replace("add(x, y)", "subtract(x, y)"))  # in no in-process cache
    for value, message in (("abc", "$HLOCC_CACHE_MAX_BYTES='abc': expected an integer"),
                           ("-1", "$HLOCC_CACHE_MAX_BYTES=-1: expected an integer >= 0")):
        monkeypatch.setenv("HLOCC_CACHE_MAX_BYTES", value)
        assert main(["run", str(module), "--backend", "cpu"]) == 1
        assert capsys.readouterr().err == f"hlocc: error: {message}\n"
    monkeypatch.setenv("HLOCC_CPU_THREADS", "two")
    with pytest.raises(HloError, match=r"\$HLOCC_CPU_THREADS='two': expected an integer"):
        num_workers()


def test_debug_shows_the_traceback(tmp_path):
    bad = write(tmp_path, "ENTRY e { ROOT y = f32[2] frob() }")
    proc = subprocess.run([sys.executable, "-m", "hlocc.cli", "run", str(bad), "--debug"], capture_output=True,
                          text=True)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "unknown opcode 'frob'" in proc.stderr


def test_print_is_canonical_and_verifies(tmp_path, capsys):
    module = write(tmp_path, "ENTRY e {\n %x = f32[2]{0} parameter(0)\n ROOT %y = f32[2]{0} negate(f32[2]{0} %x), metadata={op_name=\"n\"}\n}")
    assert main(["print", str(module), "--no-metadata"]) == 0
    assert capsys.readouterr().out == "HloModule module_e\n\nENTRY e {\n  x = f32[2]{0} parameter(0)\n  ROOT y = f32[2]{0} negate(x)\n}\n"
    invalid = write(tmp_path, "ENTRY e {\n x = f32[2] parameter(0)\n ROOT y = f32[3] negate(x)\n}", "bad.hlo")
    assert main(["print", str(invalid)]) == 1
    assert "instruction 'y'" in capsys.readouterr().err


def test_api_checks_arguments():
    import hlocc

    exe = hlocc.compile(ADD)
    np.testing.assert_array_equal(exe(np.ones(3, np.float32), [1, 2, 3]), [2, 3, 4])
    with pytest.raises(hlocc.ArgumentError, match="takes 2 arguments, got 1"):
        exe(np.ones(3, np.float32))
    with pytest.raises(hlocc.ArgumentError, match=r"argument 1: expected dtype f32 \(float32\), got float64"):
        exe(np.ones(3, np.float32), np.ones(3))
    bf = hlocc.compile(PAIR)
    x, n = bf(np.array([1, 2], ml_dtypes.bfloat16))
    assert n.dtype == ml_dtypes.bfloat16 and n.tolist() == [-1, -2]


DOT = """HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,4] parameter(1)
  ROOT d = f32[2,4] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


RNG = """HloModule m
ENTRY e {
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  ROOT s = f32[5] rng(lo, hi), distribution=rng_uniform
}
"""


def test_cpu_backend_runs_a_dot_as_a_library_call_and_lists_host_fallbacks(tmp_path, capsys):
    reference = tmp_path / "ref.npz"
    assert main(["run", str(write(tmp_path, DOT)), "--output", str(reference)]) == 0
    capsys.readouterr()
    assert main(["run", str(write(tmp_path, DOT)), "--backend", "cpu", "--gemm", "library", "--stats", "--expected",
                 str(reference)]) == 0
    out = capsys.readouterr().out
    assert "library calls: gemm 1" in out and "kernels: 0" in out and "host fallbacks: 0" in out, out
    assert "matches expected outputs" in out
    assert main(["run", str(write(tmp_path, RNG)), "--backend", "cpu", "--stats"]) == 0
    out = capsys.readouterr().out
    assert "host fallbacks: 1\n  s (rng): no library implementation on this backend yet" in out, out


def test_cpu_backend_runs_the_example_and_dumps_ir(tmp_path, capsys):
    example = Path(__file__).resolve().parents[1] / "examples" / "gelu.hlo"
    out = tmp_path / "out.npz"
    assert main(["run", str(example), "--backend", "cpu", "--dump-dir", str(tmp_path / "dump"),
                 "--output", str(out)]) == 0
    names = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert "loop_multiply_fusion.03.inline.mlir" in names and "loop_multiply_fusion.llvm-opt.ll" in names
    assert {"module.after_passes.hlo", "buffer_assignment.txt", "thunks.txt", "stats.txt"} <= set(names)
    assert main(["run", str(example), "--expected", str(out), "--rtol", "1e-2", "--atol", "1e-2"]) == 0


def test_a_symbolic_modules_kernels_are_dumped_and_printed_too(tmp_path, capsys):
    """The plan for every size compiles its kernels through the same pipeline: --dump-dir and
    --print-ir-after-all show their IR after each kernel pass, as for a static module."""
    module = write(tmp_path, "HloModule m\nENTRY e {\n  p = f32[?b,4] parameter(0)\n"
                             "  ROOT r = f32[?b,4] exponential(p)\n}\n")
    inputs = tmp_path / "in.npz"
    np.savez(inputs, arg0=np.ones((3, 4), np.float32))
    assert main(["run", str(module), "--backend", "cpu", "--inputs", str(inputs), "--dump-dir",
                 str(tmp_path / "dump")]) == 0
    names = {p.name for p in (tmp_path / "dump").iterdir()}
    assert {"wrapped_exponential.00.emitted.mlir", "wrapped_exponential.llvm.ll"} <= names, sorted(names)
    capsys.readouterr()
    assert main(["run", str(module), "--backend", "cpu", "--inputs", str(inputs), "--print-ir-after-all"]) == 0
    out = capsys.readouterr().out
    assert "IR Dump After flatten-tensors" in out and "xla.symbol_value \"b\"" in out, out[-2000:]


def test_elided_constants_are_warned_about(tmp_path, capsys):
    """XLA prints large constants as `{...}` by default; they read as zeros, which `run` says."""
    module = write(tmp_path, "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  %constant.5 = f32[4] constant({...})\n"
                             "  ROOT r = f32[4] add(p, %constant.5)\n}\n")
    assert main(["run", str(module)]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 constant(s) elided as {...}" in err and "'constant.5'" in err
    assert "--xla_dump_large_constants" in err
    assert main(["run", str(write(tmp_path, ADD, "plain.hlo"))]) == 0
    assert "elided" not in capsys.readouterr().err


def test_elided_constants_are_a_warning_of_the_python_api():
    """`hlocc.compile` of such text is not silently another program: an ElidedConstantsWarning."""
    import hlocc

    text = ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  c = f32[4] constant({...})\n"
            "  ROOT r = f32[4] add(p, c)\n}\n")
    with pytest.warns(hlocc.ElidedConstantsWarning, match=r"1 constant\(s\) elided as \{\.\.\.\} in module 'm' "
                                                         r"\(e\.g\. 'c'\) read as zeros"):
        hlocc.compile(text, "interpreter")
