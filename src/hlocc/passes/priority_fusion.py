"""`priority-fusion`: XLA's PriorityFusion (xla/backends/gpu/transforms/priority_fusion.cc; facts §3).

Every fusible producer gets a priority: the time saved by fusing it into *all* its users,
`unfused − fused` from the cost model (analysis/cost_model.py), which charges a producer
duplicated into several consumers once per consumer. The producer with the highest priority is
fused into each of its users (a user that is not a fusion yet becomes one); the new fusions and
their operands get new priorities; this repeats while some priority is positive. Bitcasts come
first (priority +∞); constants last: after the queue is empty, constants of at most one element
are fused into every fusible user, larger ones stay outside as parameters.

A producer is fused only when it may be fused into every non-bitcast user (`can_fuse`):

- both are fusible (dot, convolution, sort, custom-call, rng, control flow, collectives, I/O, fft,
  linear algebra, top-k and batch norm stay outside) and the producer is not its computation's root;
- no reduce of ≥ 16 elements per output on both sides (one reduction hero per fusion);
- a reduction fusion stays a reduction fusion: fusing into its output must not turn it into a loop;
- tiled transposes on both sides must be equivalent (same normalized shape and permutation);
- a cumulative reduce-window (cumsum) is never fused into a consumer (but the convert that rounds a
  widened bf16 scan): the scan emitter computes it in O(n) a line only as its fusion's root,
  elementwise it folds a window per element (analysis/scan.py);
- a reduce-window is not fused into the pad of an implicit gemm's input (passes/convolution_to_gemm.py):
  the torch CNN's max pool and that pad as one loop kernel took 96 µs, as two 27 + 4 µs;
- XLA's budgets: shared memory, 8 unnested reductions, 96 operands + outputs, fusion size;
- nothing reads the buffer an in-place dynamic-update-slice or scatter overwrites;
- an expensive producer (a transcendental, root, reduce, gather, ...) is never
  recomputed: not duplicated into several users, and not fused into a user that reads each of its
  elements more than once (e.g. through a broadcast). XLA leaves this to its cost model; hlocc makes
  it a rule because a CPU's arithmetic is relatively dearer than a GPU's.

New fusions are named `fusion`, `fusion.N` and call `fused_computation`, `fused_computation.N`;
their kind is kInput for reduction, transpose, concatenate and scatter emitters, kLoop otherwise
(`rename-fusions` gives them XLA's final `loop_add_fusion`-style names).

The queue holds each producer once (stale entries are skipped by version); every priority update
looks at a producer and its users only, so the pass is about linear in the module for bounded
fan-out.

Fusions that pay whatever the order are made first, without pricing (XLA prices every producer
after every fusion next to it, which on the 6800-op threefry probe was 120k estimates, 7 per op):

- before the queue, each producer that computes nothing and reads no more than its output (an iota,
  a broadcast of a scalar: `_free_to_duplicate`) is fused into all its users, when the cost model
  shows it slows none of them (`CostModel.fusion_always_pays`);
- in the queue, a producer with one user, where neither they nor the producer's operands hold an op
  that can be a hero (a reduce's epilogue or prologue is left to the priorities), gets priority
  +inf, as bitcasts do, when the fusion always pays;
- a producer with several users is priced only when no +inf producer is left (`_price`): while
  chains collapse its users keep changing, and only its last price counts.

The fusions are the same as with every producer priced (over the JAX corpus, module for module the
same fused computations), but the order of fusing, and with it fused parameter numbers and the
order of multi-output roots, follows the queue's order (later producers first) rather than
priorities that differ in their last bits.
"""

from __future__ import annotations

import heapq
import math

from hlocc.analysis.cost_model import DEFAULT_MACHINE, CostModel, MachineModel
from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import EmitterKind, analyze_fusion, fusion_kind_for
from hlocc.analysis.scan import produces_scan, takes_scan
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.fusible import (
    DEFAULT_LIMITS,
    FusionFacts,
    FusionLimits,
    FusionSummary,
    can_emit_input_fused_scatter,
    fusible_computations,
    fusion_fits_in_budget,
    is_expensive,
    is_fusible,
    is_fusible_bitcast,
    should_fuse_in_place_op,
)
from hlocc.passes.fusion_utils import FusionBuilder, distinct
from hlocc.passes.gemm_fusion import is_gemm_fusion

SMALL_CONSTANT_ELEMENTS = 1
"""Constants of at most this many elements are fused (XLA's IsSmallConstant)."""


class FusionTracker:
    """Fuses producers into consumers and keeps the caches of a fusion pass current: the fusion
    summaries and analyses (`facts`) and the cost model's per-instruction costs, both updated from
    the parts' old values rather than by re-analysing the grown fusion."""

    def __init__(self, builder: FusionBuilder, cost: CostModel, facts: FusionFacts):
        self.builder = builder
        self.cost = cost
        self.facts = facts

    def fuse(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        """Fuse `producer` into `consumer` (made a fusion first if needed); return the fusion, whose
        kind follows its emitter."""
        producer_cost, consumer_cost = self.cost.cost(producer), self.cost.cost(consumer)
        summary = self.facts.summary(consumer).merged(self.facts.summary(producer))
        consumer_operands = list(consumer.operands)
        if (producer.opcode == "fusion" and all(u is consumer for u in producer.users)
                and producer.attrs["calls"].root.opcode != "tuple"
                and self.facts.summary(producer).instructions > self.facts.summary(consumer).instructions):
            fusion = self.builder.absorb_consumer(producer, consumer)  # same result, cheaper to build
        else:
            fusion = consumer if consumer.opcode == "fusion" else self.builder.create_fusion(consumer, "kLoop")
            self.builder.fuse_producer(fusion, producer)
        if fusion is not consumer:
            self.facts.invalidate(consumer)
            self.cost.invalidate(consumer)
        self.facts.record(fusion, summary)
        self.builder.set_kind(fusion, self._kind(fusion, summary))
        self.cost.record_fusion(fusion, producer, consumer_operands, producer_cost, consumer_cost)
        self._fuse_small_constants(fusion)
        return fusion

    def _fuse_small_constants(self, fusion: HloInstruction) -> None:
        """Pull the small constants that `fusion` reads into it now rather than at the end of the
        pass, where they would go anyway (`SMALL_CONSTANT_ELEMENTS`): a fused broadcast of a scalar
        brings its constant as an operand, and every later cost estimate and budget check of the
        fusion walked those operands again (most operands of the threefry probe's fusions were
        such constants). A constant is never a hero, so the fusion's kind stays."""
        for constant in [op for op in distinct(fusion.operands) if _is_small_constant(op)]:
            if can_emit_input_fused_scatter(constant, fusion) is not None:
                continue
            operands = list(fusion.operands)
            constant_cost, fusion_cost = self.cost.cost(constant), self.cost.cost(fusion)
            summary = self.facts.summary(fusion).merged(self.facts.summary(constant))
            self.builder.fuse_producer(fusion, constant)
            self.facts.record(fusion, summary)
            self.cost.record_fusion(fusion, constant, operands, constant_cost, fusion_cost)
            if not constant.users and constant is not constant.parent.root:
                self.builder.remove(constant)


    def _kind(self, fusion: HloInstruction, summary: FusionSummary) -> str:
        """The fusion kind of the emitter; without an op that can be a hero (or a copy), a
        single-output fusion is a loop fusion, no analysis needed."""
        if not (summary.opcodes & _HERO_OPCODES) and fusion.attrs["calls"].root.opcode != "tuple":
            return "kLoop"
        return fusion_kind_for(self.facts.analysis(fusion).kind)


def _free_to_duplicate(instr: HloInstruction) -> bool:
    """Whether `instr` computes nothing and reads no more than a consumer reading its output would:
    an iota, a broadcast of a one-element array of its element type, a fusion of such with no
    operands. Fused into each of its users (at most once per element: `fusion_always_pays`),
    every fused kernel is then at most as slow as the user alone (analysis/cost_model.py)."""
    if instr.opcode == "broadcast":
        operand = instr.operand(0)
        return (operand.shape.is_array and operand.shape.num_elements <= 1
                and operand.shape.element_type == instr.shape.element_type)
    return instr.opcode in ("iota", "fusion") and not instr.operands and instr.shape.is_array


def _is_small_constant(instr: HloInstruction) -> bool:
    return (instr.opcode == "constant" and instr.shape.is_array
            and instr.shape.num_elements <= SMALL_CONSTANT_ELEMENTS)


_HERO_OPCODES = frozenset({"reduce", "transpose", "concatenate", "scatter", "sort", "dynamic-update-slice", "copy"})
_IN_PLACE_OPCODES = frozenset({"dynamic-update-slice", "scatter"})


class _Queue:
    """Max-priority queue of producers with lazy deletion (XLA keys ties by instruction id; here
    later instructions win ties, as there)."""

    def __init__(self):
        self._heap: list[tuple[float, int, int, HloInstruction]] = []
        self._version: dict[HloInstruction, int] = {}
        self._seq: dict[HloInstruction, int] = {}

    def set(self, instr: HloInstruction, priority: float, seq: int) -> None:
        self._seq.setdefault(instr, seq)
        version = self._version.get(instr, 0) + 1
        self._version[instr] = version
        if priority >= 0:
            heapq.heappush(self._heap, (-priority, -self._seq[instr], version, instr))

    def remove(self, instr: HloInstruction, seq: int | None = None) -> None:
        """Drop `instr`'s entry (`seq`: its tie-break, kept for when it comes back)."""
        if seq is not None:
            self._seq.setdefault(instr, seq)
        self._version[instr] = self._version.get(instr, 0) + 1

    def top_is_infinite(self) -> bool:
        """Whether the next `pop` gives a producer of priority +inf (stale entries are dropped)."""
        heap = self._heap
        while heap:
            priority, _, version, instr = heap[0]
            if self._version.get(instr) == version:
                return priority == -math.inf
            heapq.heappop(heap)
        return False

    def pop(self) -> HloInstruction | None:
        while self._heap:
            _, _, version, instr = heapq.heappop(self._heap)
            if self._version.get(instr) == version:
                self._version[instr] = version + 1
                return instr
        return None


class _ComputationFusion:
    """Priority fusion of one computation."""

    def __init__(self, comp: HloComputation, tracker: FusionTracker, limits: FusionLimits):
        self.comp = comp
        self.tracker = tracker
        self.builder = tracker.builder
        self.cost = tracker.cost
        self.facts = tracker.facts
        self.limits = limits
        self.queue = _Queue()
        self._version: dict[HloInstruction, int] = {}
        self._can_fuse: dict[tuple, str | None] = {}
        self._fusible: dict[HloInstruction, bool] = {}
        self._seq = 0
        self._unpriced: dict[HloInstruction, None] = {}  # producers whose benefit is not computed yet
        self._sure: set[HloInstruction] = set()  # producers queued at +inf
        self.changed = False

    # -- decisions ------------------------------------------------------------------------------
    def can_fuse(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        """None when `producer` may be fused into `consumer`, else the reason (module doc)."""
        key = (producer, consumer, self._version.get(producer, 0), self._version.get(consumer, 0))
        if key not in self._can_fuse:
            self._can_fuse[key] = self._can_fuse_uncached(producer, consumer)
        return self._can_fuse[key]

    def _can_fuse_uncached(self, producer: HloInstruction, consumer: HloInstruction) -> str | None:
        facts = self.facts
        if producer is self.comp.root:
            return "not fusing into the output of the root instruction"
        fusible = self._fusible
        if not (fusible[producer] if producer in fusible else self._note_fusible(producer)):
            return "the producer is not fusible"
        if not (fusible[consumer] if consumer in fusible else self._note_fusible(consumer)):
            return "the consumer is not fusible"
        if is_fusible_bitcast(consumer):
            return "not fusing into a single bitcast as consumer"
        if producer.opcode in ("reduce-window", "fusion") and produces_scan(producer) \
                and not takes_scan(producer, consumer):
            return "a cumulative reduce-window stays the root of its scan fusion"
        why = can_emit_input_fused_scatter(producer, consumer)
        if why:
            return why
        sp, sc = facts.summary(producer), facts.summary(consumer)  # (each check below reads them)
        if consumer.opcode == "pad" and "reduce-window" in sp.opcodes and consumer.users \
                and all(is_gemm_fusion(u) for u in consumer.users):
            return "a reduce-window is not fused into the pad of an implicit gemm's input"
        if sp.significant_reduces and sc.significant_reduces:
            return "both the producer and the consumer contain a reduce"
        if sp.expensive and self.cost.consumer_utilization(producer, consumer) > 1.0 + 1e-9:
            return "the consumer would recompute an expensive producer"
        if (sp.transposes or sc.transposes) and len(sp.transposes | sc.transposes) > 1:
            return "tiled transposes with different shapes"  # (tiled_transposes_compatible)
        if "reduce" in sp.opcodes and facts.analysis(producer).kind is EmitterKind.REDUCTION:
            opcodes = sp.opcodes | sc.opcodes
            fused = analyze_fusion(FusionAdaptor.for_producer_consumer(producer, consumer), opcodes=opcodes)
            if fused.kind is EmitterKind.LOOP:
                return "fusion into output of a reduce fusion would create a loop fusion"
        if not self._fits_easily(sp, sc, producer, consumer):  # (the full check only near a budget)
            why = fusion_fits_in_budget(consumer, producer, consumer_producer=True, limits=self.limits, facts=facts)
            if why:
                return why
        if sc.opcodes & _IN_PLACE_OPCODES:
            return should_fuse_in_place_op(producer, consumer)
        return None

    def _note_fusible(self, instr: HloInstruction) -> bool:
        """`is_fusible`, remembered: an instruction's opcode stays, and a fusion this pass builds
        is never kCustom."""
        fusible = self._fusible[instr] = is_fusible(instr)
        return fusible

    def _fits_easily(self, sp: FusionSummary, sc: FusionSummary, producer: HloInstruction,
                     consumer: HloInstruction) -> bool:
        """Whether the two are far enough below every budget that `fusion_fits_in_budget` would
        pass them (its first tests, from the summaries at hand, and the operand count before
        duplicates are taken out)."""
        limits = self.limits
        outputs = (len(consumer.shape.leaves()) if consumer.shape.is_tuple else 1) + (
            len(producer.shape.leaves()) if producer.shape.is_tuple else 1)
        return (sp.shared_memory + sc.shared_memory <= limits.shared_memory_bytes
                and sp.unnested_reductions + sc.unnested_reductions <= limits.max_unnested_reductions
                and sp.instructions + sc.instructions <= limits.max_fused_instructions
                and len(consumer.operands) + len(producer.operands) - 1 + outputs <= limits.max_operands_and_outputs)

    def priority(self, producer: HloInstruction) -> float:
        """Time saved by fusing `producer` into all its users, or -inf when it may not be."""
        tier = self._tier(producer)
        if tier is not None:
            return tier
        users = producer.users
        return self.cost.fusion_benefit(producer, users if len(users) == 1 else distinct(users))

    def _tier(self, producer: HloInstruction) -> float | None:
        """-inf when `producer` may not be fused, +inf when it is fused first (a bitcast, or a
        producer whose fusion pays in every order of the queue: module doc), None when its
        priority is the cost model's benefit."""
        if not producer.users or self.builder.is_removed(producer):
            return -math.inf
        if is_fusible_bitcast(producer):
            return math.inf
        if producer.opcode == "constant":
            return -math.inf
        users = producer.users
        users = users if len(users) == 1 else distinct(users)
        non_bitcast = [u for u in users if not is_fusible_bitcast(u)]
        if not non_bitcast:
            return -math.inf
        if len(non_bitcast) > 1 and is_expensive(producer, self.facts):
            return -math.inf  # never duplicate expensive work (module doc); cheaper to see than can_fuse
        for user in non_bitcast:
            if self.can_fuse(producer, user) is not None:
                return -math.inf
        if (len(users) == 1 and producer.shape.is_array and self._plain(users[0])
                and all(self._plain(op) for op in producer.operands) and self._plain(producer)
                and self.cost.fusion_always_pays(producer, users[0])):
            return math.inf
        if (len(non_bitcast) == len(users) and _free_to_duplicate(producer)
                and all(self.cost.fusion_always_pays(producer, u, duplicated=True) for u in users)):
            return math.inf
        return None

    def _plain(self, instr: HloInstruction) -> bool:
        """Without an op that can be a hero: a producer fused into its one user first (`_tier`)
        takes no hero's epilogue or prologue from it, whose order the benefits decide."""
        return not (self.facts.summary(instr).opcodes & _HERO_OPCODES)

    # -- the loop -----------------------------------------------------------------------------------
    def _enqueue(self, instr: HloInstruction) -> None:
        """Queue `instr` with its tier; a producer whose priority is the cost model's benefit is
        only marked (`_unpriced`) and priced when no +inf producer is left (`_price`)."""
        self._seq += 1
        if instr in self._sure:
            return  # (its +inf is checked again when it is popped: `_pop`)
        users = instr.users
        # (only a bitcast or a producer with one user is ranked now; the others wait unexamined)
        if not (not users or is_fusible_bitcast(instr) or all(u is users[0] for u in users)):
            if instr not in self._unpriced:
                self.queue.remove(instr, self._seq)
                self._unpriced[instr] = None
            return
        tier = self._tier(instr)
        if tier is None:
            self.queue.remove(instr, self._seq)
            self._unpriced[instr] = None
        else:
            self._unpriced.pop(instr, None)
            self.queue.set(instr, tier, self._seq)
            if tier == math.inf:
                self._sure.add(instr)

    def _forget(self, instr: HloInstruction) -> None:
        self.queue.remove(instr)
        self._unpriced.pop(instr, None)
        self._sure.discard(instr)

    def _price(self) -> None:
        """Price the marked producers: their benefit from the module as it is now."""
        unpriced, self._unpriced = self._unpriced, {}
        for instr in unpriced:
            if not self.builder.is_removed(instr):
                self.queue.set(instr, self.priority(instr), 0)

    def _pop(self) -> HloInstruction | None:
        """The next producer to fuse. A +inf producer is not ranked again when its neighbours
        change (the user it fuses into grows many times before its turn) but when it is popped:
        if it lost its +inf (a budget reached, a second user), it is queued again as it is now."""
        while True:
            if self._unpriced and not self.queue.top_is_infinite():
                self._price()
            producer = self.queue.pop()
            if producer is None or producer not in self._sure:
                return producer
            self._sure.discard(producer)
            if self._tier(producer) == math.inf:
                return producer
            self._enqueue(producer)

    def run(self) -> bool:
        for instr in self.comp.post_order():  # (first: what is fused into every user for free)
            if _free_to_duplicate(instr) and instr.users and self._tier(instr) == math.inf:
                self._fuse_into_users(instr)
        for instr in self.comp.post_order():
            if instr.opcode in ("parameter", "tuple", "get-tuple-element") or not instr.users:
                continue
            if not is_fusible(instr) or self.builder.is_removed(instr):
                continue
            self._enqueue(instr)
        while (producer := self._pop()) is not None:
            if self.builder.is_removed(producer) or not producer.users:
                continue
            for instr in self._fuse_into_users(producer):
                if not self.builder.is_removed(instr):
                    self._enqueue(instr)
        self._fuse_constants()
        return self.changed

    def _fuse_into_users(self, producer: HloInstruction) -> dict[HloInstruction, None]:
        """Fuse `producer` into each of its users; return the instructions to rank again."""
        consumers = distinct(producer.users)
        if is_fusible_bitcast(producer):
            consumers = [c for c in consumers if self.can_fuse(producer, c) is None]
        to_update: dict[HloInstruction, None] = {}
        absorbed = False  # the producer fusion took its only consumer in
        for consumer in consumers:
            if is_fusible_bitcast(consumer):
                continue
            fusion = self.tracker.fuse(producer, consumer)
            absorbed |= fusion is producer
            self.changed = True
            self._on_fused(fusion, producer, consumer, to_update)
        if not producer.users and not absorbed:
            self._forget(producer)
            self.builder.remove(producer)
        return to_update

    def _on_fused(self, fusion: HloInstruction, producer: HloInstruction, consumer: HloInstruction,
                  to_update: dict[HloInstruction, None]) -> None:
        self._version[fusion] = self._version.get(fusion, 0) + 1
        if fusion is not consumer:
            self._forget(consumer)
            to_update.pop(consumer, None)
        for operand in fusion.operands:
            if operand.opcode in ("constant", "get-tuple-element", "parameter"):
                continue
            if is_fusible(operand):
                to_update[operand] = None
        to_update[fusion] = None

    def _fuse_constants(self) -> None:
        constants = [i for i in self.comp.instructions if _is_small_constant(i) and not self.builder.is_removed(i)]
        for constant in constants:
            for user in distinct(constant.users):
                if self.builder.is_removed(user) or not is_fusible(user):
                    continue
                if can_emit_input_fused_scatter(constant, user) is not None:
                    continue
                self.tracker.fuse(constant, user)
                self.changed = True
            if not constant.users and constant is not self.comp.root:
                self.builder.remove(constant)


@register_hlo_pass
class PriorityFusion(HloPass):
    """See the module doc. `machine` parameterises the cost model, `limits` the fusion budgets."""

    name = "priority-fusion"

    def __init__(self, machine: MachineModel = DEFAULT_MACHINE, limits: FusionLimits = DEFAULT_LIMITS):
        self.machine = machine
        self.limits = limits

    def run(self, module: HloModule) -> bool:
        tracker = FusionTracker(FusionBuilder(module), CostModel(self.machine), FusionFacts())
        changed = False
        for comp in fusible_computations(module):
            changed |= _ComputationFusion(comp, tracker, self.limits).run()
        tracker.builder.finish()
        return changed
