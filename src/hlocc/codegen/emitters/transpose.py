"""The transpose emitter (XLA's TransposeFusion and PackedTranspose,
xla/backends/gpu/codegen/emitters/transpose.cc; seed 000 "Transpose emitter"; facts §4.3).

A fusion whose heroes are tiled transposes (`analysis.transpose_info.TransposeDescription`: the
transpose normalised to "021", "102", "210", ...) moves its data through block-shared memory, so
that both the reads of the input and the writes of the output run along the minor dimension:

1. every block owns one tile of the normalised transpose. Its threads read the tile from the input
   along the input's minor dimension, compute each hero's operand there (the fused prologue, a
   `xla.pure_call` of the operand's subgraph) and write it into a shared tile
   (`xla.allocate_shared`, padded by one along the dimension the writes walk, so that the writes
   of a warp fall into different banks). Side outputs (roots without a transpose hero, bitcasts of
   the transpose input) are computed and written in the same loop, indexed like the input;
2. `xla.sync_threads` of the shared tiles;
3. the threads read the tiles transposed and write every transpose root along the output's minor
   dimension, computing the epilogue (the ops between hero and root) from the hero's value: the
   hero is injected into `ElementEmitter.overrides`, so the root's subgraph is emitted around it.

`allocate_shared` and `sync_threads` stay at the top level of the entry function; the shared tiles
are the iter_args of the phase-1 `xla.loop` (the CPU backend runs each segment between barriers
for all threads of a block before the next).

Tilings (all maps in the normalised or canonical shapes, then bitcast to the real shapes):

- `ShmemTiling` (TransposeFusion): on the GPU target XLA's numbers: tiles of 32 (times the vector
  size) along the two swapped dimensions, 128 threads (4 rows of 32), each thread `vector`
  consecutive elements per step; the "102" case keeps the whole minor dimension in the tile. On
  the CPU target (no warps, no banks) tiles of up to 128×128 (at most 32 KiB) without padding, a
  thread handling a 16-byte vector of a tile row per phase (`cpu_shmem_tiling`).
- `PackedTiling` (PackedTranspose, GPU target only): elements under 32 bits are packed into
  32-bit banks: a (32·v)² shared tile, v = 32 / bits, [T2, A, T1, B] → [T1, A, T2, B] with as many
  T1 rows per tile row as fit, and swizzled columns. XLA reads v×v vector tiles from shared memory;
  hlocc reads the same elements one by one (same thread → element mapping). The CPU target has no
  banks and uses `ShmemTiling` for these too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import FunctionType, ModuleOp, TensorType
from xdsl.ir import Region, SSAValue

from hlocc.analysis.affine_expr import Const, Expr, dim, sym
from hlocc.analysis.bitcast import bitcast_index
from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import EmitterKind, analyze_fusion
from hlocc.analysis.indexing_map import IndexingMap, Variable, compose
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.op_indexing import output_to_input
from hlocc.analysis.transpose_info import (
    BANK_BITWIDTH,
    NUM_SHMEM_BANKS,
    TransposeDescription,
    inverse_permutation,
    packed_transpose_tiles,
    tiled_transpose_description,
)
from hlocc.codegen.elemental.element_emitter import ElementEmitter
from hlocc.codegen.elemental.storage import buffer_element_type, from_storage, store_element, to_storage
from hlocc.codegen.emitters.base import (
    FusionEmitterBase,
    KernelModule,
    emit_subgraph_function,
    entry_block,
    reachable_functions,
    thread_and_block_ids,
)
from hlocc.codegen.ir import AllocateSharedOp, LoopOp, PureCallOp, SyncThreadsOp, YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.partitioner import PartitionedComputation, partition_fusion, subgraph_roots_for_heroes
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import Shape

TILE_SIZE = 32
"""XLA's kTileSize: the tile side along the two swapped dimensions (times the vector size)."""
NUM_ROWS = 4
"""XLA's kNumRows on CUDA: 4 rows of 32 threads, 128 threads per block (ROCm: 8)."""
MAX_VECTORIZED_BYTES = 4
"""XLA's kMaxVectorizedBytes on CUDA: a thread reads at most 4 bytes per step (ROCm: 16)."""
THREADS_PER_CORE_LIMIT = 2048
"""The H100's resident threads per SM (XLA's device_info().threads_per_core_limit()), for the
vectorisation heuristic's "enough work" test."""
CPU_TILE_SIZE = 128
"""The CPU tile side, halved until a tile fits `CPU_TILE_BYTES`: 128×128 for 1- and 2-byte
elements, 64×64 for 4-byte ones."""
CPU_TILE_BYTES = 32 * 1024
"""A shared tile stays in L1 (32 KiB or more on current x86 and Arm cores)."""
CPU_VECTOR_BYTES = 16
"""Bytes a CPU thread moves per step (one 128-bit vector), and at least 4 elements."""
CPU_MAX_THREADS = 1024


# -- index expressions -----------------------------------------------------------------------------

def _in_bounds(exprs: Sequence[Expr], dims: Sequence[int]) -> list[tuple[Expr, Interval]]:
    return [(e, Interval(0, n - 1)) for e, n in zip(exprs, dims)]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# -- tilings ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ShmemTiling:
    """XLA's TransposeFusion tiling of a normalised transpose: blocks of `block_sizes` (over the
    input dimensions) in row-major block order; in phase 1 a thread's k-th element of step s is
    element `s * threads * vector + th * vector + k` of the input tile (row-major), in phase 2 the
    same of the output tile. The shared tile is the input tile with the two swapped dimensions
    exchanged, `padding` longer along the one the phase-1 writes walk.

    Both tilings answer, for phase 1 (`output` False: reading the input) and phase 2 (`output`
    True: writing the output): `dims` (normalised or canonical shape), `symbols` (the per-thread
    loop), `index` (of that shape), `shmem_index` and `constraints` (the points that run)."""

    input_dims: tuple[int, ...]
    permutation: tuple[int, ...]
    block_sizes: tuple[int, ...]
    threads: int
    vector: int
    padding: int = 1

    @property
    def swapped(self) -> tuple[int, int]:
        """The two input dimensions the shared tile exchanges (the minor one first): the second
        minor one of a "102" transpose, whose minor dimension stays, else the minor one."""
        r, perm = len(self.permutation), self.permutation
        return (r - 2, perm[r - 2]) if perm[-1] == r - 1 else (r - 1, perm[r - 1])

    @property
    def block_counts(self) -> tuple[int, ...]:
        return tuple(_ceil(n, b) for n, b in zip(self.input_dims, self.block_sizes))

    @property
    def launch(self) -> LaunchDims:
        return LaunchDims(self.threads, math.prod(self.block_counts))

    @property
    def shmem_dims(self) -> tuple[int, ...]:
        dims = self._swap(self.block_sizes)
        dims[self.swapped[0]] += self.padding
        return tuple(dims)

    def dims(self, output: bool) -> tuple[int, ...]:
        return tuple(self.input_dims[p] for p in self.permutation) if output else self.input_dims

    def symbols(self, output: bool) -> tuple[Variable, ...]:
        steps = math.prod(self.block_sizes) // (self.threads * self.vector)
        return Variable(Interval(0, steps - 1)), Variable(Interval(0, self.vector - 1))

    def _swap(self, values: Sequence) -> list:
        a, b = self.swapped
        out = list(values)
        out[a], out[b] = out[b], out[a]
        return out

    def _tile(self, output: bool) -> tuple[int, ...]:
        return tuple(self.block_sizes[p] for p in self.permutation) if output else self.block_sizes

    def _offsets(self, output: bool) -> list[Expr]:
        linear = sym(0) * (self.threads * self.vector) + dim(0) * self.vector + sym(1)
        return delinearize(linear, self._tile(output))

    def index(self, output: bool) -> list[Expr]:
        block_ids = delinearize(dim(1), self.block_counts)
        if output:
            block_ids = [block_ids[p] for p in self.permutation]
        return [b * n + o for b, n, o in zip(block_ids, self._tile(output), self._offsets(output))]

    def shmem_index(self, output: bool) -> list[Expr]:
        offsets = self._offsets(output)
        if output:  # the element's offsets in the input tile
            tile = list(offsets)
            for i, p in enumerate(self.permutation):
                tile[p] = offsets[i]
            offsets = tile
        return self._swap(offsets)

    def constraints(self, output: bool) -> list[tuple[Expr, Interval]]:
        return _in_bounds(self.index(output), self.dims(output))


@dataclass(frozen=True)
class PackedTiling:
    """XLA's PackedTranspose tiling: canonical [T2, A, T1, B] → [T1, A, T2, B] (B = 1), blocks of
    `output_tile` over the canonical output, a shared tile of (32·v)² elements whose rows are T2
    and whose columns are A·T1 (`tile_A` rows of T1 side by side), columns swizzled by
    (col + row / v · v) mod 32v. Phase 1: lane l of thread group g writes row `s0·groups + g`,
    columns `l·v + s1`; phase 2 reads rows `l·v + s2`, columns `(s0·groups + g)·v + s1`."""

    input_dims: tuple[int, ...]
    output_dims: tuple[int, ...]
    permutation: tuple[int, ...]
    output_tile: tuple[int, ...]
    vector: int
    threads: int

    @cached_property
    def _facts(self) -> tuple:
        """(input tile, T1 tile, populated rows, populated columns, dimension ids: A, T1 and T2 in
        the input, T1 and T2 in the output)."""
        r, perm = len(self.permutation), self.permutation
        inverse = inverse_permutation(perm)
        tile = tuple(self.output_tile[inverse[i]] for i in range(r))
        ids = (r - 3, r - 2, perm[r - 2], inverse[r - 2], r - 2)
        return tile, tile[r - 2], tile[perm[r - 2]], tile[r - 3] * tile[r - 2], ids

    @property
    def groups(self) -> int:
        return self.threads // NUM_SHMEM_BANKS

    @property
    def block_counts(self) -> tuple[int, ...]:
        return tuple(_ceil(n, t) for n, t in zip(self.output_dims, self.output_tile))

    @property
    def launch(self) -> LaunchDims:
        return LaunchDims(self.threads, math.prod(self.block_counts))

    @property
    def shmem_dims(self) -> tuple[int, ...]:
        return NUM_SHMEM_BANKS * self.vector, NUM_SHMEM_BANKS * self.vector

    def dims(self, output: bool) -> tuple[int, ...]:
        return self.output_dims if output else self.input_dims

    def symbols(self, output: bool) -> tuple[Variable, ...]:
        _, _, rows, cols, _ = self._facts
        v = Variable(Interval(0, self.vector - 1))
        if output:
            return Variable(Interval(0, _ceil(cols, self.vector * self.groups) - 1)), v, v
        return Variable(Interval(0, _ceil(rows, self.groups) - 1)), v

    def _cell(self, output: bool) -> tuple[Expr, Expr]:
        """(shared tile row, column) of a thread's element in a phase."""
        lane, group = dim(0) % NUM_SHMEM_BANKS, dim(0) // NUM_SHMEM_BANKS
        if output:
            return lane * self.vector + sym(2), (sym(0) * self.groups + group) * self.vector + sym(1)
        return sym(0) * self.groups + group, lane * self.vector + sym(1)

    def index(self, output: bool) -> list[Expr]:
        row, col = self._cell(output)
        input_tile, t1, _, _, (a, t1_in, t2_in, t1_out, t2_out) = self._facts
        block_ids = delinearize(dim(1), self.block_counts)
        tile = self.output_tile
        if not output:
            inverse = inverse_permutation(self.permutation)
            block_ids, tile = [block_ids[i] for i in inverse], input_tile
        offsets: list[Expr] = [Const(0)] * len(tile)
        offsets[a] = col // t1
        offsets[t1_out if output else t1_in] = col % t1
        offsets[t2_out if output else t2_in] = row
        return [b * n + o for b, n, o in zip(block_ids, tile, offsets)]

    def shmem_index(self, output: bool) -> list[Expr]:
        row, col = self._cell(output)
        return [row, (col + (row // self.vector) * self.vector) % (NUM_SHMEM_BANKS * self.vector)]

    def constraints(self, output: bool) -> list[tuple[Expr, Interval]]:
        row, col = self._cell(output)
        _, _, rows, cols, _ = self._facts
        return [(col, Interval(0, cols - 1)), (row, Interval(0, rows - 1)),
                *_in_bounds(self.index(output), self.dims(output))]


Tiling = ShmemTiling | PackedTiling


def gpu_shmem_tiling(description: TransposeDescription, tile_element_bytes: Sequence[int], target) -> ShmemTiling:
    """XLA's TransposeFusion constructor: the "102" tile keeps the minor dimension whole; otherwise
    32×32 tiles, vectorised by v (v², a power of two ≤ 4 bytes / widest element) when the launch
    still fills the GPU v² times over, the shared tiles fit v² times and both swapped dimensions
    are multiples of v. `tile_element_bytes` holds one entry per transpose root (XLA counts roots)."""
    dims, perm = description.input_dimensions, description.permutation
    rank = len(dims)

    def tiling(vector: int) -> ShmemTiling:
        sizes = [1] * rank
        if perm[-1] == rank - 1:
            sizes[-1] = dims[-1]
            sizes[-2] = sizes[perm[-2]] = TILE_SIZE
            return ShmemTiling(dims, perm, tuple(sizes), TILE_SIZE * NUM_ROWS, dims[-1])
        sizes[-1] = sizes[perm[-1]] = TILE_SIZE * vector
        return ShmemTiling(dims, perm, tuple(sizes), TILE_SIZE * NUM_ROWS, vector)

    if perm[-1] == rank - 1:
        return tiling(1)
    base = tiling(1)
    shmem_usage = sum(TILE_SIZE * (TILE_SIZE + 1) * b for b in tile_element_bytes)
    vector = MAX_VECTORIZED_BYTES // max(tile_element_bytes)
    while vector > 1:
        enough_work = base.launch.num_threads >= vector * vector * target.num_cores * THREADS_PER_CORE_LIMIT
        enough_shmem = shmem_usage * vector * vector <= target.shared_memory_bytes
        aligned = dims[-1] % vector == 0 and dims[perm[-1]] % vector == 0
        if enough_work and enough_shmem and aligned:
            return tiling(vector)
        vector //= 2
    return base


def cpu_shmem_tiling(description: TransposeDescription, tile_element_bytes: int,
                     element_bytes: int = 4) -> ShmemTiling:
    """A CPU tiling: tiles of up to 128×128 that fit `CPU_TILE_BYTES` of L1 (`tile_element_bytes`:
    the bytes one tile position takes in all shared tiles together), a thread handling one
    16-byte vector of consecutive elements of a tile row (at least 4; the whole minor dimension of a
    "102" tile) in each phase, as many threads as that takes (at most 1024, else a few steps each),
    and no padding (no banks). Measured on 2-D and 3-D transposes of f32, f16 and s8 (2 to 3 times
    faster for 16- and 8-bit elements than 64×64 tiles of 4 elements per thread); the element
    count per step follows the widest transposed element (`element_bytes`)."""
    dims, perm = description.input_dimensions, description.permutation
    rank = len(dims)
    side = CPU_TILE_SIZE
    while side > 8 and side * side * tile_element_bytes > CPU_TILE_BYTES:
        side //= 2
    sizes = [1] * rank
    if perm[-1] == rank - 1:
        sizes[-1] = dims[-1]
        a, b = rank - 2, perm[-2]
    else:
        a, b = rank - 1, perm[-1]
    sizes[a], sizes[b] = min(side, dims[a]), min(side, dims[b])
    per_thread = max(4, CPU_VECTOR_BYTES // element_bytes)
    vector = dims[-1] if perm[-1] == rank - 1 else math.gcd(per_thread, sizes[a], sizes[b])
    work = math.prod(sizes) // vector
    steps = next(d for d in range(1, work + 1) if work % d == 0 and work // d <= CPU_MAX_THREADS)
    return ShmemTiling(dims, perm, tuple(sizes), work // steps, vector, padding=0)


def packed_tiling(description: TransposeDescription) -> PackedTiling | None:
    """XLA's packed tiling for the element's *storage* width. *Differs from XLA* for 4-bit types:
    hlocc stores them one per byte (in shared memory too), so a 32-bit bank holds 4 of them, not 8,
    and XLA's (32·8)² tile would need 64 KiB of shared memory (a block has 48 KiB): the tile is the
    8-bit one, (32·4)² bytes."""
    bits = max(8, description.bits)
    tiles = packed_transpose_tiles(description.dimensions, description.permutation, bits)
    if tiles is None:
        return None
    return PackedTiling(tiles.canonical_input, tiles.canonical_output, tiles.canonical_permutation, tiles.tile_sizes,
                        BANK_BITWIDTH // bits, TILE_SIZE * NUM_ROWS)


# -- the emitter ----------------------------------------------------------------------------------------

def _byte_width(shape: Shape) -> int:
    """XLA's primitive_util::ByteWidth: whole bytes (a pred or s4 element counts as one)."""
    return max(1, _ceil(shape.element_type.bits, 8))


class TransposeEmitter(FusionEmitterBase):
    """Shared-memory transposes (module docstring). `outputs` are the fusion's outputs (the root
    tuple's operands), `heroes` their heroes; transpose roots (hero a tiled transpose) are written
    in phase 2, side outputs in phase 1."""

    def __init__(self, fusion, target, name: str = "main"):
        super().__init__(fusion, target, name)
        analysis = analyze_fusion(FusionAdaptor.for_computation(fusion))
        if analysis.kind is not EmitterKind.TRANSPOSE:
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' is not a transpose fusion "
                                   f"(hero analysis: {analysis.kind.value})")
        self.description: TransposeDescription = analysis.transpose
        root = fusion.root
        self.outputs: list[HloInstruction] = list(root.operands) if root.opcode == "tuple" else [root]
        if any(o.shape.is_tuple for o in self.outputs):
            raise UnsupportedError(f"unsupported: nested tuple output in transpose fusion '{fusion.name}'")
        hero_of = {id(r): h for r, h in zip(analysis.roots, analysis.heroes)}
        self.heroes = [hero_of[id(o)] for o in self.outputs]
        self.transpose_roots = [k for k, h in enumerate(self.heroes) if tiled_transpose_description(h) is not None]
        self.side_roots = [k for k in range(len(self.outputs)) if k not in self.transpose_roots]
        self.transposes: list[HloInstruction] = []
        for k in self.transpose_roots:
            if all(t is not self.heroes[k] for t in self.transposes):
                self.transposes.append(self.heroes[k])
        self.tiling = self._tiling()

    def _tiling(self) -> Tiling:
        d = self.description
        minor = d.input_dimensions[-1] if d.permutation[-1] == len(d.permutation) - 1 else 1  # "102": in the tile
        if self.target.kind != "gpu":
            widths = [_byte_width(t.shape) for t in self.transposes]
            return cpu_shmem_tiling(d, minor * sum(widths), max(widths))
        packed = packed_tiling(d) if d.packed else None
        return packed or gpu_shmem_tiling(d, [minor * _byte_width(self.heroes[k].shape) for k in self.transpose_roots],
                                          self.target)

    @property
    def launch(self) -> LaunchDims:
        return self.tiling.launch

    # -- indexing maps (XLA's ComputeThreadIdTo{Output,Input}Indexing) -----------------------------------
    def _grid(self) -> tuple[Variable, Variable]:
        launch = self.launch
        return (Variable(Interval(0, launch.threads_per_block - 1), "th_x"),
                Variable(Interval(0, launch.blocks - 1), "bl_x"))

    def _phase_map(self, output: bool, results: Sequence[Expr]) -> IndexingMap:
        """(th_x, bl_x)[the phase's loop] -> `results`, over the points of the phase that run."""
        m = IndexingMap(self._grid(), tuple(results), self.tiling.symbols(output))
        for e, iv in self.tiling.constraints(output):
            m = m.with_constraint(e, iv)
        return m.simplify()

    def _index(self, output: bool, shape: Shape) -> list[Expr]:
        """The index of `shape` (a bitcast of the phase's normalised shape) a thread works on."""
        return bitcast_index(self.tiling.dims(output), self.tiling.index(output), shape)

    def thread_id_to_output_indexing(self, root_index: int) -> IndexingMap:
        """(th_x, bl_x)[loop symbols] -> the index of output `root_index` that thread writes."""
        shape = self.outputs[root_index].shape
        if root_index in self.transpose_roots:
            return self._phase_map(True, self._index(True, shape))
        return self._phase_map(False, self._index(False, shape))

    def thread_id_to_input_indexing(self, root_index: int, hero_operand_index: int) -> IndexingMap:
        """(th_x, bl_x)[loop symbols] -> the index of operand `hero_operand_index` of the root's hero
        that thread reads (for a side output, the root is its own hero)."""
        hero = self.heroes[root_index]
        if root_index in self.transpose_roots:
            return self._phase_map(False, self._index(False, hero.operand(hero_operand_index).shape))
        out = self.thread_id_to_output_indexing(root_index)
        return compose(out, output_to_input(self.outputs[root_index])[hero_operand_index])

    # -- IR ------------------------------------------------------------------------------------------------
    def emit(self) -> KernelModule:
        partitioned = partition_fusion(self.fusion, subgraph_roots_for_heroes(self.transposes))
        pc = partitioned.fusion
        params = self.fusion.parameters
        block, param_types, out_types = entry_block(self.fusion, [o.shape for o in self.outputs])
        b = KernelBuilder(block)
        launch = self.launch
        ids = list(thread_and_block_ids(b, launch))
        param_values = list(block.args[:len(params)])
        outputs = list(block.args[len(params):])

        shmem, outputs = self._emit_phase1(b, pc, ids, param_values, outputs)
        synced = SyncThreadsOp(shmem)
        b.insert(synced)
        results = self._emit_phase2(b, pc, ids, param_values, outputs, list(synced.results))
        b.insert(func.ReturnOp(*results))

        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        functions = [emit_subgraph_function(pc, sg) for sg in pc.subgraphs]
        module = ModuleOp([entry, *reachable_functions(entry, functions)])
        return KernelModule(module, self.name, launch, len(params), len(self.outputs), emitter="transpose")

    def _emit_phase1(self, b: KernelBuilder, pc: PartitionedComputation, ids: list[SSAValue],
                     params: list[SSAValue], outputs: list[SSAValue]) -> tuple[list[SSAValue], list[SSAValue]]:
        """The shared tiles written from the hero operands, and the side outputs (module doc, 1)."""
        t = self.tiling
        tiles = [b.add(AllocateSharedOp(TensorType(buffer_element_type(h.shape.element_type), list(t.shmem_dims))))
                 for h in self.transposes]
        results, slices = _ResultList(), []
        for h in self.transposes:
            slices.append(results.add(self._index(False, h.operand(0).shape)))
        shmem_slice = results.add(t.shmem_index(False))
        for k in self.side_roots:
            slices.append(results.add(self._index(False, self.outputs[k].shape)))
        loop = LoopOp(self._phase_map(False, results.exprs), ids, [*tiles, *(outputs[k] for k in self.side_roots)])
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        index = list(loop.map_results)
        shmem_index = index[shmem_slice]
        written = []
        for h, tile, at in zip(self.transposes, loop.region_iter_args, slices):
            value = _provide(body, pc, params, h.operand(0), index[at])
            value = to_storage(body, value, h.shape.element_type)
            written.append(body.add(tensor.InsertOp(value, tile, shmem_index)))
        # All side outputs are computed before any is written: an output may share its buffer
        # with a parameter another side output reads at the same element (input_output_alias).
        side_slices = slices[len(self.transposes):]
        values = [_provide(body, pc, params, self.outputs[k], index[at]) for k, at in zip(self.side_roots, side_slices)]
        for k, out, at, value in zip(self.side_roots, loop.region_iter_args[len(tiles):], side_slices, values):
            written.append(store_element(body, value, out, self.outputs[k].shape, index[at]))
        body.insert(YieldOp(*written))
        new_outputs = list(outputs)
        for k, value in zip(self.side_roots, loop.results[len(tiles):]):
            new_outputs[k] = value
        return list(loop.results[:len(tiles)]), new_outputs

    def _emit_phase2(self, b: KernelBuilder, pc: PartitionedComputation, ids: list[SSAValue],
                     params: list[SSAValue], outputs: list[SSAValue], tiles: list[SSAValue]) -> list[SSAValue]:
        """The transpose roots, from the shared tiles through their epilogues (module doc, 3)."""
        results, slices = _ResultList(), []
        for k in self.transpose_roots:
            slices.append(results.add(self._index(True, self.outputs[k].shape)))
        shmem_slice = results.add(self.tiling.shmem_index(True))
        loop = LoopOp(self._phase_map(True, results.exprs), ids, outputs)
        b.insert(loop)
        body = KernelBuilder(loop.body.block)
        index = list(loop.map_results)
        overrides = {}
        for h, tile in zip(self.transposes, tiles):
            stored = body.add(tensor.ExtractOp(tile, index[shmem_slice], buffer_element_type(h.shape.element_type)))
            overrides[id(h)] = [from_storage(body, stored, h.shape.element_type)]
        epilogues: dict[int, ElementEmitter] = {}
        values = []
        for k, at in zip(self.transpose_roots, slices):
            subgraph = pc.find_subgraph(self.outputs[k])
            emitter = epilogues.get(id(subgraph))
            if emitter is None:
                emitter = epilogues[id(subgraph)] = ElementEmitter(body, pc, subgraph, params)
                emitter.overrides.update(overrides)
            values.append(emitter.value(self.outputs[k], index[at])[0])
        current = list(loop.region_iter_args)
        for k, at, value in zip(self.transpose_roots, slices, values):
            current[k] = store_element(body, value, current[k], self.outputs[k].shape, index[at])
        body.insert(YieldOp(*current))
        return list(loop.results)


class _ResultList:
    """The results of one phase map: groups of expressions, identical groups stored once."""

    def __init__(self):
        self.exprs: list[Expr] = []
        self._seen: dict[tuple, slice] = {}

    def add(self, exprs: Sequence[Expr]) -> slice:
        key = tuple(exprs)
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = slice(len(self.exprs), len(self.exprs) + len(exprs))
            self.exprs.extend(exprs)
        return found


def _provide(b: KernelBuilder, pc: PartitionedComputation, params: list[SSAValue], instr: HloInstruction,
             indices: Sequence[SSAValue]) -> SSAValue:
    """The value of `instr` at `indices`: a call of its subgraph when it is that subgraph's root,
    else emitted inline as part of its subgraph (XLA's ProvideParameter)."""
    subgraph = pc.find_subgraph(instr)
    if subgraph.roots[0] is instr:
        call = PureCallOp(subgraph.name, [*params, *indices], [element_type(instr.shape.element_type)])
        b.insert(call)
        return call.results[0]
    return ElementEmitter(b, pc, subgraph, params).value(instr, indices)[0]



__all__ = ["PackedTiling", "ShmemTiling", "TransposeEmitter", "cpu_shmem_tiling",
           "gpu_shmem_tiling", "packed_tiling"]
