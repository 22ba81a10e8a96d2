"""Pieces the `xla` dialect's ops share: the indexing-map attribute, parse/print helpers for the
ops' custom syntax, verifier helpers, and the `xla.yield` terminator (of `loop` and `atomic_rmw`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    AnyFloatConstr,
    IndexType,
    SymbolRefAttr,
    TensorType,
    VectorType,
)
from xdsl.ir import Attribute, Block, Data, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, SymbolTable
from xdsl.utils.exceptions import VerifyException

from hlocc.analysis.affine_expr import IndexingError
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text, parse_indexing_map

INDEX = IndexType()


# -- the indexing-map attribute -------------------------------------------------------------------

@irdl_attr_definition
class IndexingMapAttr(Data[IndexingMap]):
    """An hlocc IndexingMap as an attribute: `#xla.indexing_map<"(d0)[s0] -> (...), domain: ...">`."""

    name = "xla.indexing_map"

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> IndexingMap:
        with parser.in_angle_brackets():
            start = parser.pos
            text = parser.parse_str_literal("indexing map")
            while (more := parser.parse_optional_str_literal()) is not None:
                text += more
            try:
                return parse_indexing_map(text)
            except IndexingError as e:
                parser.raise_error(f"invalid indexing map: {e}", start, parser.pos)

    def print_parameter(self, printer: Printer) -> None:
        with printer.in_angle_brackets():
            printer.print_string_literal(map_to_text(self.data))

    @property
    def indexing_map(self) -> IndexingMap:
        return self.data


def _map_attr(m: IndexingMap | IndexingMapAttr) -> IndexingMapAttr:
    return m if isinstance(m, IndexingMapAttr) else IndexingMapAttr(m)


# -- shared parsing / printing helpers ------------------------------------------------------------

def _parse_operand_list(parser: Parser, delimiter: Parser.Delimiter) -> list[UnresolvedOperand]:
    return parser.parse_comma_separated_list(delimiter, parser.parse_unresolved_operand)


def _parse_index_operands(parser: Parser, delimiter: Parser.Delimiter, optional: bool = False) -> list[SSAValue]:
    """A delimited list of `index` operands; with `optional`, an absent list is an empty one."""
    pos = parser.pos
    if optional:
        operands = parser.parse_optional_comma_separated_list(delimiter, parser.parse_unresolved_operand) or []
    else:
        operands = _parse_operand_list(parser, delimiter)
    return list(parser.resolve_operands(operands, [INDEX] * len(operands), pos))


def _parse_types(parser: Parser) -> list[Attribute]:
    """`type (, type)*`."""
    return parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)


def _print_values(printer: Printer, values: Sequence[SSAValue], open_: str = "", close: str = "") -> None:
    printer.print_string(open_)
    printer.print_list(values, printer.print_ssa_value)
    printer.print_string(close)


def _print_assignment(printer: Printer, arg: SSAValue, value: SSAValue) -> None:
    printer.print_ssa_value(arg)
    printer.print_string(" = ")
    printer.print_ssa_value(value)


def _print_types(printer: Printer, types: Sequence[Attribute]) -> None:
    printer.print_list(types, printer.print_attribute)


def _tensor(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, found {value.type}")
    return value.type


def _check_indices(tensor_type: TensorType, indices: Sequence[SSAValue], op_name: str) -> None:
    if len(indices) != tensor_type.get_num_dims():
        raise VerifyException(f"'{op_name}' expects {tensor_type.get_num_dims()} indices for {tensor_type}, "
                              f"found {len(indices)}")


def _lookup_function(op: Operation, callee: SymbolRefAttr):
    """The func.func `callee` names, or raise: XLA's PureCallOp::verifySymbolUses."""
    from xdsl.dialects.func import FuncOp

    found = SymbolTable.lookup_symbol(op, callee)
    if not isinstance(found, FuncOp):
        raise VerifyException(f"'{op.name}' refers to an undefined function: {callee}")
    return found


# -- yield ----------------------------------------------------------------------------------------

@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `xla.loop` (the next iter_args) and `xla.atomic_rmw`/`xla.atomic_update` (the
    new element)."""

    name = "xla.yield"

    values = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(*_yield_parents()), Pure()))

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


def _check_yield(block: Block, types: Sequence[Attribute], op_name: str) -> None:
    last = block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"'{op_name}' body must end with xla.yield")
    found = [v.type for v in last.values]
    if found != list(types):
        raise VerifyException(f"'{op_name}' yields ({', '.join(map(str, found))}) but expects "
                              f"({', '.join(map(str, types))})")



def _yield_parents():
    from hlocc.codegen.dialect import LoopOp
    from hlocc.codegen.dialect_parallel import AtomicRMWOp, AtomicUpdateOp

    return LoopOp, AtomicRMWOp, AtomicUpdateOp


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

