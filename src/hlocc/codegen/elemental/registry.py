"""The registries of elemental emission: `ELEMENTAL` and `ELEMENTAL_COMPLEX` (an opcode's scalar
emission on real and on complex values; filled by ops.py, complex.py and math_functions.py) and
`INDEX_OPS` (the ops emitted through indexing maps, filled by index_ops.py and
emitters/elemental_reduce.py), with the decorators that fill them and `emit_elementwise`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xdsl.ir import SSAValue

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import PrimitiveType

ScalarEmitter = Callable[[KernelBuilder, HloInstruction, Sequence[SSAValue]], SSAValue]
ELEMENTAL: dict[str, ScalarEmitter] = {}
"""Every elementwise opcode a kernel computes, on real types (pred, integers, floats)."""
ELEMENTAL_COMPLEX: dict[str, ScalarEmitter] = {}
"""The opcodes a kernel computes with complex operands or results (complex.py)."""


def _registrar(registry: dict[str, ScalarEmitter]):
    def register_in(*opcodes: str):
        def wrap(fn: ScalarEmitter) -> ScalarEmitter:
            for opcode in opcodes:
                registry[opcode] = fn
            return fn
        return wrap
    return register_in


register = _registrar(ELEMENTAL)
register_complex = _registrar(ELEMENTAL_COMPLEX)


def emit_elementwise(b: KernelBuilder, instr: HloInstruction, args: Sequence[SSAValue]) -> SSAValue:
    on_complex = any(op.shape.element_type.is_complex for op in instr.operands) or out_type(instr).is_complex
    fn = (ELEMENTAL_COMPLEX if on_complex else ELEMENTAL).get(instr.opcode)
    if fn is None:
        raise unsupported(instr, "on complex numbers" if on_complex else "")
    return fn(b, instr, args)


def in_type(instr: HloInstruction, k: int = 0) -> PrimitiveType:
    return instr.operand(k).shape.element_type


def out_type(instr: HloInstruction) -> PrimitiveType:
    return instr.shape.element_type


def unsupported(instr: HloInstruction, why: str = "") -> UnsupportedError:
    return UnsupportedError(f"unsupported: {instr.opcode}{' ' + why if why else ''} in a kernel "
                            f"(instruction '{instr.name}')")


INDEX_OPS: dict[str, Callable] = {}
"""Opcodes the element emitter computes through indexing maps: `fn(emitter, instr, indices)` returns
the instruction's scalars at the logical `indices`."""


def register_index_op(*opcodes: str):
    def wrap(fn):
        for opcode in opcodes:
            INDEX_OPS[opcode] = fn
        return fn
    return wrap
