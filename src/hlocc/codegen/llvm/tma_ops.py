"""Translation of the TMA and mbarrier ops of codegen/ir/tma_ops.py: NVVM intrinsics for NVPTX
(sm_90a, PTX ISA 8.0; each pushed through instruction selection by tests/backends/cuda/
test_tma_ops.py in a subprocess) and, on the CPU, calls of the simulation functions of
tma_simulation.py.

| op | NVPTX (LLVM 22) |
| --- | --- |
| `xla.tensor_map` k | the k-th tensor-map parameter (`.param .align 64 .b8 [128]`), by address |
| `xla.mbarrier_init` | `llvm.nvvm.mbarrier.init.shared` |
| `xla.mbarrier_arrive_expect_tx` | `llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta` |
| `xla.mbarrier_arrive` | `llvm.nvvm.mbarrier.arrive.shared` |
| `xla.mbarrier_wait` | a loop on `llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta` |
| `xla.tma_load` | `llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{1..5}d` (shared::cluster, no multicast or hint) |

On the CPU a tensor map is a private constant of the simulation's description words (its spec) and
its operand's pointer is read where a load uses it; the shared window and its size are the block
function's (block_simulation.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llvmlite import ir

from hlocc.codegen.ir.tma_ops import (
    MbarrierArriveExpectTxOp,
    MbarrierArriveOp,
    MbarrierInitOp,
    MbarrierWaitOp,
    TensorMapOp,
    TmaLoadOp,
)
from hlocc.codegen.llvm.tma_simulation import (
    MAX_RANK,
    arrive_function,
    description_words,
    init_function,
    tma_load_function,
    wait_function,
)
from hlocc.codegen.llvm.types import TranslationError, declare_function

if TYPE_CHECKING:
    from hlocc.codegen.llvm.translator import FunctionTranslator

I1, I16, I32, I64 = ir.IntType(1), ir.IntType(16), ir.IntType(32), ir.IntType(64)
SHARED = ir.PointerType(addrspace=3)
SHARED_CLUSTER = ir.PointerType(addrspace=7)


def tensor_map_key(k: int) -> str:
    """The entry function's extra argument of the k-th tensor map (translator.py)."""
    return f"tensor_map{k}"


def _element(ft: FunctionTranslator, source, index, ty: ir.Type) -> ir.Value:
    return ft.b.gep(ft.v(source), [ft.v(index)], inbounds=True, source_etype=ty)


def _shared(ft: FunctionTranslator, pointer: ir.Value) -> ir.Value:
    return ft.b.addrspacecast(pointer, SHARED)


def _window(ft: FunctionTranslator, op) -> list[ir.Value]:
    if ft.shared_window is None:
        raise TranslationError(f"'{op.name}' outside a kernel with shared memory (@{ft.fn.sym_name.data})")
    return [ft.shared_window, ir.Constant(I64, ft.shared_window_bytes)]


def _call(ft: FunctionTranslator, name: str, ret: ir.Type, args: list[ir.Value]) -> ir.Value:
    return ft.b.call(declare_function(ft.t.module, name, ret, [a.type for a in args]), args)


def _tensor_map(ft: FunctionTranslator, op: TensorMapOp) -> None:
    if ft.t.gpu:
        maps = [o for o in ft.fn.walk() if isinstance(o, TensorMapOp)]
        ft.set(op, ft.ids[tensor_map_key(maps.index(op))])
        return
    words = description_words(op.spec)
    ty = ir.ArrayType(I64, len(words))
    name = "__hlocc_tensor_map_" + "_".join(map(str, words))  # one constant per description
    g = ft.t.module.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(ft.t.module, ty, name)
        g.linkage, g.global_constant, g.align = "private", True, 8
        g.initializer = ir.Constant(ty, [ir.Constant(I64, w) for w in words])
    ft.set(op, ft.b.bitcast(g, ir.PointerType()))


def _init(ft: FunctionTranslator, op: MbarrierInitOp) -> None:
    bar = _element(ft, op.bars, op.index, I64)
    count = op.count.value.data
    if ft.t.gpu:
        _call(ft, "llvm.nvvm.mbarrier.init.shared", ir.VoidType(), [_shared(ft, bar), ir.Constant(I32, count)])
    else:
        ft.b.call(init_function(ft.t.module), [bar, ir.Constant(I64, count)])
    ft.set(op, ft.v(op.bars))


def _arrive(ft: FunctionTranslator, op: MbarrierArriveOp | MbarrierArriveExpectTxOp) -> None:
    bar = _element(ft, op.bars, op.index, I64)
    tx = op.bytes.value.data if isinstance(op, MbarrierArriveExpectTxOp) else None
    if ft.t.gpu:
        if tx is None:
            _call(ft, "llvm.nvvm.mbarrier.arrive.shared", I64, [_shared(ft, bar)])
        else:
            _call(ft, "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta", I64,
                  [_shared(ft, bar), ir.Constant(I32, tx)])
    else:
        ft.b.call(arrive_function(ft.t.module), [bar, ir.Constant(I64, tx or 0), ir.Constant(I64, 1),
                                                 *_window(ft, op)])
    ft.set(op, ft.v(op.bars))


def _wait(ft: FunctionTranslator, op: MbarrierWaitOp) -> None:
    b = ft.b
    bar = _element(ft, op.bars, op.index, I64)
    parity = ft.v(op.parity)
    if ft.t.gpu:
        wait = declare_function(ft.t.module, "llvm.nvvm.mbarrier.try.wait.parity.scope.cta.space.cta", I1,
                                [SHARED, I32])
        shared = _shared(ft, bar)
        loop, done = ft.llfn.append_basic_block("mbarrier.wait"), ft.llfn.append_basic_block("mbarrier.ready")
        b.branch(loop)
        b.position_at_end(loop)
        b.cbranch(b.call(wait, [shared, parity]), done, loop)
        b.position_at_end(done)
    else:
        b.call(wait_function(ft.t.module), [bar, b.zext(parity, I64), *_window(ft, op)])
    for r, v in zip(op.results, op.operands_):
        ft.values[r] = ft.v(v)


def _tma_load(ft: FunctionTranslator, op: TmaLoadOp) -> None:
    b = ft.b
    dst = _element(ft, op.tile, op.tile_index, I16)  # TMA elements here are 16 bits (tma_ops.TMA_ELEMENTS)
    bar = _element(ft, op.bars, op.bar_index, I64)
    coords = [ft.v(c) for c in op.coords]
    rank = len(coords)
    if ft.t.gpu:
        args = [b.addrspacecast(_shared(ft, dst), SHARED_CLUSTER), _shared(ft, bar), ft.v(op.map),
                *(b.trunc(c, I32) for c in coords), ir.Constant(I16, 0), ir.Constant(I64, 0), ir.Constant(I1, 0),
                ir.Constant(I1, 0), ir.Constant(I32, 0)]
        _call(ft, f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{rank}d", ir.VoidType(), args)
    else:
        owner = op.map.owner
        if not isinstance(owner, TensorMapOp):
            raise TranslationError(f"'{op.name}' in @{ft.fn.sym_name.data}: its map is not an xla.tensor_map")
        coords += [ir.Constant(I64, 0)] * (MAX_RANK - rank)
        b.call(tma_load_function(ft.t.module), [ft.v(op.map), ft.v(owner.source), dst, bar, *coords,
                                                *_window(ft, op)])
    ft.set(op, ft.v(op.tile))


TMA_HANDLERS = {TensorMapOp: _tensor_map, MbarrierInitOp: _init, MbarrierArriveExpectTxOp: _arrive,
                MbarrierArriveOp: _arrive, MbarrierWaitOp: _wait, TmaLoadOp: _tma_load}

__all__ = ["TMA_HANDLERS", "tensor_map_key"]
