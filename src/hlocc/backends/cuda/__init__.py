"""The `cuda` backend: the runtime's thunks on a device (executable.py, memory.py), the CUDA driver
(driver.py: CudaDevice, cuda_available), the SimulatedDevice that runs the same path without a
GPU (device.py), cuBLAS gemms (library.py), DLPack arrays in and out (dlpack.py) and fusions
compiled to PTX (ptx.py). Nothing here imports the CUDA packages until a CudaDevice is made."""
