"""The CPU execution of a block of GPU-form threads (DESIGN "One kernel model"): shared memory,
barriers and warp shuffles, by *barrier fission* of the thread loop, at the LLVM translation.

A kernel entry function without these ops runs once per thread: the block loop of the CPU
backend calls it for thread 0, 1, ... of each block. One with them is translated instead into a
*block function*, called once per block, that runs the threads of its block in phases:

    entry:  one buffer per `xla.shared_memory` (the block's shared memory), one per value that
            lives across a phase boundary ([threads x T]), one per shuffled value ([threads x T])
    phase 0: for thread in [0, threads): the ops before the first barrier or shuffle
    (barrier)
    phase 1: for thread in [0, threads): the ops up to the next one ...
    (shuffle_reduce: the phase before stores each thread's operands; a block step combines them
     lane by lane; the phase after reads each thread's result)
    ...

Every thread finishes a phase before any thread starts the next, which is exactly what a barrier
guarantees, so kernels that are correct on a GPU are correct here, and a kernel that reads
shared memory before the barrier that orders the write is caught by the SIMT-simulation tests as
a wrong answer, as on a GPU. `gpu.barrier`, `xla.shuffle_reduce` and the warp ops must therefore
be at the top level of the entry function (emitters put them there, as XLA's do), or at the top
level of an `scf.for` there whose bounds are the same for every thread (constants, arguments):
such a loop is *fissioned*, i.e. it runs once per block around its body's phases (a GPU matmul's K
loop), its iteration values kept per thread ([threads x T], stored by the phase before the loop and
by the body's last phase, read by the phases after). Elsewhere the translation fails with a message.

`xla.ldmatrix` and `xla.mma_sync` (warp-collective, codegen/ir/warp_ops.py) are steps between
phases like a shuffle: the phase before stores each thread's operands, warp_simulation.py computes
each lane's result from the lanes of its warp by PTX's fragment layouts, the phase after reads it.
`xla.wgmma_mma_async` (sm_90a, codegen/ir/warpgroup_ops.py) is such a step over the 128 threads of a
warpgroup, reading A and B through its descriptors from the block's shared memory: one window, each
buffer at a multiple of 1024 bytes in it, whose offsets are the addresses the descriptors hold
(warpgroup_simulation.py).

A value defined in one phase and used in a later one is recomputed there when it is a pure
function of the ids, constants and arguments (index arithmetic, addresses: the common case) and
otherwise stored per thread at its definition and loaded where used (a loaded value, a loop's
result).

`xla.shuffle_reduce` combines each lane with lane ^ distance for distance = max_distance, ..., 1
(a butterfly: every lane ends with the combination of its group of 2·max_distance lanes; on a GPU,
`shfl.sync.bfly`). The combiner is called as (own values, other lane's values), as on a GPU, so a
non-commutative combiner gives each lane the result a GPU would.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from xdsl.dialects import arith, func, gpu, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.traits import is_side_effect_free

from hlocc.codegen.ir import SharedMemoryOp, ShuffleReduceOp
from hlocc.codegen.ir.warp_ops import WARP_OPS
from hlocc.codegen.ir.warpgroup_ops import WgmmaMmaAsyncOp
from hlocc.codegen.llvm.types import I64, TranslationError, llvm_type
from hlocc.codegen.llvm.warp_simulation import warp_step
from hlocc.codegen.llvm.warpgroup_simulation import WARPGROUP, warpgroup_step

STEP_OPS = (*WARP_OPS, WgmmaMmaAsyncOp)
"""Ops run as a step between thread phases from the lanes of a warp or warpgroup."""
PARALLEL_OPS = (gpu.BarrierOp, ShuffleReduceOp, SharedMemoryOp, *STEP_OPS)
_BOUNDARIES = (gpu.BarrierOp, ShuffleReduceOp, *STEP_OPS)
SHARED_WINDOW_ALIGNMENT = 1024
SIMULATION_STATE_BYTES = 8
"""Bytes past the window: the TMA/mbarrier simulation's poison flag (tma_simulation.py)."""
"""Each shared buffer's alignment in the block's window: what a wgmma descriptor's 128-byte swizzle
needs of a tile (the GPU aligns a wgmma kernel's shared buffers the same way)."""


def needs_block_function(fn: func.FuncOp) -> bool:
    return any(isinstance(op, PARALLEL_OPS) for op in fn.walk())


def thread_count(fn: func.FuncOp) -> int:
    """Threads per block, from the range of the entry function's `gpu.thread_id`."""
    for op in fn.walk():
        if isinstance(op, gpu.ThreadIdOp):
            bounds = op.attributes.get("xla.range")
            if bounds is None:
                raise _error(fn, "gpu.thread_id has no xla.range: the block size is unknown")
            return int(bounds.data[1].value.data) + 1
    return 1


def _error(fn: func.FuncOp, message: str):
    return TranslationError(f"@{fn.sym_name.data}: {message}")


def _has_boundary(op: Operation) -> bool:
    return any(isinstance(inner, _BOUNDARIES) for inner in op.walk())


def _uniform(fn: func.FuncOp, loop: scf.ForOp) -> None:
    """A fissioned loop runs once per block: its bounds must be the same for every thread
    (constants or the function's arguments)."""
    for v in (loop.lb, loop.ub, loop.step):
        if not (isinstance(v.owner, arith.ConstantOp) or (isinstance(v, BlockArgument) and v.owner is fn.body.block)):
            raise _error(fn, f"'{loop.name}' holds a barrier, shuffle or warp op but its bounds are not constants "
                             "or arguments (the same for every thread)")


def _phases(fn: func.FuncOp, ops: list[Operation] | None = None, items: list | None = None) -> list[tuple[str, object]]:
    """[("threads", ops) | ("shuffle", op) | ("warp", op) | ("loop", for) ... ("end", for)] in
    order; barriers separate thread phases; a top-level `scf.for` holding barriers (or shuffles,
    warp ops) is fissioned: its body's phases between ("loop", for) and ("end", for)."""
    items = [] if items is None else items
    current: list[Operation] = []
    for op in (fn.body.block.ops if ops is None else ops):
        if isinstance(op, scf.ForOp) and _has_boundary(op):
            _uniform(fn, op)
            items.append(("threads", current))
            items.append(("loop", op))
            _phases(fn, list(op.body.block.ops), items)
            items.append(("end", op))
            current = []
            continue
        for inner in op.walk():
            if inner is not op and isinstance(inner, _BOUNDARIES):
                raise _error(fn, f"'{inner.name}' inside '{op.name}': barriers, shuffles and warp ops must be at the "
                                 "top level of a kernel's entry function, or of a loop there with uniform bounds, to "
                                 "run on the CPU")
        if isinstance(op, gpu.BarrierOp):
            items.append(("threads", current))
            current = []
        elif isinstance(op, (ShuffleReduceOp, *STEP_OPS)):
            items.append(("threads", current))
            items.append(("shuffle" if isinstance(op, ShuffleReduceOp) else "warp", op))
            current = []
        else:
            current.append(op)
    items.append(("threads", current))
    return items


def _uses(ops: list[Operation]) -> list[SSAValue]:
    """Operands of `ops` (and of the ops nested in them), in order, without duplicates."""
    seen: dict[SSAValue, None] = {}
    for op in ops:
        for inner in op.walk():
            for v in inner.operands:
                seen.setdefault(v, None)
    return list(seen)


def _recomputable(op: Operation) -> bool:
    if isinstance(op, (ShuffleReduceOp, *STEP_OPS)):
        return False
    return not op.regions and (is_side_effect_free(op) or isinstance(op, (gpu.ThreadIdOp, gpu.BlockIdOp,
                                                                          SharedMemoryOp)))


def _phase_inputs(used: list[SSAValue], k: int, phase_of: dict[Operation, int],
                  slotted: set[SSAValue]) -> tuple[list[SSAValue], set[Operation]]:
    """(values phase k loads, ops phase k recomputes) for the values it uses that earlier phases
    define: recomputable ops are cloned with their recomputable operands; the rest are loaded.
    `slotted` values (a warp op's or shuffle's results, a fissioned loop's iteration values and
    results) always live in per-thread buffers."""
    closure: set[Operation] = set()
    loaded: list[SSAValue] = []

    def visit(v: SSAValue) -> None:
        if v in slotted:
            if v not in loaded:
                loaded.append(v)
            return
        owner = v.owner
        if not isinstance(owner, Operation) or owner not in phase_of or phase_of[owner] >= k:
            return  # an argument, a loop's induction variable, or defined in this phase
        if _recomputable(owner):
            if owner not in closure:
                closure.add(owner)
                for operand in owner.operands:
                    visit(operand)
        elif v not in loaded:
            loaded.append(v)

    for v in used:
        visit(v)
    return loaded, closure


def _operands_after(items: list, k: int) -> list[SSAValue]:
    """What the thread phase k hands to the item after it: a shuffle's or warp op's operands
    (per lane), a fissioned loop's initial values."""
    if k + 1 >= len(items):
        return []
    kind, op = items[k + 1]
    if kind in ("shuffle", "warp"):
        return list(op.operands)
    if kind == "loop":
        return list(op.iter_args)
    return []


def translate_block_function(ft) -> None:
    """Translate `ft.fn` (a `_FunctionTranslator`'s kernel entry function) as a block function."""
    fn = ft.fn
    b: ir.IRBuilder = ft.b
    threads = thread_count(fn)
    items = _phases(fn)
    if any(kind == "warp" for kind, _ in items) and threads % 32:
        raise _error(fn, f"warp ops need whole warps, but the block has {threads} threads")
    if any(kind == "warp" and isinstance(op, WgmmaMmaAsyncOp) for kind, op in items) and threads % WARPGROUP:
        raise _error(fn, f"warpgroup ops need whole warpgroups (128 threads), but the block has {threads} threads")
    order = {op: k for k, op in enumerate(fn.walk())}
    phase_of: dict[Operation, int] = {}
    for k, (kind, payload) in enumerate(items):
        for op in (payload if kind == "threads" else [payload] if kind != "loop" else []):
            phase_of[op] = k
    base = dict(ft.values)  # the function's arguments (and, inside a fissioned loop, its induction variable)

    # Shared memory: one window, each op's buffer in it at a multiple of SHARED_WINDOW_ALIGNMENT, so
    # an offset in the window is a shared-memory address (what wgmma descriptors hold).
    shared_ops = [op for op in fn.walk() if isinstance(op, SharedMemoryOp)]
    window_bytes = 0
    offsets = []
    for op in shared_ops:
        offsets.append(window_bytes)
        window_bytes += -(-op.size.value.data // SHARED_WINDOW_ALIGNMENT) * SHARED_WINDOW_ALIGNMENT
    if shared_ops:
        # 8 bytes past the window: the TMA/mbarrier simulation's poison flag (tma_simulation.py), clear
        ft.shared_window = _buffer(b, ir.IntType(8), window_bytes + SIMULATION_STATE_BYTES, "shared",
                                   SHARED_WINDOW_ALIGNMENT)
        ft.shared_window_bytes = window_bytes
        b.store(ir.Constant(I64, 0), b.gep(ft.shared_window, [ir.Constant(I64, window_bytes)], inbounds=True,
                                           source_etype=ir.IntType(8)))
        for op, offset in zip(shared_ops, offsets):
            ft.shared[op] = b.gep(ft.shared_window, [ir.Constant(I64, offset)], inbounds=True,
                                  source_etype=ir.IntType(8))

    def slots(values, name: str) -> dict[SSAValue, tuple[ir.Value, ir.Type]]:
        return {v: (_buffer(b, llvm_type(v.type), threads, name), llvm_type(v.type)) for v in values}

    # Per-thread buffers of the values that cross a step: a shuffle's or warp op's operands and
    # results, a fissioned loop's iteration values (its results are the same buffers).
    lanes = {op: slots(list(op.operands), "lanes") for kind, op in items if kind in ("shuffle", "warp")}
    results = {op: slots(list(op.results), "result") for kind, op in items if kind == "warp"}
    iteration = {op: slots(list(op.body.block.args[1:]), "iter") for kind, op in items if kind == "loop"}
    slot_of: dict[SSAValue, tuple[ir.Value, ir.Type]] = {}
    for kind, op in items:
        if kind == "shuffle":
            slot_of.update({r: lanes[op][operand] for r, operand in zip(op.results, op.operands)})
        elif kind == "warp":
            slot_of.update(results[op])
        elif kind == "loop":
            slot_of.update(iteration[op])
            slot_of.update({r: iteration[op][a] for r, a in zip(op.results, op.body.block.args[1:])})

    # What each thread phase needs from earlier phases; which values are stored per thread.
    needs: dict[int, list[SSAValue]] = {}
    recompute: dict[int, list[Operation]] = {}
    stored: set[SSAValue] = set()
    for k, (kind, payload) in enumerate(items):
        if kind == "threads":
            used = _uses(payload)
            used += [v for v in _operands_after(items, k) if v not in used]
            needs[k], closure = _phase_inputs(used, k, phase_of, set(slot_of))
            recompute[k] = sorted(closure, key=order.__getitem__)
            stored.update(v for v in needs[k] if v not in slot_of)
    spill = slots([v for v in _uses(list(fn.body.block.ops)) if v in stored], "spill")
    loops: list[tuple[ir.PhiInstr, ir.Block, ir.Block]] = []

    for k, (kind, payload) in enumerate(items):
        if kind == "shuffle":
            _shuffle_step(ft, payload, lanes[payload], threads)
            continue
        if kind == "warp":
            operands, result = [lanes[payload][v][0] for v in payload.operands], results[payload][payload.results[0]][0]
            if isinstance(payload, WgmmaMmaAsyncOp):
                if ft.shared_window is None:
                    raise _error(fn, f"'{payload.name}' in a kernel without shared memory for its operands")
                warpgroup_step(ft.t.module, b, payload, operands, result, ft.shared_window, window_bytes, threads)
            else:
                warp_step(ft.t.module, b, payload, operands, result, threads)
            continue
        if kind == "loop":
            loops.append(_loop_begin(ft, payload, base))
            continue
        if kind == "end":
            _loop_end(ft, payload, base, *loops.pop())
            continue

        def phase(thread: ir.Value, k=k, payload=payload) -> None:
            ft.values = dict(base)
            ft.ids["thread"] = thread
            for v in needs[k]:  # loads first: a recomputed op may use a loaded value
                ft.values[v] = _load(b, spill.get(v) or slot_of[v], thread)
            for op in recompute[k]:
                ft.op(op)
            for op in payload:
                if isinstance(op, func.ReturnOp):
                    continue
                if isinstance(op, scf.YieldOp):  # the end of a fissioned loop's iteration
                    loop = op.parent_op()
                    for arg, value in zip(loop.body.block.args[1:], op.operands):
                        b.store(ft.v(value), _element(b, iteration[loop][arg], thread))
                    continue
                ft.op(op)
                for r in op.results:
                    if r in spill:
                        b.store(ft.values[r], _element(b, spill[r], thread))
            after = items[k + 1] if k + 1 < len(items) else None
            if after is not None and after[0] in ("shuffle", "warp"):
                for operand in after[1].operands:
                    b.store(ft.v(operand), _element(b, lanes[after[1]][operand], thread))
            elif after is not None and after[0] == "loop":
                for arg, init in zip(after[1].body.block.args[1:], after[1].iter_args):
                    b.store(ft.v(init), _element(b, iteration[after[1]][arg], thread))

        _counted_loop(ft, threads, phase, "thread")
    b.ret_void()


def _bound(ft, value: SSAValue, base: dict) -> ir.Value:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return ir.Constant(llvm_type(value.type), owner.value.value.data)
    return base[value]


def _loop_begin(ft, loop: scf.ForOp, base: dict) -> tuple[ir.PhiInstr, ir.Block, ir.Block]:
    """The block-level header of a fissioned loop; its induction variable joins `base`."""
    b: ir.IRBuilder = ft.b
    lb, ub = _bound(ft, loop.lb, base), _bound(ft, loop.ub, base)
    pre = b.block
    header = ft.llfn.append_basic_block("fission.header")
    body = ft.llfn.append_basic_block("fission.body")
    exit_ = ft.llfn.append_basic_block("fission.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(lb.type, "iv")
    iv.add_incoming(lb, pre)
    b.cbranch(b.icmp_signed("<", iv, ub), body, exit_)
    b.position_at_end(body)
    base[loop.body.block.args[0]] = iv
    return iv, header, exit_


def _loop_end(ft, loop: scf.ForOp, base: dict, iv: ir.PhiInstr, header: ir.Block, exit_: ir.Block) -> None:
    b: ir.IRBuilder = ft.b
    iv.add_incoming(b.add(iv, _bound(ft, loop.step, base)), b.block)
    b.branch(header)
    b.position_at_end(exit_)


def _buffer(b: ir.IRBuilder, element: ir.Type, count: int, name: str, alignment: int = 64) -> ir.Value:
    """An `alloca [count x element]`, aligned, as an opaque pointer (lower-tensors' form)."""
    buf = b.alloca(ir.ArrayType(element, count), name=name)
    buf.align = alignment
    buf.type = ir.PointerType()
    return buf


def _element(b: ir.IRBuilder, slot: tuple[ir.Value, ir.Type], index: ir.Value) -> ir.Value:
    return b.gep(slot[0], [index], inbounds=True, source_etype=slot[1])


def _load(b: ir.IRBuilder, slot: tuple[ir.Value, ir.Type], index: ir.Value) -> ir.Value:
    return b.load(_element(b, slot, index), typ=slot[1])


def _counted_loop(ft, count: int, body: Callable[[ir.Value], None], name: str) -> None:
    """for i in [0, count): body(i), in `ft`'s function at its builder."""
    b: ir.IRBuilder = ft.b
    pre = b.block
    header = ft.llfn.append_basic_block(f"{name}s")
    inner = ft.llfn.append_basic_block(name)
    done = ft.llfn.append_basic_block(f"{name}s.done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name)
    i.add_incoming(ir.Constant(I64, 0), pre)
    b.cbranch(b.icmp_signed("<", i, ir.Constant(I64, count)), inner, done)
    b.position_at_end(inner)
    body(i)
    i.add_incoming(b.add(i, ir.Constant(I64, 1), flags=["nuw", "nsw"]), b.block)
    b.branch(header)
    b.position_at_end(done)


def _shuffle_step(ft, op: ShuffleReduceOp, lanes: dict[SSAValue, ir.Value], threads: int) -> None:
    """For distance = max_distance, ..., 1: every pair of lanes (t, t | distance) with t & distance
    == 0 becomes (combiner(own, other), combiner(other, own)) — the butterfly, in place."""
    b: ir.IRBuilder = ft.b
    combiner = ft.t.functions[op.combiner.root_reference.data]
    arrays = [lanes[v] for v in op.operands]
    distance = op.max_distance.value.data
    while distance >= 1:
        d = ir.Constant(I64, distance)

        def pair(t: ir.Value, d=d) -> None:
            partner = b.or_(t, d)
            lower = b.icmp_signed("==", b.and_(t, d), ir.Constant(I64, 0))
            inside = b.icmp_signed("<", partner, ir.Constant(I64, threads))
            then = ft.llfn.append_basic_block("shuffle.pair")
            after = ft.llfn.append_basic_block("shuffle.next")
            b.cbranch(b.and_(lower, inside), then, after)
            b.position_at_end(then)
            own = [_load(b, a, t) for a in arrays]
            other = [_load(b, a, partner) for a in arrays]
            for where, result in ((t, _call(b, combiner, own + other, len(arrays))),
                                  (partner, _call(b, combiner, other + own, len(arrays)))):
                for a, value in zip(arrays, result):
                    b.store(value, _element(b, a, where))
            b.branch(after)
            b.position_at_end(after)

        _counted_loop(ft, threads, pair, "lane")
        distance //= 2


def _call(b: ir.IRBuilder, fn: ir.Function, args: list[ir.Value], n: int) -> list[ir.Value]:
    result = b.call(fn, args)
    return [result] if n == 1 else [b.extract_value(result, k) for k in range(n)]


__all__ = ["needs_block_function", "thread_count", "translate_block_function"]
