"""The CPU execution of the TMA and mbarrier ops (codegen/ir/tma_ops.py) inside a block function
(block_simulation.py): internal functions, made once per module, that one simulated thread calls
where a GPU thread would issue the instruction. They follow the PTX ISA's semantics as
codegen/ir/tma_ops.py's module doc states them and share no code with the lowering
(codegen/transforms/matmul/gpu_wgmma_tma.py), so a misread layout or count fails a test instead of
agreeing twice.

An mbarrier's 8 bytes hold the simulation's own state: bits 0-19 the pending arrivals, 20-39 the
expected arrivals, 40-60 the tx-count (21 bits, two's complement), bit 63 the current phase's
parity. Arrivals and complete_tx update it as PTX says; when pending arrivals and tx-count are both
zero the phase completes (parity flips, pending arrivals start again).

A tensor map is the `TensorMapSpec` a kernel's `xla.tensor_map` holds, written by the translation
as 18 i64 (rank, element bytes, swizzle bytes, dims[5], byte strides[5] with stride[0] the element,
box[5]) — the description the cuda backend hands cuTensorMapEncodeTiled on a GPU —, and the
operand's address. `@__hlocc_sim_tma_load` copies the box at the coordinates at once: each box
element, innermost first, from global memory or zero where any coordinate is outside the tensor,
to the dense box at the destination with each 16-byte chunk's shared address bits [4, 4+b) xor-ed
with bits [7, 7+b) (the swizzle), then complete_tx of the whole box's bytes.

Sequential threads cannot block: a wait whose phase has not completed when the simulated thread
reaches it (on a GPU it would wait for a thread the simulation runs later, or for ever: a wrong
parity, a tx-count that never reaches zero), more arrivals than a phase expects, a destination not
128-byte aligned or a copy outside the block's shared memory *poison* the block: every byte of its
shared memory becomes 0xFF (NaN in 16-bit floats) and every later copy writes 0xFF, so the kernel's
result is NaN and a test fails. The flag is 8 bytes past the block's shared window (it is not
shared memory a kernel can address). Copies complete when issued, so a kernel that reads a tile
without waiting is blind here as it is to ptxas (the wait itself is checked: its parity and the
phase's counts).
"""

from __future__ import annotations

from llvmlite import ir

from hlocc.codegen.llvm.types import I64

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
PTR = ir.PointerType()
DESCRIPTION_WORDS = 18
MAX_RANK = 5


def _c(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def description_words(spec) -> list[int]:
    """The 18 i64 the simulation reads for a TensorMapSpec (module doc)."""
    rank = len(spec.dims)
    pad = [0] * (MAX_RANK - rank)
    return ([rank, spec.element_bytes, spec.swizzle] + list(spec.dims) + [1] * (MAX_RANK - rank)
            + [spec.element_bytes, *spec.strides] + pad + list(spec.box) + [1] * (MAX_RANK - rank))


def _function(module: ir.Module, name: str, args: list[ir.Type]) -> tuple[ir.Function, bool]:
    existing = module.globals.get(name)
    if existing is not None:
        return existing, False
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), args), name=name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    return fn, True


def _field(b: ir.IRBuilder, state: ir.Value, shift: int, bits: int) -> ir.Value:
    return b.and_(b.lshr(state, _c(shift)), _c((1 << bits) - 1))


def poison_function(module: ir.Module) -> ir.Function:
    """`(window, window_bytes)`: every byte of the window 0xFF, the flag past it set."""
    fn, new = _function(module, "__hlocc_sim_poison", [PTR, I64])
    if not new:
        return fn
    window, size = fn.args
    entry, head, body, done = (fn.append_basic_block(n) for n in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(_c(0), entry)
    b.cbranch(b.icmp_unsigned("<", i, size), body, done)
    b.position_at_end(body)
    b.store(ir.Constant(I8, 0xFF), b.gep(window, [i], source_etype=I8))
    i.add_incoming(b.add(i, _c(1)), body)
    b.branch(head)
    b.position_at_end(done)
    b.store(_c(1), b.gep(window, [size], source_etype=I8), align=1)
    b.ret_void()
    return fn


def _poison_if(b: ir.IRBuilder, fn: ir.Function, bad: ir.Value, window: ir.Value, size: ir.Value) -> None:
    with b.if_then(bad):
        b.call(poison_function(fn.module), [window, size])


def init_function(module: ir.Module) -> ir.Function:
    """`(bar, count)`: phase 0, `count` pending and expected arrivals, tx-count 0."""
    fn, new = _function(module, "__hlocc_sim_mbarrier_init", [PTR, I64])
    if new:
        bar, count = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.store(b.or_(count, b.shl(count, _c(20))), bar, align=8)
        b.ret_void()
    return fn


def arrive_function(module: ir.Module) -> ir.Function:
    """`(bar, tx_delta, arrivals, window, window_bytes)`: tx-count += tx_delta (expect_tx > 0,
    complete_tx < 0), pending -= arrivals, then the phase completes if both are zero."""
    fn, new = _function(module, "__hlocc_sim_mbarrier_arrive", [PTR, I64, I64, PTR, I64])
    if not new:
        return fn
    bar, delta, arrivals, window, size = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    state = b.load(bar, typ=I64, align=8)
    pending, expected = _field(b, state, 0, 20), _field(b, state, 20, 20)
    tx_bits = _field(b, state, 40, 21)
    tx = b.sub(tx_bits, b.select(b.icmp_unsigned(">=", tx_bits, _c(1 << 20)), _c(1 << 21), _c(0)))  # signed
    phase = b.lshr(state, _c(63))
    tx = b.add(tx, delta)
    pending = b.sub(pending, arrivals)
    bad = b.or_(b.icmp_signed("<", pending, _c(0)),
                b.or_(b.icmp_signed(">=", tx, _c(1 << 20)), b.icmp_signed("<", tx, _c(-(1 << 20)))))
    complete = b.and_(b.icmp_signed("==", pending, _c(0)), b.icmp_signed("==", tx, _c(0)))
    pending = b.select(complete, expected, pending)
    phase = b.select(complete, b.xor(phase, _c(1)), phase)
    new_state = b.or_(b.or_(b.and_(pending, _c((1 << 20) - 1)), b.shl(expected, _c(20))),
                      b.or_(b.shl(b.and_(tx, _c((1 << 21) - 1)), _c(40)), b.shl(phase, _c(63))))
    b.store(new_state, bar, align=8)
    _poison_if(b, fn, bad, window, size)
    b.ret_void()
    return fn


def wait_function(module: ir.Module) -> ir.Function:
    """`(bar, parity, window, window_bytes)`: the phase of `parity` must have completed, i.e. the
    current phase's parity differs; else the block is poisoned (module doc)."""
    fn, new = _function(module, "__hlocc_sim_mbarrier_wait", [PTR, I64, PTR, I64])
    if not new:
        return fn
    bar, parity, window, size = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    phase = b.lshr(b.load(bar, typ=I64, align=8), _c(63))
    _poison_if(b, fn, b.icmp_unsigned("==", phase, b.and_(parity, _c(1))), window, size)
    b.ret_void()
    return fn


def tma_load_function(module: ir.Module) -> ir.Function:
    """`(description, base, dst, bar, c0, .., c4, window, window_bytes)`: the box at (c0, .., c4)
    copied, out-of-bounds elements zero, swizzled into the dense box at dst; complete_tx of the
    box's bytes on bar (module doc). 16-bit elements."""
    fn, new = _function(module, "__hlocc_sim_tma_load", [PTR, PTR, PTR, PTR] + [I64] * MAX_RANK + [PTR, I64])
    if not new:
        return fn
    desc, base, dst, bar, *coords, window, size = fn.args
    entry, head, body, done = (fn.append_basic_block(n) for n in ("entry", "head", "body", "done"))
    b = ir.IRBuilder(entry)

    def word(k: int) -> ir.Value:
        return b.load(b.gep(desc, [_c(k)], source_etype=I64), typ=I64)

    elem, swizzle = word(1), word(2)
    dims = [word(3 + d) for d in range(MAX_RANK)]
    strides = [word(8 + d) for d in range(MAX_RANK)]
    box = [word(13 + d) for d in range(MAX_RANK)]
    total = box[0]
    for d in range(1, MAX_RANK):
        total = b.mul(total, box[d])
    start = b.sub(b.ptrtoint(dst, I64), b.ptrtoint(window, I64))
    poisoned = b.icmp_unsigned("!=", b.load(b.gep(window, [size], source_etype=I8), typ=I64, align=1), _c(0))
    misaligned = b.icmp_unsigned("!=", b.and_(start, _c(127)), _c(0))
    # the xor mask of the 16-byte chunk: swizzle / 16 - 1 (0 without a swizzle)
    mask = b.select(b.icmp_unsigned("==", swizzle, _c(0)), _c(0), b.sub(b.udiv(swizzle, _c(16)), _c(1)))
    b.branch(head)

    b.position_at_end(head)
    i = b.phi(I64)
    i.add_incoming(_c(0), entry)
    b.cbranch(b.icmp_unsigned("<", i, total), body, done)

    b.position_at_end(body)
    rest, inside, source = i, ir.Constant(I1, 1), _c(0)
    for d in range(MAX_RANK):
        index = b.urem(rest, box[d])
        rest = b.udiv(rest, box[d])
        g = b.add(coords[d], index)  # coordinates are signed: a box may start before the tensor
        inside = b.and_(inside, b.and_(b.icmp_signed(">=", g, _c(0)), b.icmp_signed("<", g, dims[d])))
        source = b.add(source, b.mul(g, strides[d]))
    address = b.add(start, b.mul(i, elem))
    address = b.xor(address, b.shl(b.and_(b.lshr(address, _c(7)), mask), _c(4)))
    outside = b.icmp_unsigned(">", b.add(address, elem), size)
    value = b.load(b.gep(base, [b.select(inside, source, _c(0))], source_etype=I8), typ=I16, align=1)
    value = b.select(inside, value, ir.Constant(I16, 0))
    value = b.select(poisoned, ir.Constant(I16, 0xFFFF), value)
    with b.if_else(outside) as (then, otherwise):
        with then:
            b.call(poison_function(module), [window, size])
        with otherwise:
            b.store(value, b.gep(window, [address], source_etype=I8), align=1)
    i.add_incoming(b.add(i, _c(1)), b.block)
    b.branch(head)

    b.position_at_end(done)
    b.call(arrive_function(module), [bar, b.sub(_c(0), b.mul(total, elem)), _c(0), window, size])
    _poison_if(b, fn, misaligned, window, size)
    b.ret_void()
    return fn


__all__ = ["DESCRIPTION_WORDS", "MAX_RANK", "arrive_function", "description_words", "init_function",
           "poison_function", "tma_load_function", "wait_function"]
