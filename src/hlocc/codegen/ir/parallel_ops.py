"""The `xla` dialect's ops of the parallel kernel model: shared memory (`allocate_shared`), barriers
(`sync_threads`), warp shuffles (`shuffle_reduce`), predicated element access and atomics. On the
GPU they map to hardware; the CPU backend emulates them (DESIGN "One kernel model")."""

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
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.irdl import (
    IRDLOperation,
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

from hlocc.codegen.ir.core_ops import YieldOp
from hlocc.codegen.ir.syntax import (
    check_indices,
    lookup_function,
    parse_index_operands,
    parse_operand_list,
    parse_types,
    print_types,
    print_values,
    tensor_type_of,
)
from hlocc.codegen.ir.traits import YieldParent

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
class SharedMemoryOp(IRDLOperation):
    """What `lower-tensors` makes of an `allocate_shared`: a pointer to `size` bytes of block-shared
    memory (on the CPU, a buffer of the block function; on a GPU, an addrspace(3) global)."""

    name = "xla.shared_memory"

    size = prop_def(IntegerAttr[IntegerType])
    result = result_def(LLVMPointerType)

    assembly_format = "$size attr-dict `:` type($result)"

    def __init__(self, size: int):
        super().__init__(result_types=[LLVMPointerType()], properties={"size": IntegerAttr(size, i64)})


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
        op = cls(parser.resolve_operands(operands, parse_types(parser), pos))
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        print_values(printer, self.operands_, " ")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_types(printer, [v.type for v in self.operands_])


@irdl_op_definition
class AtomicUpdateOp(IRDLOperation):
    """What `lower-tensors` makes of an `atomic_rmw`: atomically replace the element at `ptr` by
    what the body yields for its current value. On the CPU (kernels using it run serially, see
    `KernelModule.serial`) a load, the body and a store; on a GPU an `atomicrmw` where the body is
    a single add or integer min/max of the current value, else a compare-and-swap loop."""

    name = "xla.atomic_update"

    ptr = operand_def(LLVMPointerType)
    body = region_def("single_block")

    traits = traits_def(YieldParent())

    def __init__(self, ptr: SSAValue | Operation, body: Region):
        super().__init__(operands=[ptr], regions=[body])

    @property
    def element_type(self):
        return self.body.block.args[0].type

    def verify_(self) -> None:
        args = self.body.block.args
        last = self.body.block.last_op
        if len(args) != 1 or not isinstance(last, YieldOp) or [v.type for v in last.values] != [args[0].type]:
            raise VerifyException(f"'{self.name}' body must take the current element and yield one value of its type")

    @classmethod
    def parse(cls, parser: Parser) -> AtomicUpdateOp:
        ptr = parser.parse_unresolved_operand()
        parser.parse_punctuation(":")
        ptr_type = parser.parse_type()
        body = parser.parse_region()
        op = cls(parser.resolve_operand(ptr, ptr_type), body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        print_values(printer, [self.ptr], " ")
        printer.print_string(" : ")
        printer.print_attribute(self.ptr.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)
        printer.print_op_attributes(self.attributes)


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
        ftype = lookup_function(self, self.combiner).function_type
        if list(ftype.inputs) != types + types or list(ftype.outputs) != types:
            raise VerifyException(f"'{self.name}' combiner '{self.combiner}' has type {ftype}, expected "
                                  f"{FunctionType.from_lists(types + types, types)}")

    @classmethod
    def parse(cls, parser: Parser) -> ShuffleReduceOp:
        combiner = SymbolRefAttr(parser.parse_symbol_name())
        pos = parser.pos
        operands = parse_operand_list(parser, Parser.Delimiter.PAREN)
        parser.parse_keyword("to")
        distance = parser.parse_integer(allow_boolean=False, allow_negative=False)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(combiner, parser.resolve_operands(operands, parse_types(parser), pos), distance)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.combiner.root_reference.data)
        print_values(printer, self.operands_, "(", ")")
        printer.print_string(f" to {self.max_distance.value.data}")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        print_types(printer, [v.type for v in self.operands_])


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
        t = tensor_type_of(self.dest, "dest")
        check_indices(t, self.indices, self.name)
        if self.value.type != t.element_type:
            raise VerifyException(f"'{self.name}' value type {self.value.type} must be the element type of {t}")
        if self.result.type != t:
            raise VerifyException(f"'{self.name}' result type {self.result.type} must be the dest type {t}")

    @classmethod
    def parse(cls, parser: Parser) -> PredicatedInsertOp:
        value = parser.parse_unresolved_operand()
        parser.parse_keyword("into")
        dest = parser.parse_unresolved_operand()
        indices = parse_index_operands(parser, Parser.Delimiter.SQUARE)
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
        print_values(printer, [self.value], " ", " into ")
        printer.print_ssa_value(self.dest)
        print_values(printer, self.indices, "[", "]")
        print_values(printer, [self.condition], " if ")
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
        t = tensor_type_of(self.src, "src")
        check_indices(t, self.indices, self.name)
        if not self.fallback.type == self.result.type == t.element_type:
            raise VerifyException(f"'{self.name}' fallback type {self.fallback.type} and result type "
                                  f"{self.result.type} must be the element type of {t}")

    @classmethod
    def parse(cls, parser: Parser) -> PredicatedExtractOp:
        src = parser.parse_unresolved_operand()
        indices = parse_index_operands(parser, Parser.Delimiter.SQUARE)
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
        print_values(printer, [self.src], " ")
        print_values(printer, self.indices, "[", "]")
        print_values(printer, [self.condition], " if ")
        print_values(printer, [self.fallback], " else ")
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

    traits = traits_def(RecursiveMemoryEffect(), YieldParent())

    def __init__(self, input: SSAValue | Operation, indices: Sequence[SSAValue | Operation],
                 body: Region | None = None):
        t = SSAValue.get(input).type
        if body is None:
            body = Region(Block(arg_types=[t.element_type]))
        super().__init__(operands=[input, indices], result_types=[t], regions=[body])

    def verify_(self) -> None:
        from xdsl.dialects.builtin import VectorType

        t = tensor_type_of(self.input, "input")
        check_indices(t, self.indices, self.name)
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
        indices = parse_index_operands(parser, Parser.Delimiter.SQUARE)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        body = parser.parse_region()
        op = cls(parser.resolve_operand(tensor, t), indices, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        print_values(printer, [self.input], " ")
        print_values(printer, self.indices, "[", "]")
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=True)
        printer.print_op_attributes(self.attributes)

