"""The tiled-transpose description used by hero analysis and the transpose emitter, and the
transpose facts behind it (the general shape and bitcast facts are in hlo/shape_util.py).

- `bit_width`: bits of one element as the emitters count them.
- `normalized_transpose`: a transpose reduced to its essential form — size-1 dimensions dropped,
  dimensions that stay adjacent merged — e.g. f32[2,2048,8,16] → [2,8,16,2048] is [2,2048,128] →
  [2,128,2048] with permutation (0,2,1) ("021"). It is computed on the *physical* (major-to-minor)
  dimensions, which equals XLA's logical normalization on the row-major layouts XLA's layout
  normalization guarantees, and stays right for the other layouts hlocc may see.
- `tiled_transpose_description`: when the shared-memory transpose emitter applies to a transpose
  or to a copy that changes the layout (a physical transpose; its permutation is the identity, the
  layouts do the transposing) (GetDescriptionForTiledTransposeEmitter in
  xla/service/gpu/ir_emission_utils.cc; facts §4.3):
  packed transposes of small types, "102" transposes that keep a short minor dimension, and
  transposes that swap the minor dimension with one at least 16 long (or both ≥ 8 with product
  ≥ 8192), never for 4-bit types when the minor dimension moves.

Everything here reads shapes and instructions; nothing changes the IR.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.shape_util import static_dims
from hlocc.hlo.types import Layout, PrimitiveType, Shape

MIN_DIMENSION_TO_TRANSPOSE_TILED = 16
"""Both swapped dimensions at least this long make a transpose tiled (XLA kMinDimensionToTransposeTiled)."""
MIN_DIMENSION_TO_TRANSPOSE_TILED2 = 8
MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED = 64 * 128
MAX_BITS_IN_MOST_MINOR_DIMENSION = 8 * 8
"""A "102" transpose is tiled only when its kept minor dimension holds at most 64 bits."""
NUM_SHMEM_BANKS = 32
BANK_BITWIDTH = 32


def bit_width(element_type: PrimitiveType) -> int:
    """Bits of one element as the emitters count them: pred is a byte (XLA's GetBitwidth)."""
    return 8 if element_type.is_pred else element_type.bits


def normalized_transpose(operand: Shape, shape: Shape,
                         permutation: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(normalized output dims, normalized permutation) of a transpose, over physical dimensions
    (see the module doc). Output dim i of the result reads normalized operand dim permutation[i]."""
    out_dims = static_dims(shape)
    in_position = {d: p for p, d in enumerate(reversed(operand.minor_to_major))}  # major-to-minor
    phys_out = list(reversed(shape.minor_to_major))
    # Physical output position j holds logical output dim phys_out[j], which reads logical operand
    # dim permutation[phys_out[j]], at physical operand position in_position[...].
    sizes = [out_dims[d] for d in phys_out]
    source = [in_position[permutation[d]] for d in phys_out]
    in_sizes = [0] * len(sizes)
    for size, s in zip(sizes, source):
        in_sizes[s] = size
    # Drop degenerate dimensions and renumber the operand dims that remain.
    kept_inputs = [i for i, size in enumerate(in_sizes) if size != 1]
    renumber = {old: new for new, old in enumerate(kept_inputs)}
    pairs = [(size, renumber[s]) for size, s in zip(sizes, source) if size != 1]
    if not pairs:
        return (1,), (0,)
    # Merge runs of output dims that read consecutive operand dims.
    merged_sizes: list[int] = []
    merged_first: list[int] = []
    for k, (size, s) in enumerate(pairs):
        if k and s == pairs[k - 1][1] + 1:
            merged_sizes[-1] *= size
        else:
            merged_sizes.append(size)
            merged_first.append(s)
    order = sorted(range(len(merged_first)), key=lambda k: merged_first[k])
    rank_of = {k: r for r, k in enumerate(order)}
    return tuple(merged_sizes), tuple(rank_of[k] for k in range(len(merged_first)))


def inverse_permutation(permutation: Sequence[int]) -> tuple[int, ...]:
    inverse = [0] * len(permutation)
    for i, p in enumerate(permutation):
        inverse[p] = i
    return tuple(inverse)


@dataclass(frozen=True)
class TransposeDescription:
    """A transpose the shared-memory transpose emitter handles: its normalized output dims and
    permutation, the element width, whether the packed (small element) emitter applies and the
    shared memory one block needs."""

    dimensions: tuple[int, ...]
    permutation: tuple[int, ...]
    bits: int
    packed: bool
    shmem_bytes: int
    instruction: HloInstruction | None = field(default=None, compare=False, repr=False)

    @property
    def input_dimensions(self) -> tuple[int, ...]:
        inverse = inverse_permutation(self.permutation)
        return tuple(self.dimensions[inverse[i]] for i in range(len(self.dimensions)))

    def is_equivalent(self, other: TransposeDescription) -> bool:
        """Same normalized shape, permutation and element width (XLA's IsEquivalent)."""
        return (self.dimensions, self.permutation, self.bits) == (other.dimensions, other.permutation, other.bits)


@dataclass(frozen=True)
class PackedTransposeTiles:
    """The packed transpose's canonical form [T2, A, T1, B] → [T1, A, T2, B] and its tile."""

    canonical_input: tuple[int, ...]
    canonical_output: tuple[int, ...]
    canonical_permutation: tuple[int, ...]
    tile_sizes: tuple[int, ...]


def packed_transpose_tiles(dimensions: Sequence[int], permutation: Sequence[int],
                           bits: int) -> PackedTransposeTiles | None:
    """The packed emitter's tiling (GetPackedTransposeTileSizes), or None when it does not apply:
    elements of 32 bits or more, fewer than 10·vector populated shared-memory rows or columns,
    a B dimension, or tiles not divisible by the vector size."""
    if bits >= BANK_BITWIDTH:
        return None
    out = list(dimensions)
    perm = list(permutation)
    if perm[-1] != len(out) - 1:  # the last dimension moves: add a size-1 B dimension
        perm.append(len(out))
        out.append(1)
    rank = len(out)
    if perm[rank - 3] != rank - 3:  # add a size-1 A dimension
        out.insert(rank - 2, 1)
        perm = [p + 1 if p > rank - 3 else p for p in perm]
        perm.insert(rank - 2, rank - 2)
        rank += 1
    inverse = inverse_permutation(perm)
    inp = [out[inverse[i]] for i in range(rank)]
    dim_a, dim_b, dim_t1 = inp[rank - 3], inp[rank - 1], inp[rank - 2]
    dim_t2 = inp[perm[rank - 2]]
    vector = BANK_BITWIDTH // bits
    shmem_dim = NUM_SHMEM_BANKS * vector
    tile_t1 = min(dim_t1, shmem_dim)
    tile_a = min(dim_a, shmem_dim // tile_t1)
    tile_t2 = min(dim_t2, shmem_dim)
    rows, cols = tile_t2, tile_a * tile_t1
    if cols < 10 * vector or rows < 10 * vector:
        return None
    if dim_b != 1 or rows % vector or cols % vector or (dim_t2 % tile_t2) % vector:
        return None
    tiles = [1] * rank
    tiles[inverse[rank - 2]] = tile_t1
    tiles[rank - 2] = tile_t2
    tiles[rank - 3] = tile_a
    return PackedTransposeTiles(tuple(inp), tuple(out), tuple(perm), tuple(tiles))


def transpose_permutation(instr: HloInstruction) -> tuple[int, ...] | None:
    """The logical permutation of an op that may transpose physically: a transpose's dimensions,
    the identity for a copy (which transposes only when the layouts differ), else None."""
    if instr.opcode == "transpose":
        return tuple(instr.attrs["dimensions"])
    if instr.opcode == "copy" and instr.shape.is_array:
        return tuple(range(instr.shape.rank))
    return None


def tiled_transpose_description(instr: HloInstruction) -> TransposeDescription | None:
    """The description of `instr` when it is a transpose the tiled emitter handles (module doc),
    or a copy that changes the layout: a physical transpose, normalised over the physical dimensions
    like a transpose (XLA's FindTiledTranspose handled such copies; XLA's layout normalization now
    rewrites them into a transpose and a bitcast before hero analysis, which amounts to the same
    description). A layout-preserving copy is a memcpy, never a transpose."""
    permutation = transpose_permutation(instr)
    if permutation is None or not instr.shape.is_array:
        return None
    operand, shape = instr.operand(0).shape, instr.shape
    if instr.opcode == "copy" and shape.same_layout(operand):
        return None
    found = _describe(static_dims(operand), operand.minor_to_major, static_dims(shape), shape.minor_to_major,
                      permutation, bit_width(shape.element_type), operand.element_type)
    return None if found is None else replace(found, instruction=instr)


@functools.lru_cache(maxsize=4096)
def _describe(in_dims, in_m2m, out_dims, out_m2m, permutation, bits,
              element_type: PrimitiveType) -> TransposeDescription | None:
    """`tiled_transpose_description` as a function of the shapes alone (memoised: hero analysis
    asks about the same transposes again and again)."""
    operand = Shape.array(element_type, in_dims, Layout(in_m2m))
    shape = Shape.array(element_type, out_dims, Layout(out_m2m))
    dims, perm = normalized_transpose(operand, shape, permutation)
    if len(perm) < 2:
        return None
    in_dims = [dims[i] for i in inverse_permutation(perm)]
    if packed_transpose_tiles(dims, perm, bits) is not None:
        vector = BANK_BITWIDTH // bits
        shmem = NUM_SHMEM_BANKS * (BANK_BITWIDTH // 8) * NUM_SHMEM_BANKS * vector
        return TransposeDescription(dims, perm, bits, True, shmem)
    if perm[-1] == len(dims) - 1:  # "102": the minor dimension stays
        operand_minor = in_dims[-2]
        minor_bits = bits * dims[-1]
        if minor_bits <= MAX_BITS_IN_MOST_MINOR_DIMENSION and \
                minor_bits * min(operand_minor, dims[-2]) >= 8 * MIN_DIMENSION_TO_TRANSPOSE_TILED:
            shmem = -(-NUM_SHMEM_BANKS * (NUM_SHMEM_BANKS + 1) * minor_bits // 8)
            return TransposeDescription(dims, perm, bits, False, shmem)
        return None
    operand_minor = in_dims[-1]
    large = operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED and dims[-1] >= MIN_DIMENSION_TO_TRANSPOSE_TILED
    medium = (operand_minor >= MIN_DIMENSION_TO_TRANSPOSE_TILED2 and dims[-1] >= MIN_DIMENSION_TO_TRANSPOSE_TILED2
              and operand_minor * dims[-1] >= MIN_TOTAL_DIMENSIONS_TO_TRANSPOSE_TILED)
    if (large or medium) and bits != 4:
        shmem = -(-NUM_SHMEM_BANKS * (NUM_SHMEM_BANKS + 1) * bits // 8)
        return TransposeDescription(dims, perm, bits, False, shmem)
    return None


def transposes_minor_dimension(instr: HloInstruction) -> bool:
    """Whether a copy or transpose moves the most minor non-trivial dimension (the reads of its
    operand are then not coalesced in a loop emitter; XLA's TransposesMinorDimension)."""
    if instr.opcode == "copy":
        return _most_minor_nontrivial(instr.operand(0).shape)[0] != _most_minor_nontrivial(instr.shape)[0]
    if instr.opcode != "transpose":
        return False
    operand = instr.operand(0).shape
    position = {d: p for p, d in enumerate(operand.minor_to_major)}
    first_nontrivial = _most_minor_nontrivial(operand)[1]
    perm = instr.attrs["dimensions"]
    for out_dim in instr.shape.minor_to_major:
        if static_dims(instr.shape)[out_dim] == 1:
            continue
        return position[perm[out_dim]] > first_nontrivial
    return False


def _most_minor_nontrivial(shape: Shape) -> tuple[int, int]:
    """(dimension, its layout position) of the most minor dimension longer than 1."""
    dims = static_dims(shape)
    for position, d in enumerate(shape.minor_to_major):
        if dims[d] > 1:
            return d, position
    return -1, shape.rank
