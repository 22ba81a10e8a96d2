"""`multi-output-fusion`: XLA's GPU MultiOutputFusion (xla/backends/gpu/transforms/
multi_output_fusion.cc; facts §3). One kernel computes several outputs, so shared inputs are read
once:

- **sibling fusion**: fusions that read the same (non-scalar) operand, e.g. the two reductions of
  a layer norm, are merged into one fusion with a tuple root; their users read their values
  through `get-tuple-element`. At least one of them must already be a fusion (unfused siblings
  wait for the fusion wrapper); multi-output fusions are preferred, then fusions;
- **producer-consumer fusion**: a loop-fusible producer with several users is fused into one
  consumer fusion and also kept as an output of it, so its other users read the value the consumer
  fusion writes (the producer is not recomputed), when the cost model says it is faster.

Legality (passes/fusible.py): both sides share one iteration space (equal loop shapes, reduce
heroes that normalise alike, equivalent tiled transposes; no reduction with a transpose), budgets,
no in-place dynamic-update-slice or scatter involved, overlapping operand slices, over symbolic
dims outputs of one element count only (unlike XLA: the kernels with runtime dims have no side
outputs of another size: codegen/emitters/loop.py, LoopEmitter.emit), and no cycle:
two siblings must not reach each other, a producer must not reach another operand of its
consumer. Reachability is answered by a search over users bounded by *levels* (every edge goes to
a higher level; merges raise the levels of the instructions after them), so each question looks
only at the instructions between the two ends instead of rebuilding a reachability matrix after
every merge as XLA does.

Instructions are visited users-first (reverse post order), as in XLA. hlocc does not build nested
tuples: an instruction whose result is a tuple other than a multi-output fusion's flat tuple is
not merged.
"""

from __future__ import annotations

from hlocc.analysis.cost_model import DEFAULT_MACHINE, CostModel, MachineModel
from hlocc.analysis.hero import fusion_kind_for
from hlocc.analysis.transpose_info import tiled_transpose_description
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.fusible import (
    DEFAULT_LIMITS,
    FusionFacts,
    FusionLimits,
    FusionSummary,
    fusible_computations,
    fusion_fits_in_budget,
    intermediate_path_to_root,
    is_effective_scalar,
    is_fusible_as_multi_output_root,
    is_producer_multi_output_fusible,
    real_hero_for_multi_output,
    shapes_compatible_for_multi_output,
    tiled_transposes_compatible,
)
from hlocc.passes.fusion_utils import FusionBuilder, distinct, is_multi_output_fusion


class Reachability:
    """Does data flow from one instruction to another? Levels strictly increase along every edge,
    so `a` can only reach `b` if level(a) < level(b), and the search from `a` never leaves the
    levels below level(b). `update(instr)` restores the invariant after `instr` changed."""

    def __init__(self, comp: HloComputation):
        self.level: dict[HloInstruction, int] = {}
        for instr in comp.post_order():
            self.level[instr] = 1 + max((self.level[op] for op in instr.operands), default=-1)

    def reachable(self, a: HloInstruction, b: HloInstruction) -> bool:
        """Whether a path of one or more edges leads from `a` to `b`."""
        limit = self.level[b]
        if self.level[a] >= limit:
            return False
        seen = {id(a)}
        stack = [a]
        while stack:
            node = stack.pop()
            for user in node.users:
                if user is b:
                    return True
                if id(user) not in seen and self.level.get(user, limit) < limit:
                    seen.add(id(user))
                    stack.append(user)
        return False

    def connected(self, a: HloInstruction, b: HloInstruction) -> bool:
        return self.reachable(a, b) or self.reachable(b, a)

    def update(self, instr: HloInstruction) -> None:
        """`instr` has new operands or users: recompute its level and raise those after it."""
        self.level[instr] = max(self.level.get(instr, 0),
                                1 + max((self.level[op] for op in instr.operands), default=-1))
        stack = [instr]
        while stack:
            node = stack.pop()
            for user in node.users:
                if self.level.get(user, -1) <= self.level[node]:
                    self.level[user] = self.level[node] + 1
                    stack.append(user)


def _fusion_priority(instr: HloInstruction) -> int:
    if is_multi_output_fusion(instr):
        return 2
    return 1 if instr.opcode == "fusion" else 0


def _flat_outputs(instr: HloInstruction) -> bool:
    """Whether the instruction's outputs are arrays (a flat multi-output fusion is fine)."""
    if instr.opcode == "fusion":
        root = instr.attrs["calls"].root
        values = root.operands if root.opcode == "tuple" else [root]
        return all(not v.shape.is_tuple for v in values)
    return not instr.shape.is_tuple


def _roots_are_dus(instr: HloInstruction) -> bool:
    if instr.opcode == "dynamic-update-slice":
        return True
    return instr.opcode == "fusion" and instr.attrs["calls"].root.opcode == "dynamic-update-slice"


def _unique_slice(parent: HloInstruction, instr: HloInstruction):
    """The one slice through which `instr` reads `parent`, if there is exactly one."""
    if instr.opcode == "slice":
        return instr
    if instr.opcode != "fusion":
        return None
    found = None
    comp = instr.attrs["calls"]
    params = {p.parameter_number: p for p in comp.instructions if p.opcode == "parameter"}
    for k, op in enumerate(instr.operands):
        if op is not parent:
            continue
        param = params[k]
        users = distinct(param.users)
        if found is not None or len(users) != 1:
            return None
        found = _unique_slice(param, users[0])
        if found is None:
            return None
    return found


def _slices_overlap(a: HloInstruction, b: HloInstruction, parent: HloInstruction) -> bool:
    """False only when both read `parent` (larger than 1 KiB) through disjoint slices."""
    if parent.shape.is_tuple or parent.shape.byte_size() < 1024:
        return True
    s1, s2 = _unique_slice(parent, a), _unique_slice(parent, b)
    if s1 is None or s2 is None:
        return True
    for d1, d2 in zip(s1.attrs["slice"], s2.attrs["slice"]):
        if not (d1.start < d2.limit and d2.start < d1.limit):
            return False
    return True


class _ComputationMultiOutputFusion:
    def __init__(self, comp: HloComputation, builder: FusionBuilder, cost: CostModel, facts: FusionFacts,
                 limits: FusionLimits):
        self.comp = comp
        self.builder = builder
        self.cost = cost
        self.facts = facts
        self.limits = limits
        self.reach = Reachability(comp)
        self.changed = False

    # -- siblings -----------------------------------------------------------------------------------
    def _is_sibling_candidate(self, instr: HloInstruction) -> bool:
        if not instr.users or not is_fusible_as_multi_output_root(instr, self.facts) or not _flat_outputs(instr):
            return False
        if instr.opcode == "reduce" and instr.shape.is_tuple:
            return False
        if is_multi_output_fusion(instr):
            return all(u.opcode == "get-tuple-element" for u in instr.users)
        return True

    def can_fuse_siblings(self, a: HloInstruction, b: HloInstruction, parent: HloInstruction) -> str | None:
        if _roots_are_dus(a) or _roots_are_dus(b):
            return "can't fuse multiple DUSs"
        why = fusion_fits_in_budget(a, b, consumer_producer=False, limits=self.limits, facts=self.facts)
        if why:
            return why
        why = shapes_compatible_for_multi_output(a, b, self.facts) or tiled_transposes_compatible(a, b, self.facts)
        if why:
            return why
        if not _slices_overlap(a, b, parent):
            return "slices are non-overlapping"
        if self.reach.connected(a, b):
            return f"{a.name} and {b.name} are connected"
        return None

    def fuse_siblings(self, parent: HloInstruction) -> None:
        if is_effective_scalar(parent) or not parent.shape.is_array:
            return
        siblings = [u for u in distinct(parent.users) if self._is_sibling_candidate(u)]
        siblings.sort(key=_fusion_priority, reverse=True)
        i = 0
        while i < len(siblings):
            first = siblings[i]
            if first.opcode != "fusion":
                i += 1
                continue
            j = i + 1
            while j < len(siblings):
                second = siblings[j]
                if self.can_fuse_siblings(first, second, parent) is not None:
                    j += 1
                    continue
                first_cost, second_cost = self.cost.cost(first), self.cost.cost(second)
                first_operands, second_operands = list(first.operands), list(second.operands)
                summary = self.facts.summary(first).merged(self.facts.summary(second))
                self.builder.merge_sibling(first, second)
                self._after_merge(first, second, summary)
                self.cost.record_siblings(first, first_operands, first_cost, second_operands, second_cost)
                siblings.pop(j)
            i += 1

    # -- producer-consumer ---------------------------------------------------------------------------------
    def _operand_reachable_from_producer(self, producer: HloInstruction, consumer: HloInstruction) -> bool:
        for operand in consumer.operands:
            if operand is not producer and self.reach.reachable(producer, operand):
                return True
        return False

    def can_fuse_producer(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        if not is_fusible_as_multi_output_root(consumer, self.facts) or not _flat_outputs(consumer):
            return "consumer not eligible as multi-output fusion root"
        why = (shapes_compatible_for_multi_output(consumer, producer, self.facts)
               or tiled_transposes_compatible(consumer, producer, self.facts))
        if why:
            return why
        if _transpose_would_become_untiled(producer, consumer, self.facts):
            return "tiled transpose would become untiled"
        if self._operand_reachable_from_producer(producer, consumer):
            return f"{producer.name} would introduce a cycle when fused"
        why = fusion_fits_in_budget(producer, consumer, consumer_producer=False, limits=self.limits, facts=self.facts)
        if why:
            return why
        times = self.cost.estimate_multi_output(producer, consumer)
        if times.time_fused > times.time_unfused:
            return "will execute slower if fused"
        return None

    def fuse_producer_consumer(self, producer: HloInstruction) -> None:
        if is_producer_multi_output_fusible(producer, self.facts) is not None or not _flat_outputs(producer):
            return
        users = distinct(producer.users)
        if len(users) == 1 and not is_multi_output_fusion(users[0]):
            return  # priority fusion already decided against fusing into the only user
        candidates = [c for c in users if self.can_fuse_producer(producer, c) is None]
        if not candidates:
            return
        best = max(_fusion_priority(c) for c in candidates)
        consumer = next(c for c in candidates if _fusion_priority(c) == best)
        producer_cost, consumer_cost = self.cost.cost(producer), self.cost.cost(consumer)
        consumer_operands = list(consumer.operands)
        summary = self.facts.summary(consumer).merged(self.facts.summary(producer))
        fusion = consumer if consumer.opcode == "fusion" else self.builder.create_fusion(consumer, "kLoop")
        if fusion is not consumer:
            self.facts.invalidate(consumer)
            self.cost.invalidate(consumer)
        self.builder.fuse_producer_multi_output(fusion, producer)
        self._after_merge(fusion, producer, summary)
        self.cost.record_fusion(fusion, producer, consumer_operands, producer_cost, consumer_cost, side_output=True)

    def _after_merge(self, fusion: HloInstruction, removed: HloInstruction, summary: FusionSummary) -> None:
        self.facts.record(fusion, summary)
        self.facts.invalidate(removed)
        self.cost.invalidate(removed)
        self.builder.set_kind(fusion, fusion_kind_for(self.facts.analysis(fusion).kind))
        self.reach.update(fusion)
        self.changed = True

    def run(self) -> bool:
        for producer in reversed(self.comp.post_order()):
            if self.builder.is_removed(producer) or producer.opcode == "constant":
                continue
            if producer.opcode == "fusion" and producer.attrs.get("kind") == "kCustom":
                continue
            self.fuse_siblings(producer)
            if not self.builder.is_removed(producer):
                self.fuse_producer_consumer(producer)
        return self.changed


def _transpose_would_become_untiled(producer: HloInstruction, consumer: HloInstruction, facts: FusionFacts) -> bool:
    """A tiled transpose hero of the producer stays tiled in the consumer only if the consumer
    reads it through intermediate ops alone (part of XLA's FusionHeroesAreCompatible)."""
    if consumer.opcode != "fusion" or producer.opcode != "fusion":
        return False
    if tiled_transpose_description(real_hero_for_multi_output(producer, facts)) is None:
        return False
    comp = consumer.attrs["calls"]
    for param in comp.instructions:
        if param.opcode == "parameter" and consumer.operand(param.parameter_number) is producer:
            if not intermediate_path_to_root(param):
                return True
    return False


@register_hlo_pass
class MultiOutputFusion(HloPass):
    """See the module doc."""

    name = "multi-output-fusion"

    def __init__(self, machine: MachineModel = DEFAULT_MACHINE, limits: FusionLimits = DEFAULT_LIMITS):
        self.machine = machine
        self.limits = limits

    def run(self, module: HloModule) -> bool:
        builder = FusionBuilder(module)
        cost = CostModel(self.machine)
        facts = FusionFacts()
        changed = False
        for comp in fusible_computations(module):
            changed |= _ComputationMultiOutputFusion(comp, builder, cost, facts, self.limits).run()
        builder.finish()
        return changed
