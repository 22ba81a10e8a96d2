"""Stand-ins for arith ops under the `xla` prefix: `remf` (which xDSL 0.74's arith dialect lacks) and
the compares, select and integer/int<->float casts on vectors (`cmpf`, `cmpi`, `select`, `extui`,
`extsi`, `trunci`, `sitofp`, `uitofp`, `fptosi`, `fptoui`), whose vector forms xDSL 0.74's arith
dialect does not verify. `VECTOR_FORMS` maps each arith op to its stand-in; scalar code keeps the
arith ops."""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import AnyFloat, AnyFloatConstr, IntegerAttr, IntegerType, VectorType, i1, i64
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AnyAttr,
    IRDLOperation,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure
from xdsl.utils.exceptions import VerifyException

from hlocc.codegen.ir.syntax import print_values

# -- remf -----------------------------------------------------------------------------------------

@irdl_op_definition
class RemFOp(IRDLOperation):
    """Float remainder with the sign of the dividend (C's fmod; HLO `remainder` on floats): MLIR's
    `arith.remf`, which xDSL 0.74's arith dialect lacks. Lowered to LLVM's `frem`."""

    name = "xla.remf"

    T: ClassVar = VarConstraint("T", AnyFloatConstr | base(VectorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[lhs, rhs], result_types=[SSAValue.get(lhs).type])


# -- elementwise compares, select and casts on scalars or vectors ---------------------------------

def _shape_of(t: Attribute) -> tuple[int, ...] | None:
    """The shape of a vector type, None for a scalar."""
    return tuple(t.get_shape()) if isinstance(t, VectorType) else None


def _element_of(t: Attribute) -> Attribute:
    return t.get_element_type() if isinstance(t, VectorType) else t


def _shaped(element: Attribute, shape: tuple[int, ...] | None) -> Attribute:
    return element if shape is None else VectorType(element, shape)


def _is_int(t: Attribute) -> bool:
    return isinstance(t, IntegerType)


def _is_float(t: Attribute) -> bool:
    return isinstance(t, AnyFloat)


class _CompareOp(IRDLOperation):
    """Elementwise comparison of two scalars or two vectors of the same type; the result is i1, or a
    vector of i1 of the operands' shape. `predicate` holds arith's encoding (`PREDICATES[k]`)."""

    PREDICATES: ClassVar[tuple[str, ...]]
    ELEMENT_KIND: ClassVar[str]

    T: ClassVar = VarConstraint("T", AnyAttr())
    predicate = prop_def(IntegerAttr)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, lhs: SSAValue | Operation, rhs: SSAValue | Operation, predicate: int | str):
        lhs = SSAValue.get(lhs)
        if isinstance(predicate, str):
            if predicate not in self.PREDICATES:
                raise VerifyException(f"'{self.name}' unknown predicate '{predicate}'; known: "
                                      f"{', '.join(self.PREDICATES)}")
            predicate = self.PREDICATES.index(predicate)
        super().__init__(operands=[lhs, rhs], result_types=[_shaped(i1, _shape_of(lhs.type))],
                         properties={"predicate": IntegerAttr(predicate, i64)})

    @property
    def predicate_name(self) -> str:
        return self.PREDICATES[self.predicate.value.data]

    def verify_(self) -> None:
        ty = self.lhs.type
        check = _is_float if self.ELEMENT_KIND == "float" else _is_int
        if not check(_element_of(ty)):
            raise VerifyException(f"'{self.name}' operands must be {self.ELEMENT_KIND}s or vectors of them, "
                                  f"found {ty}")
        if not 0 <= self.predicate.value.data < len(self.PREDICATES):
            raise VerifyException(f"'{self.name}' predicate {self.predicate.value.data} is out of range")
        expected = _shaped(i1, _shape_of(ty))
        if self.result.type != expected:
            raise VerifyException(f"'{self.name}' result must be {expected} for operands of type {ty}, "
                                  f"found {self.result.type}")

    @classmethod
    def parse(cls, parser: Parser) -> _CompareOp:
        start = parser.pos
        predicate = parser.parse_identifier()
        if predicate not in cls.PREDICATES:
            parser.raise_error(f"unknown predicate '{predicate}' of {cls.name}; known: {', '.join(cls.PREDICATES)}",
                               start, parser.pos)
        parser.parse_punctuation(",")
        lhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        rhs = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        pos = parser.pos
        ty = parser.parse_type()
        lhs, rhs = parser.resolve_operands([lhs, rhs], [ty, ty], pos)
        op = cls(lhs, rhs, predicate)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.predicate_name}, ")
        print_values(printer, [self.lhs, self.rhs])
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.lhs.type)


@irdl_op_definition
class CmpfOp(_CompareOp):
    """`arith.cmpf` for vectors too (`xla.cmpf olt, %a, %b : vector<16xf32>`): xDSL 0.74 verifies
    only an i1 result. Ordered predicates are false and unordered ones true when a lane is NaN."""

    name = "xla.cmpf"
    PREDICATES: ClassVar = tuple(arith.CMPF_COMPARISON_OPERATIONS)
    ELEMENT_KIND: ClassVar = "float"


@irdl_op_definition
class CmpiOp(_CompareOp):
    """`arith.cmpi` for vectors too (`xla.cmpi slt, %a, %b : vector<16xi32>`): xDSL 0.74 verifies
    only an i1 result."""

    name = "xla.cmpi"
    PREDICATES: ClassVar = tuple(arith.CMPI_COMPARISON_OPERATIONS)
    ELEMENT_KIND: ClassVar = "integer"


@irdl_op_definition
class SelectOp(IRDLOperation):
    """`arith.select` with a vector condition too: lane k of the result is lane k of `lhs` where the
    condition's lane k is 1, else of `rhs` (a scalar condition picks whole values). xDSL 0.74
    verifies only an i1 condition. `xla.select %c, %a, %b : vector<16xi1>, vector<16xf32>`."""

    name = "xla.select"

    T: ClassVar = VarConstraint("T", AnyAttr())
    cond = operand_def()
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    traits = traits_def(Pure())

    assembly_format = "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($result)"

    def __init__(self, cond: SSAValue | Operation, lhs: SSAValue | Operation, rhs: SSAValue | Operation):
        super().__init__(operands=[cond, lhs, rhs], result_types=[SSAValue.get(lhs).type])

    def verify_(self) -> None:
        cond = self.cond.type
        if cond != i1 and cond != _shaped(i1, _shape_of(self.result.type)):
            raise VerifyException(f"'{self.name}' condition must be i1 or a vector of i1 of the result's shape, "
                                  f"found {cond} for {self.result.type}")


class _CastOp(IRDLOperation):
    """An elementwise conversion of a scalar or a vector (the result has the input's shape) between
    the element kinds `KINDS` ('integer' or 'float'); between integers the result is `WIDER` or
    narrower than the input."""

    KINDS: ClassVar[tuple[str, str]]
    WIDER: ClassVar[bool | None] = None

    input = operand_def()
    result = result_def()

    traits = traits_def(Pure())

    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue | Operation, result_type: Attribute):
        super().__init__(operands=[input], result_types=[result_type])

    def verify_(self) -> None:
        src, dst = self.input.type, self.result.type
        if _shape_of(src) != _shape_of(dst):
            raise VerifyException(f"'{self.name}' input {src} and result {dst} must have the same shape")
        a, b = _element_of(src), _element_of(dst)
        checks = {"integer": _is_int, "float": _is_float}
        if not (checks[self.KINDS[0]](a) and checks[self.KINDS[1]](b)):
            raise VerifyException(f"'{self.name}' converts {self.KINDS[0]}s to {self.KINDS[1]}s (or vectors of "
                                  f"them), found {src} to {dst}")
        if self.WIDER is not None and (b.width.data > a.width.data) != self.WIDER:
            raise VerifyException(f"'{self.name}' result element must be {'wider' if self.WIDER else 'narrower'} "
                                  f"than the input's, found {src} to {dst}")


class _IntegerResizeOp(_CastOp):
    KINDS: ClassVar = ("integer", "integer")


class _IntegerToFloatOp(_CastOp):
    """Rounded to nearest even."""

    KINDS: ClassVar = ("integer", "float")


class _FloatToIntegerOp(_CastOp):
    """Toward zero; poison where the value does not fit (LLVM's fptosi/fptoui)."""

    KINDS: ClassVar = ("float", "integer")


@irdl_op_definition
class ExtUIOp(_IntegerResizeOp):
    """`arith.extui` (zero extension) for vectors too."""

    name = "xla.extui"
    WIDER: ClassVar = True


@irdl_op_definition
class ExtSIOp(_IntegerResizeOp):
    """`arith.extsi` (sign extension) for vectors too."""

    name = "xla.extsi"
    WIDER: ClassVar = True


@irdl_op_definition
class TruncIOp(_IntegerResizeOp):
    """`arith.trunci` (keeps the low bits) for vectors too."""

    name = "xla.trunci"
    WIDER: ClassVar = False


@irdl_op_definition
class SIToFPOp(_IntegerToFloatOp):
    """`arith.sitofp` for vectors too."""

    name = "xla.sitofp"


@irdl_op_definition
class UIToFPOp(_IntegerToFloatOp):
    """`arith.uitofp` for vectors too."""

    name = "xla.uitofp"


@irdl_op_definition
class FPToSIOp(_FloatToIntegerOp):
    """`arith.fptosi` for vectors too."""

    name = "xla.fptosi"


@irdl_op_definition
class FPToUIOp(_FloatToIntegerOp):
    """`arith.fptoui` for vectors too."""

    name = "xla.fptoui"


VECTOR_FORMS: dict[type[Operation], type[Operation]] = {
    arith.CmpfOp: CmpfOp, arith.CmpiOp: CmpiOp, arith.SelectOp: SelectOp,
    arith.ExtUIOp: ExtUIOp, arith.ExtSIOp: ExtSIOp, arith.TruncIOp: TruncIOp,
    arith.SIToFPOp: SIToFPOp, arith.UIToFPOp: UIToFPOp, arith.FPToSIOp: FPToSIOp, arith.FPToUIOp: FPToUIOp,
}  # fmt: skip
"""The arith ops whose vector forms xDSL 0.74 does not verify, and the `xla` op that stands in for
each on vectors (same operands, properties and semantics). Scalar code keeps the arith ops."""
