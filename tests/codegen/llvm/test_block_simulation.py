"""The CPU execution of shared memory, barriers and warp shuffles (codegen/llvm/block_simulation.py):
hand-written GPU-form kernels, lowered with the GPU pipeline and run on the CPU, against numpy.

Each kernel is a function of its thread and block ids only, so the expected result follows from
the GPU semantics: a barrier orders every thread's writes before any thread's reads, a butterfly
shuffle over 2·d lanes gives each lane the reduction of its group.
"""

from __future__ import annotations

import numpy as np
import pytest

from hlocc.analysis.launch import LaunchDims
from hlocc.backends.cpu.kernel import compile_kernel_module
from hlocc.codegen.emitters.base import KernelModule
from hlocc.codegen.llvm import TranslationError
from hlocc.codegen.target import gpu_target
from hlocc.hlo.parser import parse_shape
from hlocc.tools.opt import parse_module

REVERSE_AND_SUM = """
func.func private @add(%a: f32, %b: f32) -> f32 {
  %r = arith.addf %a, %b : f32
  func.return %r : f32
}
func.func @main(%x: tensor<2x64xf32>, %y: tensor<2x64xf32>, %z: tensor<2x2xf32>) -> (tensor<2x64xf32>, tensor<2x2xf32>) {
  %t = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 63 : index]} : () -> index
  %b = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 1 : index]} : () -> index
  %v = tensor.extract %x[%b, %t] : tensor<2x64xf32>
  %s = xla.allocate_shared : tensor<64xf32>
  %s1 = tensor.insert %v into %s[%t] : tensor<64xf32>
  %s2 = xla.sync_threads %s1 : tensor<64xf32>
  %j = xla.apply_indexing #xla.indexing_map<"(t) -> (63 - t), domain: t in [0, 63]">(%t)
  %w = tensor.extract %s2[%j] : tensor<64xf32>
  %y1 = tensor.insert %w into %y[%b, %t] : tensor<2x64xf32>
  %r = xla.shuffle_reduce @add(%v) to 16 : f32
  %c0 = arith.constant 0 : index
  %lane, %warp = xla.apply_indexing #xla.indexing_map<"(t) -> (t mod 32, t floordiv 32), domain: t in [0, 63]">(%t)
  %first = arith.cmpi eq, %lane, %c0 : index
  %z1 = xla.predicated_insert %r into %z[%b, %warp] if %first : tensor<2x2xf32>
  func.return %y1, %z1 : tensor<2x64xf32>, tensor<2x2xf32>
}
"""


def compile_text(text: str, shapes: list[str], num_params: int, launch: LaunchDims):
    module = parse_module(text)
    kernel = KernelModule(module, "main", launch, num_params, len(shapes) - num_params)
    parsed = [parse_shape(s) for s in shapes]
    return compile_kernel_module(kernel, gpu_target(), parsed[:num_params], parsed[num_params:])


def test_barrier_orders_shared_memory_and_shuffle_reduces_each_warp():
    kernel = compile_text(REVERSE_AND_SUM, ["f32[2,64]", "f32[2,64]", "f32[2,2]"], 1, LaunchDims(64, 2))
    x = np.random.default_rng(0).standard_normal((2, 64)).astype(np.float32)
    y, z = kernel(x)
    np.testing.assert_array_equal(y, x[:, ::-1])
    np.testing.assert_allclose(z, x.reshape(2, 2, 32).sum(-1), rtol=1e-5)



LOOP_WITH_BARRIERS = """
func.func @main(%x: tensor<64xf32>, %y: tensor<64xf32>) -> tensor<64xf32> {
  %t = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 63 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 3 : index
  %s = xla.allocate_shared : tensor<64xf32>
  %v = tensor.extract %x[%t] : tensor<64xf32>
  %j = xla.apply_indexing #xla.indexing_map<"(t) -> (63 - t), domain: t in [0, 63]">(%t)
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %v, %sh = %s) -> (f32, tensor<64xf32>) {
    %s1 = tensor.insert %a into %sh[%t] : tensor<64xf32>
    %s2 = xla.sync_threads %s1 : tensor<64xf32>
    %w = tensor.extract %s2[%j] : tensor<64xf32>
    %a2 = arith.addf %a, %w : f32
    %s3 = xla.sync_threads %s2 : tensor<64xf32>
    scf.yield %a2, %s3 : f32, tensor<64xf32>
  }
  %y1 = tensor.insert %r#0 into %y[%t] : tensor<64xf32>
  func.return %y1 : tensor<64xf32>
}
"""


def test_a_loop_with_barriers_is_fissioned_and_keeps_each_threads_values():
    kernel = compile_text(LOOP_WITH_BARRIERS, ["f32[64]", "f32[64]"], 1, LaunchDims(64, 1))
    x = np.arange(64, dtype=np.float32) ** 2
    expected = x.copy()
    for _ in range(3):
        expected = expected + expected[::-1]
    np.testing.assert_array_equal(np.asarray(kernel(x)).reshape(64), expected)


BARRIER_UNDER_IF = """
func.func @main(%x: tensor<64xf32>) -> tensor<64xf32> {
  %t = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 63 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %s = xla.allocate_shared : tensor<64xf32>
  %first = arith.cmpi eq, %t, %c0 : index
  %r = scf.if %first -> (tensor<64xf32>) {
    %b = xla.sync_threads %s : tensor<64xf32>
    scf.yield %b : tensor<64xf32>
  } else {
    scf.yield %s : tensor<64xf32>
  }
  %v = tensor.extract %r[%t] : tensor<64xf32>
  %y = tensor.insert %v into %x[%t] : tensor<64xf32>
  func.return %y : tensor<64xf32>
}
"""


def test_a_barrier_under_an_if_is_refused_with_its_place():
    with pytest.raises(TranslationError, match="'gpu.barrier' inside 'scf.if'.*top level"):
        compile_text(BARRIER_UNDER_IF, ["f32[64]"], 0, LaunchDims(64, 1))
