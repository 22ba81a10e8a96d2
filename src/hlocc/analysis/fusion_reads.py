"""The reads of a producer fused into a consumer, for the cost model's fused-kernel estimate
(analysis/cost_model.py `CostModel.fused_run_time`, `record_fusion`).

`merged_reads` gives, per operand of the fused kernel, how many times each of its elements is read
(its utilization) and whether it is read at the output's index; the cost model turns those into
read times. Priority fusion estimates each consumer with every one of its producers, and each
estimate walked the consumer's operands (a few dozen for the threefry fusions of the 6800-op
probe) twice: once to merge them, once to add up their read times. A `ConsumerReads` keeps what
the consumer side contributes, per cost and operand list:

- the consumer's reads merged over repeated operands (`merged`), which an estimate copies and
  updates with the producer's operands instead of rebuilding;
- the running sums of the consumer's read times in operand order (`prefix`, made by the cost
  model, which knows the machine): the reads before the first operand that fusing a producer
  changes (the producer itself or one of its operands) are the same in the fused kernel, so an
  estimate adds up only the rest, from that sum on. The additions happen in the same order as a
  full walk's, so the estimate is the same float.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hlocc.analysis.cost_model import InstructionCost
    from hlocc.hlo.ir import HloInstruction

Reads = dict  # HloInstruction -> (utilization, read elementwise from the root)


class ConsumerReads:
    """A consumer's side of `merged_reads` for one operand list (module doc)."""

    __slots__ = ("operands", "merged", "summed", "prefix", "position")

    def __init__(self, operands: tuple, merged: Reads, summed: dict):
        self.operands = operands
        self.merged = merged  # operand -> (utilization, elementwise), merged over repeats
        self.summed = summed  # operand -> its utilizations added up (a producer's `u`)
        self.prefix: list[float] | None = None  # read time of the first k merged operands (cost model)
        self.position: dict | None = None  # operand -> its index in `merged`

    def first_change(self, producer: HloInstruction) -> int:
        """Index in `merged` of the first operand whose read fusing `producer` changes."""
        position = self.position
        if position is None:
            position = self.position = {op: k for k, op in enumerate(self.merged)}
        first = position.get(producer, len(position))
        for op in producer.operands:
            k = position.get(op)
            if k is not None and k < first:
                first = k
        return first


def consumer_reads(operands, c: InstructionCost) -> ConsumerReads:
    """The consumer's `ConsumerReads` for `operands`, made once per cost and operand list."""
    operands = tuple(operands)
    table = c.read_map
    if table is not None and table.operands == operands:
        return table
    merged: Reads = {}
    summed: dict = {}
    for op, v, e in zip(operands, c.utilization, _padded(c.elementwise, len(c.utilization))):
        known = merged.get(op)
        merged[op] = (v, e) if known is None else _merged_read(known, v, e)
        summed[op] = summed.get(op, 0.0) + v
    table = c.read_map = ConsumerReads(operands, merged, summed)
    return table


def merged_reads(producer: HloInstruction, consumer_operands, p: InstructionCost,
                 c: InstructionCost) -> tuple[float, Reads]:
    """For `producer` (cost `p`) fused into a consumer that had `consumer_operands` and cost `c`:
    the consumer's utilization of the producer, and per operand of the fused kernel (utilization,
    read elementwise from the root). An operand that both parts read at the output's index is
    read once there (XLA's CommonElementwiseUtilization): the utilizations add up less the shared
    read, as a fresh walk of the fused computation (`fusion_utilizations`) counts it. Summing
    instead doubled the count at every step of a chain whose values feed two consumers
    (threefry's rounds), and the cost model then saw recomputation where there is none.
    Approximation: only reads shared from the output's index are seen, not reads that two paths
    share below another non-elementwise use (a broadcast) inside the fusion."""
    if not producer.shape.is_tuple:  # no get-tuple-element of the producer among the operands
        return merged_with(producer, p, consumer_reads(consumer_operands, c))
    u = 0.0
    via_root = False  # the consumer reads the producer at its output's index
    reads: Reads = {}
    get = reads.get
    for op, v, e in zip(consumer_operands, c.utilization, _padded(c.elementwise, len(c.utilization))):
        if op is producer or (op.opcode == "get-tuple-element" and op.operand(0) is producer):
            u += v
            via_root |= e
        else:
            known = get(op)
            reads[op] = (v, e) if known is None else _merged_read(known, v, e)
    return u, _add_producer_reads(reads, producer, p, u, via_root)


def merged_with(producer: HloInstruction, p: InstructionCost, table: ConsumerReads) -> tuple[float, Reads]:
    """`merged_reads` of a single-output `producer` from the consumer's table: a copy of the
    consumer's reads (in their order, so read times add up alike) less the producer's, plus the
    producer's operands'."""
    reads = dict(table.merged)
    known = reads.pop(producer, None)
    u, via_root = (0.0, False) if known is None else (table.summed[producer], known[1])
    return u, _add_producer_reads(reads, producer, p, u, via_root)


def _add_producer_reads(reads: Reads, producer: HloInstruction, p: InstructionCost, u: float,
                        via_root: bool) -> Reads:
    for op, v, e in zip(producer.operands, p.utilization, _padded(p.elementwise, len(p.utilization))):
        elementwise = via_root and e
        known = reads.get(op)
        reads[op] = (v * u, elementwise) if known is None else _merged_read(known, v * u, elementwise)
    return reads


def _merged_read(known: tuple[float, bool], v: float, elementwise: bool) -> tuple[float, bool]:
    """A second read of an operand: utilizations add up, less one shared elementwise read."""
    w, e = known
    return w + v - (1.0 if e and elementwise else 0.0), e or elementwise


def _padded(flags: list[bool], n: int) -> list[bool]:
    return flags if len(flags) >= n else flags + [False] * (n - len(flags))
