"""A simulated device whose kernel compiler also compiles every kernel to PTX: the ptxas tests of
the dynamic programs assemble what one compile made, versions included."""

from __future__ import annotations

from hlocc.backends.cuda.device import SimulatedDevice
from hlocc.backends.cuda.ptx import compile_ptx


def ptx_recording_device(arch: str) -> tuple[SimulatedDevice, list]:
    """(device, kernels): each kernel the device compiles runs in simulation and its PTX for `arch`
    is appended to `kernels`."""
    kernels: list = []
    simulate = SimulatedDevice(arch=arch).kernel_compiler(None, {})

    def compile_kernel(computation, name, noalias):
        kernels.append(compile_ptx(computation, arch, noalias=noalias))
        return simulate(computation, name, noalias)

    device = SimulatedDevice(arch=arch)
    device.kernel_compiler = lambda options, times: compile_kernel
    return device, kernels


def ptx_in_subprocess(script: str) -> dict:
    """The JSON a PTX-compiling `script` prints, run in a subprocess (NVPTX aborts the process on
    an intrinsic it cannot select); skips the test where ptxas is absent."""
    import json
    import subprocess
    import sys
    import textwrap

    import pytest

    from hlocc.backends.cuda.ptx import find_ptxas

    if find_ptxas() is None:
        pytest.skip("no ptxas: install the CUDA toolkit or the test extra 'nvidia-cuda-nvcc-cu12' (or set HLOCC_PTXAS)")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)
