"""Hero analysis and emitter choice (seed 000 "Hero-based codegen"; facts §4).

The *hero* of a fusion root is the op that shapes the code generated for the whole fusion
(XLA's FindNonTrivialHero, xla/service/gpu/ir_emission_utils.cc):

1. from the root, walk up through "intermediate" ops with one operand inside the fusion:
   elementwise ops (a copy only if it keeps the layout), bitcasts, reshapes and transposes that
   are bitcasts;
2. from there search, consumers first, for a tiled transpose (a copy that changes the layout is a
   physical transpose and counts as one), then for a concatenate, passing
   through intermediate ops of up to three operands; exactly one candidate may be found and
   nothing but intermediate ops (and the root tuple) may use it;
3. otherwise a reduce at the end of the walk is the hero; anything else: the root itself.

A dot fusion (a dot marked by passes/gemm_fusion.py and its elementwise epilogue) has the dot as
its hero and the GEMM kind (`gemm_hero`): codegen/emitters/matmul.py emits it. A stitch fusion
(reduces marked by passes/stitch_fusion.py, analysis/stitch_info.py) has the STITCH kind:
codegen/emitters/stitch.py emits it.

The emitter of a fusion (XLA's GetEmitterFusionKind, xla/service/gpu/hlo_fusion_analysis.cc,
then GetFusionEmitter's refinement of loop fusions), in this order:

1. a backend config naming a Triton / cuDNN / custom fusion → CUSTOM (hlocc has no emitter);
2. a *real* reduction hero (`reduction_info.is_real_reduction_hero`) → REDUCTION, if every other
   reduction hero normalises alike and every other root has as many elements as the reduce input;
3. tiled transpose heroes that are all equivalent, with every other root a bitcast of the
   transpose input → TRANSPOSE;
4. several roots → INPUT_SLICES when all are unit-stride slices of equally shaped operands
   (the emitter XLA deleted in 2025-08, kept by hlocc), else LOOP;
5. a scatter root → SCATTER; a sort root → SORT;
6. a concatenate hero of a single root with at most 4 operands → CONCATENATE;
7. LOOP. A loop fusion whose roots copy parameters without changing layout is a COPY (memcpy);
   one whose roots are all dynamic-update-slices (possibly behind bitcasts) that can update their
   operand's buffer in place is IN_PLACE_DYNAMIC_UPDATE_SLICE.

Instructions outside fusions get the kind of their implementation: GEMM (dot), CONVOLUTION,
CUSTOM_CALL, LIBRARY (fft, sort, linear algebra, batch norm, rng, ...), HOST (control flow,
collectives, I/O), COPY, or NO_KERNEL (parameters, constants, tuples, bitcasts); any other op is
analysed as the one-op fusion it becomes (`passes/fusion_wrapper.py`).

The decisions use XLA's warp size of 32 whatever the target, so the same HLO gets the same
emitter everywhere; emitters adapt their launch parameters to the target.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.reduction_info import (
    WARP_SIZE,
    ReductionDimensions,
    ReductionEmitterKind,
    is_real_reduction_hero,
    reduction_dimensions,
    reduction_emitter,
    reductions_compatible,
)
from hlocc.analysis.transpose_info import TransposeDescription, bit_width, tiled_transpose_description
from hlocc.hlo.attributes import RawAttr
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.shape_util import (
    is_reshape_or_transpose_bitcast,
    reshape_is_bitcast,
    static_dims,
    static_elements,
    transpose_is_bitcast,
)

MAX_CONCATENATE_OPERANDS = 4
"""The concatenate emitter emits code per operand; past this many the loop emitter is used."""


class EmitterKind(Enum):
    """How an instruction is implemented: one of the seven hero-based emitters (plus sort and the
    memcpy and custom fusions XLA has), or the library/host implementation of an unfused op."""

    LOOP = "loop"
    TRANSPOSE = "transpose"
    REDUCTION = "reduction"
    SCATTER = "scatter"
    CONCATENATE = "concatenate"
    IN_PLACE_DYNAMIC_UPDATE_SLICE = "in_place_dynamic_update_slice"
    INPUT_SLICES = "input_slices"
    SORT = "sort"
    COPY = "copy"
    CUSTOM = "custom"
    GEMM = "gemm"
    STITCH = "stitch"
    CONVOLUTION = "convolution"
    CUSTOM_CALL = "custom_call"
    LIBRARY = "library"
    HOST = "host"
    NO_KERNEL = "none"

    @property
    def is_generated_kernel(self) -> bool:
        """Whether hlocc's emitters generate the kernel (the seven emitters and sort)."""
        return self in _GENERATED


_GENERATED = frozenset({EmitterKind.LOOP, EmitterKind.TRANSPOSE, EmitterKind.REDUCTION, EmitterKind.SCATTER,
                        EmitterKind.CONCATENATE, EmitterKind.IN_PLACE_DYNAMIC_UPDATE_SLICE,
                        EmitterKind.INPUT_SLICES, EmitterKind.SORT, EmitterKind.STITCH})

UNFUSED_KINDS: dict[str, EmitterKind] = {
    **dict.fromkeys(("dot", "ragged-dot", "scaled-dot"), EmitterKind.GEMM),
    "convolution": EmitterKind.CONVOLUTION,
    "custom-call": EmitterKind.CUSTOM_CALL,
    **dict.fromkeys(("fft", "cholesky", "triangular-solve", "sort", "topk", "batch-norm-training",
                     "batch-norm-inference", "batch-norm-grad", "rng", "rng-bit-generator",
                     "rng-get-and-update-state", "select-and-scatter", "scan"), EmitterKind.LIBRARY),
    **dict.fromkeys(("while", "conditional", "call", "async-start", "async-update", "async-done", "infeed",
                     "outfeed", "send", "send-done", "recv", "recv-done", "replica-id", "partition-id",
                     "get-dimension-size", "set-dimension-size", "dynamic-reshape", "all-gather",
                     "all-gather-start", "all-gather-done", "all-reduce", "all-reduce-start", "all-reduce-done",
                     "all-to-all", "ragged-all-to-all", "reduce-scatter", "collective-broadcast",
                     "collective-permute", "collective-permute-start", "collective-permute-done"),
                    EmitterKind.HOST),
    **dict.fromkeys(("copy-start", "copy-done"), EmitterKind.COPY),
    **dict.fromkeys(("parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all",
                     "add-dependency", "opt-barrier", "domain"), EmitterKind.NO_KERNEL),
}
"""The implementation of ops that are never part of a generated kernel ("library or host
operations": seed 000's custom calls to external libraries, and the runtime's own thunks)."""

_CUSTOM_FUSION_MARKERS = ("__custom_fusion", "__triton", "__cudnn$fusion", "__dynamic_memcpy")


# -- intermediate ops and heroes -------------------------------------------------------------------

def is_elementwise(instr: HloInstruction) -> bool:
    """XLA's IsElementwise: the unary/binary/ternary ops, map, and a bitcast-convert that keeps
    the element width."""
    info = OPCODES.get(instr.opcode)
    if info is not None and info.is_elementwise:
        return True
    if instr.opcode == "map":
        return True
    if instr.opcode == "bitcast-convert" and instr.operands:
        operand = instr.operand(0).shape
        return (operand.is_array and instr.shape.is_array and operand.rank == instr.shape.rank
                and operand.element_type.bits == instr.shape.element_type.bits)
    return False


def is_intermediate(instr: HloInstruction, allowed_operand_count: int = 1) -> bool:
    """An op that keeps the hero's iteration space: elementwise with 1..n operands (a copy only
    when it keeps the layout), a bitcast, or a reshape/transpose that is a bitcast."""
    if not 1 <= len(instr.operands) <= allowed_operand_count:
        return False
    if is_elementwise(instr):
        if instr.opcode == "copy":
            return instr.shape.same_layout(instr.operand(0).shape)
        return True
    if instr.opcode == "bitcast":
        return True
    if instr.opcode == "reshape":
        return reshape_is_bitcast(instr.operand(0).shape, instr.shape)
    if instr.opcode == "transpose":
        return transpose_is_bitcast(instr.operand(0).shape, instr.shape, instr.attrs["dimensions"])
    return False


def find_hero(adaptor: FusionAdaptor, start: HloInstruction,
              predicate: Callable[[HloInstruction], bool]) -> HloInstruction | None:
    """The unique op matching `predicate` reachable from `start` through intermediate ops of up
    to three operands, provided only intermediate ops use it (XLA's FindHero); else None."""
    hero: HloInstruction | None = None
    seen = {id(start)}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        if predicate(node):
            if hero is not None:
                return None
            hero = node
            continue
        if not is_intermediate(node, 3):
            continue
        for op in adaptor.operands(node):
            if op is not None and id(op) not in seen:
                seen.add(id(op))
                queue.append(op)
    if hero is None:
        return None
    seen = set()
    queue = deque(adaptor.users(hero))
    while queue:
        node = queue.popleft()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.opcode not in ("tuple", "parameter") and not is_intermediate(node, 3):
            return None
        queue.extend(adaptor.users(node))
    return hero


def find_non_trivial_hero(adaptor: FusionAdaptor, root: HloInstruction, *, search: bool = True) -> HloInstruction:
    """The hero of `root` in the fusion (see the module doc). `search=False` skips the searches
    for transpose and concatenate heroes, for callers that know the fusion holds neither."""
    hero = root
    while is_intermediate(hero, 1):
        operand = adaptor.operand(hero, 0)
        if operand is None:
            break
        hero = operand
    if search:
        transpose = find_hero(adaptor, hero, lambda n: tiled_transpose_description(n) is not None)
        if transpose is not None:
            return transpose
        concatenate = find_hero(adaptor, hero, lambda n: n.opcode == "concatenate")
        if concatenate is not None:
            return concatenate
    return hero if hero.opcode == "reduce" else root


_HERO_SEARCH_OPCODES = frozenset({"transpose", "copy", "concatenate"})


def roots_and_heroes(adaptor: FusionAdaptor, opcodes=None) -> tuple[tuple[HloInstruction, ...],
                                                                    tuple[HloInstruction, ...]]:
    """The fusion's roots and each root's hero. `opcodes`, when given, are the opcodes present
    in the fusion: without a transpose, copy or concatenate the hero searches are skipped (they
    could find nothing), which keeps analysis of long elementwise fusions cheap. A multi-output
    fusion collects them itself: each root's search walks the fusion, so K roots cost K walks."""
    roots = tuple(adaptor.roots())
    if opcodes is None and len(roots) > 1:  # one walk for the opcodes, not one search per root
        opcodes = {i.opcode for i in adaptor.instructions()}
    search = opcodes is None or not _HERO_SEARCH_OPCODES.isdisjoint(opcodes)
    heroes = tuple(find_non_trivial_hero(adaptor, r, search=search) if adaptor.contains(r) else r for r in roots)
    return roots, heroes


def hero_of(instr: HloInstruction) -> HloInstruction:
    """The hero of an instruction of a fused computation, its computation seen as the fusion."""
    return find_non_trivial_hero(FusionAdaptor.for_computation(instr.parent), instr)


# -- fusion analysis ------------------------------------------------------------------------------

BufferPredicate = Callable[[HloInstruction, int, HloInstruction], bool]
"""`(fusion, output index, operand)`: may output `output index` of `fusion` be written into the
buffer of its operand `operand` (the in-place update of a dynamic-update-slice)?"""


@dataclass(frozen=True)
class FusionAnalysis:
    """What the emitters need to know about a fusion: its emitter, roots and heroes (for a loop
    fusion the heroes are the roots, as in XLA), the transpose description of a transpose fusion,
    the hero reduce of a reduction fusion, and the narrowest input and output element widths."""

    kind: EmitterKind
    roots: tuple[HloInstruction, ...]
    heroes: tuple[HloInstruction, ...]
    transpose: TransposeDescription | None = None
    reduction_hero: HloInstruction | None = None
    smallest_input_bits: int = 1 << 30
    smallest_output_bits: int = 1 << 30

    @property
    def reduction(self) -> ReductionDimensions | None:
        return reduction_dimensions(self.reduction_hero) if self.reduction_hero is not None else None

    def reduction_emitter(self, *, warp_size: int = WARP_SIZE, core_count: int = 132) -> ReductionEmitterKind:
        """Row, multi-row, column or small-column reduction emitter (reduction fusions only)."""
        if self.reduction_hero is None:
            raise ValueError("not a reduction fusion")
        return reduction_emitter(self.reduction_hero, self.smallest_input_bits, self.smallest_output_bits,
                                 warp_size=warp_size, core_count=core_count)


def _smallest_bits(shapes) -> int:
    bits = 1 << 30
    for shape in shapes:
        for leaf in shape.leaves():
            if leaf.is_array:
                bits = min(bits, bit_width(leaf.element_type))
    return bits


def _elements(instr: HloInstruction) -> int:
    return static_elements(instr.shape.leaves()[0])


def custom_fusion_kind(fusion: HloInstruction | None) -> bool:
    """Whether a fusion's backend config names a Triton, cuDNN or custom fusion."""
    if fusion is None or fusion.opcode != "fusion":
        return False
    config = fusion.attrs.get("backend_config")
    text = config.text if isinstance(config, RawAttr) else str(config or "")
    return any(marker in text for marker in _CUSTOM_FUSION_MARKERS)


GEMM_DOT_MARKER = "__hlocc_gemm"
"""In the backend config of the dot (or convolution: an implicit gemm) of a dot fusion that
passes/gemm_fusion.py made. On the hero, not on the fusion instruction, so that the fused
computation alone (what the emitters see) says it; a fusion XLA made with a dot inside is none."""
GEMM_HERO_OPCODES = ("dot", "convolution")


STITCH_MARKER = "__hlocc_stitch"
"""In the backend config of each reduce of a stitch fusion (passes/stitch_fusion.py)."""


def is_stitch_marked(instr: HloInstruction) -> bool:
    return instr.opcode == "reduce" and STITCH_MARKER in str(instr.attrs.get("backend_config") or "")


def is_gemm_dot_marked(instr: HloInstruction) -> bool:
    return instr.opcode in GEMM_HERO_OPCODES and GEMM_DOT_MARKER in str(instr.attrs.get("backend_config") or "")


def gemm_hero(adaptor: FusionAdaptor, roots) -> HloInstruction | None:
    """The dot of a dot fusion (passes/gemm_fusion.py): the fusion's only dot (or convolution: an
    implicit gemm), marked with `GEMM_DOT_MARKER`, whose value reaches the single root through
    elementwise ops of its dimensions alone (its epilogue). None for any other fusion."""
    dots = [i for i in adaptor.instructions() if i.opcode in GEMM_HERO_OPCODES]
    if len(dots) != 1 or len(roots) != 1 or not is_gemm_dot_marked(dots[0]):
        return None
    dot, root = dots[0], roots[0]
    if static_dims(root.shape) != static_dims(dot.shape):
        return None
    pending, seen = [root], set()
    while pending:  # every path from the root back to the dot passes only elementwise ops
        node = pending.pop()
        if node is dot or id(node) in seen:
            continue
        seen.add(id(node))
        if not is_elementwise(node) or static_dims(node.shape) != static_dims(dot.shape):
            if _reaches(adaptor, node, dot):
                return None
            continue
        pending += [op for op in node.operands if adaptor.contains(op)]
    return dot if _reaches(adaptor, root, dot) else None


def _reaches(adaptor: FusionAdaptor, start: HloInstruction, target: HloInstruction) -> bool:
    pending, seen = [start], set()
    while pending:
        node = pending.pop()
        if node is target:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            pending += [op for op in node.operands if adaptor.contains(op)]
    return False


def consistent_transpose_hero(roots, heroes) -> TransposeDescription | None:
    """The transpose description all roots agree with: every transpose hero equivalent, every
    other root a bitcast of the transpose's input (XLA's FindConsistentTransposeHero)."""
    description: TransposeDescription | None = None
    others = []
    for root, hero in zip(roots, heroes):
        found = tiled_transpose_description(hero)
        if found is None:
            others.append(root)
        elif description is None:
            description = found
        elif not description.is_equivalent(found):
            return None
    if description is None:
        return None
    transpose_input = description.instruction.operand(0).shape
    if any(not is_reshape_or_transpose_bitcast(root.shape, transpose_input) for root in others):
        return None
    return description


def _reduction_hero(roots, heroes, warp_size: int) -> HloInstruction | None:
    first = next((h for r, h in zip(roots, heroes) if is_real_reduction_hero(r, h, warp_size)), None)
    if first is None:
        return None
    input_elements = _elements(first.operand(0))
    for root, hero in zip(roots, heroes):
        if root is first:
            continue
        if is_real_reduction_hero(root, hero, warp_size):
            if not reductions_compatible(hero, first):
                return None
        elif root.shape.is_tuple or _elements(root) != input_elements:
            return None
    return first


def _are_input_slices(roots) -> bool:
    if len(roots) < 2 or any(r.opcode != "slice" for r in roots):
        return False
    if any(d.stride != 1 for r in roots for d in r.attrs["slice"]):
        return False
    first = roots[0].operand(0).shape
    return all(static_dims(r.operand(0).shape) == static_dims(first)
               and r.operand(0).shape.minor_to_major == first.minor_to_major for r in roots)


def _use_concatenate(roots, heroes) -> bool:
    return (len(heroes) == 1 and heroes[0].opcode == "concatenate" and not roots[0].shape.is_tuple
            and len(heroes[0].operands) <= MAX_CONCATENATE_OPERANDS)


def _is_copy_fusion(adaptor: FusionAdaptor, roots) -> bool:
    for root in roots:
        if root.opcode != "copy" or adaptor.operand(root, 0) is not None:
            return False
        if not root.shape.same_layout(root.operand(0).shape):
            return False
    return True


def analyze_fusion(adaptor: FusionAdaptor, fusion: HloInstruction | None = None, *,
                   warp_size: int = WARP_SIZE, can_share_buffer: BufferPredicate | None = None,
                   opcodes=None) -> FusionAnalysis:
    """The emitter and heroes of the fusion `adaptor` describes (module doc). `fusion` is the
    fusion instruction when there is one (its backend config and, for an in-place
    dynamic-update-slice, its operand buffers matter); `can_share_buffer` decides the in-place
    question (default: `default_can_share_buffer`; with no fusion instruction the structure alone
    decides, as XLA does before buffer assignment); `opcodes` as for `roots_and_heroes`."""
    if opcodes is None:  # one walk answers the gemm and stitch questions below (each was a walk)
        opcodes = {i.opcode for i in adaptor.instructions()}
    roots, heroes = roots_and_heroes(adaptor, opcodes)
    bits_in = _smallest_bits(p.shape for p in adaptor.parameters())
    bits_out = _smallest_bits(r.shape for r in roots)

    def result(kind: EmitterKind, **extra) -> FusionAnalysis:
        hero_list = roots if kind in _ROOTS_ARE_HEROES else heroes
        return FusionAnalysis(kind, roots, hero_list, smallest_input_bits=bits_in, smallest_output_bits=bits_out,
                              **extra)

    if custom_fusion_kind(fusion):
        return result(EmitterKind.CUSTOM)
    dot = gemm_hero(adaptor, roots) if not opcodes.isdisjoint(GEMM_HERO_OPCODES) else None
    if dot is not None:
        return FusionAnalysis(EmitterKind.GEMM, roots, [dot], smallest_input_bits=bits_in,
                              smallest_output_bits=bits_out)
    if "reduce" in opcodes and any(is_stitch_marked(i) for i in adaptor.instructions()):
        return result(EmitterKind.STITCH)
    reduce_hero = _reduction_hero(roots, heroes, warp_size)
    if reduce_hero is not None:
        return result(EmitterKind.REDUCTION, reduction_hero=reduce_hero)
    transpose = consistent_transpose_hero(roots, heroes)
    if transpose is not None:
        return result(EmitterKind.TRANSPOSE, transpose=transpose)
    if len(roots) > 1:
        if _are_input_slices(roots):
            return result(EmitterKind.INPUT_SLICES)
        return result(_refine_loop(adaptor, roots, fusion, can_share_buffer))
    if roots[0].opcode == "scatter":
        return result(EmitterKind.SCATTER)
    if roots[0].opcode == "sort":
        return result(EmitterKind.SORT)
    if _use_concatenate(roots, heroes):
        return result(EmitterKind.CONCATENATE)
    return result(_refine_loop(adaptor, roots, fusion, can_share_buffer))


_ROOTS_ARE_HEROES = frozenset({EmitterKind.LOOP, EmitterKind.COPY, EmitterKind.IN_PLACE_DYNAMIC_UPDATE_SLICE,
                               EmitterKind.INPUT_SLICES, EmitterKind.CUSTOM})


def _refine_loop(adaptor, roots, fusion, can_share_buffer) -> EmitterKind:
    if _is_copy_fusion(adaptor, roots):
        return EmitterKind.COPY
    if can_emit_dynamic_update_slice_in_place(adaptor, fusion, can_share_buffer):
        return EmitterKind.IN_PLACE_DYNAMIC_UPDATE_SLICE
    return EmitterKind.LOOP


# -- in-place dynamic-update-slice ---------------------------------------------------------------

def _strip_bitcasts(adaptor: FusionAdaptor, node: HloInstruction) -> HloInstruction:
    while node.opcode == "bitcast":
        operand = adaptor.operand(node, 0)
        if operand is None:
            break
        node = operand
    return node


def can_emit_dynamic_update_slice_in_place(adaptor: FusionAdaptor, fusion: HloInstruction | None = None,
                                           can_share_buffer: BufferPredicate | None = None) -> bool:
    """Whether every root is a dynamic-update-slice (possibly behind bitcasts) that may write only
    its update into its operand's buffer (XLA's CanEmitFusedDynamicUpdateSliceInPlace): each DUS
    reaches its root through bitcasts alone, updates a fusion parameter that nothing else in the
    fusion reads except elementwise ops, bitcasts and a dynamic-slice of the same window, all
    updates have one shape, and the operand's buffer can be shared with the output."""
    roots = adaptor.roots()
    updates = [_strip_bitcasts(adaptor, r) for r in roots]
    if not updates or any(u.opcode != "dynamic-update-slice" or not adaptor.contains(u) for u in updates):
        return False
    update_dims = static_dims(updates[0].operand(1).shape)
    check = can_share_buffer or default_can_share_buffer
    for index, dus in enumerate(updates):
        node = dus
        users = adaptor.users(node)
        while users:
            if len(users) > 1 or users[0].opcode != "bitcast":
                return False
            node = users[0]
            users = adaptor.users(node)
        param = dus.operand(0)
        if param.opcode == "bitcast" and adaptor.contains(param):
            param = param.operand(0)
        if adaptor.contains(param) or param.opcode != "parameter":
            return False
        if not _only_same_window_readers(adaptor, param, dus):
            return False
        if static_dims(dus.operand(1).shape) != update_dims:
            return False
        if fusion is not None:
            operand = fusion.operands[param.parameter_number]
            if not check(fusion, index, operand):
                return False
    return True


def _only_same_window_readers(adaptor: FusionAdaptor, param: HloInstruction, dus: HloInstruction) -> bool:
    update = dus.operand(1).shape
    dus_starts = dus.operands[2:]
    seen = {id(param), id(dus)}
    queue = deque([param])
    root = param.parent.root
    while queue:
        node = queue.popleft()
        users = [u for u in node.users if not (u is root and u.opcode == "tuple")]
        for user in users:
            if user.opcode == "dynamic-slice" and user.operand(0) is dus.operand(0) \
                    and static_dims(user.shape) == static_dims(update):
                if static_elements(update) != 1 and [o for o in user.operands[1:]] != list(dus_starts):
                    return False
            elif user is not dus and user.opcode == "dynamic-update-slice":
                return False
            elif user is not dus and not is_elementwise(user) and user.opcode not in ("bitcast", "tuple"):
                return False
            if id(user) not in seen:
                seen.add(id(user))
                queue.append(user)
    return True


def default_can_share_buffer(fusion: HloInstruction, output_index: int, operand: HloInstruction) -> bool:
    """hlocc's rule before buffer assignment: the operand's buffer may be overwritten when the
    fusion is its only user and it is neither a constant nor an entry parameter that the module
    does not donate (input_output_alias). Buffer assignment must honour the decision (give the
    fusion's output the operand's buffer) or pass its own predicate."""
    if operand.opcode == "constant":
        return False
    if any(u is not fusion for u in operand.users) or sum(1 for o in fusion.operands if o is operand) != 1:
        return False
    comp = operand.parent
    if operand.opcode == "parameter" and comp is not None and comp.is_entry:
        module = comp.parent
        aliases = module.input_output_alias if module is not None else []
        return any(p == operand.parameter_number for _, p, _, _ in aliases)
    if operand.opcode == "parameter":
        return False
    return True


# -- instructions ---------------------------------------------------------------------------------

def analyze(instr: HloInstruction, *, warp_size: int = WARP_SIZE,
            can_share_buffer: BufferPredicate | None = None, opcodes=None) -> FusionAnalysis:
    """`analyze_fusion` of a fusion instruction, or of another op as the one-op fusion it becomes."""
    return analyze_fusion(FusionAdaptor.for_instruction(instr), instr if instr.opcode == "fusion" else None,
                          warp_size=warp_size, can_share_buffer=can_share_buffer, opcodes=opcodes)


def emitter_kind(instr: HloInstruction, *, warp_size: int = WARP_SIZE,
                 can_share_buffer: BufferPredicate | None = None) -> EmitterKind:
    """How `instr` is implemented: a fusion's emitter, an unfused library/host op's kind, or (for
    an op that needs a generated kernel but is not fused yet) the emitter of its one-op fusion."""
    if instr.opcode != "fusion":
        kind = UNFUSED_KINDS.get(instr.opcode)
        if kind is not None:
            return kind
        if instr.opcode == "copy" and instr.shape.same_layout(instr.operand(0).shape):
            return EmitterKind.COPY
    return analyze(instr, warp_size=warp_size, can_share_buffer=can_share_buffer).kind


def computation_emitter_kind(computation: HloComputation, *, warp_size: int = WARP_SIZE) -> EmitterKind:
    """The emitter of a fused computation on its own (an emitter test's body)."""
    return analyze_fusion(FusionAdaptor.for_computation(computation), warp_size=warp_size).kind


def fusion_kind_for(kind: EmitterKind) -> str:
    """The HLO fusion kind XLA records for an emitter (PriorityFusion::ChooseKind): kInput for
    the reduction, transpose, concatenate and scatter emitters, kCustom for custom and sort
    fusions, kLoop otherwise."""
    if kind in (EmitterKind.REDUCTION, EmitterKind.TRANSPOSE, EmitterKind.CONCATENATE, EmitterKind.SCATTER):
        return "kInput"
    if kind in (EmitterKind.CUSTOM, EmitterKind.SORT, EmitterKind.STITCH):
        return "kCustom"
    return "kLoop"
