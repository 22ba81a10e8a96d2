"""The `xla` dialect: every op and attribute of codegen/ir/, registered under one name."""

from __future__ import annotations

from xdsl.ir import Dialect

from hlocc.codegen.ir.arith_ops import VECTOR_FORMS, RemFOp
from hlocc.codegen.ir.attributes import IndexingMapAttr
from hlocc.codegen.ir.core_ops import ApplyIndexingOp, LoopOp, PureCallOp, YieldOp
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
from hlocc.codegen.ir.size_ops import SymbolValueOp
from hlocc.codegen.ir.tma_ops import TMA_OPS
from hlocc.codegen.ir.warp_ops import CpAsyncCommitOp, CpAsyncOp, CpAsyncWaitOp, LdMatrixOp, MmaSyncOp
from hlocc.codegen.ir.warpgroup_ops import WARPGROUP_OPS

XLA = Dialect(
    "xla",
    [ApplyIndexingOp, LoopOp, YieldOp, PureCallOp, AllocateSharedOp, SharedMemoryOp, SyncThreadsOp, ShuffleReduceOp,
     PredicatedInsertOp, PredicatedExtractOp, AtomicRMWOp, AtomicUpdateOp, MatmulOp, PrefetchOp, DotBF16PairsOp,
     SymbolValueOp, RemFOp, LdMatrixOp, MmaSyncOp, CpAsyncOp, CpAsyncCommitOp, CpAsyncWaitOp,
     *WARPGROUP_OPS, *TMA_OPS, *VECTOR_FORMS.values()],
    [IndexingMapAttr],
)
