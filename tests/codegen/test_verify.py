"""codegen/verify.py: `verify_ir` raises where xDSL's `module.verify()` raises, with the same message,
though it checks each signature of a region-free op once."""

from __future__ import annotations

import pytest
from xdsl.dialects import arith
from xdsl.dialects.builtin import i32
from xdsl.utils.exceptions import VerifyException

from hlocc.codegen.context import parse_module
from hlocc.codegen.verify import verify_ir

KERNEL = """
func.func @f(%a: f32, %b: f32, %n: index) -> f32 {
  %c = arith.addf %a, %b : f32
  %d = arith.addf %c, %b : f32
  %zero = arith.constant 0 : index
  %one = arith.constant 1 : index
  %r = scf.for %i = %zero to %n step %one iter_args(%acc = %d) -> (f32) {
    %e = arith.addf %acc, %b : f32
    %f = arith.mulf %e, %e : f32
    scf.yield %f : f32
  }
  func.return %r : f32
}
"""


def _errors(module) -> tuple[str, str]:
    """The messages of xDSL's verifier and of verify_ir on `module`."""
    messages = []
    for verify in (lambda: module.verify(), lambda: verify_ir(module)):
        with pytest.raises((VerifyException, ValueError)) as e:
            verify()
        messages.append(str(e.value))
    return messages[0], messages[1]


def _adds(module) -> list[arith.AddfOp]:
    return [op for op in module.walk() if isinstance(op, arith.AddfOp)]


def test_a_valid_kernel_verifies():
    verify_ir(parse_module(KERNEL))


@pytest.mark.parametrize("which", [0, 1, 2], ids=["first", "repeated", "in-a-loop"])
def test_a_wrong_result_type_is_found_wherever_its_op_is(which):
    """The second and third adds have the first one's signature until one is broken: the broken one
    has a signature of its own, verified in full."""
    module = parse_module(KERNEL)
    _adds(module)[which].results[0]._type = i32
    full, memo = _errors(module)
    assert memo == full
    assert "i32" in memo


def test_an_erased_operand_of_a_repeated_op_is_found():
    """The third add has the first one's signature (checked once), and reads the second, erased."""
    module = parse_module("""
func.func @f(%a: f32, %b: f32) -> f32 {
  %c = arith.addf %a, %b : f32
  %d = arith.addf %c, %b : f32
  %e = arith.addf %d, %b : f32
  func.return %e : f32
}""")
    verify_ir(module)
    second = _adds(module)[1]
    second.detach()
    second.erase(safe_erase=False)
    full, memo = _errors(module)
    assert memo == full == "Erased SSA value is used by the operation"


def test_an_empty_loop_body_is_found():
    module = parse_module(KERNEL)
    loop_body = next(op for op in module.walk() if op.name == "scf.for").body.block
    for op in reversed(list(loop_body.ops)):
        op.detach()
        op.erase(safe_erase=False)
    full, memo = _errors(module)
    assert memo == full
