"""The machine a kernel is emitted for, as far as emitters care (DESIGN "One kernel model").

Emitters read launch parameters from a `Target`: the GPU targets reproduce XLA's choices
(xla_facts.md §4.4: 128 threads per block for loop fusions, unroll ≤ 4, warp 32); the CPU target
picks what is fast when blocks run on a thread pool and the threads of a block are an inner loop:
one "thread" handles a whole SIMD register of elements, and a block is a few thousand elements so
that the pool's per-task overhead is amortised.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    name: str
    kind: str  # "cpu" or "gpu"
    warp_size: int
    threads_per_block: int  # for loop fusions
    max_unroll: int  # elements per thread in the loop emitter (XLA's unroll factor)
    vector_bytes: int  # widest load/store the loop emitter aims for per thread
    max_threads_per_block: int = 1024
    max_blocks_x: int = 2**31 - 1
    shared_memory_bytes: int = 48 * 1024  # static shared memory of a block (what fusion heuristics plan with)
    max_shared_memory_bytes: int = 48 * 1024  # with the launch's opt-in (dynamic shared memory beyond 48 KiB)
    num_cores: int = 1  # SMs on a GPU, cores on a CPU
    has_fma: bool = False  # fused multiply-add: math approximations take XLA:CPU's FMA variants
    check_bounds: bool = False  # kernels check every access against its buffer (transforms/check_bounds.py)

    def loop_elements_per_thread(self, num_elements: int, smallest_bits: int, largest_bits: int) -> int:
        """Elements each thread writes in a loop fusion: XLA's unroll factor on a GPU (a power of
        two ≤ max_unroll dividing N, only when the grid would be large), a full vector register on
        the CPU; at least enough that sub-byte outputs are written in whole bytes."""
        if self.kind == "cpu":
            n = max(1, min(self.max_unroll, self.vector_bytes * 8 // max(largest_bits, 8)))
        else:
            n = 1
            if num_elements >= self.threads_per_block * self.num_cores * 16:
                n = self.max_unroll
                while n > 1 and num_elements % n:
                    n //= 2
        while n * smallest_bits < 8:
            n *= 2
        return n


OPT_IN_SHARED_MEMORY_KIB = {70: 96, 72: 48, 75: 64, 80: 163, 86: 99, 87: 163, 89: 99, 90: 227, 100: 227,
                            120: 99}
"""Shared memory a block may have per compute capability once its kernel opts in
(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; CUDA C++ Programming Guide, compute capabilities
table); an arch not listed gets the 48 KiB every arch has without it."""


def gpu_target(sm_count: int = 132, name: str = "sm_90") -> Target:
    """An NVIDIA GPU as XLA's loop emitter sees it (H100 by default). Every NVIDIA GPU has a fused
    multiply-add (`fma.rn`): math functions take their FMA expansions (XLA:GPU contracts to FMA as
    well); the H200's softmax ran its exp as 35 separately rounded mul.rn/add.rn without it."""
    digits = name[3:].removesuffix("a")  # sm_90a: sm_90 with its arch-specific features (wgmma)
    capability = int(digits) if name.startswith("sm_") and digits.isdigit() else 0
    return Target(name=name, kind="gpu", warp_size=32, threads_per_block=128, max_unroll=4, vector_bytes=16,
                  max_blocks_x=2**31 - 1, shared_memory_bytes=48 * 1024,
                  max_shared_memory_bytes=OPT_IN_SHARED_MEMORY_KIB.get(capability, 48) * 1024,
                  num_cores=sm_count, has_fma=True)


def cpu_target() -> Target:
    """The host CPU. Warp size 1 (no lanes to shuffle across); 64-byte vectors (AVX-512 width; on
    narrower machines LLVM splits them: on an AVX2 host, 32-byte vectors moved the JAX corpus's
    programs both ways within the VM's noise, bf16 GELU 0.77x, convert_image_preproc 2.6x, the
    latter now had by the loop emitter's narrow rows; the matmul micro-kernel does follow the
    host's registers, `vector_isa`). Up to 32 elements per
    thread: a bf16/f16 thread's 64 bytes are two f32 registers of compute, two independent chains
    that keep a core busy through the latency of the per-op roundings (bf16 GELU 1.2x faster)."""
    return Target(name="host", kind="cpu", warp_size=1, threads_per_block=64, max_unroll=32, vector_bytes=64,
                  max_threads_per_block=1024, shared_memory_bytes=1 << 20, num_cores=os.cpu_count() or 1,
                  has_fma=_host_has_fma())


@dataclass(frozen=True)
class VectorIsa:
    """A CPU's vector registers as the matmul micro-kernel counts them (codegen/schedule): the f32
    lanes of one register, how many registers there are, and whether bf16 pairs have a dot-product
    instruction into f32 (vdpbf16ps, AVX512_BF16). The register block MR x NR, the packed panels'
    vectors and the schedules a tuner may try all follow from it, so that an AVX2 machine gets
    blocks of ymm registers that fit its 16 (not AVX-512's 6 x 64, which LLVM would split into 48
    ymm accumulators and spill)."""

    name: str
    lanes: int
    registers: int
    bf16_dot: bool = False


AVX512_BF16 = VectorIsa("avx512+bf16", 16, 32, True)
AVX512 = VectorIsa("avx512", 16, 32)
AVX2 = VectorIsa("avx2", 8, 16)
SSE = VectorIsa("sse", 4, 16)
NEON = VectorIsa("neon", 4, 32)
VECTOR_ISAS = {isa.name: isa for isa in (AVX512_BF16, AVX512, AVX2, NEON, SSE)}
"""Every `VectorIsa` by name (`hlocc opt --vector-isa`)."""


@functools.cache
def host_vector_isa() -> VectorIsa:
    """The host's `VectorIsa`, from the features LLVM reports for it (what the JIT compiles for):
    AVX-512 (with or without its bf16 dot), AVX or AVX2, NEON, else SSE's 4 lanes."""
    import llvmlite.binding as llvm

    features = llvm.get_host_cpu_features()
    if features.get("avx512f", False):
        return AVX512_BF16 if features.get("avx512bf16", False) else AVX512
    if features.get("avx", False):
        return AVX2
    if features.get("neon", False):  # AArch64: 32 registers of 128 bits
        return NEON
    return SSE


_ISA = threading.local()


def vector_isa() -> VectorIsa:
    """The `VectorIsa` kernels are emitted for in this thread: the host's, or the one in force
    through `use_vector_isa`."""
    return getattr(_ISA, "isa", None) or host_vector_isa()


@contextmanager
def use_vector_isa(isa: VectorIsa) -> Iterator[None]:
    """Emit matmul kernels for `isa` in this thread inside the block: tests that check the code for
    another CPU (the object code is still compiled for the host, so run it only where the host has
    `isa`). Like a forced schedule, not part of the kernel caches' keys: compile with the cache off."""
    saved = getattr(_ISA, "isa", None)
    _ISA.isa = isa
    try:
        yield
    finally:
        _ISA.isa = saved


@functools.cache
def _host_has_fma() -> bool:
    import llvmlite.binding as llvm

    return bool(llvm.get_host_cpu_features().get("fma", False))
