"""The `xla` dialect's core ops: `apply_indexing` (an indexing map applied to index values), `loop`
(a loop nest over an indexing map's domain), `pure_call` (a call of a side-effect-free function) and
`yield`, the terminator of `loop`, `atomic_rmw` and `atomic_update` (any op with the `YieldParent`
trait)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import FlatSymbolRefAttrConstr, FunctionType, IndexType, SymbolRefAttr
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    prop_def,
    region_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text
from hlocc.codegen.ir.attributes import INDEX, IndexingMapAttr, map_attr
from hlocc.codegen.ir.syntax import lookup_function, parse_index_operands, print_assignment, print_types, print_values
from hlocc.codegen.ir.traits import HasYieldParent, YieldParent

# -- apply_indexing -------------------------------------------------------------------------------

@irdl_op_definition
class ApplyIndexingOp(IRDLOperation):
    """Evaluates an indexing map: operands are the map's dimensions, then its range variables and
    runtime variables (all `index`); one `index` result per map result. The map must have no
    constraints (XLA's verifier): a bounds check is a separate op, this one only computes."""

    name = "xla.apply_indexing"

    indexing_map = prop_def(IndexingMapAttr)
    operands_ = var_operand_def(IndexType)
    results_ = var_result_def(IndexType)

    traits = traits_def(Pure())

    def __init__(self, indexing_map: IndexingMap | IndexingMapAttr, operands: Sequence[SSAValue | Operation]):
        attr = map_attr(indexing_map)
        super().__init__(operands=[operands], result_types=[[INDEX] * len(attr.data.results)],
                         properties={"indexing_map": attr})

    @property
    def map(self) -> IndexingMap:
        return self.indexing_map.data

    def verify_(self) -> None:
        m = self.map
        expected = len(m.dims) + len(m.symbols) + len(m.runtime)
        if len(self.operands_) != expected:
            raise VerifyException(
                f"'{self.name}' operand count {len(self.operands_)} must match the number of dimensions, range "
                f"and runtime variables of the indexing map ({expected})")
        if len(self.results_) != len(m.results):
            raise VerifyException(f"'{self.name}' result count {len(self.results_)} must match the number of "
                                  f"indexing map results ({len(m.results)})")
        if m.constraints:
            raise VerifyException(f"'{self.name}' indexing map cannot have any constraints")

    @classmethod
    def parse(cls, parser: Parser) -> ApplyIndexingOp:
        attr = parser.parse_attribute()
        if not isinstance(attr, IndexingMapAttr):
            parser.raise_error(f"expected an #xla.indexing_map attribute, found {attr}")
        operands = parse_index_operands(parser, Parser.Delimiter.PAREN, optional=True)
        operands += parse_index_operands(parser, Parser.Delimiter.SQUARE, optional=True)
        op = cls(attr, operands)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.indexing_map)
        n = len(self.map.dims)
        if n:
            print_values(printer, self.operands_[:n], "(", ")")
        if len(self.operands_) > n:
            print_values(printer, self.operands_[n:], "[", "]")
        printer.print_op_attributes(self.attributes)


# -- loop -----------------------------------------------------------------------------------------

@irdl_op_definition
class LoopOp(IRDLOperation):
    """A loop nest over every feasible value of the map's range variables, for given dimension
    values; iterations outside the map's domain (bounds and constraints) are skipped.

    The body block's arguments are: one induction variable per range variable, one value per map
    result (the map evaluated at the current point), then one per iter_arg. The body ends with
    `xla.yield` of the next iter_args; the results are the final iter_args."""

    name = "xla.loop"

    indexing_map = prop_def(IndexingMapAttr)
    dims = var_operand_def(IndexType)
    inits = var_operand_def()
    results_ = var_result_def()
    body = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect(), YieldParent())

    def __init__(self, indexing_map: IndexingMap | IndexingMapAttr, dims: Sequence[SSAValue | Operation],
                 inits: Sequence[SSAValue | Operation], body: Region | None = None):
        attr = map_attr(indexing_map)
        init_types = [SSAValue.get(v).type for v in inits]
        if body is None:
            m = attr.data
            body = Region(Block(arg_types=[INDEX] * (len(m.symbols) + len(m.results)) + init_types))
        super().__init__(operands=[dims, inits], result_types=[init_types], regions=[body],
                         properties={"indexing_map": attr})

    @property
    def map(self) -> IndexingMap:
        return self.indexing_map.data

    @property
    def induction_vars(self) -> Sequence[SSAValue]:
        return self.body.block.args[:len(self.map.symbols)]

    @property
    def map_results(self) -> Sequence[SSAValue]:
        n = len(self.map.symbols)
        return self.body.block.args[n:n + len(self.map.results)]

    @property
    def region_iter_args(self) -> Sequence[SSAValue]:
        return self.body.block.args[len(self.map.symbols) + len(self.map.results):]

    def verify_(self) -> None:
        m = self.map
        if len(self.inits) != len(self.results_):
            raise VerifyException(f"'{self.name}' mismatch in number of loop-carried values ({len(self.inits)}) "
                                  f"and results ({len(self.results_)})")
        if len(self.dims) != len(m.dims) + len(m.runtime):
            raise VerifyException(f"'{self.name}' mismatch in number of dims operands {len(self.dims)} and "
                                  f"dimension + runtime variables in the indexing map {map_to_text(m)}")
        args = self.body.block.args
        n_index = len(m.symbols) + len(m.results)
        if len(args) != n_index + len(self.inits):
            raise VerifyException(
                f"'{self.name}' body has {len(args)} arguments, expected {len(m.symbols)} induction variables + "
                f"{len(m.results)} indexing map results + {len(self.inits)} iter_args")
        if any(not isinstance(a.type, IndexType) for a in args[:n_index]):
            raise VerifyException(f"'{self.name}' induction variables and map results must be index")
        for arg, result, init in zip(args[n_index:], self.results_, self.inits):
            if not arg.type == result.type == init.type:
                raise VerifyException(f"'{self.name}' block iter arg type = {arg.type}, result type = {result.type} "
                                      f"and init operand type = {init.type} should match")
        check_yield(self.body.block, [r.type for r in self.results_], self.name)

    @classmethod
    def parse(cls, parser: Parser) -> LoopOp:
        dims = parse_index_operands(parser, Parser.Delimiter.PAREN)
        ivs = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE,
                                                lambda: parser.parse_argument(expect_type=False))
        parser.parse_punctuation("->")
        map_results = parser.parse_comma_separated_list(Parser.Delimiter.PAREN,
                                                        lambda: parser.parse_argument(expect_type=False))
        parser.parse_keyword("in")
        attr = parser.parse_attribute()
        if not isinstance(attr, IndexingMapAttr):
            parser.raise_error(f"expected an #xla.indexing_map attribute, found {attr}")
        iter_args, init_operands, types = [], [], []
        pos = parser.pos
        if parser.parse_optional_keyword("iter_args"):
            def assignment():
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()

            pairs = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, assignment)
            iter_args = [a for a, _ in pairs]
            init_operands = [o for _, o in pairs]
            parser.parse_punctuation("->")
            types = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_type)
        inits = parser.resolve_operands(init_operands, types, pos)
        block_args = [a.resolve(INDEX) for a in ivs + map_results] + [a.resolve(t) for a, t in zip(iter_args, types)]
        body = parser.parse_region(block_args)
        op = cls(attr, dims, inits, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        print_values(printer, self.dims, " (", ")")
        print_values(printer, self.induction_vars, "[", "]")
        print_values(printer, self.map_results, " -> (", ")")
        printer.print_string(" in ")
        printer.print_attribute(self.indexing_map)
        if self.inits:
            printer.print_string(" iter_args(")
            printer.print_list(zip(self.region_iter_args, self.inits),
                               lambda pair: print_assignment(printer, *pair))
            printer.print_string(") -> (")
            print_types(printer, [v.type for v in self.inits])
            printer.print_string(")")
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)


# -- pure_call ------------------------------------------------------------------------------------

@irdl_op_definition
class PureCallOp(IRDLOperation):
    """A call of a func.func without side effects (so CSE and LICM may move or merge it)."""

    name = "xla.pure_call"

    callee = prop_def(FlatSymbolRefAttrConstr)
    operands_ = var_operand_def()
    results_ = var_result_def()

    traits = traits_def(Pure())

    assembly_format = "$callee `(` $operands_ `)` attr-dict `:` functional-type($operands_, $results_)"

    def __init__(self, callee: str | SymbolRefAttr, operands: Sequence[SSAValue | Operation],
                 result_types: Sequence[Attribute]):
        callee = SymbolRefAttr(callee) if isinstance(callee, str) else callee
        super().__init__(operands=[operands], result_types=[result_types], properties={"callee": callee})

    def verify_(self) -> None:
        func = lookup_function(self, self.callee)
        ftype: FunctionType = func.function_type
        if len(ftype.inputs) != len(self.operands_):
            raise VerifyException(f"'{self.name}' argument count mismatch: 'operands' has {len(self.operands_)} "
                                  f"arguments, but '{self.callee}' expects {len(ftype.inputs)}")
        found = ([v.type for v in self.operands_], [r.type for r in self.results_])
        if found != (list(ftype.inputs), list(ftype.outputs)):
            raise VerifyException(f"'{self.name}' type {FunctionType.from_lists(*found)} does not match "
                                  f"'{self.callee}' of type {ftype}")


# -- yield ----------------------------------------------------------------------------------------

@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `xla.loop` (the next iter_args) and `xla.atomic_rmw`/`xla.atomic_update` (the
    new element)."""

    name = "xla.yield"

    values = var_operand_def()

    traits = traits_def(IsTerminator(), HasYieldParent(), Pure())

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue | Operation):
        super().__init__(operands=[values])


def check_yield(block: Block, types: Sequence[Attribute], op_name: str) -> None:
    last = block.last_op
    if not isinstance(last, YieldOp):
        raise VerifyException(f"'{op_name}' body must end with xla.yield")
    found = [v.type for v in last.values]
    if found != list(types):
        raise VerifyException(f"'{op_name}' yields ({', '.join(map(str, found))}) but expects "
                              f"({', '.join(map(str, types))})")
