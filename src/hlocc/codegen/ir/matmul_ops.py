"""`xla.matmul`: a batched matrix product with its elementwise epilogue, the op a dot fusion becomes
(issue 17; the matmul emitter, codegen/emitters/matmul.py, writes it and `lower-matmul` lowers it).

    %r = xla.matmul %lhs[#lhs_map], %rhs[#rhs_map] into %out[#out_map] sizes [B, M, N, K]
           : (tensor<...>, tensor<...>, tensor<...>) -> tensor<...> {
    ^bb0(%acc: f32, %b: index, %m: index, %n: index):
      ...
      xla.yield %value : bf16
    }

Semantics: for every (b, m, n) in [0, B) x [0, M) x [0, N), `acc` = sum over k in [0, K) of
lhs[lhs_map(b, m, n, k)] * rhs[rhs_map(b, m, n, k)], both operands converted to the accumulator
type (the epilogue block's first argument: f32 for f32/bf16/f16 operands, f64 for f64, as XLA:CPU
and the evaluator compute dots); the epilogue computes the output element from `acc` and the
indices, and it is stored at out[out_map(b, m, n, 0)]. The result is `out` with every element of
the iteration space written. K = 0 gives acc = 0.

The three maps share one domain: dimensions (b, m, n, k) whose ranges are the problem's sizes, so
a transposed operand, a layout or several batch, free or contracting HLO dimensions (linearised
into one b, m, n or k) are all in the maps: no operand is copied to be canonical.

After `transform.hlocc.tile` (codegen/schedule/) an op computes one block: `offsets(%b0, %m0, %n0)`
give its first (b, m, n), `sizes` its extent (the maps' ranges remain the whole problem, and
indices past them are skipped: the remainder block). Schedule properties set by transform ops and
read by the lowering: `k_block` (KC: the contraction split into blocks of KC) and `register_block`
(MR x NR accumulators per step of k, `k_unroll` steps of k per iteration), `packed` (the operands,
0 = lhs and 1 = rhs, copied into zero-padded panels: codegen/transforms/matmul/packed.py),
`k_pairs` (bf16 packed as (k, k + 1) pairs for a dot-product instruction), `prepacked` (B is
read in place: its map already gives the packed panel layout), `row_tails` (a register block of
the rows left where fewer than MR remain), `prefetch` (the distance in k steps of the B panel
prefetch), `hoist_address` and `fuse_epilogue` (unit flags);
on a GPU `warp_grid` and `warp_tile` (the block's warps and each warp's extent in mma.sync tiles)
and `stages` (the cp.async ring's depth): codegen/transforms/matmul/gpu_mma.py; `wgmma` (sm_90a's
warpgroup MMA instead): codegen/transforms/matmul/gpu_wgmma.py; `tma_stages` (its tiles by TMA through
an mbarrier ring): gpu_wgmma_tma.py.

A run-time M (`runtime_m = "v"`, a problem property printed with the schedule's): the problem's M
is the value of dimension variable v (`xla.symbol_value`, dynamic shapes), at most the maps' m
range, which is then its bound; the operands' addresses do not depend on M (M is not a stride), so
the tensors are declared at the bound and only rows below M are read or written. A few-rows
product by a constant matrix of a dynamic program (runtime/small_gemm.py) is one such kernel for
every row count.

`xla.prefetch %t[%i]` (a hint that element i of t is read soon; no effect on values) is LLVM's
prefetch intrinsic for the address `lower-tensors` gives the element.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
    DenseArrayBase,
    Float32Type,
    IndexType,
    IntegerAttr,
    StringAttr,
    TensorType,
    UnitAttr,
    VectorType,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.traits import RecursiveMemoryEffect
from xdsl.utils.exceptions import VerifyException

from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text
from hlocc.codegen.ir.attributes import INDEX, IndexingMapAttr, map_attr
from hlocc.codegen.ir.core_ops import check_yield
from hlocc.codegen.ir.size_ops import SymbolValueOp
from hlocc.codegen.ir.syntax import parse_index_operands, print_values
from hlocc.codegen.ir.traits import YieldParent

MATMUL_DIMS = ("b", "m", "n", "k")

SCHEDULE_PROPERTIES = ("runtime_m", "k_block", "register_block", "k_unroll", "row_tails", "packed", "prepacked",
                       "k_pairs", "prefetch", "hoist_address", "fuse_epilogue", "warp_grid", "warp_tile", "stages",
                       "wgmma", "tma_stages")
"""The properties transform ops set on an `xla.matmul` (printed after `schedule`), and the problem's
`runtime_m` (module doc), printed with them."""
"""The iteration dimensions of `xla.matmul`, in the order of its maps' dimensions and `sizes`."""


def _dense(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


@irdl_op_definition
class MatmulOp(IRDLOperation):
    """out[b, m, n] = epilogue(sum_k lhs[b, m, k] * rhs[b, k, n], b, m, n) through indexing maps
    (module doc)."""

    name = "xla.matmul"

    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    init = operand_def(TensorType)
    offsets = var_operand_def(IndexType)
    result = result_def(TensorType)
    lhs_map = prop_def(IndexingMapAttr)
    rhs_map = prop_def(IndexingMapAttr)
    out_map = prop_def(IndexingMapAttr)
    sizes = prop_def(DenseArrayBase)
    runtime_m = opt_prop_def(StringAttr)  # M is this dimension variable's value (module doc)
    k_block = opt_prop_def(IntegerAttr)
    register_block = opt_prop_def(DenseArrayBase)
    k_unroll = opt_prop_def(IntegerAttr)
    row_tails = opt_prop_def(UnitAttr)
    packed = opt_prop_def(DenseArrayBase)
    prepacked = opt_prop_def(UnitAttr)
    prefetch = opt_prop_def(IntegerAttr)
    k_pairs = opt_prop_def(UnitAttr)
    hoist_address = opt_prop_def(UnitAttr)
    fuse_epilogue = opt_prop_def(UnitAttr)
    warp_grid = opt_prop_def(DenseArrayBase)  # GPU: warps along (m, n) of the block (set_operand_layout)
    warp_tile = opt_prop_def(DenseArrayBase)  # GPU: each warp's (m, n) extent, in m16n8k16 mma tiles
    stages = opt_prop_def(IntegerAttr)  # GPU: shared-memory stages of the cp.async ring
    wgmma = opt_prop_def(UnitAttr)  # GPU, sm_90a: warpgroup MMA instead of mma.sync (use_wgmma)
    tma_stages = opt_prop_def(IntegerAttr)  # GPU, sm_90a: wgmma tiles by TMA into a ring of this depth (use_tma)
    epilogue = region_def("single_block")

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(RecursiveMemoryEffect(), YieldParent())

    def __init__(self, lhs: SSAValue, rhs: SSAValue, init: SSAValue, maps: Sequence[IndexingMap | IndexingMapAttr],
                 sizes: Sequence[int], epilogue: Region, offsets: Sequence[SSAValue] = (),
                 schedule: dict[str, Attribute] | None = None):
        lhs_map, rhs_map, out_map = (map_attr(m) for m in maps)
        super().__init__(operands=[lhs, rhs, init, offsets], result_types=[SSAValue.get(init).type],
                         regions=[epilogue],
                         properties={"lhs_map": lhs_map, "rhs_map": rhs_map, "out_map": out_map,
                                     "sizes": _dense(sizes), **(schedule or {})})

    @staticmethod
    def epilogue_block(acc_type: Attribute) -> Block:
        """An empty epilogue block: (acc, b, m, n)."""
        block = Block(arg_types=[acc_type, INDEX, INDEX, INDEX])
        for arg, name in zip(block.args, ("acc", "b", "m", "n")):
            arg.name_hint = name
        return block

    # -- facts the lowering and the transforms read --------------------------------------------------
    @property
    def size_list(self) -> list[int]:
        return list(self.sizes.get_values())

    @property
    def problem_sizes(self) -> list[int]:
        """The whole problem's (B, M, N, K): the maps' dimension ranges, but K from `sizes` (k is
        never tiled, and an empty range is written [0, 0] in the maps)."""
        return [v.bounds.hi + 1 for v in self.lhs_map.data.dims[:3]] + [self.size_list[3]]

    def m_value(self, b) -> SSAValue | int:
        """The problem's M: the value of `runtime_m` (an `xla.symbol_value` built with the
        KernelBuilder b), or the constant extent."""
        if self.runtime_m is None:
            return self.problem_sizes[1]
        return b.add(SymbolValueOp(self.runtime_m.data))

    @property
    def acc_type(self) -> Attribute:
        return self.epilogue.block.args[0].type

    @property
    def maps(self) -> tuple[IndexingMap, IndexingMap, IndexingMap]:
        return self.lhs_map.data, self.rhs_map.data, self.out_map.data

    def schedule(self) -> dict[str, Attribute]:
        """The schedule properties set on this op (module doc)."""
        return {k: self.properties[k] for k in SCHEDULE_PROPERTIES if k in self.properties}

    def verify_(self) -> None:
        sizes = self.size_list
        if len(sizes) != 4 or any(s < 0 for s in sizes):
            raise VerifyException(f"'{self.name}' sizes must be 4 non-negative extents (b, m, n, k), found {sizes}")
        problem = None
        for what, m, value in zip(("lhs", "rhs", "out"), self.maps, (self.lhs, self.rhs, self.init)):
            if len(m.dims) != 4 or m.symbols or m.runtime:
                raise VerifyException(f"'{self.name}' {what} map must have exactly the dimensions (b, m, n, k) and "
                                      f"no symbols: {map_to_text(m)}")
            rank = value.type.get_num_dims()
            if len(m.results) != rank:
                raise VerifyException(f"'{self.name}' {what} map has {len(m.results)} results for a rank-{rank} "
                                      f"tensor {value.type}")
            ranges = [(v.bounds.lo, v.bounds.hi) for v in m.dims]
            if problem is not None and ranges != problem:
                raise VerifyException(f"'{self.name}' the maps' dimension ranges differ ({what}: {ranges}, lhs: "
                                      f"{problem})")
            problem = ranges
        if len(self.offsets) not in (0, 3):
            raise VerifyException(f"'{self.name}' takes no offsets or three (b, m, n), found {len(self.offsets)}")
        if not self.offsets and sizes[:3] != self.problem_sizes[:3]:
            raise VerifyException(f"'{self.name}' without offsets must cover the problem: sizes {sizes}, maps' "
                                  f"ranges {self.problem_sizes}")
        if self.result.type != self.init.type:
            raise VerifyException(f"'{self.name}' result type {self.result.type} must be the init type "
                                  f"{self.init.type}")
        args = self.epilogue.block.args
        if len(args) != 4 or any(not isinstance(a.type, IndexType) for a in args[1:]):
            raise VerifyException(f"'{self.name}' epilogue block must take (acc, b: index, m: index, n: index)")
        last = self.epilogue.block.last_op
        if last is None or len(last.operands) != 1:
            raise VerifyException(f"'{self.name}' epilogue must yield one element")
        check_yield(self.epilogue.block, [self.init.type.element_type], self.name)
        if self.runtime_m is not None and not self.runtime_m.data:
            raise VerifyException(f"'{self.name}' runtime_m must name a dimension variable")
        block = self.register_block
        if block is not None and (len(block.get_values()) != 2 or min(block.get_values()) < 1):
            raise VerifyException(f"'{self.name}' register_block must be two positive sizes (MR, NR)")

    # -- syntax ---------------------------------------------------------------------------------
    @classmethod
    def parse(cls, parser: Parser) -> MatmulOp:
        pos = parser.pos
        names, maps = [], []
        for keyword in (None, ",", "into"):
            if keyword == ",":
                parser.parse_punctuation(",")
            elif keyword:
                parser.parse_keyword(keyword)
            names.append(parser.parse_unresolved_operand())
            parser.parse_punctuation("[")
            attr = parser.parse_attribute()
            if not isinstance(attr, IndexingMapAttr):
                parser.raise_error(f"expected an #xla.indexing_map attribute, found {attr}")
            maps.append(attr)
            parser.parse_punctuation("]")
        offsets = []
        if parser.parse_optional_keyword("offsets"):
            offsets = parse_index_operands(parser, Parser.Delimiter.PAREN)
        parser.parse_keyword("sizes")
        sizes = parser.parse_comma_separated_list(Parser.Delimiter.SQUARE, parser.parse_integer)
        props = parser.parse_optional_attr_dict() if parser.parse_optional_keyword("schedule") else {}
        parser.parse_punctuation(":")
        parser.parse_punctuation("(")
        types = parser.parse_comma_separated_list(Parser.Delimiter.NONE, parser.parse_type)
        parser.parse_punctuation(")")
        parser.parse_punctuation("->")
        parser.parse_type()
        lhs, rhs, init = parser.resolve_operands(names, types, pos)
        region = parser.parse_region()
        op = cls(lhs, rhs, init, maps, sizes, region, offsets, props)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        for k, (value, attr) in enumerate(zip((self.lhs, self.rhs, self.init),
                                              (self.lhs_map, self.rhs_map, self.out_map))):
            printer.print_string((" ", ", ", " into ")[k])
            printer.print_ssa_value(value)
            printer.print_string("[")
            printer.print_attribute(attr)
            printer.print_string("]")
        if self.offsets:
            print_values(printer, self.offsets, " offsets(", ")")
        printer.print_string(f" sizes [{', '.join(map(str, self.size_list))}]")
        schedule = self.schedule()
        if schedule:
            printer.print_string(" schedule ")
            printer.print_attr_dict(schedule)
        printer.print_string(" : (")
        printer.print_list([self.lhs.type, self.rhs.type, self.init.type], printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.result.type)
        printer.print_string(" ")
        printer.print_region(self.epilogue, print_entry_block_args=True)
        printer.print_op_attributes(self.attributes)


@irdl_op_definition
class PrefetchOp(IRDLOperation):
    """A read prefetch of element `index` of the 1-D tensor `source` into all cache levels (module doc)."""

    name = "xla.prefetch"

    source = operand_def(TensorType)
    index = operand_def(IndexType)

    assembly_format = "$source `[` $index `]` attr-dict `:` type($source)"

    def __init__(self, source: SSAValue, index: SSAValue):
        super().__init__(operands=[source, index])


@irdl_op_definition
class DotBF16PairsOp(IRDLOperation):
    """acc + the dot products of bf16 pairs, lane by lane: for each of the 16 i32 lanes of `lhs`
    and `rhs`, each holding two bf16 values (element 2i in the low half), result[i] = acc[i] +
    lhs.hi * rhs.hi + lhs.lo * rhs.lo, as AVX512-BF16's vdpbf16ps computes it (products exact in
    f32, round to nearest even, denormal inputs and outputs flushed to zero). The LLVM translation
    calls llvm.x86.avx512bf16.dpbf16ps.512 on the lanes bitcast to <32 x bfloat>."""

    name = "xla.dot_bf16_pairs"

    acc = operand_def(VectorType)
    lhs = operand_def(VectorType)
    rhs = operand_def(VectorType)
    result = result_def(VectorType)

    assembly_format = "$acc `,` $lhs `,` $rhs attr-dict `:` type($acc) `,` type($lhs) `,` type($rhs) `->` type($result)"

    def __init__(self, acc: SSAValue, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[acc, lhs, rhs], result_types=[SSAValue.get(acc).type])

    def verify_(self) -> None:
        if self.acc.type != VectorType(Float32Type(), [16]) or self.lhs.type != VectorType(i32, [16]) \
                or self.rhs.type != self.lhs.type:
            raise VerifyException(f"'{self.name}' takes vector<16xf32> and two vector<16xi32> (bf16 pairs)")


__all__ = ["MATMUL_DIMS", "SCHEDULE_PROPERTIES", "DotBF16PairsOp", "MatmulOp", "PrefetchOp"]
