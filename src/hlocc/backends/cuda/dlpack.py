"""Arrays in and out of the `cuda` backend through DLPack (https://dmlc.github.io/dlpack), with ctypes.

Out: `DeviceArray`, a result left in device memory (`exe(..., return_device_arrays=True)`). It
implements `__dlpack__` / `__dlpack_device__` (and `__cuda_array_interface__` on a CUDA device,
`__array__` for numpy), so `torch.from_dlpack`, `jax.dlpack.from_dlpack`, `cupy.from_dlpack` and
`numpy.from_dlpack` take it without a copy. The capsule holds a `DLManagedTensor` whose deleter
releases the DeviceArray (and so its buffer) once the consumer is done; a capsule never consumed
releases it when it dies.

In: `import_dlpack(obj)` takes any object with `__dlpack__` (torch, jax, cupy) as a `DLPackArray`:
its pointer, shape, element strides, dtype and device, holding the producer's tensor alive until
the DLPackArray dies (then the producer's deleter runs). The runtime uses device-resident ones in
place when their strides are the parameter's layout (executable.py).

A consumer that asks for `max_version` ≥ (1, 0) (numpy 2, recent torch and jax) gets a versioned
capsule ("dltensor_versioned", writable: no read-only flag); others the unversioned one. On import
the unversioned capsule is asked for: every producer still offers it.

The deleters are Python callbacks (ctypes): a consumer that frees the tensor while an exception is
propagating (numpy does, when an expression on the imported array raised) makes that exception a
SystemError wrapping it; the memory is released all the same.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import ml_dtypes
import numpy as np

from hlocc.errors import ArgumentError
from hlocc.hlo.types import Shape

KDLCPU, KDLCUDA, KDLCUDAHOST, KDLCUDAMANAGED = 1, 2, 3, 13
DEVICE_NAMES = {KDLCPU: "cpu", KDLCUDA: "cuda", KDLCUDAHOST: "cuda_host", KDLCUDAMANAGED: "cuda_managed"}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    pass


VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

# DLDataTypeCode: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLComplex 5, kDLBool 6, and the
# DLPack 1.1 float8 codes.
_CODES = {
    **{np.dtype(f"int{b}"): (0, b) for b in (8, 16, 32, 64)},
    **{np.dtype(f"uint{b}"): (1, b) for b in (8, 16, 32, 64)},
    np.dtype(np.float16): (2, 16), np.dtype(np.float32): (2, 32), np.dtype(np.float64): (2, 64),
    np.dtype(ml_dtypes.bfloat16): (4, 16), np.dtype(np.complex64): (5, 64), np.dtype(np.complex128): (5, 128),
    np.dtype(np.bool_): (6, 8),
    np.dtype(ml_dtypes.float8_e4m3fn): (10, 8), np.dtype(ml_dtypes.float8_e5m2): (12, 8),
}
_DTYPES = {code: dtype for dtype, code in _CODES.items()}


def dlpack_dtype(dtype: np.dtype) -> tuple[int, int]:
    try:
        return _CODES[np.dtype(dtype)]
    except KeyError:
        raise BufferError(f"DLPack has no type for {np.dtype(dtype)}") from None


# -- capsules --------------------------------------------------------------------------------------

_CAPSULE_NAME = ctypes.create_string_buffer(b"dltensor")  # the capsule keeps a pointer to its name
_VERSIONED_NAME = ctypes.create_string_buffer(b"dltensor_versioned")
_USED_NAME = ctypes.create_string_buffer(b"used_dltensor")
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_void_p)(
    ("PyCapsule_SetName", ctypes.pythonapi))

_EXPORTED: dict[int, tuple] = {}  # managed tensor address → what must live until its deleter runs
_EXPORTED_LOCK = threading.Lock()


def _release_export(address: int) -> None:
    with _EXPORTED_LOCK:
        _EXPORTED.pop(address, None)


@DELETER
def _delete_exported(managed) -> None:
    _release_export(ctypes.addressof(managed.contents))


@VERSIONED_DELETER
def _delete_exported_versioned(managed) -> None:
    _release_export(ctypes.addressof(managed.contents))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule: int) -> None:
    # A capsule still under its first name was never consumed: the deleter is ours to call.
    for name in (_CAPSULE_NAME, _VERSIONED_NAME):
        if _capsule_is_valid(capsule, ctypes.addressof(name)):
            _release_export(_capsule_get_pointer_raw(capsule, ctypes.addressof(name)))


def make_capsule(owner: Any, address: int, shape: tuple[int, ...], strides: tuple[int, ...], dtype: np.dtype,
                 device: tuple[int, int], version: tuple[int, int] | None = None) -> Any:
    """A DLPack capsule of the array at `address` (element `strides`): "dltensor", or with
    `version` a writable "dltensor_versioned". `owner` lives until the consumer calls the deleter
    (or the capsule dies unconsumed)."""
    code, bits = dlpack_dtype(dtype)
    ndim = len(shape)
    shape_array = (ctypes.c_int64 * max(1, ndim))(*shape)
    strides_array = (ctypes.c_int64 * max(1, ndim))(*strides)
    if version is None:
        managed, name = DLManagedTensor(), _CAPSULE_NAME
        managed.deleter = _delete_exported
    else:
        managed, name = DLManagedTensorVersioned(), _VERSIONED_NAME
        managed.version = DLPackVersion(*version)
        managed.deleter = _delete_exported_versioned
        managed.flags = 0  # writable, not a copy
    tensor = managed.dl_tensor
    tensor.data = address
    tensor.device = DLDevice(*device)
    tensor.ndim = ndim
    tensor.dtype = DLDataType(code, bits, 1)
    tensor.shape = ctypes.cast(shape_array, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_array, ctypes.POINTER(ctypes.c_int64))
    tensor.byte_offset = 0
    key = ctypes.addressof(managed)
    managed.manager_ctx = key
    with _EXPORTED_LOCK:
        _EXPORTED[key] = (owner, managed, shape_array, strides_array)
    return _capsule_new(key, ctypes.addressof(name), ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class DLPackArray:
    """An array a DLPack producer handed over (`import_dlpack`): `ptr` (data + byte offset), logical
    `shape`, element `strides`, `dtype` and `device` ((type, id)). It holds the producer's tensor
    alive; the producer's deleter runs when this object dies."""

    def __init__(self, managed_address: int, source: Any):
        managed = DLManagedTensor.from_address(managed_address)
        tensor = managed.dl_tensor
        self.source = source  # the producer object (its memory outlives us through the deleter anyway)
        self.ndim = tensor.ndim
        self.shape = tuple(tensor.shape[i] for i in range(self.ndim))
        code = (tensor.dtype.code, tensor.dtype.bits)
        if tensor.dtype.lanes != 1 or code not in _DTYPES:
            self._release(managed_address)
            raise ArgumentError(f"DLPack type code {code[0]} of {code[1]} bits (lanes {tensor.dtype.lanes}) is "
                                "not supported")
        self.dtype = _DTYPES[code]
        self.ptr = (tensor.data or 0) + tensor.byte_offset
        self.device = (tensor.device.device_type, tensor.device.device_id)
        self.strides = (tuple(tensor.strides[i] for i in range(self.ndim)) if tensor.strides
                        else compact_strides(self.shape))
        self._managed = managed_address

    @staticmethod
    def _release(address: int) -> None:
        managed = DLManagedTensor.from_address(address)
        if managed.deleter:
            managed.deleter(ctypes.pointer(managed))

    def __del__(self) -> None:
        address, self._managed = getattr(self, "_managed", 0), 0
        if address:
            self._release(address)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def device_name(self) -> str:
        return f"{DEVICE_NAMES.get(self.device[0], f'device type {self.device[0]}')}:{self.device[1]}"

    def has_layout(self, shape: Shape) -> bool:
        """Whether the elements lie in `shape`'s physical order, densely (sizes-1 dims' strides do not count)."""
        expected = layout_strides(shape)
        return all(n == 1 or s == e for n, s, e in zip(self.shape, self.strides, expected))

    def span(self) -> tuple[int, int]:
        """(lowest, one past highest) element offset the array touches."""
        low = sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s < 0)
        high = sum((n - 1) * s for n, s in zip(self.shape, self.strides) if s > 0)
        return low, high + 1

    def __repr__(self) -> str:
        return f"DLPackArray({list(self.shape)}, {self.dtype}, {self.device_name})"


def import_dlpack(obj: Any, stream: int | None = None) -> DLPackArray:
    """Take `obj`'s DLPack capsule (asking for it on `stream`, for a CUDA producer)."""
    capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    address = _capsule_get_pointer(capsule, ctypes.addressof(_CAPSULE_NAME))
    _capsule_set_name(capsule, ctypes.addressof(_USED_NAME))  # consumed: its deleter is ours now
    return DLPackArray(address, obj)


def import_argument(value: Any) -> Any:
    """An argument with `__dlpack_device__`: a numpy array (no copy) when it is in host memory, a
    DLPackArray when it is in device memory."""
    device_type = int(value.__dlpack_device__()[0])
    if device_type in (KDLCPU, KDLCUDAHOST):
        if type(value).__module__.startswith("torch"):
            return _torch_host_array(value)
        try:
            return np.from_dlpack(value)
        except (BufferError, TypeError, RuntimeError, ValueError):
            return np.asarray(value)  # a type numpy's DLPack import lacks (bf16): the producer's own conversion
    # 1 = the legacy default stream, which the runtime's (blocking) stream is ordered after.
    return import_dlpack(value, stream=1 if device_type == KDLCUDA else None)


def _torch_host_array(tensor: Any) -> np.ndarray:
    """A PyTorch tensor in host memory as a numpy array without a copy: detached from autograd
    (numpy refuses a tensor that requires grad), and bf16 and the f8 types, which numpy's DLPack
    import lacks, through an integer view of their bits as ml_dtypes' types."""
    tensor = tensor.detach()
    narrow = _torch_narrow_types().get(tensor.dtype)
    if narrow is not None:
        bits, dtype = narrow
        return tensor.view(bits).numpy().view(dtype)
    return tensor.numpy()


@functools.cache
def _torch_narrow_types() -> dict:
    """PyTorch's bf16 and f8 dtypes -> (the integer dtype of their bits, ml_dtypes' type)."""
    import torch

    narrow = {torch.bfloat16: (torch.int16, ml_dtypes.bfloat16)}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        if hasattr(torch, name) and hasattr(ml_dtypes, name):
            narrow[getattr(torch, name)] = (torch.uint8, getattr(ml_dtypes, name))
    return narrow


# -- layouts and results ---------------------------------------------------------------------------

def compact_strides(dims: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of `dims`."""
    strides, step = [], 1
    for n in reversed(dims):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def layout_strides(shape: Shape) -> tuple[int, ...]:
    """Element strides, per logical dimension, of an array of `shape` stored in its layout's order."""
    strides = [0] * shape.rank
    step = 1
    for d in shape.minor_to_major:
        strides[d] = step
        step *= max(shape.dims[d], 1)
    return tuple(strides)


class DeviceArray:
    """A result left in device memory (module doc): `shape` and `dtype` are the logical array's,
    stored in the layout of `hlo_shape` at `ptr`. `numpy()` (or `np.asarray`) copies it to the host."""

    def __init__(self, device: Any, buffer: Any, offset: int, shape: Shape):
        self.device = device
        self.buffer = buffer  # keeps the memory alive
        self.ptr = buffer.ptr + offset
        self.hlo_shape = shape
        self.shape = tuple(shape.dims)
        self.dtype = shape.dtype
        self.strides = layout_strides(shape)  # in elements

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nbytes(self) -> int:
        return self.hlo_shape.byte_size()

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device.dlpack_device

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        # The run that made this array synchronized its stream: any consumer stream may read it.
        if dl_device is not None and tuple(dl_device) != tuple(self.device.dlpack_device):
            raise BufferError(f"the array is on DLPack device {self.device.dlpack_device}, not {tuple(dl_device)}")
        if copy:
            raise BufferError("DeviceArray exports its memory without a copy only (copy=True asked)")
        version = None
        if max_version is not None and tuple(max_version) >= (1, 0):
            version = (1, 1) if tuple(max_version) >= (1, 1) else (1, 0)
        return make_capsule(self, self.ptr, self.shape, self.strides, self.dtype, self.device.dlpack_device, version)

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device.dlpack_device[0] != KDLCUDA:
            raise AttributeError("__cuda_array_interface__: the array is not in CUDA memory")
        if self.dtype.kind == "V" or self.dtype not in _CODES or self.dtype.type.__module__ == "ml_dtypes":
            raise AttributeError(f"__cuda_array_interface__ has no type string for {self.dtype}")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": tuple(s * self.dtype.itemsize for s in self.strides), "stream": None}

    def numpy(self) -> np.ndarray:
        from hlocc.runtime.thunks import aligned_bytes, logical_array

        host = aligned_bytes(self.nbytes)
        if host.size:
            self.device.download(host, self.ptr)
        return logical_array(host, self.hlo_shape)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        kind, index = self.device.dlpack_device
        return f"DeviceArray({self.hlo_shape}, {DEVICE_NAMES.get(kind, kind)}:{index})"


__all__ = ["KDLCPU", "KDLCUDA", "DLPackArray", "DeviceArray", "compact_strides", "import_argument", "import_dlpack",
           "layout_strides", "make_capsule"]
