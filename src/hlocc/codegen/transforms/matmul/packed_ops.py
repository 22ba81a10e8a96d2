"""The vocabulary packed.py's lowering builds with: f32 vector reads and writes of the target's
register width (`lanes`: 16 on AVX-512, 8 on AVX2), index
arithmetic, a two-way `scf.if`, the K loops kept rolled, and the facts it decides its forms by
(an identity epilogue, a unit-stride output, and `separable_offsets`: an operand's offset split
into a k part and an m/n part, the packing's offset tables).

Offset tables (an implicit gemm's input, `separable_offsets`): where an operand's map splits into
F(b, k) + G(x) (x = m for A, n for B) with G not affine (a convolution's output positions:
divisions and remainders of m or n), the block first fills a table of G over its rows or columns
(`offset_table`, i32 block scratch) and the packing reads the operand at F(b, k) + table[x]: the
per-element index arithmetic was what made packing through the convolution's maps cost as much
as the gemm (and bf16, which has no 16-bit gather, 2.2x f32). A 16-bit B is packed micro-panel
by micro-panel with the panel's offsets loaded once (`pack_b_by_panel`).
"""

from __future__ import annotations

from xdsl.dialects import arith, scf, vector
from xdsl.dialects.builtin import AffineMapAttr, ArrayAttr, BoolAttr, IntegerType, VectorType, f32
from xdsl.ir import Block, Region, SSAValue
from xdsl.ir.affine import AffineMap

from hlocc.analysis.affine_expr import Const, Expr, Var, dim, linear_form, variables
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.codegen.ir import YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.target import vector_isa
from hlocc.codegen.transforms.util import for_loop


def lanes() -> int:
    """f32 lanes of one vector register of the target (codegen/target.py `vector_isa`); NR is a
    multiple of it."""
    return vector_isa().lanes


def vector_type() -> VectorType:
    return VectorType(f32, [lanes()])


def read_vector(b: KernelBuilder, t: SSAValue, offset: SSAValue) -> SSAValue:
    """vector<lanes x T> of the 1-D tensor t (f32, or i32 bf16 pairs) at offset."""
    elem = t.type.element_type
    pad = b.constant(0.0, elem) if elem == f32 else b.constant(0, elem)
    return b.add(vector.TransferReadOp(t, [offset], pad, VectorType(elem, [lanes()]),
                                       ArrayAttr([BoolAttr(True, IntegerType(1))]),
                                       AffineMapAttr(AffineMap.identity(1))))


def write_vector(b: KernelBuilder, v: SSAValue, t: SSAValue, offset: SSAValue) -> SSAValue:
    return b.add(vector.TransferWriteOp(v, t, [offset], ArrayAttr([BoolAttr(True, IntegerType(1))]),
                                        permutation_map=AffineMapAttr(AffineMap.identity(1)), result_type=t.type))


def add_index(b: KernelBuilder, x: SSAValue, y: SSAValue | int) -> SSAValue:
    y = b.index(y) if isinstance(y, int) else y
    return b.add(arith.AddiOp(x, y))


def mul_index(b: KernelBuilder, x: SSAValue, y: int) -> SSAValue:
    return b.add(arith.MuliOp(x, b.index(y)))


def min_index(b: KernelBuilder, x: SSAValue, y: SSAValue | int) -> SSAValue:
    y = b.index(y) if isinstance(y, int) else y
    return b.add(arith.MinSIOp(x, y))


def sub_index(b: KernelBuilder, x: SSAValue | int, y: SSAValue) -> SSAValue:
    x = b.index(x) if isinstance(x, int) else x
    return b.add(arith.SubiOp(x, y))


def if_else(b: KernelBuilder, cond: SSAValue, then, otherwise) -> list[SSAValue]:
    """`scf.if cond { then(builder) } else { otherwise(builder) }`, both yielding values of the same types."""
    blocks = []
    for build in (then, otherwise):
        block = Block()
        inner = KernelBuilder(block)
        values = build(inner)
        inner.insert(scf.YieldOp(*values))
        blocks.append(block)
    types = [v.type for v in blocks[0].last_op.operands]
    return list(b.insert(scf.IfOp(cond, types, Region(blocks[0]), Region(blocks[1]))).results)


def identity_epilogue(op: MatmulOp) -> bool:
    """The epilogue stores the f32 sum unchanged (`xla.yield %acc`)."""
    block = op.epilogue.block
    ops = list(block.ops)
    return (len(ops) == 1 and isinstance(ops[0], YieldOp) and ops[0].operands[0] is block.args[0]
            and op.init.type.element_type == f32)


def unit_stride_in_n(op: MatmulOp) -> bool:
    """The output is rank 1 and its map moves by one element per step of n (a vector of NR/16
    consecutive columns of a row is contiguous)."""
    results = op.maps[2].results
    if op.init.type.get_num_dims() != 1 or len(results) != 1:
        return False
    terms, _ = linear_form(results[0])
    return all(isinstance(atom, Var) for atom in terms) and terms.get(dim(2)) == 1 and dim(3) not in terms


CONSTANT_OFFSETS = 256
"""The most columns of a 16-bit B packed with constant offsets (`pack_b_constant`): each is about
ten ops of the unrolled row (the pairs' twenty), and the kernel IR's passes run in Python."""


def separable_offsets(m: IndexingMap, shape: list[int], along: int) -> tuple[Expr, Expr] | None:
    """(F, G) with the row-major linear offset of `m`'s element in a tensor of `shape` equal to
    F(b, k) + G(x), x the dimension `along` (1: m, 2: n), each simplified over the map's domain
    (a 1x1 convolution's G folds back to x times the feature count), or None when a term of the
    map mixes x with another dimension (or x is unused, or the shape is dynamic or too large for
    an i32 offset). A convolution's input read through its im2col map is separable: each index is an
    output position's term plus a kernel tap's (and a feature's and an image's) term."""
    if any(s < 0 for s in shape) or len(m.results) != len(shape) or m.symbols or m.runtime:
        return None
    total = 1
    for s in shape:
        total *= s
    if total >= 1 << 31:
        return None
    stride, strides = 1, []
    for s in reversed(shape):
        strides.append(stride)
        stride *= s
    f_terms: list[Expr] = []
    g_terms: list[Expr] = []
    f_const = 0
    n = dim(along)
    for expr, st in zip(m.results, reversed(strides)):
        terms, constant = linear_form(expr)
        f_const += constant * st
        for atom, c in terms.items():
            used = variables(atom)
            if n in used and len(used) > 1:
                return None
            (g_terms if n in used else f_terms).append(atom * (c * st))
    if not g_terms:
        return None
    f, g = (IndexingMap(m.dims, (e,)).simplify().results[0]
            for e in (sum(f_terms, Const(f_const)), sum(g_terms[1:], g_terms[0])))
    return f, g


def k_rolled_for_loop(b: KernelBuilder, lo, hi, inits: list, body, name: str = "", step: int = 1) -> list:
    """`for_loop`, with the loops over K ("k": the micro-kernel's and the packing's, "kc": the K
    blocks) kept rolled: the schedule's k_unroll is their unrolling. `unroll-loops` fully unrolled
    a K of 64 or less (a 256x256x64 product: 1536 FMAs, 1.5 MB of LLVM IR, 15 s of LLVM)."""
    return for_loop(b, lo, hi, inits, body, name, step, keep_rolled=name in ("k", "kc"))
