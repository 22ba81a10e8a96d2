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
    %m = xla.cmpf olt, %a, %b : vector<16xf32>
    %s = xla.select %m, %a, %b : vector<16xi1>, vector<16xf32>
    %w = xla.extui %h : vector<16xi16> to vector<16xi32>

The compares, select and integer/int<->float casts (`cmpf`, `cmpi`, `select`, `extui`, `extsi`,
`trunci`, `sitofp`, `uitofp`, `fptosi`, `fptoui`) are MLIR's arith ops under the `xla` prefix, for
vectors: xDSL 0.74's arith dialect verifies only their scalar forms. The float passes and
`vectorize-elementwise` emit them on vectors (`VECTOR_FORMS`); scalar code keeps the arith ops.

The indexing-map attribute holds an hlocc `IndexingMap` and prints it as one string in XLA's
syntax (`indexing_map_text`); the parser also accepts XLA's split form `<"part one," "part two">`
(adjacent string literals are concatenated). Runtime variables of a map (`{r0}` in its text) are
operands too: in `apply_indexing` they follow the range variables inside `[...]` (XLA's affine maps
number them as trailing symbols), in `loop` they follow the dimensions inside `(...)`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    AnyFloat,
    FlatSymbolRefAttrConstr,
    FunctionType,
    IndexType,
    IntegerAttr,
    IntegerType,
    SymbolRefAttr,
    VectorType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, Region, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    VarConstraint,
    irdl_op_definition,
    operand_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import Pure, RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text
from hlocc.codegen.dialect_common import (  # noqa: F401
    INDEX,
    IndexingMapAttr,
    RemFOp,
    YieldOp,
    _check_indices,
    _check_yield,
    _lookup_function,
    _map_attr,
    _parse_index_operands,
    _parse_operand_list,
    _parse_types,
    _print_assignment,
    _print_types,
    _print_values,
    _tensor,
)
from hlocc.codegen.dialect_parallel import (  # noqa: F401
    AllocateSharedOp,
    AtomicRMWOp,
    AtomicUpdateOp,
    PredicatedExtractOp,
    PredicatedInsertOp,
    SharedMemoryOp,
    ShuffleReduceOp,
    SyncThreadsOp,
)

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
        _print_values(printer, [self.lhs, self.rhs])
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


XLA = Dialect(
    "xla",
    [ApplyIndexingOp, LoopOp, YieldOp, PureCallOp, AllocateSharedOp, SharedMemoryOp, SyncThreadsOp, ShuffleReduceOp,
     PredicatedInsertOp, PredicatedExtractOp, AtomicRMWOp, AtomicUpdateOp, RemFOp, *VECTOR_FORMS.values()],
    [IndexingMapAttr],
)
