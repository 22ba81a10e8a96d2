"""`transform.hlocc.pack`: copy operand panels into contiguous, zero-padded per-block buffers
(BLIS's packing of A blocks and B panels; issue 17, seed 004's operand layout step on the CPU).

    transform.hlocc.pack %tiled operands [0, 1] [k_pairs] [prepacked] : !transform.any_op

Sets `packed` on the targets: `lower-matmul` then lowers them to the packed macro-kernel
(codegen/transforms/matmul/packed.py): per K block, B's KC x NC panel as NC/NR micro-panels
[KC][NR] and (with operand 0) A's MC x KC block as MC/MR micro-panels [KC][MR], whatever the
operands' layouts (a transposed operand is absorbed here: it is read through its map once per
block, never copied whole), then the vector micro-kernel on them. Operand 1 (B) must be packed:
the micro-kernel reads whole vectors of B from its panel.

`prepacked`: B is packed already, once, outside the kernel (a constant operand: a dynamic
program's weights, packed at plan time by `pack_panels`); its map must be that layout,
`panel_layout` (whole NR-wide panels of every row of K, the last zero-padded: [ceil(N/NR), K, NR]
linearised into a rank-1 tensor, whose offsets the micro-kernel computes), and the micro-kernel
reads its panels in place, with no per-block copy (the block tiles start on panels: microkernel's
NR divides NC). Needs an f32 B.

`k_pairs` (bf16 operands): the panels hold i32 pairs of bf16 along K, the micro-kernel's step is
AVX512-BF16's vdpbf16ps (`xla.dot_bf16_pairs`); the schedule asks for it only on hosts that have
the instruction (codegen/schedule/choice.py).

Illegal, rejected before code generation: a target without `tile` and `microkernel` applied first;
an f64 matmul (the micro-kernel is f32); NR not a multiple of the 16 f32 lanes of a vector
register; operands other than a set of {0, 1} holding 1; `k_pairs` on operands that are not both
bf16, or with an odd KC smaller than K; per-block buffers (Bp KC x NCp, Ap
MCp x KC, the accumulator block MCp x NCp, NCp and MCp rounded up to NR and MR) larger than
`SCRATCH_BYTES`: they live on the stack of the thread that runs the block; `prepacked` with a B
map that is not the panel layout of the register block's NR, or a tensor not of its size, with a B
that is not f32, or with `k_pairs`.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects.builtin import BFloat16Type, DenseArrayBase, Float32Type, UnitAttr, i64
from xdsl.dialects.transform import TransformHandleType
from xdsl.irdl import IRDLOperation, irdl_op_definition, operand_def, opt_prop_def, prop_def

from hlocc.analysis.affine_expr import dim
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import map_to_text
from hlocc.codegen.ir.matmul_ops import MatmulOp
from hlocc.codegen.schedule.handles import ScheduleError, matmul_targets
from hlocc.codegen.target import vector_isa

SCRATCH_BYTES = 4 << 20
"""The most per-block scratch a packed schedule may take (thread stacks are 8 MiB)."""


@irdl_op_definition
class PackOp(IRDLOperation):
    """Pack the operand panels of tiled, register-blocked xla.matmul targets (module doc)."""

    name = "transform.hlocc.pack"

    target = operand_def(TransformHandleType)
    operands_ = prop_def(DenseArrayBase.constr(i64), prop_name="operands")
    k_pairs = opt_prop_def(UnitAttr)
    prepacked = opt_prop_def(UnitAttr)

    assembly_format = ("$target `operands` $operands (`k_pairs` $k_pairs^)? (`prepacked` $prepacked^)? attr-dict "
                       "`:` type($target)")

    def __init__(self, target, operands: list[int], k_pairs: bool = False, prepacked: bool = False):
        super().__init__(operands=[target], properties={"operands": DenseArrayBase.from_list(i64, operands),
                                                        **({"k_pairs": UnitAttr()} if k_pairs else {}),
                                                        **({"prepacked": UnitAttr()} if prepacked else {})})


def panel_layout(like: IndexingMap, nr: int, k_total: int) -> IndexingMap:
    """The map over `like`'s dimensions (b, m, n, k) to B's element (k, n) in NR-wide panels of every
    row of K, linearised: (n floordiv NR) * K * NR + k * NR + n mod NR (`pack_panels`'s layout; the
    `prepacked` operand's map)."""
    n, k = dim(2), dim(3)
    return IndexingMap(like.dims, ((n // nr) * (k_total * nr) + k * nr + n % nr,))


def pack_panels(w: np.ndarray, nr: int) -> np.ndarray:
    """w [K, N] as `panel_layout`: [ceil(N/NR), K, NR] f32, C-contiguous, the last panel's columns
    past N zero (flatten it for the kernel's rank-1 operand). Done once for a constant operand."""
    k, n = w.shape
    panels = -(-n // nr)
    padded = np.zeros((k, panels * nr), np.float32)
    padded[:, :n] = w
    return np.ascontiguousarray(padded.reshape(k, panels, nr).transpose(1, 0, 2))


def scratch_bytes(target: MatmulOp, pack_a: bool, k_pairs: bool = False, prepacked: bool = False) -> int:
    """Bytes of the per-block buffers of a packed target (module doc)."""
    mr, nr = target.register_block.get_values()
    _, mc, nc, k = target.size_list
    kc = min(target.k_block.value.data, k) if target.k_block is not None else k
    depth = -(-kc // 2) if k_pairs else kc
    mcp, ncp = -(-mc // mr) * mr, -(-nc // nr) * nr
    return 4 * ((0 if prepacked else depth * ncp) + mcp * ncp + (mcp * depth if pack_a else 0))


def check_prepacked(op: PackOp, target: MatmulOp) -> None:
    if op.k_pairs is not None:
        raise ScheduleError(f"{op.name}: prepacked B is f32 panels; k_pairs packs bf16 pairs")
    if not isinstance(target.rhs.type.element_type, Float32Type):
        raise ScheduleError(f"{op.name}: a prepacked B must be f32 (the micro-kernel reads its vectors in place), "
                            f"found {target.rhs.type.element_type}")
    nr = target.register_block.get_values()[1]  # (microkernel: NR divides NC, or one block: tiles start on panels)
    k = target.size_list[3]
    n_total = target.problem_sizes[2]
    panels = -(-n_total // nr)
    if target.rhs.type.get_num_dims() != 1 or target.rhs.type.element_count() != panels * k * nr:
        raise ScheduleError(f"{op.name}: a prepacked B is a rank-1 tensor of {panels} zero-padded panels of "
                            f"{k} x {nr} elements, found {target.rhs.type}")
    expected = panel_layout(target.rhs_map.data, nr, k)
    if target.rhs_map.data.simplify().results != expected.simplify().results:
        raise ScheduleError(f"{op.name}: prepacked B's map must be the {nr}-column panel layout of a rank-1 "
                            f"tensor, (n floordiv {nr}) * {k * nr} + k * {nr} + n mod {nr}, found "
                            f"{map_to_text(target.rhs_map.data)}")


def check_k_pairs(op: PackOp, target: MatmulOp) -> None:
    if not (isinstance(target.lhs.type.element_type, BFloat16Type)
            and isinstance(target.rhs.type.element_type, BFloat16Type)):
        raise ScheduleError(f"{op.name}: k_pairs packs bf16 pairs for vdpbf16ps; this matmul's operands are "
                            f"{target.lhs.type.element_type} and {target.rhs.type.element_type}")
    isa = vector_isa()
    if not isa.bf16_dot:
        raise ScheduleError(f"{op.name}: k_pairs packs bf16 pairs for vdpbf16ps, which this target ({isa.name}) "
                            "does not have (AVX512_BF16)")
    kc = target.k_block.value.data if target.k_block is not None else target.size_list[3]
    if kc % 2 and kc < target.size_list[3]:
        raise ScheduleError(f"{op.name}: k_pairs needs an even KC (a pair may not straddle K blocks), found {kc}")


def check_pack(op: PackOp, target: MatmulOp, operands: list[int]) -> None:
    if not target.offsets:
        raise ScheduleError(f"{op.name}: the target xla.matmul is not tiled; apply transform.hlocc.tile first")
    if target.register_block is None:
        raise ScheduleError(f"{op.name}: the target has no register block; apply transform.hlocc.microkernel first")
    if not isinstance(target.acc_type, Float32Type):
        raise ScheduleError(f"{op.name}: the packed micro-kernel accumulates in f32; this matmul accumulates in "
                            f"{target.acc_type}")
    nr, lanes = target.register_block.get_values()[1], vector_isa().lanes
    if nr % lanes:
        raise ScheduleError(f"{op.name}: NR = {nr} is not a multiple of the {lanes} f32 lanes of a vector register")
    if op.prepacked is not None:
        check_prepacked(op, target)
    if op.k_pairs is not None:
        check_k_pairs(op, target)
    need = scratch_bytes(target, 0 in operands, op.k_pairs is not None, op.prepacked is not None)
    if need > SCRATCH_BYTES:
        raise ScheduleError(f"{op.name}: the packed panels and the accumulator block need {need} bytes per block, "
                            f"more than the {SCRATCH_BYTES} a block's scratch may take (reduce MC, NC or KC)")


def run_pack(op: PackOp, handle: object) -> tuple:
    operands = list(op.operands_.get_values())
    if sorted(set(operands)) != sorted(operands) or not set(operands) <= {0, 1} or 1 not in operands:
        raise ScheduleError(f"{op.name}: operands must be [1] or [0, 1] (B is always packed), found {operands}")
    targets = matmul_targets(op, handle)
    for target in targets:
        check_pack(op, target, operands)
    for target in targets:
        target.properties["packed"] = DenseArrayBase.from_list(i64, sorted(operands))
        if op.k_pairs is not None:
            target.properties["k_pairs"] = UnitAttr()
        if op.prepacked is not None:
            target.properties["prepacked"] = UnitAttr()
    return ()


__all__ = ["SCRATCH_BYTES", "PackOp", "pack_panels", "panel_layout", "run_pack", "scratch_bytes"]
