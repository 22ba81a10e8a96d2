"""The kernel dialect `xla` (codegen/ir/): the ops emitters write and the lowering passes consume.

attributes.py (the indexing-map attribute), core_ops.py (apply_indexing, loop, pure_call, yield),
matmul_ops.py (`matmul`, a dot with its epilogue), size_ops.py (`symbol_value`: a symbolic size),
parallel_ops.py (shared memory, barriers, shuffles, predicated access, atomics), warp_ops.py and
warpgroup_ops.py (the tensor-core ops: mma.sync, ldmatrix, cp.async; sm_90a's wgmma), arith_ops.py (arith
stand-ins: remf and the vector compares/select/casts), traits.py, syntax.py (parse/print helpers),
dialect.py (`XLA`, the registered dialect). This package re-exports them all.

Modelled on XLA's `xla` and `xla_gpu` dialects (xla/codegen/emitters/ir/xla_ops.td and
xla/backends/gpu/codegen/emitters/ir/xla_gpu_ops.td), declared with xDSL IRDL. hlocc has one kernel
model for the CPU and the GPU (shared/DESIGN.md), so the GPU-flavoured ops (allocate_shared,
sync_threads, shuffle_reduce) live in the same dialect instead of a separate `xla_gpu` one.

Textual forms (each op also parses and prints in MLIR's generic form):

    #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 9], s0 in [0, 3]">
    %r:2 = xla.apply_indexing #map(%d0, %d1)[%s0]
    %out = xla.loop (%tid, %bid)[%i] -> (%ra, %rb) in #map iter_args(%it = %init) -> (tensor<8xf32>) {
      ...
      xla.yield %v : tensor<8xf32>
    }
    %v = xla.pure_call @fn(%t, %i) : (tensor<8xf32>, index) -> f32
    %s = xla.allocate_shared : tensor<32x33xf32>
    %a, %b = xla.sync_threads %x, %y : tensor<32x33xf32>, tensor<8xf32>
    %r = xla.shuffle_reduce @sum(%v) to 16 : f32
    %t2 = xla.predicated_insert %v into %t[%i] if %cond : tensor<8xf32>
    %e = xla.predicated_extract %t[%i] if %cond else %fallback : tensor<8xf32>
    %t3 = xla.atomic_rmw %t[%i] : tensor<8xf32> {
    ^bb0(%current: f32):
      ...
      xla.yield %new : f32
    }
    %r = xla.matmul %a[#lhs], %b[#rhs] into %c[#out] sizes [1, 4, 5, 3] : (...) -> tensor<4x5xf32> {
    ^bb0(%acc: f32, %b: index, %m: index, %n: index):
      xla.yield %acc : f32
    }
    %m = xla.cmpf olt, %a, %b : vector<16xf32>
    %s = xla.select %m, %a, %b : vector<16xi1>, vector<16xf32>
    %w = xla.extui %h : vector<16xi16> to vector<16xi32>

The compares, select and integer/int<->float casts (`cmpf`, `cmpi`, `select`, `extui`, `extsi`,
`trunci`, `sitofp`, `uitofp`, `fptosi`, `fptoui`) are MLIR's arith ops under the `xla` prefix, for
vectors: xDSL 0.74's arith dialect verifies only their scalar forms. The float passes and
`vectorize-elementwise` emit them on vectors (`VECTOR_FORMS`); scalar code keeps the arith ops.

The indexing-map attribute holds an hlocc `IndexingMap` and prints it as one string in XLA's
syntax (`indexing_map_text`); the parser also accepts XLA's split form `<"part one," "part two">`
(adjacent string literals are concatenated). Runtime variables of a map (`{r0}` in its text) are
operands too: in `apply_indexing` they follow the range variables inside `[...]` (XLA's affine maps
number them as trailing symbols), in `loop` they follow the dimensions inside `(...)`.
"""

from hlocc.codegen.ir.arith_ops import (
    VECTOR_FORMS,
    CmpfOp,
    CmpiOp,
    ExtSIOp,
    ExtUIOp,
    FPToSIOp,
    FPToUIOp,
    RemFOp,
    SelectOp,
    SIToFPOp,
    TruncIOp,
    UIToFPOp,
)
from hlocc.codegen.ir.attributes import INDEX, IndexingMapAttr
from hlocc.codegen.ir.core_ops import ApplyIndexingOp, LoopOp, PureCallOp, YieldOp
from hlocc.codegen.ir.dialect import XLA
from hlocc.codegen.ir.matmul_ops import DotBF16PairsOp, MatmulOp, PrefetchOp
from hlocc.codegen.ir.parallel_ops import (
    AllocateSharedOp,
    AtomicRMWOp,
    AtomicUpdateOp,
    PredicatedExtractOp,
    PredicatedInsertOp,
    SharedMemoryOp,
    ShuffleReduceOp,
    SyncThreadsOp,
)
from hlocc.codegen.ir.size_ops import SymbolValueOp, size_value
from hlocc.codegen.ir.tma_ops import (
    MbarrierArriveExpectTxOp,
    MbarrierArriveOp,
    MbarrierInitOp,
    MbarrierWaitOp,
    TensorMapOp,
    TmaLoadOp,
)
from hlocc.codegen.ir.warp_ops import CpAsyncCommitOp, CpAsyncOp, CpAsyncWaitOp, LdMatrixOp, MmaSyncOp
from hlocc.codegen.ir.warpgroup_ops import (
    FenceProxyAsyncOp,
    WgmmaCommitGroupOp,
    WgmmaDescriptorOp,
    WgmmaFenceOp,
    WgmmaMmaAsyncOp,
    WgmmaWaitGroupOp,
)

__all__ = [
    "INDEX", "VECTOR_FORMS", "XLA", "AllocateSharedOp", "ApplyIndexingOp", "AtomicRMWOp", "AtomicUpdateOp", "CmpfOp",
    "CmpiOp", "ExtSIOp", "ExtUIOp", "FPToSIOp", "FPToUIOp", "IndexingMapAttr", "LoopOp", "MatmulOp", "PrefetchOp",
    "DotBF16PairsOp", "LdMatrixOp", "MmaSyncOp", "CpAsyncOp", "CpAsyncCommitOp", "CpAsyncWaitOp",
    "FenceProxyAsyncOp", "WgmmaCommitGroupOp", "WgmmaDescriptorOp", "WgmmaFenceOp", "WgmmaMmaAsyncOp",
    "WgmmaWaitGroupOp", "MbarrierArriveExpectTxOp", "MbarrierArriveOp", "MbarrierInitOp", "MbarrierWaitOp",
    "TensorMapOp", "TmaLoadOp",
    "PredicatedExtractOp", "PredicatedInsertOp", "PureCallOp", "RemFOp", "SIToFPOp", "SelectOp", "SharedMemoryOp",
    "ShuffleReduceOp", "SymbolValueOp", "SyncThreadsOp", "TruncIOp", "UIToFPOp", "YieldOp", "size_value",
]
