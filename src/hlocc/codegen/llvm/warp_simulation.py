"""The CPU execution of the warp-collective matrix ops (`xla.ldmatrix`, `xla.mma_sync`;
codegen/ir/warp_ops.py) inside a block function (block_simulation.py): a *warp step* between two
thread phases. The phase before stores each thread's operands in per-lane buffers ([threads x T]);
the step computes every lane's result from the lanes of its warp, by the fragment layouts PTX
documents (warp_ops.py's module doc), into a per-lane result buffer that the phase after reads.

Each step is a call of one internal function per op kind (made once per module), so a kernel with
many mma ops stays small: `@__hlocc_sim_ldmatrix_x{count}[_trans](ptrs, indices, out, threads)` and
`@__hlocc_sim_mma_{bf16,f16}(a, b, c, d, threads)`, all buffers [threads x operand type].

The mma step forms each product of the two 16-bit operands exactly in f32 and adds them in
increasing k, then C: exact whenever the sums are (integer-valued data), which is what the tests
compare; a tensor core's order of addition is not specified by PTX.
"""

from __future__ import annotations

from llvmlite import ir

from hlocc.codegen.ir import LdMatrixOp, MmaSyncOp
from hlocc.codegen.llvm.types import I64

I32 = ir.IntType(32)
I16 = ir.IntType(16)
F32 = ir.FloatType()
WARP = 32


def _lane_loop(fn: ir.Function, threads: ir.Value, body) -> ir.IRBuilder:
    """for t in [0, threads): body(b, t, warp_base, lane), in `fn`'s entry; returns the builder
    positioned after the loop."""
    entry = fn.append_basic_block("entry")
    header = fn.append_basic_block("lanes")
    inner = fn.append_basic_block("lane")
    done = fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(header)
    b.position_at_end(header)
    t = b.phi(I64, "t")
    t.add_incoming(ir.Constant(I64, 0), entry)
    b.cbranch(b.icmp_signed("<", t, threads), inner, done)
    b.position_at_end(inner)
    base = b.and_(t, ir.Constant(I64, ~(WARP - 1)))
    lane = b.and_(t, ir.Constant(I64, WARP - 1))
    body(b, t, base, lane)
    t.add_incoming(b.add(t, ir.Constant(I64, 1)), b.block)
    b.branch(header)
    b.position_at_end(done)
    return b


def _function(module: ir.Module, name: str, n_buffers: int) -> tuple[ir.Function, bool]:
    existing = module.globals.get(name)
    if existing is not None:
        return existing, False
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * n_buffers + [I64]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    return fn, True


def ldmatrix_function(module: ir.Module, count: int, trans: bool) -> ir.Function:
    """(row pointers, row indices, out words, threads): lane t's word j = elements (t/4, 2(t%4)+h)
    of matrix j for h = 0, 1 (low half first), the rows given by lanes 8j..8j+7 of its warp; with
    `trans`, elements (2(t%4)+h, t/4)."""
    fn, new = _function(module, f"__hlocc_sim_ldmatrix_x{count}{'_trans' if trans else ''}", 3)
    if not new:
        return fn
    ptrs, indices, out, threads = fn.args
    words_t = ir.VectorType(I32, count)

    def body(b: ir.IRBuilder, t, base, lane) -> None:
        quad, row = b.and_(lane, ir.Constant(I64, 3)), b.lshr(lane, ir.Constant(I64, 2))
        result = ir.Constant(words_t, ir.Undefined)
        for j in range(count):
            halves = []
            for h in range(2):
                if trans:  # the lane holding row 2q + h of matrix j; column t/4
                    source = b.add(base, b.add(ir.Constant(I64, 8 * j + h), b.shl(quad, ir.Constant(I64, 1))))
                    column = row
                else:  # the lane holding row t/4 of matrix j; column 2q + h
                    source = b.add(base, b.add(ir.Constant(I64, 8 * j), row))
                    column = b.add(b.shl(quad, ir.Constant(I64, 1)), ir.Constant(I64, h))
                ptr = b.load(b.gep(ptrs, [source], inbounds=True, source_etype=ir.PointerType()), typ=ir.PointerType())
                index = b.load(b.gep(indices, [source], inbounds=True, source_etype=I64), typ=I64)
                element = b.gep(ptr, [b.add(index, column)], inbounds=True, source_etype=I16)
                halves.append(b.zext(b.load(element, typ=I16), I32))
            word = b.or_(halves[0], b.shl(halves[1], ir.Constant(I32, 16)))
            result = b.insert_element(result, word, ir.Constant(I32, j))
        b.store(result, b.gep(out, [t], inbounds=True, source_etype=words_t))

    _lane_loop(fn, threads, body).ret_void()
    return fn


def _to_f32(b: ir.IRBuilder, half: ir.Value, bf16: bool) -> ir.Value:
    """A 16-bit operand (in the low bits of an i32) as f32, exactly."""
    if bf16:
        return b.bitcast(b.shl(half, ir.Constant(I32, 16)), F32)
    return b.fpext(b.bitcast(b.trunc(half, I16), ir.HalfType()), F32)


def _half_of(b: ir.IRBuilder, buffer: ir.Value, words: int, lane: ir.Value, word: int, high: bool) -> ir.Value:
    vector_t = ir.VectorType(I32, words)
    vector = b.load(b.gep(buffer, [lane], inbounds=True, source_etype=vector_t), typ=vector_t)
    value = b.extract_element(vector, ir.Constant(I32, word))
    return b.lshr(value, ir.Constant(I32, 16)) if high else b.and_(value, ir.Constant(I32, 0xFFFF))


def mma_function(module: ir.Module, element: str) -> ir.Function:
    """(A words, B words, C, D, threads): each lane's D = A·B + C of its warp's m16n8k16 fragments."""
    fn, new = _function(module, f"__hlocc_sim_mma_{element}", 4)
    if not new:
        return fn
    a_buf, b_buf, c_buf, d_buf, threads = fn.args
    bf16 = element == "bf16"
    f32x4 = ir.VectorType(F32, 4)

    def body(b: ir.IRBuilder, t, base, lane) -> None:
        group, quad = b.lshr(lane, ir.Constant(I64, 2)), b.and_(lane, ir.Constant(I64, 3))
        c = b.load(b.gep(c_buf, [t], inbounds=True, source_etype=f32x4), typ=f32x4)
        d = ir.Constant(f32x4, ir.Undefined)
        for i in range(4):
            column = b.add(b.shl(quad, ir.Constant(I64, 1)), ir.Constant(I64, i % 2))
            total = None
            for k in range(16):
                # A(row = g + 8(i/2), k): lane g*4 + (k%8)/2, word (i/2) + 2(k/8); B(k, column): lane
                # column*4 + (k%8)/2, word k/8; the odd k in the high half.
                a_lane = b.add(base, b.add(b.shl(group, ir.Constant(I64, 2)), ir.Constant(I64, (k % 8) // 2)))
                b_lane = b.add(base, b.add(b.shl(column, ir.Constant(I64, 2)), ir.Constant(I64, (k % 8) // 2)))
                x = _to_f32(b, _half_of(b, a_buf, 4, a_lane, i // 2 + 2 * (k // 8), bool(k % 2)), bf16)
                y = _to_f32(b, _half_of(b, b_buf, 2, b_lane, k // 8, bool(k % 2)), bf16)
                product = b.fmul(x, y)
                total = product if total is None else b.fadd(total, product)
            d = b.insert_element(d, b.fadd(b.extract_element(c, ir.Constant(I32, i)), total), ir.Constant(I32, i))
        b.store(d, b.gep(d_buf, [t], inbounds=True, source_etype=f32x4))

    _lane_loop(fn, threads, body).ret_void()
    return fn


def warp_step(module: ir.Module, b: ir.IRBuilder, op: LdMatrixOp | MmaSyncOp, operand_buffers: list[ir.Value],
              result_buffer: ir.Value, threads: int) -> None:
    """Call the op's simulation function on the block's lane buffers."""
    if isinstance(op, LdMatrixOp):
        fn = ldmatrix_function(module, op.count.value.data, op.trans is not None)
    else:
        fn = mma_function(module, op.element.data)
    b.call(fn, [*operand_buffers, result_buffer, ir.Constant(I64, threads)])


__all__ = ["ldmatrix_function", "mma_function", "warp_step"]
