"""Helpers the `xla` ops share for their custom syntax (parsing and printing operand and type
lists) and their verifiers (tensor operands, index counts, callee lookup)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import SymbolRefAttr, TensorType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import SymbolTable
from xdsl.utils.exceptions import VerifyException

from hlocc.codegen.ir.attributes import INDEX

# -- shared parsing / printing helpers ------------------------------------------------------------

def parse_operand_list(parser: Parser, delimiter: Parser.Delimiter) -> list[UnresolvedOperand]:
    return parser.parse_comma_separated_list(delimiter, parser.parse_unresolved_operand)


def parse_index_operands(parser: Parser, delimiter: Parser.Delimiter, optional: bool = False) -> list[SSAValue]:
    """A delimited list of `index` operands; with `optional`, an absent list is an empty one."""
    pos = parser.pos
    if optional:
        operands = parser.parse_optional_comma_separated_list(delimiter, parser.parse_unresolved_operand) or []
    else:
        operands = parse_operand_list(parser, delimiter)
    return list(parser.resolve_operands(operands, [INDEX] * len(operands), pos))


def parse_types(parser: Parser) -> list[Attribute]:
    """`type (, type)*`."""
    return parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)


def print_values(printer: Printer, values: Sequence[SSAValue], open_: str = "", close: str = "") -> None:
    printer.print_string(open_)
    printer.print_list(values, printer.print_ssa_value)
    printer.print_string(close)


def print_assignment(printer: Printer, arg: SSAValue, value: SSAValue) -> None:
    printer.print_ssa_value(arg)
    printer.print_string(" = ")
    printer.print_ssa_value(value)


def print_types(printer: Printer, types: Sequence[Attribute]) -> None:
    printer.print_list(types, printer.print_attribute)


def tensor_type_of(value: SSAValue, what: str) -> TensorType:
    if not isinstance(value.type, TensorType):
        raise VerifyException(f"{what} must be a ranked tensor, found {value.type}")
    return value.type


def check_indices(tensor_type: TensorType, indices: Sequence[SSAValue], op_name: str) -> None:
    if len(indices) != tensor_type.get_num_dims():
        raise VerifyException(f"'{op_name}' expects {tensor_type.get_num_dims()} indices for {tensor_type}, "
                              f"found {len(indices)}")


def lookup_function(op: Operation, callee: SymbolRefAttr):
    """The func.func `callee` names, or raise: XLA's PureCallOp::verifySymbolUses."""
    from xdsl.dialects.func import FuncOp

    found = SymbolTable.lookup_symbol(op, callee)
    if not isinstance(found, FuncOp):
        raise VerifyException(f"'{op.name}' refers to an undefined function: {callee}")
    return found


