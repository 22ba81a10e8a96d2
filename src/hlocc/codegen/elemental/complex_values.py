"""Complex values in kernel IR: taking one apart into its real and imaginary parts, building one from
its parts, and complex constants (`complex<fN>` values; complex.create/re/im)."""

from __future__ import annotations

from xdsl.dialects import complex as cx
from xdsl.dialects.builtin import ComplexType
from xdsl.ir import SSAValue

from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.math.float_builder_xdsl import complex_parts


def parts(b: KernelBuilder, z: SSAValue) -> tuple[SSAValue, SSAValue]:
    return complex_parts(z, b.insert)


def create(b: KernelBuilder, re: SSAValue, im: SSAValue) -> SSAValue:
    return b.add(cx.CreateOp(re, im, ComplexType(re.type)))


def constant(b: KernelBuilder, re: float, im: float, like: SSAValue) -> SSAValue:
    part = like.type.element_type
    return create(b, b.constant(re, part), b.constant(im, part))
