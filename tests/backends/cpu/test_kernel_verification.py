"""The CPU compile path's kernel verification (codegen/pipeline.py): outside tests the kernel passes'
result is not verified by xDSL, LLVM's checks stand in, and a broken pass still fails the compile
with the kernel named; `HLOCC_VERIFY_KERNELS=1` (which tests/conftest.py sets) verifies it."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

import hlocc.backends.cpu.kernel as cpu_kernel
from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen import transforms
from hlocc.codegen.context import KernelIRError
from hlocc.hlo.parser import parse_hlo

HLO = """HloModule m
ENTRY e {
  a = f32[64] parameter(0)
  b = f32[64] parameter(1)
  m = f32[64] multiply(a, b)
  ROOT s = f32[64] add(m, b)
}"""


class _MismatchedOperand(ModulePass):
    """A broken pass: the first `arith.addf`'s left operand becomes an earlier value of another type
    (an index computation of its loop body)."""

    name = "test-mismatched-operand"

    def apply(self, ctx, module: ModuleOp) -> None:
        add = next(o for o in module.walk() if isinstance(o, arith.AddfOp))
        other = next(r for o in add.parent_block().ops if o.is_before_in_block(add)
                     for r in o.results if r.type != add.lhs.type)
        add.operands = [other, add.rhs]


@pytest.fixture
def broken_pipeline(monkeypatch):
    """Every CPU kernel's pipeline ends with `_MismatchedOperand`."""
    monkeypatch.setitem(transforms.PASSES, _MismatchedOperand.name, _MismatchedOperand)
    pipeline_for = cpu_kernel.pipeline_for
    monkeypatch.setattr(cpu_kernel, "pipeline_for", lambda *a: pipeline_for(*a) + (_MismatchedOperand.name,))


def _fusion():
    return parse_hlo(HLO).entry


def test_unverified_kernel_compiles_without_xdsl_verification(monkeypatch):
    monkeypatch.delenv("HLOCC_VERIFY_KERNELS", raising=False)
    monkeypatch.delenv("HLOCC_VERIFY_EACH_PASS", raising=False)

    def refuse(self, *args, **kwargs):
        raise AssertionError("the kernel IR was verified")

    monkeypatch.setattr(ModuleOp, "verify", refuse)
    kernel = compile_fusion(_fusion(), use_cache=False)
    a, b = np.arange(64, dtype=np.float32), np.full(64, 2.0, np.float32)
    np.testing.assert_array_equal(kernel(a, b)[0], a * b + b)


def test_broken_pass_without_verification_names_the_kernel(monkeypatch, broken_pipeline):
    monkeypatch.delenv("HLOCC_VERIFY_KERNELS", raising=False)
    monkeypatch.delenv("HLOCC_VERIFY_EACH_PASS", raising=False)
    with pytest.raises(KernelIRError, match=r"kernel e: its translation to LLVM failed \(ValueError: "
                                            r"Operands must be the same type.*HLOCC_VERIFY_KERNELS=1"):
        compile_fusion(_fusion(), use_cache=False)


def test_broken_pass_with_verification_names_the_pass(monkeypatch, broken_pipeline):
    monkeypatch.setenv("HLOCC_VERIFY_KERNELS", "1")
    with pytest.raises(KernelIRError, match=r"kernel pass 'test-mismatched-operand' \(or an earlier pass.*operand 'lhs'"):
        compile_fusion(_fusion(), use_cache=False)
