"""DLPack in and out of the cuda backend (backends/cuda/dlpack.py), on the SimulatedDevice, whose
device memory is host memory (DLPack device kDLCPU): numpy and JAX consume the DeviceArrays it
returns without a copy, and DLPack producers are accepted as arguments."""

from __future__ import annotations

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import hlocc
from hlocc.backends.cuda.dlpack import _EXPORTED, KDLCPU, KDLCUDA, DeviceArray, DLPackArray, import_dlpack, make_capsule
from hlocc.errors import ArgumentError

SCALE = """HloModule m
ENTRY e {
  x = f32[16,8] parameter(0)
  c = f32[] constant(3)
  b = f32[16,8] broadcast(c), dimensions={}
  ROOT y = f32[16,8] multiply(x, b)
}"""


@pytest.fixture(scope="module")
def scale():
    return hlocc.compile(SCALE, backend="cuda-sim")


def test_numpy_sees_a_device_arrays_memory_without_a_copy(scale):
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    out = scale(x, return_device_arrays=True)
    assert isinstance(out, DeviceArray) and out.__dlpack_device__() == (KDLCPU, 0)
    assert (out.shape, out.dtype) == ((16, 8), np.float32)
    view = np.from_dlpack(out)
    assert view.ctypes.data == out.ptr
    np.testing.assert_array_equal(view, x * 3)
    view[2, 5] = -1.0  # a write through numpy's view is in the device array's memory
    assert out.numpy()[2, 5] == -1.0
    np.testing.assert_array_equal(np.asarray(out)[3], x[3] * 3)
    assert not hasattr(out, "__cuda_array_interface__")  # host memory: no CUDA interface


def test_a_consumed_capsule_keeps_the_buffer_alive_until_the_consumer_lets_go(scale):
    out = scale(np.ones((16, 8), np.float32), return_device_arrays=True)
    buffer = weakref.ref(out.buffer)
    view = np.from_dlpack(out)
    del out
    gc.collect()
    assert buffer() is not None and view.sum() == 3 * 128
    del view
    gc.collect()
    assert buffer() is None


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_an_unconsumed_capsule_releases_the_array_when_it_dies(scale, max_version):
    out = scale(np.ones((16, 8), np.float32), return_device_arrays=True)
    before = len(_EXPORTED)
    capsule = out.__dlpack__(max_version=max_version)
    assert len(_EXPORTED) == before + 1
    del capsule
    assert len(_EXPORTED) == before


def test_a_consumer_of_the_unversioned_capsule_sees_the_same_memory(scale):
    """Consumers that do not ask for a version get the DLPack 0.x capsule (here: our own importer)."""
    out = scale(np.full((16, 8), 2, np.float32), return_device_arrays=True)
    imported = import_dlpack(out)
    assert (imported.ptr, imported.shape, imported.strides) == (out.ptr, (16, 8), (8, 1))
    before = len(_EXPORTED)
    del imported
    gc.collect()
    assert len(_EXPORTED) == before - 1


def test_a_result_in_a_non_default_layout_is_exported_with_its_strides():
    text = """HloModule m
ENTRY e {
  x = f32[4,6] parameter(0)
  ROOT y = f32[4,6]{0,1} negate(x)
}"""
    exe = hlocc.compile(text, backend="cuda-sim")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    out = exe(x, return_device_arrays=True)
    assert out.strides == (1, 4)
    view = np.from_dlpack(out)
    assert view.strides == (4, 16)
    np.testing.assert_array_equal(view, -x)


def test_importing_a_numpy_array_sees_its_memory_and_releases_it():
    x = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]
    imported = import_dlpack(x)
    assert (imported.ptr, imported.shape, imported.strides, imported.dtype) == (x.ctypes.data, (3, 2), (4, 2), x.dtype)
    assert imported.device == (KDLCPU, 0)
    base = weakref.ref(x.base)
    del x
    gc.collect()
    assert base() is not None  # the imported tensor holds it
    del imported
    gc.collect()
    assert base() is None


def test_a_bf16_device_array_round_trips_through_dlpack():
    text = """HloModule m
ENTRY e {
  x = bf16[8] parameter(0)
  ROOT y = bf16[8] add(x, x)
}"""
    exe = hlocc.compile(text, backend="cuda-sim")
    x = np.arange(8).astype(ml_dtypes.bfloat16)
    out = exe(x, return_device_arrays=True)
    imported = import_dlpack(out)
    assert (imported.dtype, imported.ptr, imported.shape) == (np.dtype(ml_dtypes.bfloat16), out.ptr, (8,))
    np.testing.assert_array_equal(out.numpy().astype(np.float32), np.arange(8) * 2)


def test_tuple_results_come_back_as_device_arrays():
    text = """HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  n = f32[4] negate(x)
  ROOT t = (f32[4], f32[4], f32[4]) tuple(n, c, x)
}"""
    exe = hlocc.compile(text, backend="cuda-sim")
    x = np.full(4, 2, np.float32)
    n, c, y = exe(x, return_device_arrays=True)
    np.testing.assert_array_equal(np.from_dlpack(n), -x)
    np.testing.assert_array_equal(np.from_dlpack(c), [1, 2, 3, 4])
    np.testing.assert_array_equal(np.from_dlpack(y), x)
    np.from_dlpack(c)[0] = 100  # the constant's result is a copy: the program's constant is not touched
    np.testing.assert_array_equal(exe(x)[1], [1, 2, 3, 4])
    np.from_dlpack(y)[0] = 100  # nor is the caller's argument
    assert x[0] == 2


def test_jax_takes_device_arrays_and_gives_arguments():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    exe = hlocc.compile(SCALE, backend="cuda-sim")
    # on the host (the simulated device's memory), also where jax's default device is a GPU
    x = jax.device_put(jnp.arange(128, dtype=jnp.float32).reshape(16, 8), jax.devices("cpu")[0])
    out = exe(x, return_device_arrays=True)  # a jax array in, through its __dlpack__
    y = jax.dlpack.from_dlpack(out)
    np.testing.assert_array_equal(np.asarray(y), np.arange(128, dtype=np.float32).reshape(16, 8) * 3)
    np.testing.assert_array_equal(exe(y * 2), np.arange(128, dtype=np.float32).reshape(16, 8) * 18)


class FakeCudaArray:
    """A DLPack producer that claims its (host) memory is on CUDA device 0."""

    def __init__(self, array: np.ndarray):
        self.array = array

    def __dlpack_device__(self):
        return (KDLCUDA, 0)

    def __dlpack__(self, stream=None):
        assert stream == 1  # the consumer asks for the legacy default stream
        strides = tuple(s // self.array.itemsize for s in self.array.strides)
        return make_capsule(self.array, self.array.ctypes.data, self.array.shape, strides, self.array.dtype,
                            (KDLCUDA, 0))


def test_a_cuda_array_is_imported_with_its_device_and_refused_where_it_cannot_run(scale):
    fake = FakeCudaArray(np.ones((16, 8), np.float32))
    imported = hlocc.compiler.check_arguments(scale.module, [fake], device_arrays=True)[0]
    assert isinstance(imported, DLPackArray) and imported.device == (KDLCUDA, 0) and imported.ptr == fake.array.ctypes.data
    with pytest.raises(ArgumentError, match=r"argument 0: the array is in cuda:0 memory, but the program runs on "
                                            r"simulated sm_90"):
        scale(fake)
    cpu = hlocc.compile(SCALE, backend="cpu")
    with pytest.raises(ArgumentError, match=r"argument 0: the array is in cuda:0 memory; this backend takes host arrays"):
        cpu(fake)
    with pytest.raises(ArgumentError, match=r"expected shape f32\[16,8\], got an array of shape \[8, 16\] .* in cuda:0"):
        scale(FakeCudaArray(np.ones((8, 16), np.float32)))
    with pytest.raises(ArgumentError, match=r"expected dtype f32 \(float32\), got float64 in cuda:0 memory"):
        scale(FakeCudaArray(np.ones((16, 8))))


def test_device_arrays_are_only_for_the_cuda_backends():
    with pytest.raises(ArgumentError, match="the cpu backend returns host arrays only"):
        hlocc.compile(SCALE, backend="cpu")(np.ones((16, 8), np.float32), return_device_arrays=True)
