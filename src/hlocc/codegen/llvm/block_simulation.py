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
a wrong answer, as on a GPU. `gpu.barrier` and `xla.shuffle_reduce` must therefore be at the top
level of the entry function (emitters put them there, as XLA's do); elsewhere the translation
fails with a message.

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
from xdsl.dialects import func, gpu
from xdsl.ir import Operation, SSAValue
from xdsl.traits import is_side_effect_free

from hlocc.codegen.ir import SharedMemoryOp, ShuffleReduceOp
from hlocc.codegen.llvm.types import I64, TranslationError, llvm_type

PARALLEL_OPS = (gpu.BarrierOp, ShuffleReduceOp, SharedMemoryOp)


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


def _phases(fn: func.FuncOp) -> list[tuple[str, object]]:
    """[("threads", ops) | ("shuffle", op)] in order; barriers separate thread phases."""
    items: list[tuple[str, object]] = []
    current: list[Operation] = []
    for op in fn.body.block.ops:
        for inner in op.walk():
            if inner is not op and isinstance(inner, (gpu.BarrierOp, ShuffleReduceOp)):
                raise _error(fn, f"'{inner.name}' inside '{op.name}': barriers and shuffles must be at the top level "
                                 "of a kernel's entry function to run on the CPU")
        if isinstance(op, gpu.BarrierOp):
            items.append(("threads", current))
            current = []
        elif isinstance(op, ShuffleReduceOp):
            items.append(("threads", current))
            items.append(("shuffle", op))
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
    return not op.regions and (is_side_effect_free(op) or isinstance(op, (gpu.ThreadIdOp, gpu.BlockIdOp,
                                                                          SharedMemoryOp)))


def _phase_inputs(used: list[SSAValue], k: int, phase_of: dict[Operation, int]) -> tuple[list[SSAValue],
                                                                                          set[Operation]]:
    """(values phase k loads, ops phase k recomputes) for the values it uses that earlier phases
    define: recomputable ops are cloned with their recomputable operands; the rest are loaded."""
    closure: set[Operation] = set()
    loaded: list[SSAValue] = []

    def visit(v: SSAValue) -> None:
        owner = v.owner
        if not isinstance(owner, Operation) or owner not in phase_of or phase_of[owner] >= k:
            return  # an argument, or defined in this phase
        if not isinstance(owner, ShuffleReduceOp) and _recomputable(owner):
            if owner not in closure:
                closure.add(owner)
                for operand in owner.operands:
                    visit(operand)
        elif v not in loaded:
            loaded.append(v)

    for v in used:
        visit(v)
    return loaded, closure


def translate_block_function(ft) -> None:
    """Translate `ft.fn` (a `_FunctionTranslator`'s kernel entry function) as a block function."""
    fn = ft.fn
    b: ir.IRBuilder = ft.b
    threads = thread_count(fn)
    items = _phases(fn)
    top = list(fn.body.block.ops)
    position = {op: k for k, op in enumerate(top)}
    phase_of: dict[Operation, int] = {}
    for k, (kind, payload) in enumerate(items):
        for op in (payload if kind == "threads" else [payload]):
            phase_of[op] = k
    base = dict(ft.values)  # the function's arguments

    # Shared memory: one buffer per op, 64-byte aligned, in the entry block.
    for op in top:
        if isinstance(op, SharedMemoryOp):
            ft.shared[op] = _buffer(b, ir.IntType(8), op.size.value.data, "shared")

    def slots(values, name: str) -> dict[SSAValue, tuple[ir.Value, ir.Type]]:
        return {v: (_buffer(b, llvm_type(v.type), threads, name), llvm_type(v.type)) for v in values}

    # What each thread phase needs from earlier phases; which values are stored per thread.
    needs: dict[int, list[SSAValue]] = {}
    recompute: dict[int, list[Operation]] = {}
    stored: set[SSAValue] = set()
    for k, (kind, payload) in enumerate(items):
        if kind == "threads":
            used = _uses(payload)
            if k + 1 < len(items) and items[k + 1][0] == "shuffle":
                used += [v for v in items[k + 1][1].operands if v not in used]
            needs[k], closure = _phase_inputs(used, k, phase_of)
            recompute[k] = sorted(closure, key=position.__getitem__)
            stored.update(v for v in needs[k] if not isinstance(v.owner, ShuffleReduceOp))
    spill = slots([v for v in _uses(top) if v in stored], "spill")
    lanes = {op: slots(list(op.operands), "lanes") for _, op in items if isinstance(op, ShuffleReduceOp)}
    lane_of = {r: lanes[op][operand] for _, op in items if isinstance(op, ShuffleReduceOp)
               for r, operand in zip(op.results, op.operands)}

    for k, (kind, payload) in enumerate(items):
        if kind == "shuffle":
            _shuffle_step(ft, payload, lanes[payload], threads)
            continue

        def phase(thread: ir.Value, k=k, payload=payload) -> None:
            ft.values = dict(base)
            ft.ids["thread"] = thread
            for v in needs[k]:  # loads first: a recomputed op may use a loaded value
                slot = spill.get(v) or lane_of[v]
                ft.values[v] = _load(b, slot, thread)
            for op in recompute[k]:
                ft.op(op)
            for op in payload:
                if isinstance(op, func.ReturnOp):
                    continue
                ft.op(op)
                for r in op.results:
                    if r in spill:
                        b.store(ft.values[r], _element(b, spill[r], thread))
            if k + 1 < len(items) and items[k + 1][0] == "shuffle":
                shuffle = items[k + 1][1]
                for operand in shuffle.operands:
                    b.store(ft.v(operand), _element(b, lanes[shuffle][operand], thread))

        _counted_loop(ft, threads, phase, "thread")
    b.ret_void()


def _buffer(b: ir.IRBuilder, element: ir.Type, count: int, name: str) -> ir.Value:
    """An `alloca [count x element]`, 64-byte aligned, as an opaque pointer (lower-tensors' form)."""
    buf = b.alloca(ir.ArrayType(element, count), name=name)
    buf.align = 64
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
