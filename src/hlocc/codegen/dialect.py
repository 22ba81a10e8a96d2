"""The kernel dialect `xla`: the ops emitters write and the lowering passes consume.

Modelled on XLA's `xla` and `xla_gpu` dialects (xla/codegen/emitters/ir/xla_ops.td and
xla/backends/gpu/codegen/emitters/ir/xla_gpu_ops.td), declared with xDSL IRDL. hlocc has one kernel
model for the CPU and the GPU (shared/DESIGN.md), so the GPU-flavoured ops (allocate_shared,
sync_threads, shuffle_reduce) live in the same dialect instead of a separate `xla_gpu` one.

Textual forms (each op also parses and prints in MLIR's generic form):

    #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 9], s0 in [0, 3]">
    %r:2 = xla.apply_indexing #map(%d0, %d1)[%s0]
    %out = xla.loop (%tid, %bid)[%i] -> (%ra, %rb) in #map iter_args(%it = %init) -> (tensor<8xf32>) {
      ...
      xla.yield %v : tensor<8xf32>
    }
    %v = xla.pure_call @fn(%t, %i) : (tensor<8xf32>, index) -> f32
    %s = xla.allocate_shared : tensor<32x33xf32>
    %a, %b = xla.sync_threads %x, %y : tensor<32x33xf32>, tensor<8xf32>
    %r = xla.shuffle_reduce @sum(%v) to 16 : f32
    %t2 = xla.predicated_insert %v into %t[%i] if %cond : tensor<8xf32>
    %e = xla.predicated_extract %t[%i] if %cond else %fallback : tensor<8xf32>
    %t3 = xla.atomic_rmw %t[%i] : tensor<8xf32> {
    ^bb0(%current: f32):
      ...
      xla.yield %new : f32
    }

The indexing-map attribute holds an hlocc `IndexingMap` and prints it as one string in XLA's
syntax (`indexing_map_text`); the parser also accepts XLA's split form `<"part one," "part two">`
(adjacent string literals are concatenated). Runtime variables of a map (`{r0}` in its text) are
operands too: in `apply_indexing` they follow the range variables inside `[...]` (XLA's affine maps
number them as trailing symbols), in `loop` they follow the dimensions inside `(...)`.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    FlatSymbolRefAttrConstr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    SymbolRefAttr,
    TensorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Data, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsTerminator, Pure, RecursiveMemoryEffect, SymbolTable
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
        attr = _map_attr(indexing_map)
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
        operands = _parse_index_operands(parser, Parser.Delimiter.PAREN, optional=True)
        operands += _parse_index_operands(parser, Parser.Delimiter.SQUARE, optional=True)
        op = cls(attr, operands)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.indexing_map)
        n = len(self.map.dims)
        if n:
            _print_values(printer, self.operands_[:n], "(", ")")
        if len(self.operands_) > n:
            _print_values(printer, self.operands_[n:], "[", "]")
        printer.print_op_attributes(self.attributes)


# -- yield ----------------------------------------------------------------------------------------

@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of `xla.loop` (the next iter_args) and `xla.atomic_rmw` (the new element)."""

    name = "xla.yield"

    values = var_operand_def()

    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(LoopOp, AtomicRMWOp), Pure()))

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
    traits = traits_def(RecursiveMemoryEffect())

    def __init__(self, indexing_map: IndexingMap | IndexingMapAttr, dims: Sequence[SSAValue | Operation],
                 inits: Sequence[SSAValue | Operation], body: Region | None = None):
        attr = _map_attr(indexing_map)
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
        _check_yield(self.body.block, [r.type for r in self.results_], self.name)

    @classmethod
    def parse(cls, parser: Parser) -> LoopOp:
        dims = _parse_index_operands(parser, Parser.Delimiter.PAREN)
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
        _print_values(printer, self.dims, " (", ")")
        _print_values(printer, self.induction_vars, "[", "]")
        _print_values(printer, self.map_results, " -> (", ")")
        printer.print_string(" in ")
        printer.print_attribute(self.indexing_map)
        if self.inits:
            printer.print_string(" iter_args(")
            printer.print_list(zip(self.region_iter_args, self.inits),
                               lambda pair: _print_assignment(printer, *pair))
            printer.print_string(") -> (")
            _print_types(printer, [v.type for v in self.inits])
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
        func = _lookup_function(self, self.callee)
        ftype: FunctionType = func.function_type
        if len(ftype.inputs) != len(self.operands_):
            raise VerifyException(f"'{self.name}' argument count mismatch: 'operands' has {len(self.operands_)} "
                                  f"arguments, but '{self.callee}' expects {len(ftype.inputs)}")
        found = ([v.type for v in self.operands_], [r.type for r in self.results_])
        if found != (list(ftype.inputs), list(ftype.outputs)):
            raise VerifyException(f"'{self.name}' type {FunctionType.from_lists(*found)} does not match "
                                  f"'{self.callee}' of type {ftype}")


# -- allocate_shared, sync_threads ----------------------------------------------------------------

@irdl_op_definition
class AllocateSharedOp(IRDLOperation):
    """A tensor in block-shared memory (on the CPU, a per-block scratch buffer)."""

    name = "xla.allocate_shared"

    result = result_def(TensorType)

    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, tensor_type: TensorType):
        super().__init__(result_types=[tensor_type])

    def verify_(self) -> None:
        t = self.result.type
        if any(d < 0 for d in t.get_shape()):
            raise VerifyException(f"'{self.name}' needs a statically shaped tensor, found {t}")


@irdl_op_definition
class SyncThreadsOp(IRDLOperation):
    """A barrier over the threads of a block; returns the tensors (shared memory) it synchronises,
    so later reads depend on the barrier."""

    name = "xla.sync_threads"

    operands_ = var_operand_def(TensorType)
    results_ = var_result_def(TensorType)

    def __init__(self, tensors: Sequence[SSAValue | Operation]):
        super().__init__(operands=[tensors], result_types=[[SSAValue.get(t).type for t in tensors]])

    def verify_(self) -> None:
        if [v.type for v in self.operands_] != [r.type for r in self.results_]:
            raise VerifyException(f"'{self.name}' results must have the types of its operands")

    @classmethod
    def parse(cls, parser: Parser) -> SyncThreadsOp:
        pos = parser.pos
        operands = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_unresolved_operand)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(parser.resolve_operands(operands, _parse_types(parser), pos))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        _print_values(printer, self.operands_, " ")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        _print_types(printer, [v.type for v in self.operands_])


# -- shuffle_reduce -------------------------------------------------------------------------------

@irdl_op_definition
class ShuffleReduceOp(IRDLOperation):
    """A butterfly reduction over the lanes of a warp: for distance = max_distance, ..., 2, 1 each
    lane combines its values with those of lane ^ distance by calling `combiner` (own values first,
    then the other lane's). The combiner has type (T..., T...) -> (T...)."""

    name = "xla.shuffle_reduce"

    combiner = prop_def(FlatSymbolRefAttrConstr)
    max_distance = prop_def(IntegerAttr[IntegerType])
    operands_ = var_operand_def()
    results_ = var_result_def()

    traits = traits_def(Pure())

    def __init__(self, combiner: str | SymbolRefAttr, operands: Sequence[SSAValue | Operation], max_distance: int):
        combiner = SymbolRefAttr(combiner) if isinstance(combiner, str) else combiner
        super().__init__(operands=[operands], result_types=[[SSAValue.get(v).type for v in operands]],
                         properties={"combiner": combiner, "max_distance": IntegerAttr(max_distance, i64)})

    def verify_(self) -> None:
        distance = self.max_distance.value.data
        if distance <= 0 or distance & (distance - 1):
            raise VerifyException(f"'{self.name}' max_distance must be a positive power of two, found {distance}")
        types = [v.type for v in self.operands_]
        if not types or types != [r.type for r in self.results_]:
            raise VerifyException(f"'{self.name}' needs operands, and results of the operands' types")
        if any(isinstance(t, TensorType) for t in types):
            raise VerifyException(f"'{self.name}' reduces scalars or vectors, not tensors")
        ftype = _lookup_function(self, self.combiner).function_type
        if list(ftype.inputs) != types + types or list(ftype.outputs) != types:
            raise VerifyException(f"'{self.name}' combiner '{self.combiner}' has type {ftype}, expected "
                                  f"{FunctionType.from_lists(types + types, types)}")

    @classmethod
    def parse(cls, parser: Parser) -> ShuffleReduceOp:
        combiner = SymbolRefAttr(parser.parse_symbol_name())
        pos = parser.pos
        operands = _parse_operand_list(parser, Parser.Delimiter.PAREN)
        parser.parse_keyword("to")
        distance = parser.parse_integer(allow_boolean=False, allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(combiner, parser.resolve_operands(operands, _parse_types(parser), pos), distance)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.combiner.root_reference.data)
        _print_values(printer, self.operands_, "(", ")")
        printer.print_string(f" to {self.max_distance.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        _print_types(printer, [v.type for v in self.operands_])


# -- predicated insert / extract ------------------------------------------------------------------

@irdl_op_definition
class PredicatedInsertOp(IRDLOperation):
    """`tensor.insert value into dest[indices]` if `condition`, else `dest` unchanged."""

    name = "xla.predicated_insert"

    condition = operand_def(i1)
    value = operand_def()
    dest = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    result = result_def(TensorType)

    traits = traits_def(Pure())

    def __init__(self, condition: SSAValue | Operation, value: SSAValue | Operation, dest: SSAValue | Operation,
                 indices: Sequence[SSAValue | Operation]):
        super().__init__(operands=[condition, value, dest, indices], result_types=[SSAValue.get(dest).type])

    def verify_(self) -> None:
        t = _tensor(self.dest, "dest")
        _check_indices(t, self.indices, self.name)
        if self.value.type != t.element_type:
            raise VerifyException(f"'{self.name}' value type {self.value.type} must be the element type of {t}")
        if self.result.type != t:
            raise VerifyException(f"'{self.name}' result type {self.result.type} must be the dest type {t}")

    @classmethod
    def parse(cls, parser: Parser) -> PredicatedInsertOp:
        value = parser.parse_unresolved_operand()
        parser.parse_keyword("into")
        dest = parser.parse_unresolved_operand()
        indices = _parse_index_operands(parser, Parser.Delimiter.SQUARE)
        parser.parse_keyword("if")
        cond = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        if not isinstance(t, TensorType):
            parser.raise_error(f"expected a tensor type, found {t}")
        op = cls(parser.resolve_operand(cond, i1), parser.resolve_operand(value, t.element_type),
                 parser.resolve_operand(dest, t), indices)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        _print_values(printer, [self.value], " ", " into ")
        printer.print_ssa_value(self.dest)
        _print_values(printer, self.indices, "[", "]")
        _print_values(printer, [self.condition], " if ")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.dest.type)


@irdl_op_definition
class PredicatedExtractOp(IRDLOperation):
    """`tensor.extract src[indices]` if `condition`, else `fallback` (without reading src)."""

    name = "xla.predicated_extract"

    condition = operand_def(i1)
    fallback = operand_def()
    src = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    result = result_def()

    traits = traits_def(Pure())

    def __init__(self, condition: SSAValue | Operation, fallback: SSAValue | Operation, src: SSAValue | Operation,
                 indices: Sequence[SSAValue | Operation]):
        super().__init__(operands=[condition, fallback, src, indices],
                         result_types=[SSAValue.get(src).type.element_type])

    def verify_(self) -> None:
        t = _tensor(self.src, "src")
        _check_indices(t, self.indices, self.name)
        if not self.fallback.type == self.result.type == t.element_type:
            raise VerifyException(f"'{self.name}' fallback type {self.fallback.type} and result type "
                                  f"{self.result.type} must be the element type of {t}")

    @classmethod
    def parse(cls, parser: Parser) -> PredicatedExtractOp:
        src = parser.parse_unresolved_operand()
        indices = _parse_index_operands(parser, Parser.Delimiter.SQUARE)
        parser.parse_keyword("if")
        cond = parser.parse_unresolved_operand()
        parser.parse_keyword("else")
        fallback = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        t = parser.parse_type()
        if not isinstance(t, TensorType):
            parser.raise_error(f"expected a tensor type, found {t}")
        op = cls(parser.resolve_operand(cond, i1), parser.resolve_operand(fallback, t.element_type),
                 parser.resolve_operand(src, t), indices)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        _print_values(printer, [self.src], " ")
        _print_values(printer, self.indices, "[", "]")
        _print_values(printer, [self.condition], " if ")
        _print_values(printer, [self.fallback], " else ")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.src.type)


# -- atomic_rmw -----------------------------------------------------------------------------------

@irdl_op_definition
class AtomicRMWOp(IRDLOperation):
    """Atomically replaces `input[indices]` by what the body yields for its current value; returns
    the updated tensor. The body's one argument is the current element (or a rank-1 vector of
    elements, for packed updates) and it yields a value of the same type."""

    name = "xla.atomic_rmw"

    input = operand_def(TensorType)
    indices = var_operand_def(IndexType)
    result = result_def(TensorType)
    body = region_def("single_block")

    traits = traits_def(RecursiveMemoryEffect())

    def __init__(self, input: SSAValue | Operation, indices: Sequence[SSAValue | Operation],
                 body: Region | None = None):
        t = SSAValue.get(input).type
        if body is None:
            body = Region(Block(arg_types=[t.element_type]))
        super().__init__(operands=[input, indices], result_types=[t], regions=[body])

    def verify_(self) -> None:
        from xdsl.dialects.builtin import VectorType

        t = _tensor(self.input, "input")
        _check_indices(t, self.indices, self.name)
        if self.result.type != t:
            raise VerifyException(f"'{self.name}' result type {self.result.type} must be the input type {t}")
        args = self.body.block.args
        if len(args) != 1:
            raise VerifyException(f"'{self.name}' body must have exactly one argument (the current value)")
        arg_type = args[0].type
        if isinstance(arg_type, VectorType):
            if arg_type.get_num_dims() != 1 or arg_type.element_type != t.element_type:
                raise VerifyException(f"'{self.name}' expected a rank-1 vector of {t.element_type} for the block "
                                      f"argument, found {arg_type}")
        elif arg_type != t.element_type:
            raise VerifyException(f"'{self.name}' mismatch in the result element type {t.element_type} and the "
                                  f"block argument type {arg_type}")
        last = self.body.block.last_op
        if not isinstance(last, YieldOp) or [v.type for v in last.values] != [arg_type]:
            raise VerifyException(f"'{self.name}' mismatch in the block argument type and the yielded type")

    @classmethod
    def parse(cls, parser: Parser) -> AtomicRMWOp:
        tensor = parser.parse_unresolved_operand()
        indices = _parse_index_operands(parser, Parser.Delimiter.SQUARE)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        body = parser.parse_region()
        op = cls(parser.resolve_operand(tensor, t), indices, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        _print_values(printer, [self.input], " ")
        _print_values(printer, self.indices, "[", "]")
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)
        printer.print_op_attributes(self.attributes)


XLA = Dialect(
    "xla",
    [ApplyIndexingOp, LoopOp, YieldOp, PureCallOp, AllocateSharedOp, SyncThreadsOp, ShuffleReduceOp,
     PredicatedInsertOp, PredicatedExtractOp, AtomicRMWOp],
    [IndexingMapAttr],
)
