"""A Python builder for matmul transform scripts (for people and for the autotuner to come): a
`MatmulSchedule` (block tile, register block, k-unroll) as the text of a
`transform.named_sequence @__transform_main`, which `transform-interpreter` runs.

    script = MatmulSchedule(mc=96, nc=256, kc=256, mr=6, nr=64, k_unroll=4).script()
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.codegen.schedule.interpreter import ENTRY_POINT


@dataclass(frozen=True)
class MatmulSchedule:
    """One point of the matmul schedule space. `mr`/`nr` None: no register block; `parallel`: the
    blocks run on the kernel's blocks (the thread pool) instead of a loop; `pack`: the operands
    packed (() none, (1,) B, (0, 1) both); `prefetch`: the B prefetch distance in k steps (0 none);
    `hoist_address`, `fuse_epilogue`: those transform ops applied (packed schedules only);
    `k_pairs`: bf16 packed in pairs for vdpbf16ps; `prepacked`: B arrives packed in NR-wide panels
    (a constant packed once outside the kernel: `pack.pack_panels`); `row_tails`: a register block
    of the rows left where fewer than MR remain (a few-rows product); `warp_grid`/`warp_tile`: on a
    GPU, the block's warps over (m, n) and each warp's part (set_operand_layout, mma.sync m16n8k16),
    which also give the block's threads (set_gpu_launch_threads); `stages`: the cp.async ring's
    depth (0: none; pipeline_shared_copies); `wgmma`: sm_90a's warpgroup MMA instead of mma.sync
    (use_wgmma; warp_grid (4G, 1) and warp_tile (16, NC)), an explicit choice only; `tma`: wgmma's
    tiles by TMA through an mbarrier ring of `stages` buffers (use_tma), an explicit choice only."""

    mc: int
    nc: int
    kc: int
    mr: int | None = None
    nr: int | None = None
    k_unroll: int = 1
    parallel: bool = False
    pack: tuple[int, ...] = ()
    prefetch: int = 0
    hoist_address: bool = False
    fuse_epilogue: bool = False
    k_pairs: bool = False
    prepacked: bool = False
    row_tails: bool = False
    warp_grid: tuple[int, int] | None = None
    warp_tile: tuple[int, int] | None = None
    stages: int = 0
    wgmma: bool = False
    tma: bool = False

    @property
    def threads(self) -> int:
        """Threads per block: 32 per warp of the warp grid, or 1 (a CPU block is one thread)."""
        return 32 * self.warp_grid[0] * self.warp_grid[1] if self.warp_grid is not None else 1

    def blocks(self, sizes: list[int]) -> int:
        """The kernel's blocks for a (B, M, N, K) matmul: 1, or one per block tile when parallel."""
        b, m, n, _ = sizes
        return b * -(-n // self.nc) * -(-m // self.mc) if self.parallel else 1

    def script(self) -> str:
        """The transform script: match every xla.matmul, tile it, set its register block, pack it
    (with prefetch, hoisted addresses, the fused epilogue), parallelize it."""
        any_op = "!transform.any_op"
        lines = [
            "builtin.module attributes {transform.with_named_sequence} {",
            f"  transform.named_sequence @{ENTRY_POINT}(%root: {any_op}) {{",
            f'    %mm = transform.structured.match ops{{["xla.matmul"]}} in %root : ({any_op}) -> {any_op}',
            f"    %tiled, %b, %n, %m = transform.hlocc.tile %mm sizes [{self.mc}, {self.nc}, {self.kc}] "
            f": ({any_op}) -> ({any_op}, {any_op}, {any_op}, {any_op})",
        ]
        if self.mr is not None and self.nr is not None:
            lines.append(f"    transform.hlocc.microkernel %tiled register_block [{self.mr}, {self.nr}] "
                         f"k_unroll {self.k_unroll}{' row_tails' if self.row_tails else ''} : {any_op}")
        if self.pack:
            operands = (f"[{', '.join(map(str, self.pack))}]" + (" k_pairs" if self.k_pairs else "")
                        + (" prepacked" if self.prepacked else ""))
            lines.append(f"    transform.hlocc.pack %tiled operands {operands} : {any_op}")
            if self.prefetch:
                lines.append(f"    transform.hlocc.insert_prefetch %tiled distance {self.prefetch} : {any_op}")
            if self.hoist_address:
                lines.append(f"    transform.hlocc.hoist_address %tiled : {any_op}")
            if self.fuse_epilogue:
                lines.append(f"    transform.hlocc.fuse_epilogue %tiled : {any_op}")
        if self.warp_grid is not None and self.warp_tile is not None:
            grid, tile = (", ".join(map(str, v)) for v in (self.warp_grid, self.warp_tile))
            lines.append(f"    transform.hlocc.set_operand_layout %tiled sg_layout [{grid}] sg_data [{tile}] "
                         f"inst_data [16, 8, 16] : {any_op}")
            lines.append(f"    transform.hlocc.set_gpu_launch_threads %tiled threads [{self.threads}, 1, 1] : {any_op}")
            if self.stages and not self.tma:
                lines.append(f"    transform.hlocc.pipeline_shared_copies %tiled stages {self.stages} : {any_op}")
        if self.wgmma:  # without a warp layout, use_wgmma says so
            lines.append(f"    transform.hlocc.use_wgmma %tiled : {any_op}")
        if self.tma:  # without wgmma, use_tma says so
            lines.append(f"    transform.hlocc.use_tma %tiled stages {self.stages} : {any_op}")
        if self.parallel:
            lines.append(f"    transform.hlocc.parallelize %tiled : {any_op}")
        lines += ["    transform.yield", "  }", "}"]
        return "\n".join(lines) + "\n"


__all__ = ["MatmulSchedule"]
