"""The CPU execution of `xla.wgmma_mma_async` (codegen/ir/warpgroup_ops.py) inside a block function
(block_simulation.py): a *warpgroup step* between two thread phases, like the warp steps of
warp_simulation.py. The phase before stores each thread's descriptors and accumulators in per-thread
buffers; the step computes every thread's D from the block's shared memory, read through the
descriptors of its warpgroup, into a per-thread result buffer that the phase after reads.

One internal function per (element, N) is made once per module:
`@__hlocc_sim_wgmma_{bf16,f16}_n{N}[_ta][_tb](a_desc, b_desc, c, d, window, window_bytes,
threads)` (`_ta`/`_tb`: that operand MN-major). It decodes the descriptors as PTX documents them
(warpgroup_ops.py's module doc: start address, LBO, SBO, swizzle mode; K-major or MN-major
canonical layouts of 8-row x 16-byte core matrices; the swizzle as an xor of address bits
[7, 7 + b) into bits [4, 4 + b)) against the shared-memory window, whose offsets are
the shared addresses the descriptors hold (warpgroup_ops.py in codegen/llvm). It does not share code
with the kernels' own layout functions (codegen/transforms/matmul/gpu_wgmma.py), so a misreading of
the layout in one shows up as a wrong product rather than as two agreeing mistakes.

D: thread t of warpgroup g (t = 128g + 32w + l) register i is row 16w + l/4 + 8((i/2) % 2),
column 8(i/4) + 2(l % 4) + i % 2 of the 64 x N tile; it is sum_k A(row, k)·B(col, k) over k = 0..15
in increasing k, each product exact in f32, then + C: exact whenever the sums are (integer-valued
data), as the mma.sync simulation.

What the hardware leaves undefined or this simulation does not model gives NaN in every register of
the thread, so a test fails instead of passing by luck: a descriptor that differs between the
threads of a warpgroup (the simulation reads thread 128g's), a base offset other than 0, an element
outside the block's shared memory.
"""

from __future__ import annotations

from llvmlite import ir

from hlocc.codegen.llvm.types import I64
from hlocc.codegen.llvm.warp_simulation import _to_f32

I32 = ir.IntType(32)
I16 = ir.IntType(16)
F32 = ir.FloatType()
WARPGROUP = 128


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _fields(b: ir.IRBuilder, desc: ir.Value) -> dict[str, ir.Value]:
    """The descriptor's fields in bytes: start, lbo, sbo; the row pitch W of a core matrix's 8 rows
    and the k stride of its second 16-byte chunk; the swizzle's xor mask; the base offset."""
    def field(shift: int, bits: int) -> ir.Value:
        return b.and_(b.lshr(desc, _c(shift)), _c((1 << bits) - 1))

    mode = field(62, 2)
    start, lbo, sbo = (b.shl(field(s, 14), _c(4)) for s in (0, 16, 32))

    def by_mode(none: int, b128: int, b64: int, b32: int) -> ir.Value:
        value = _c(b32)
        for m, v in ((0, none), (1, b128), (2, b64)):
            value = b.select(b.icmp_unsigned("==", mode, _c(m)), _c(v), value)
        return value

    return {"start": start, "lbo": lbo, "sbo": sbo, "pitch": by_mode(16, 128, 64, 32),
            "k_stride": b.select(b.icmp_unsigned("==", mode, _c(0)), lbo, _c(16)),
            "mask": by_mode(0, 7, 3, 1), "base_offset": field(49, 3)}


def _address(b: ir.IRBuilder, f: dict[str, ir.Value], row: ir.Value, k: int, mn_major: bool = False) -> ir.Value:
    """The byte address of element (row, k) of a K-major operand, or of an MN-major one (row
    contiguous; warpgroup_ops.py's module doc in codegen/ir)."""
    if mn_major:
        swizzled = b.icmp_unsigned("!=", f["mask"], _c(0))
        per_line = b.lshr(f["pitch"], _c(1))  # W/2 elements of 16 bits per W-byte line (8 unswizzled)
        per_line = b.select(swizzled, per_line, _c(8))
        line_stride = b.select(swizzled, f["lbo"], f["sbo"])  # between groups of per_line rows
        k_group = b.select(swizzled, f["sbo"], f["lbo"])  # between groups of 8 k
        k_pitch = b.select(swizzled, f["pitch"], _c(16))
        within, line = b.mul(b.urem(row, per_line), _c(2)), b.mul(b.udiv(row, per_line), line_stride)
        linear = b.add(f["start"], b.add(within, line))
        linear = b.add(linear, b.add(b.mul(_c(k % 8), k_pitch), b.mul(_c(k // 8), k_group)))
    else:
        linear = b.add(f["start"], b.add(b.mul(b.and_(row, _c(7)), f["pitch"]), b.mul(b.lshr(row, _c(3)), f["sbo"])))
        linear = b.add(linear, b.add(b.mul(_c(k // 8), f["k_stride"]), _c((k % 8) * 2)))
    return b.xor(linear, b.shl(b.and_(b.lshr(linear, _c(7)), f["mask"]), _c(4)))


def wgmma_function(module: ir.Module, element: str, n: int, trans: tuple[bool, bool] = (False, False)) -> ir.Function:
    """`trans`: (A MN-major, B MN-major)."""
    name = f"__hlocc_sim_wgmma_{element}_n{n}" + "".join(f"_t{'ab'[i]}" for i in range(2) if trans[i])
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ir.PointerType()] * 5 + [I64, I64]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    a_buf, b_buf, c_buf, d_buf, window, window_bytes, threads = fn.args
    bf16 = element == "bf16"
    acc_t = ir.VectorType(F32, n // 2)

    entry = fn.append_basic_block("entry")
    t_head, t_body = fn.append_basic_block("threads"), fn.append_basic_block("thread")
    i_head, i_body = fn.append_basic_block("registers"), fn.append_basic_block("register")
    t_next, done = fn.append_basic_block("thread.next"), fn.append_basic_block("done")
    b = ir.IRBuilder(entry)
    b.branch(t_head)
    b.position_at_end(t_head)
    t = b.phi(I64, "t")
    t.add_incoming(_c(0), entry)
    b.cbranch(b.icmp_signed("<", t, threads), t_body, done)

    b.position_at_end(t_body)
    group = b.and_(t, _c(~(WARPGROUP - 1)))
    warp, lane = b.lshr(b.and_(t, _c(WARPGROUP - 1)), _c(5)), b.and_(t, _c(31))

    def load_desc(buf: ir.Value, index: ir.Value) -> ir.Value:
        return b.load(b.gep(buf, [index], inbounds=True, source_etype=I64), typ=I64)

    a_desc, b_desc = load_desc(a_buf, group), load_desc(b_buf, group)
    fa, fb = _fields(b, a_desc), _fields(b, b_desc)
    bad = b.or_(b.icmp_unsigned("!=", load_desc(a_buf, t), a_desc), b.icmp_unsigned("!=", load_desc(b_buf, t), b_desc))
    bad = b.or_(bad, b.icmp_unsigned("!=", b.or_(fa["base_offset"], fb["base_offset"]), _c(0)))
    c_ptr = b.gep(c_buf, [t], inbounds=True, source_etype=acc_t)
    d_ptr = b.gep(d_buf, [t], inbounds=True, source_etype=acc_t)
    row = b.add(b.shl(warp, _c(4)), b.lshr(lane, _c(2)))
    col0 = b.shl(b.and_(lane, _c(3)), _c(1))
    b.branch(i_head)

    b.position_at_end(i_head)
    i = b.phi(I64, "i")
    i.add_incoming(_c(0), t_body)
    b.cbranch(b.icmp_signed("<", i, _c(n // 2)), i_body, t_next)

    b.position_at_end(i_body)
    r = b.add(row, b.shl(b.and_(b.lshr(i, _c(1)), _c(1)), _c(3)))
    col = b.add(col0, b.add(b.shl(b.lshr(i, _c(2)), _c(3)), b.and_(i, _c(1))))
    total = None
    outside = bad
    for k in range(16):
        values = []
        for f, line, mn_major in ((fa, r, trans[0]), (fb, col, trans[1])):
            address = _address(b, f, line, k, mn_major)
            outside = b.or_(outside, b.icmp_unsigned(">", b.add(address, _c(2)), window_bytes))
            safe = b.select(outside, _c(0), address)
            half = b.load(b.gep(window, [safe], inbounds=True, source_etype=ir.IntType(8)), typ=I16, align=1)
            values.append(_to_f32(b, b.zext(half, I32), bf16))
        product = b.fmul(*values)
        total = product if total is None else b.fadd(total, product)
    element_ptr = b.gep(c_ptr, [_c(0), i], inbounds=True, source_etype=acc_t)
    result = b.fadd(b.load(element_ptr, typ=F32), total)
    result = b.select(outside, ir.Constant(F32, float("nan")), result)
    b.store(result, b.gep(d_ptr, [_c(0), i], inbounds=True, source_etype=acc_t))
    i.add_incoming(b.add(i, _c(1)), b.block)
    b.branch(i_head)

    b.position_at_end(t_next)
    t.add_incoming(b.add(t, _c(1)), t_next)
    b.branch(t_head)
    b.position_at_end(done)
    b.ret_void()
    return fn


def warpgroup_step(module: ir.Module, b: ir.IRBuilder, op, operand_buffers: list[ir.Value], result_buffer: ir.Value,
                   window: ir.Value, window_bytes: int, threads: int) -> None:
    """Call the op's simulation function on the block's per-thread buffers and shared window."""
    fn = wgmma_function(module, op.element.data, op.n.value.data, (op.trans_a is not None, op.trans_b is not None))
    b.call(fn, [*operand_buffers, result_buffer, window, ir.Constant(I64, window_bytes), ir.Constant(I64, threads)])


__all__ = ["wgmma_function", "warpgroup_step"]
