"""Command buffers (backends/cuda/command_buffer.py): a run site's device work is observed on its
first call, recorded on its second, and replayed with one launch from then on. Checked on the
SimulatedDevice, whose recording is the list of operations a CUDA graph would hold (a transfer to
or from the host while recording is refused there as a capturing stream refuses it), and against
a stand-in for the CUDA driver for the order of the driver calls a CudaDevice makes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _programs import MLP

import hlocc
from hlocc.backends.cuda import command_buffer
from hlocc.backends.cuda.device import CaptureError, SimulatedDevice
from hlocc.backends.cuda.dynamic import compile_dynamic_module
from hlocc.backends.cuda.executable import compile_module
from hlocc.hlo.parser import parse_hlo

RNG = np.random.default_rng(0)

# a kernel, a gemm (cuBLAS's plan, numpy on the SimulatedDevice) and a kernel after it, over a
# constant: everything a recording holds
PROGRAM = """HloModule p
ENTRY e {
  x = f32[8,16] parameter(0)
  w = f32[16,4] constant({...})
  t = f32[8,16] tanh(x)
  d = f32[8,4] dot(t, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT r = f32[8,4] multiply(d, d)
}"""
W = RNG.standard_normal((16, 4)).astype(np.float32)

LOOP = """HloModule loop
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(3)), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  ROOT n = (s32[], f32[4]) tuple(s32[] add(i, s32[] constant(1)), f32[4] add(v, v))
}
ENTRY e {
  x = f32[4] parameter(0)
  w = (s32[], f32[4]) while((s32[], f32[4]) tuple(s32[] constant(0), x)), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}"""


def program_text() -> str:
    return PROGRAM.replace("{...}", "{" + ", ".join("{" + ", ".join(map(repr, map(float, row))) + "}"
                                                    for row in W) + "}")


def reference(x: np.ndarray) -> np.ndarray:
    """The program's result on the reference evaluator."""
    return np.asarray(_EVALUATOR(x))


_EVALUATOR = hlocc.compile(program_text(), "interpreter")


def static(device: SimulatedDevice | None = None):
    return compile_module(parse_hlo(program_text()), device or SimulatedDevice(fill=0xA5))


def test_the_second_call_records_and_every_later_call_replays_with_new_arguments():
    exe = static()
    results = []
    for call in range(4):
        x = RNG.standard_normal((8, 16)).astype(np.float32)
        out = exe.run([x])
        np.testing.assert_allclose(out, reference(x), rtol=1e-5, atol=1e-5, err_msg=f"call {call}")
        results.append((out, reference(x)))
        run = exe.last_run
        assert run.replays == (call >= 1), (call, run.to_string())
        assert run.launches == 2 and run.device_gemms == 1, run.to_string()  # as recorded
        if call >= 1:  # the kept buffers: nothing allocated, the argument uploaded into its buffer
            assert run.allocations == 0 and run.uploaded_bytes == x.nbytes, run.to_string()
    for out, expected in results:  # each call's result is its own (not a view of a kept buffer)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert exe._commands.replays == 3 and exe._commands.why_not == ""


def test_a_dynamic_program_records_each_binding_at_its_sizes():
    program = compile_dynamic_module(parse_hlo(MLP), SimulatedDevice(fill=0xA5))
    reference_exe = hlocc.compile(MLP, "interpreter")
    w1 = RNG.standard_normal((16, 32)).astype(np.float32)
    w2 = RNG.standard_normal((32, 8)).astype(np.float32)
    for n in [3, 5, 3, 5, 3, 5, 0, 0]:
        x = RNG.standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(program.run([x, w1, w2]), reference_exe(x, w1, w2), rtol=1e-5, atol=1e-5,
                                   err_msg=f"size {n}")
    replays = {key[0][0]: calls.calls.commands.replays for key, calls in program._bound.items()}
    assert replays == {3: 2, 5: 2, 0: 0}, replays
    # at size 0 the gemms are empty (the host's, on no bytes): that binding is never recorded
    [empty] = [calls.calls.commands for key, calls in program._bound.items() if key[0][0] == 0]
    assert empty.why_not.startswith("its thunks use the host"), empty.why_not


def test_a_program_whose_thunks_use_the_host_is_never_recorded():
    exe = compile_module(parse_hlo(LOOP), SimulatedDevice())
    for _ in range(3):
        np.testing.assert_array_equal(exe.run([np.arange(4, dtype=np.float32)]), np.arange(4) * 8)
        assert exe.last_run.replays == 0
    assert "use the host" in exe._commands.why_not


def test_device_arrays_out_run_eagerly_and_leave_the_recording_alone():
    exe = static()
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    exe.run([x])
    exe.run([x])
    kept = exe._commands.buffers
    [out] = [exe.run([x], return_device_arrays=True)]
    assert exe.last_run.replays == 0 and exe.last_run.allocations >= 1
    np.testing.assert_allclose(np.from_dlpack(out), reference(x), rtol=1e-5, atol=1e-5)
    exe.run([x])
    assert exe.last_run.replays == 1 and exe._commands.buffers is kept


def test_a_refused_recording_turns_the_site_off_and_the_call_runs_eagerly(monkeypatch):
    device = SimulatedDevice()
    exe = static(device)
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    exe.run([x])

    def refuse(*_):
        device.end_capture()
        raise CaptureError("cuStreamEndCapture failed: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")

    monkeypatch.setattr(device, "begin_capture", lambda: (SimulatedDevice.begin_capture(device), refuse()))
    for _ in range(2):
        np.testing.assert_allclose(exe.run([x]), reference(x), rtol=1e-5, atol=1e-5)
        assert exe.last_run.replays == 0
    assert exe._commands.why_not == ("the recording failed: cuStreamEndCapture failed: "
                                     "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED")


def test_a_host_transfer_while_recording_is_refused():
    device = SimulatedDevice()
    device.begin_capture()
    with pytest.raises(CaptureError, match="download while recording a command buffer"):
        device.download(np.empty(4, np.uint8), device.allocate(4).ptr)
    assert device.end_capture() == []


def test_recording_past_the_budget_forgets_the_least_recently_replayed(monkeypatch):
    device = SimulatedDevice()
    first, second = static(device), static(device)
    kept = sum(a.size for a in first.assignment.allocations if a.kind.name != "CONSTANT")
    monkeypatch.setattr(command_buffer, "MEMORY_BUDGET", kept + kept // 2)  # room for one
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    for exe in (first, first, second, second):
        np.testing.assert_allclose(exe.run([x]), reference(x), rtol=1e-5, atol=1e-5)
    assert first._commands.buffers is None and second._commands.buffers is not None
    np.testing.assert_allclose(first.run([x]), reference(x), rtol=1e-5, atol=1e-5)  # records again
    assert first.last_run.replays == 1 and second._commands.buffers is None


def test_hlocc_cuda_graphs_0_turns_command_buffers_off(monkeypatch):
    monkeypatch.setenv("HLOCC_CUDA_GRAPHS", "0")
    exe = static()
    x = RNG.standard_normal((8, 16)).astype(np.float32)
    for _ in range(3):
        exe.run([x])
        assert exe.last_run.replays == 0
    assert exe._commands.why_not == "HLOCC_CUDA_GRAPHS=0"


def test_threads_calling_one_site_get_their_own_results():
    exe = static()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(15):
            x = rng.standard_normal((8, 16)).astype(np.float32)
            out = exe.run([x])
            if not np.allclose(out, reference(x), rtol=1e-5, atol=1e-5):
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and exe._commands.replays >= 1


def test_a_cuda_device_records_on_its_own_stream_and_replays_on_its_stream(monkeypatch):
    # The driver calls of a CudaDevice's recording, against a stand-in driver (no GPU needed).
    from hlocc.backends.cuda import driver

    calls = []

    class FakeDriver:
        class CUresult:
            CUDA_SUCCESS = 0

        class CUstreamCaptureMode:
            CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = "thread-local"

        @staticmethod
        def cuStreamCreate(flags):
            calls.append(("create stream", flags))
            return (0, "capture-stream")

        @staticmethod
        def cuStreamBeginCapture(stream, mode):
            calls.append(("begin", stream, mode))
            return (0,)

        @staticmethod
        def cuMemcpyDtoDAsync(destination, source, size, stream):
            calls.append(("copy", stream))
            return (0,)

        @staticmethod
        def cuStreamEndCapture(stream):
            calls.append(("end", stream))
            return (0, "graph")

        @staticmethod
        def cuGraphInstantiate(graph, flags):
            calls.append(("instantiate", graph))
            return (0, "exec")

        @staticmethod
        def cuGraphDestroy(graph):
            calls.append(("destroy", graph))
            return (0,)

        @staticmethod
        def cuGraphLaunch(exec_, stream):
            calls.append(("launch graph", exec_, stream))
            return (0,)

        @staticmethod
        def cuGraphExecDestroy(exec_):
            return (0,)

    monkeypatch.setattr(driver, "_driver", lambda: FakeDriver)
    device = object.__new__(driver.CudaDevice)
    device.stream, device._gemm = "stream", None
    device._capture, device._capture_lock = threading.local(), threading.Lock()
    device._capture_stream = device._capture_gemm = None
    device.begin_capture()
    device.copy(0x1000, 0x2000, 64)
    graph = device.end_capture()
    device.copy(0x1000, 0x2000, 64)  # after the recording: the device's own stream again
    device.replay(graph)
    assert calls == [("create stream", 1), ("begin", "capture-stream", "thread-local"), ("copy", "capture-stream"),
                     ("end", "capture-stream"), ("instantiate", "graph"), ("destroy", "graph"),
                     ("copy", "stream"), ("launch graph", "exec", "stream")]
    assert not device._capture_lock.locked()


def _gpu() -> str:
    from hlocc.backends.cuda.driver import cuda_available

    ok, why = cuda_available()
    return "" if ok else why


@pytest.mark.skipif(bool(_gpu()), reason=f"no GPU: {_gpu()}")
def test_on_a_gpu_static_and_dynamic_programs_replay_cuda_graphs():
    exe = hlocc.compile(program_text(), backend="cuda")
    for call in range(4):
        x = RNG.standard_normal((8, 16)).astype(np.float32)
        np.testing.assert_allclose(exe(x), reference(x), rtol=1e-4, atol=1e-4, err_msg=f"call {call}")
        run = exe.runner.last_run
        assert run.replays == (call >= 1), (exe.runner._commands.why_not, run.to_string())
    dynamic = hlocc.compile(MLP, backend="cuda")
    reference_exe = hlocc.compile(MLP, "interpreter")
    w1 = RNG.standard_normal((16, 32)).astype(np.float32)
    w2 = RNG.standard_normal((32, 8)).astype(np.float32)
    for n in [3, 500, 3, 500, 3, 500]:
        x = RNG.standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(dynamic(x, w1, w2), reference_exe(x, w1, w2), rtol=1e-4, atol=1e-4,
                                   err_msg=f"size {n}")
    sites = [calls.calls.commands for calls in dynamic.program._bound.values()]
    assert [site.replays for site in sites] == [2, 2], [site.why_not for site in sites]
