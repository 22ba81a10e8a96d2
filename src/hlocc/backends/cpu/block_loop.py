"""The LLVM wrapper every CPU kernel's object code exports: the block loop that runs a kernel's
threads (backends/cpu/kernel.py compiles the kernel function, the launcher calls this loop over a
range of blocks), and the internal linkage of everything else, so that many kernels' objects share
one engine."""

from __future__ import annotations

from llvmlite import ir

from hlocc.codegen.llvm import I64


def internalize(module: ir.Module, keep: set[str]) -> None:
    """Every definition but the block loop internal: objects of many kernels share one engine."""
    for value in module.global_values:
        if value.name not in keep and not getattr(value, "is_declaration", False):
            value.linkage = "internal" if isinstance(value, ir.Function) else value.linkage or "internal"


def add_block_loop(module: ir.Module, kernel: ir.Function, num_buffers: int, threads: int, name: str) -> None:
    """void name(ptr buffers, i64 first, i64 end): for block in [first, end): for thread in
    [0, threads): kernel(buffers[0..n), thread, block)."""
    ptr = ir.PointerType()
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr, I64, I64]), name=name)
    table, first, end = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    buffers = [b.load(b.gep(table, [ir.Constant(I64, i)], inbounds=True, source_etype=ptr), typ=ptr)
               for i in range(num_buffers)]
    entry = b.block
    block_header = fn.append_basic_block("blocks")
    thread_header = fn.append_basic_block("threads")
    thread_body = fn.append_basic_block("thread")
    block_latch = fn.append_basic_block("next_block")
    done = fn.append_basic_block("done")
    b.branch(block_header)
    b.position_at_end(block_header)
    block = b.phi(I64, "block")
    block.add_incoming(first, entry)
    b.cbranch(b.icmp_signed("<", block, end), thread_header, done)
    b.position_at_end(thread_header)
    thread = b.phi(I64, "thread")
    thread.add_incoming(ir.Constant(I64, 0), block_header)
    b.cbranch(b.icmp_signed("<", thread, ir.Constant(I64, threads)), thread_body, block_latch)
    b.position_at_end(thread_body)
    b.call(kernel, [*buffers, thread, block])
    next_thread = b.add(thread, ir.Constant(I64, 1), flags=["nuw", "nsw"])
    thread.add_incoming(next_thread, thread_body)
    b.branch(thread_header)
    b.position_at_end(block_latch)
    next_block = b.add(block, ir.Constant(I64, 1))
    block.add_incoming(next_block, block_latch)
    b.branch(block_header)
    b.position_at_end(done)
    b.ret_void()


__all__ = ["add_block_loop", "internalize"]
