"""The reads of a producer fused into a consumer, for the cost model's fused-kernel estimate
(analysis/cost_model.py `CostModel.fused_run_time` and `record_fusion`): per operand of the fused
kernel, how many times each of its elements is read (its utilization) and whether it is read at
the output's index. Priority fusion estimates each consumer with every one of its producers, so
the consumer's side (its reads merged over repeated operands) is built once per cost and operand
list (`InstructionCost.read_map`) and copied by each estimate.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hlocc.analysis.cost_model import InstructionCost
    from hlocc.hlo.ir import HloInstruction


def merged_reads(producer: HloInstruction, consumer_operands, p: InstructionCost,
                 c: InstructionCost) -> tuple[float, dict[HloInstruction, tuple[float, bool]]]:
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
        merged, summed = _consumer_reads(consumer_operands, c)
        reads = dict(merged)  # (a copy keeps the operands' order, so the read times add up alike)
        known = reads.pop(producer, None)
        u, via_root = (0.0, False) if known is None else (summed[producer], known[1])
        for op, v, e in zip(producer.operands, p.utilization, _padded(p.elementwise, len(p.utilization))):
            elementwise = via_root and e
            known = reads.get(op)
            reads[op] = (v * u, elementwise) if known is None else _merged_read(known, v * u, elementwise)
        return u, reads
    u = 0.0
    via_root = False  # the consumer reads the producer at its output's index
    reads = {}
    get = reads.get  # (inlined `add`: this runs for every priority fusion estimate)
    for op, v, e in zip(consumer_operands, c.utilization, _padded(c.elementwise, len(c.utilization))):
        if op is producer or (op.opcode == "get-tuple-element" and op.operand(0) is producer):
            u += v
            via_root |= e
        else:
            known = get(op)
            reads[op] = (v, e) if known is None else _merged_read(known, v, e)
    for op, v, e in zip(producer.operands, p.utilization, _padded(p.elementwise, len(p.utilization))):
        elementwise = via_root and e
        known = get(op)
        reads[op] = (v * u, elementwise) if known is None else _merged_read(known, v * u, elementwise)
    return u, reads


def _consumer_reads(operands, c: InstructionCost) -> tuple[dict, dict]:
    """A consumer's reads per distinct operand (utilization, elementwise), merged over repeats as
    `merged_reads` merges them, and each operand's summed utilizations (the producer's `u`): built
    once per cost and operand list, not once per producer the consumer is estimated with."""
    operands = tuple(operands)
    cached = c.read_map
    if cached is not None and cached[0] == operands:
        return cached[1], cached[2]
    merged: dict[HloInstruction, tuple[float, bool]] = {}
    summed: dict[HloInstruction, float] = {}
    for op, v, e in zip(operands, c.utilization, _padded(c.elementwise, len(c.utilization))):
        known = merged.get(op)
        merged[op] = (v, e) if known is None else _merged_read(known, v, e)
        summed[op] = summed.get(op, 0.0) + v
    c.read_map = (operands, merged, summed)
    return merged, summed


def _merged_read(known: tuple[float, bool], v: float, elementwise: bool) -> tuple[float, bool]:
    """A second read of an operand: utilizations add up, less one shared elementwise read."""
    w, e = known
    return w + v - (1.0 if e and elementwise else 0.0), e or elementwise


def _padded(flags: list[bool], n: int) -> list[bool]:
    return flags if len(flags) >= n else flags + [False] * (n - len(flags))
