"""The TMA and mbarrier ops of the kernel dialect (codegen/ir/tma_ops.py): their verifiers name the
cause of a malformed op."""

from __future__ import annotations

import pytest

from hlocc.codegen.context import KernelIRError, parse_module

HEAD = ("func.func @f(%a: tensor<64x64xbf16>, %t: tensor<8192xbf16>, %bars: tensor<4xi64>, %i: index, %p: i32) {\n")


def _verify(body: str) -> None:
    parse_module(HEAD + body + "\n  func.return\n}").verify()


def test_well_formed_ops_verify():
    _verify('''
  %map = xla.tensor_map %a {element = "bf16", dims = [64, 64], strides = [128], box = [64, 64], swizzle = 128 : i64} : tensor<64x64xbf16> -> !llvm.ptr
  %b1 = xla.mbarrier_init %bars[%i] count 1 : tensor<4xi64> -> tensor<4xi64>
  %b2 = xla.mbarrier_arrive_expect_tx %b1[%i] bytes 8192 : tensor<4xi64> -> tensor<4xi64>
  %t2 = xla.tma_load %map[%i, %i], %t[%i], %b2[%i] : !llvm.ptr, tensor<8192xbf16>, tensor<4xi64> -> tensor<8192xbf16>
  %t3 = xla.mbarrier_wait %b2[%i] parity %p(%t2) : tensor<4xi64>, i32, tensor<8192xbf16> -> tensor<8192xbf16>
  %b3 = xla.mbarrier_arrive %b2[%i] : tensor<4xi64> -> tensor<4xi64>''')


@pytest.mark.parametrize("body,message", ids=["map", "count", "bytes", "barrier_type", "coords"], argvalues=[
    ('%m = xla.tensor_map %a {element = "bf16", dims = [64, 64], strides = [100], box = [128, 64], swizzle = 128 : i64}'
     ' : tensor<64x64xbf16> -> !llvm.ptr',
     r"'xla.tensor_map' is not a valid tensor map: strides must be positive multiples of 16 bytes below 2\^40, found "
     r"\[100\]; the inner box dimension \(256 bytes\) must be at most the 128-byte swizzle span"),
    ("%b = xla.mbarrier_init %bars[%i] count 0 : tensor<4xi64> -> tensor<4xi64>",
     r"'xla.mbarrier_init' count must be in \[1, 2\^20 - 1\]"),
    ("%b = xla.mbarrier_arrive_expect_tx %bars[%i] bytes 2000000 : tensor<4xi64> -> tensor<4xi64>",
     r"'xla.mbarrier_arrive_expect_tx' bytes must be in \[0, 2\^20 - 1\] \(the tx-count's range\)"),
    ("%b = xla.mbarrier_arrive %t[%i] : tensor<8192xbf16> -> tensor<8192xbf16>",
     r"'xla.mbarrier_arrive' takes its mbarrier in a 1-d tensor of i64"),
    ('%m = xla.tensor_map %a {element = "bf16", dims = [64, 64], strides = [128], box = [64, 64], swizzle = 128 : i64}'
     ' : tensor<64x64xbf16> -> !llvm.ptr\n'
     "  %t2 = xla.tma_load %m[%i], %t[%i], %bars[%i] : !llvm.ptr, tensor<8192xbf16>, tensor<4xi64> -> tensor<8192xbf16>",
     r"'xla.tma_load' needs one coordinate per dimension of its tensor map \(2\), found 1"),
])
def test_verifiers_name_the_cause(body, message):
    with pytest.raises((KernelIRError, Exception), match=message):
        _verify("  " + body)
