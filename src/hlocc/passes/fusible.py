"""Which instructions may fuse, and with what: the legality rules shared by the fusion passes
(XLA's xla/service/gpu/gpu_fusible.cc and the checks of priority_fusion.cc / instruction_fusion.cc).

- `is_fusible`: ops the emitters can generate inside a fusion (elementwise ops, data movement,
  reduce, reduce-window, scatter, gather, iota, constants, loop/input fusions). Everything else —
  dot, convolution, sort, custom-call, rng, control flow, collectives, I/O, fft, linear algebra,
  top-k, batch norm — stays outside as a library or host operation (analysis/hero.py UNFUSED_KINDS);
- `is_expensive`: ops not worth recomputing — XLA's IsExpensive list (transcendentals, roots,
  reduce, gather, dot, complex arithmetic, ...) except division, whose recomputation the cost
  model prices instead (a mean's division fused under a broadcast is common and cheap); a fusion
  is expensive when it holds one;
- multi-output legality: `is_fusible_as_multi_output_root`, `shapes_compatible_for_multi_output`
  (one iteration space: equal loop shapes, reduce heroes that normalise alike, equivalent tiled
  transposes; XLA's ShapesCompatibleForMultiOutputFusion and FusionHeroesAreCompatible),
  `is_producer_multi_output_fusible`;
- budgets (`FusionLimits`): shared memory of tiled heroes, at most 8 unnested reductions, at most
  96 operands plus outputs per kernel, at most 10000 fused instructions;
- in-place safety (`should_fuse_in_place_op`, `can_emit_input_fused_scatter`): nothing may be fused
  that reads a buffer an in-place dynamic-update-slice or scatter overwrites, except elementwise
  code reading the same element.

All predicates read the IR; none changes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hlocc.analysis.fusion_adaptor import FusionAdaptor, fusion_roots
from hlocc.analysis.hero import (
    EmitterKind,
    FusionAnalysis,
    analyze,
    is_elementwise,
    is_intermediate,
    roots_and_heroes,
)
from hlocc.analysis.reduction_info import (
    is_real_reduction_hero,
    is_reduction_from_or_to_contiguous_dimensions,
    reduction_dimensions,
    reductions_compatible,
)
from hlocc.analysis.scan import scan_window
from hlocc.analysis.transpose_info import tiled_transpose_description
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.shape_util import (
    is_reshape_or_transpose_bitcast,
    static_dims,
    static_elements,
    transpose_is_bitcast,
)
from hlocc.passes.fusion_utils import distinct


@dataclass(frozen=True)
class FusionLimits:
    """Budgets a fusion must fit (XLA's device limits and FusionFitsInBudget)."""

    shared_memory_bytes: int = 48 * 1024
    max_unnested_reductions: int = 8
    max_operands_and_outputs: int = 96
    max_fused_instructions: int = 10000


DEFAULT_LIMITS = FusionLimits()

_FUSIBLE_NON_ELEMENTWISE = frozenset({
    "copy", "iota", "constant", "reduce", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice",
    "gather", "pad", "reduce-window", "reshape", "reverse", "scatter", "slice", "transpose",
})

_EXPENSIVE = frozenset({
    "acos", "acosh", "asin", "asinh", "atan2", "atanh", "cosh", "erf", "exponential", "exponential-minus-one",
    "log", "log-plus-one", "logistic", "power", "rsqrt", "sqrt", "cbrt", "tanh", "dot", "convolution", "fft",
    "gather", "map", "reduce", "reduce-window", "scatter", "select-and-scatter", "sort", "topk", "custom-call",
    "cholesky", "triangular-solve", "rng", "rng-bit-generator", "rng-get-and-update-state", "scan",
    "batch-norm-training", "batch-norm-inference", "batch-norm-grad",
})
_EXPENSIVE_FOR_COMPLEX = frozenset({"abs", "cosine", "sign", "sine", "sinh", "tan"})


def is_fusible_bitcast(instr: HloInstruction) -> bool:
    """A bitcast that keeps the element width (a no-op the fusion absorbs)."""
    if instr.opcode != "bitcast" or not instr.shape.is_array or not instr.operand(0).shape.is_array:
        return False
    return instr.shape.element_type.bits == instr.operand(0).shape.element_type.bits


def is_fusible(instr: HloInstruction) -> bool:
    """Whether `instr` may be fused as a producer or consumer (priority fusion's IsFusible)."""
    if instr.opcode == "fusion":
        return instr.attrs.get("kind") != "kCustom"
    if is_elementwise(instr):
        return True
    return instr.opcode in _FUSIBLE_NON_ELEMENTWISE or is_fusible_bitcast(instr)


def _instruction_is_expensive(instr: HloInstruction) -> bool:
    op = instr.opcode
    if op in _EXPENSIVE:
        return True
    element = instr.shape.element_type if instr.shape.is_array else None
    if op in _EXPENSIVE_FOR_COMPLEX or op in ("divide", "remainder"):
        return element is not None and element.is_complex
    return False


def is_expensive(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    """XLA's IsExpensive; a fusion is expensive when one of its instructions is."""
    return _facts(facts).summary(instr).expensive > 0


def _is_significant_reduce(node: HloInstruction) -> bool:
    if node.opcode != "reduce" or not node.shape.is_array:
        return False
    n_out = static_elements(node.shape)
    return bool(n_out) and static_elements(node.operand(0).shape) // n_out >= 16


@dataclass(frozen=True)
class FusionSummary:
    """Counts over the instructions of a fusion (or of one op), which add up when fusions merge,
    so a pass can keep them up to date without rescanning a growing fusion."""

    instructions: int
    opcodes: frozenset[str]
    significant_reduces: int
    unnested_reductions: int
    shared_memory: int
    expensive: int
    transposes: frozenset[tuple] = frozenset()  # normalized (dims, permutation, bits) of tiled transposes

    @staticmethod
    def of(instr: HloInstruction) -> FusionSummary:
        nodes = instr.attrs["calls"].instructions if instr.opcode == "fusion" else [instr]
        nodes = [n for n in nodes if n.opcode != "parameter"]
        return FusionSummary(
            instructions=len(nodes),
            opcodes=frozenset(n.opcode for n in nodes),
            significant_reduces=sum(1 for n in nodes if _is_significant_reduce(n)),
            unnested_reductions=sum(1 for n in nodes if n.opcode == "reduce"
                                    and is_reduction_from_or_to_contiguous_dimensions(n)),
            shared_memory=sum(_shared_memory(n) for n in nodes if n.opcode in ("reduce", "transpose", "copy")),
            expensive=sum(1 for n in nodes if _instruction_is_expensive(n)),
            transposes=frozenset((d.dimensions, d.permutation, d.bits) for d in map(tiled_transpose_description, nodes)
                                 if d is not None),
        )

    def merged(self, other: FusionSummary) -> FusionSummary:
        return FusionSummary(self.instructions + other.instructions, self.opcodes | other.opcodes,
                             self.significant_reduces + other.significant_reduces,
                             self.unnested_reductions + other.unnested_reductions,
                             self.shared_memory + other.shared_memory, self.expensive + other.expensive,
                             self.transposes | other.transposes)


def tiled_transposes_compatible(instr1: HloInstruction, instr2: HloInstruction,
                                facts: FusionFacts | None = None) -> str | None:
    """None unless the two hold tiled transposes with different normalized shapes: one kernel can
    tile for one transpose only, and the other would be read uncoalesced."""
    facts = _facts(facts)
    first, second = facts.summary(instr1).transposes, facts.summary(instr2).transposes
    if (first or second) and len(first | second) > 1:
        return "tiled transposes with different shapes"
    return None


class FusionFacts:
    """Summaries, heroes and analyses of instructions, cached for a pass. `record` sets the
    summary of a changed fusion (e.g. the merge of its parts' summaries); `invalidate` forgets an
    instruction."""

    def __init__(self):
        self._summaries: dict[HloInstruction, FusionSummary] = {}
        self._heroes: dict[HloInstruction, tuple] = {}
        self._analyses: dict[HloInstruction, FusionAnalysis] = {}

    def summary(self, instr: HloInstruction) -> FusionSummary:
        found = self._summaries.get(instr)
        if found is None:
            found = self._summaries[instr] = FusionSummary.of(instr)
        return found

    def record(self, instr: HloInstruction, summary: FusionSummary) -> None:
        self.invalidate(instr)
        self._summaries[instr] = summary

    def invalidate(self, instr: HloInstruction) -> None:
        self._summaries.pop(instr, None)
        self._heroes.pop(instr, None)
        self._analyses.pop(instr, None)

    def roots_and_heroes(self, instr: HloInstruction) -> list[tuple[HloInstruction, HloInstruction]]:
        found = self._heroes.get(instr)
        if found is None:
            if instr.opcode != "fusion":
                found = ((instr, instr),)
            else:
                roots, heroes = roots_and_heroes(FusionAdaptor.for_instruction(instr), self.summary(instr).opcodes)
                found = tuple(zip(roots, heroes))
            self._heroes[instr] = found
        return list(found)

    def analysis(self, instr: HloInstruction) -> FusionAnalysis:
        found = self._analyses.get(instr)
        if found is None:
            found = self._analyses[instr] = analyze(instr, opcodes=self.summary(instr).opcodes)
        return found


def _facts(facts: FusionFacts | None) -> FusionFacts:
    return facts if facts is not None else FusionFacts()


def contains_significant_reduce(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    """A reduce over at least 16 elements per output (smaller ones are emitted elementally)."""
    return _facts(facts).summary(instr).significant_reduces > 0


# -- input fusions and heroes ----------------------------------------------------------------------

def is_reduce_input_fusion(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    if instr.opcode != "fusion":
        return False
    facts = _facts(facts)
    if "reduce" not in facts.summary(instr).opcodes:
        return False
    return any(is_real_reduction_hero(r, h) for r, h in facts.roots_and_heroes(instr))


def is_input_fusible_reduction(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    return is_reduce_input_fusion(instr, facts) or is_reduction_from_or_to_contiguous_dimensions(instr)


def is_input_fusible_scatter(instr: HloInstruction) -> bool:
    if instr.opcode == "scatter":
        return True
    return (instr.opcode == "fusion" and instr.attrs.get("kind") == "kInput"
            and instr.attrs["calls"].root.opcode == "scatter")


def is_input_fusible_transpose(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    if instr.opcode == "bitcast" or (instr.opcode == "fusion" and instr.attrs.get("kind") == "kCustom"):
        return False
    if instr.opcode == "fusion":
        facts = _facts(facts)
        if facts.summary(instr).opcodes.isdisjoint(("transpose", "copy")):  # a copy may transpose physically
            return False
        return any(tiled_transpose_description(h) is not None for _, h in facts.roots_and_heroes(instr))
    return tiled_transpose_description(instr) is not None


def is_input_fusible(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    return is_fusible(instr) and (is_input_fusible_reduction(instr, facts) or is_input_fusible_scatter(instr)
                                  or is_input_fusible_transpose(instr, facts))


def choose_fusion_kind(producer: HloInstruction, consumer: HloInstruction, facts: FusionFacts | None = None) -> str:
    """kInput when either side is input fusible, else kLoop (XLA's gpu::ChooseFusionKind)."""
    return "kInput" if is_input_fusible(consumer, facts) or is_input_fusible(producer, facts) else "kLoop"


def is_universally_loop_fusible(instr: HloInstruction) -> bool:
    if is_elementwise(instr) and instr.operands and instr.opcode != "copy":
        return True
    op = instr.opcode
    if op == "copy":
        return tiled_transpose_description(instr) is None
    if op == "fusion":
        return instr.attrs.get("kind") == "kLoop"
    if op == "bitcast":
        return is_fusible_bitcast(instr)
    return op in ("broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "pad",
                  "reduce-window", "reshape", "reverse", "slice", "transpose")


def is_loop_fusible_as_producer(instr: HloInstruction) -> bool:
    if instr.opcode in ("iota", "constant"):
        return True
    if instr.opcode == "reduce":
        return not instr.shape.is_tuple
    return is_universally_loop_fusible(instr)


def is_physically_transposing(instr: HloInstruction) -> bool:
    """A copy, or a transpose that is not a bitcast (in a fusion: any of its instructions)."""
    if instr.opcode == "fusion":
        return any(is_physically_transposing(i) for i in instr.attrs["calls"].instructions)
    if instr.opcode == "copy":
        return True
    return instr.opcode == "transpose" and not transpose_is_bitcast(
        instr.operand(0).shape, instr.shape, instr.attrs["dimensions"])


def real_hero_for_multi_output(instr: HloInstruction, facts: FusionFacts | None = None) -> HloInstruction:
    """The hero constraining a multi-output fusion with `instr`: a real reduction or tiled
    transpose hero of one of its roots if any, else its (first) root (GetRealHeroForMultiOutputFusion)."""
    if instr.opcode != "fusion":
        return instr
    pairs = _facts(facts).roots_and_heroes(instr)
    for root, hero in pairs:
        if is_real_reduction_hero(root, hero) or tiled_transpose_description(hero) is not None:
            return hero
    return pairs[0][0]


def fusion_heroes_compatible(hero1: HloInstruction, hero2: HloInstruction) -> str | None:
    """None when two heroes can share a kernel, else why not (XLA's FusionHeroesAreCompatible; a
    cumulative reduce-window shares its kernel with nothing: analysis/scan.py)."""
    if scan_window(hero1) is not None or scan_window(hero2) is not None:
        return "a cumulative reduce-window is the root of its own scan fusion"
    reduce1 = is_reduction_from_or_to_contiguous_dimensions(hero1)
    reduce2 = is_reduction_from_or_to_contiguous_dimensions(hero2)
    tiled1, tiled2 = tiled_transpose_description(hero1), tiled_transpose_description(hero2)
    nested1 = hero1.opcode == "transpose" and tiled1 is None
    nested2 = hero2.opcode == "transpose" and tiled2 is None
    if reduce1 and reduce2 and not reductions_compatible(hero1, hero2):
        return "tiled reductions with different shapes"
    if tiled1 and tiled2 and not tiled1.is_equivalent(tiled2):
        return "tiled transposes with different shapes"
    if ((tiled1 or reduce1) and nested2) or (nested1 and (tiled2 or reduce2)):
        return "multi-output fusion of a nested transpose with an unnested hero op"
    if (tiled1 and reduce2) or (reduce1 and tiled2):
        return "multi-output fusion of a transpose and a reduction"
    return None


def _loop_shape(hero: HloInstruction):
    if is_reduction_from_or_to_contiguous_dimensions(hero) or tiled_transpose_description(hero) is not None:
        return hero.operand(0).shape
    return hero.shape


def _symbolic_output_sizes_differ(instr1: HloInstruction, instr2: HloInstruction) -> str | None:
    """Why two instructions with symbolic dims cannot share a fusion whose outputs would have
    different element counts (a reduction beside its input-shaped side output): the kernels with
    runtime dims compute such a fusion as one loop over the outputs (LoopEmitter.emit in codegen/emitters/loop.py, a
    row per thread), which needs one element count; the fusion would be compiled per size instead.
    Static shapes keep XLA's rule (the reduction emitter writes side outputs)."""
    leaves = [leaf for instr in (instr1, instr2) for leaf in instr.shape.leaves() if leaf.is_array]
    if not any(leaf.symbols for leaf in leaves):
        return None
    if len({leaf.num_elements for leaf in leaves}) > 1:
        return "outputs of different sizes over symbolic dims"
    return None


def shapes_compatible_for_multi_output(instr1: HloInstruction, instr2: HloInstruction,
                                       facts: FusionFacts | None = None) -> str | None:
    """None when two instructions can share one parallel loop, else why not: compatible heroes and
    loop shapes (a reduce's or tiled transpose's input shape, else the output) that are equal or
    bitcasts of each other."""
    facts = _facts(facts)
    hero1, hero2 = real_hero_for_multi_output(instr1, facts), real_hero_for_multi_output(instr2, facts)
    why = fusion_heroes_compatible(hero1, hero2)
    if why:
        return why
    why = _symbolic_output_sizes_differ(instr1, instr2)
    if why:
        return why
    l1, l2 = _loop_shape(hero1), _loop_shape(hero2)
    if l1.is_tuple or l2.is_tuple:
        return None if l1 == l2 else "different loop shapes"
    if static_dims(l1) == static_dims(l2) and l1.minor_to_major == l2.minor_to_major:
        return None
    if not is_reshape_or_transpose_bitcast(l1, l2):
        return "different loop shapes"
    return None


def in_place_operands(instr: HloInstruction) -> list[int]:
    """Operands whose buffer `instr` may update in place: a dynamic-update-slice's operand 0, a
    scatter's operands, and the fusion parameters feeding such roots (through bitcasts)."""
    if instr.opcode == "dynamic-update-slice":
        return [0]
    if instr.opcode == "scatter":
        return list(range(len(instr.operands) // 2))
    if instr.opcode != "fusion":
        return []
    result: list[int] = []
    for root in fusion_roots(instr.attrs["calls"]):
        while root.opcode == "bitcast":
            root = root.operand(0)
        targets = [root.operand(0)] if root.opcode == "dynamic-update-slice" else (
            root.operands[: len(root.operands) // 2] if root.opcode == "scatter" else [])
        for target in targets:
            while target.opcode == "bitcast":
                target = target.operand(0)
            if target.opcode == "parameter" and target.parameter_number not in result:
                result.append(target.parameter_number)
    return result


def is_fusible_as_multi_output_root(instr: HloInstruction, facts: FusionFacts | None = None) -> bool:
    if not is_fusible(instr):
        return False
    return (is_input_fusible_reduction(instr, facts) or is_input_fusible_transpose(instr, facts)
            or (instr.opcode == "fusion" and instr.attrs.get("kind") == "kLoop") or is_elementwise(instr))


def is_producer_multi_output_fusible(producer: HloInstruction, facts: FusionFacts | None = None) -> str | None:
    """None when `producer` may become a side output of its consumer's fusion, else why not."""
    if producer.opcode == "fusion" and producer.attrs["calls"].root.opcode == "tuple":
        return "producer is a multi-output fusion"
    if in_place_operands(producer):
        return "in-place operations are present"
    if not is_loop_fusible_as_producer(producer):
        return "producer is not loop-fusible"
    opcodes = _facts(facts).summary(producer).opcodes
    if ("copy" in opcodes or "transpose" in opcodes) and is_physically_transposing(producer):
        return "producer is physically transposing"
    return None


# -- budgets -----------------------------------------------------------------------------------------

def _shared_memory(instr: HloInstruction) -> int:
    if instr.opcode == "reduce" and is_reduction_from_or_to_contiguous_dimensions(instr):
        size = sum(instr.operand(i).shape.element_type.byte_size for i in range(len(instr.operands) // 2))
        return 32 * size if reduction_dimensions(instr).is_row_reduction else 32 * (4 * 32 + 1) * size
    description = tiled_transpose_description(instr)
    return description.shmem_bytes if description is not None else 0


def shared_memory_usage(instr: HloInstruction, facts: FusionFacts | None = None) -> int:
    """Bytes of shared memory the tiled heroes in `instr` need (XLA's estimate)."""
    return _facts(facts).summary(instr).shared_memory


def unnested_reductions(instr: HloInstruction, facts: FusionFacts | None = None) -> int:
    return _facts(facts).summary(instr).unnested_reductions


def fused_instruction_count(instr: HloInstruction, facts: FusionFacts | None = None) -> int:
    return _facts(facts).summary(instr).instructions


def _output_buffers(instr: HloInstruction) -> int:
    return len(instr.shape.leaves()) if instr.shape.is_tuple else 1


def fusion_fits_in_budget(instr1: HloInstruction, instr2: HloInstruction, *, consumer_producer: bool,
                          limits: FusionLimits = DEFAULT_LIMITS, facts: FusionFacts | None = None) -> str | None:
    """None when fusing the two fits the budgets, else why not (XLA's FusionFitsInBudget, plus
    hlocc's cap on fused instructions)."""
    s1, s2 = _facts(facts).summary(instr1), _facts(facts).summary(instr2)
    if s1.shared_memory + s2.shared_memory > limits.shared_memory_bytes:
        return f"shared memory usage would be over the budget of {limits.shared_memory_bytes}B"
    if s1.unnested_reductions + s2.unnested_reductions > limits.max_unnested_reductions:
        return f"over {limits.max_unnested_reductions} unnested reductions in fusion"
    if s1.instructions + s2.instructions > limits.max_fused_instructions:
        return "the fusion would be too large"
    outputs = _output_buffers(instr1) + _output_buffers(instr2)
    if len(instr1.operands) + len(instr2.operands) - 1 + outputs <= limits.max_operands_and_outputs:
        return None
    operands = {id(o): o for o in instr1.operands}
    operands.update({id(o): o for o in instr2.operands})
    operands.pop(id(instr1), None)
    operands.pop(id(instr2), None)
    if consumer_producer and len(operands) <= len(instr1.operands):
        return None
    if len(operands) + outputs > limits.max_operands_and_outputs:
        return "number of operands and output buffers is larger than allowed budget per fusion"
    return None


# -- in-place safety -----------------------------------------------------------------------------------

def can_emit_input_fused_scatter(producer: HloInstruction, consumer: HloInstruction) -> str | None:
    """None unless fusing would read a scatter's in-place operand or fuse into a scatter's output."""
    if is_input_fusible_scatter(producer):
        return "do not fuse into the output of scatter"
    if not is_input_fusible_scatter(consumer):
        return None
    if consumer.opcode == "fusion":
        scatter = consumer.attrs["calls"].root
        target = scatter.operand(0)
        in_place = consumer.operand(target.parameter_number) if target.opcode == "parameter" else None
    else:
        in_place = consumer.operand(0)
    if in_place is producer:
        return "do not fuse into the in-place operand of scatter"
    if any(op is in_place for op in producer.operands):
        return "producer uses the in-place operand of a scatter"
    return None


def _nonelementwise(instr: HloInstruction) -> bool:
    return instr.opcode not in ("fusion", "bitcast", "parameter") and not is_elementwise(instr)


def should_fuse_in_place_op(producer: HloInstruction, consumer: HloInstruction) -> str | None:
    """None when fusing `producer` into an in-place `consumer` is safe: the producer must not read
    the overwritten buffer except through elementwise ops (a conservative form of XLA's
    ShouldFuseInPlaceOp, without its slice/dynamic-slice special cases)."""
    for number in in_place_operands(consumer):
        target = consumer.operand(number)
        if any(k != number and op is target for k, op in enumerate(consumer.operands)):
            return "the consumer is an in-place operation with another operand aliasing the in-place buffer"
        if target is not producer and not any(op is target for op in producer.operands):
            continue
        nodes = producer.attrs["calls"].instructions if producer.opcode == "fusion" else [producer]
        if any(_nonelementwise(n) for n in nodes):
            return "producer reads the in-place buffer with a non-elementwise op"
        if consumer.opcode == "fusion":
            comp = consumer.attrs["calls"]
            param = next((i for i in comp.instructions if i.opcode == "parameter"
                          and consumer.operand(i.parameter_number) is producer), None)
            if param is not None and _reaches_nonelementwise(comp, param):
                return "non-elementwise ops in the consumer read the in-place buffer"
    return None


def _reaches_nonelementwise(comp: HloComputation, start: HloInstruction) -> bool:
    roots = {id(r) for r in fusion_roots(comp)}
    seen = {id(start)}
    stack = [start]
    while stack:
        node = stack.pop()
        for user in node.users:
            if id(user) in seen:
                continue
            seen.add(id(user))
            if _nonelementwise(user) and id(user) not in roots and user.opcode != "tuple":
                return True
            stack.append(user)
    return False


# -- computations ----------------------------------------------------------------------------------------

def fusible_computations(module: HloModule) -> list[HloComputation]:
    """Computations in which fusion runs: every computation except fused ones and those called as
    scalar functions (reducers, comparators, map bodies) or by `call`/async ops (XLA's
    GetFusibleComputations), callees first."""
    excluded: set[int] = set()
    fused: set[int] = set()
    for comp in module.computations:
        for instr in comp.instructions:
            callees = instr.called_computations()
            if instr.opcode == "fusion":
                fused.update(id(c) for c in callees)
            elif instr.opcode not in ("while", "conditional"):
                excluded.update(id(c) for c in callees)
    return [c for c in module.computation_post_order() if id(c) not in excluded and id(c) not in fused]


def is_effective_scalar(instr: HloInstruction) -> bool:
    return instr.shape.is_array and all(d == 1 for d in static_dims(instr.shape))


def intermediate_path_to_root(param: HloInstruction) -> bool:
    """A single chain of intermediate ops from a fused parameter to the root."""
    users = distinct(param.users)
    if len(users) != 1:
        return False
    node = users[0]
    while node.users:
        users = distinct(node.users)
        if not is_intermediate(node) or len(users) != 1:
            return False
        node = users[0]
    return True


_ALSO_IN_KERNELS = frozenset({"bitcast-convert", "bitcast", "get-tuple-element", "map", "reduce-precision"})
"""Ops a kernel may hold besides the fusible ones: wrapped alone (bitcast-convert), or reading a
part of a tuple-shaped fused value."""


def fusion_violations(module: HloModule) -> list[str]:
    """What is wrong with the fusions of a module, as messages (empty when all is well): an op
    that must stay outside inside a fusion, a fusion inside a fusion, a nested tuple root, or
    reduction heroes that normalise differently."""
    problems: list[str] = []
    for instr in module.all_instructions():
        if instr.opcode != "fusion" or instr.attrs.get("kind") == "kCustom":
            continue
        comp = instr.attrs["calls"]
        for inner in comp.instructions:
            if inner.opcode in ("parameter", "tuple") and (inner.opcode == "parameter" or inner is comp.root):
                continue
            if inner.opcode == "fusion" or not (is_fusible(inner) or inner.opcode in _ALSO_IN_KERNELS):
                problems.append(f"fusion '{instr.name}' holds '{inner.name}' ({inner.opcode}), which is not fusible")
        if comp.root.opcode == "tuple" and any(op.shape.is_tuple for op in comp.root.operands):
            problems.append(f"fusion '{instr.name}' has a nested tuple root")
        analysis = analyze(instr)
        if analysis.kind is EmitterKind.REDUCTION:
            first = analysis.reduction_hero
            for root, hero in zip(analysis.roots, analysis.heroes):
                if is_real_reduction_hero(root, hero) and not reductions_compatible(hero, first):
                    problems.append(f"fusion '{instr.name}' has incompatible reduction heroes "
                                    f"'{first.name}' and '{hero.name}'")
    return problems
