"""A simple performance model for fusion decisions, in the spirit of XLA's GpuPerformanceModel
(xla/service/gpu/model/gpu_performance_model*.cc; facts §3).

Per instruction (an unfused op, or a fusion as a whole) the model counts

- **flops**: elements produced × an op's cost per element (`flops_per_element`: 1 for cheap
  arithmetic, 8 for division and roots, 20 for exp/log/tanh-like transcendentals, 30–40 for the
  inverse trigonometric and power functions, ×4 for complex types); a reduce costs its reducer
  per input element, a dot 2·M·N·K. Inside a fusion every instruction is weighted by how often it
  is evaluated (its *utilization*, below), so recomputation is paid for;
- **bytes read** per operand: the operand's size × its utilization (elements of the operand read
  per element, summed over the whole op: 1 for elementwise use, the fan-out for a broadcast, less
  than 1 for a slice); **bytes written**: the output's size.

Utilization inside a fusion follows XLA's GpuHloCostAnalysis: walking from the roots to the
parameters, elementwise users share their reads (an element read by `exp` and `add` at the same
index is read once), while a non-elementwise user (broadcast, reduce, slice, ...) starts a new
"use root" whose utilization is the user's times its operand utilization. A producer broadcast into
a consumer is thus evaluated once per *consumer* element: fusing an expensive producer under a
broadcast shows up as extra flops.

Time of one kernel, on a `MachineModel`:

    read  = Σ operands  net/(bandwidth·coalescing) + (total − net)/(bandwidth·cache speedup)
    write = bytes written / bandwidth
    time  = compute + memory − 0.95·min(compute, memory),   compute = flops / flop rate

where `net` = min(operand size, bytes read): the first read comes from memory, re-reads from the
cache when the operand fits in it. Reads are uncoalesced (one element per memory transaction) when
the kernel transposes a minor dimension outside the transpose emitter or fuses two reductions
(XLA's IsReadCoalescedHeuristic). Priority fusion compares, for a producer and all its consumers,

    unfused = launch·(n+1) + t(producer) + Σ t(consumer_i)
    fused   = launch·n + Σ t(producer fused into consumer_i)

so a producer duplicated into several consumers is charged once per consumer.

`MachineModel.cpu()` (the default) and `MachineModel.gpu()` are parameters, not measurements:
order-of-magnitude figures of a 2-core AVX-512 host and an H100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.fusion_reads import merged_reads
from hlocc.analysis.hero import EmitterKind, analyze_fusion
from hlocc.analysis.transpose_info import transposes_minor_dimension
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.shape_util import static_dims
from hlocc.hlo.symbolic import hint_value
from hlocc.hlo.types import Shape, primitive_type

# -- machine description ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineModel:
    """What the cost model knows about the machine (all rates per second)."""

    name: str
    memory_bandwidth: float  # bytes/s from main memory (DRAM, HBM)
    cache_bytes: int  # re-reads of a working set smaller than this hit the cache
    cache_speedup: float  # how much faster a cache re-read is than a memory read
    flop_rate: float  # flops/s of elementwise code, all cores
    launch_overhead: float  # seconds per kernel launch
    transaction_bytes: int  # bytes moved for one uncoalesced element read
    memory_compute_overlap: float = 0.95  # XLA's kMemoryComputeParallelism

    @staticmethod
    def cpu(cores: int = 2) -> MachineModel:
        """A host CPU: ~10 GB/s of memory bandwidth and 16 f32 lanes × 2 FMA ports × 3 GHz per core,
        a 32 MiB last-level cache, a few µs to hand a kernel to the thread pool, 64-byte lines."""
        return MachineModel("cpu", 10e9 * cores, 32 << 20, 2.5, 16 * 2 * 3e9 * cores, 2e-6, 64)

    @staticmethod
    def gpu() -> MachineModel:
        """An H100: 3.35 TB/s HBM, 50 MiB L2, 132 SMs × 128 FP32 lanes × 2 × 1.755 GHz, 1 µs per
        launch (XLA's kKernelLaunchOverhead), 32-byte DRAM→L2 transactions."""
        return MachineModel("gpu", 3.35e12, 50 << 20, 2.5, 132 * 128 * 2 * 1.755e9, 1e-6, 32)


DEFAULT_MACHINE = MachineModel.cpu()

# -- per-op counts -----------------------------------------------------------------------------------

_FLOPS_PER_ELEMENT: dict[str, float] = {
    **dict.fromkeys(("add", "subtract", "multiply", "maximum", "minimum", "compare", "select", "clamp", "negate",
                     "abs", "and", "or", "xor", "not", "shift-left", "shift-right-arithmetic",
                     "shift-right-logical", "sign", "floor", "ceil", "round-nearest-afz", "round-nearest-even",
                     "is-finite", "real", "imag", "complex", "popcnt", "count-leading-zeros", "convert",
                     "reduce-precision", "stochastic-convert"), 1.0),
    **dict.fromkeys(("divide", "remainder", "sqrt", "rsqrt", "cbrt"), 8.0),
    **dict.fromkeys(("exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "tanh", "erf",
                     "sine", "cosine", "tan"), 20.0),
    **dict.fromkeys(("acos", "asin", "acosh", "asinh", "atanh", "cosh", "sinh"), 30.0),
    **dict.fromkeys(("power", "atan2"), 40.0),
}


def flops_per_element(instr: HloInstruction) -> float:
    """Cost of one output element of an elementwise op, in cheap-op units (module doc)."""
    cost = _FLOPS_PER_ELEMENT.get(instr.opcode, 0.0)
    element = instr.shape.element_type if instr.shape.is_array else None
    if element is not None and element.is_complex:
        cost *= 4
    if instr.opcode in ("divide", "remainder") and element is not None and not element.is_float \
            and not element.is_complex:
        cost = 2.0
    return cost


def hinted_dims(shape: Shape) -> tuple[int, ...]:
    """The dimension sizes as numbers: `static_dims`, with each symbolic size at the size hint
    (hlo/symbolic.py), where it may be 0 (`mod(n, 2)` at n = 128), so the model's ratios of sizes
    test the number, never the expression, for 0."""
    return tuple(hint_value(d) for d in static_dims(shape))


def elements(shape: Shape) -> int:
    """Array elements of a shape (tuple leaves summed; `?` dims counted as large, symbolic ones at
    the size hint)."""
    total = 0
    for leaf in shape.leaves():
        if leaf.is_array:
            total += math.prod(hinted_dims(leaf))
    return total


def byte_size(shape: Shape) -> int:
    """Bytes of a shape's arrays (sub-byte types take a byte per element, as in buffers)."""
    return sum(math.prod(hinted_dims(leaf)) * leaf.element_type.byte_size for leaf in shape.leaves()
               if leaf.is_array)


def computation_flops(computation: HloComputation) -> float:
    """Cost of one application of a scalar computation (a reducer or map body), at least 1."""
    return max(1.0, sum(flops_per_element(i) for i in computation.instructions))


def instruction_flops(instr: HloInstruction) -> float:
    """Flops of one complete evaluation of an unfused instruction."""
    op = instr.opcode
    if op in _FLOPS_PER_ELEMENT:
        return flops_per_element(instr) * elements(instr.shape)
    if op == "map":
        return computation_flops(instr.attrs["to_apply"]) * elements(instr.shape)
    if op == "reduce":
        n_inputs = len(instr.operands) // 2
        return computation_flops(instr.attrs["to_apply"]) * elements(instr.operand(0).shape) * max(1, n_inputs)
    if op == "reduce-window":
        window = math.prod(d.size for d in instr.attrs.get("window", ()))
        return computation_flops(instr.attrs["to_apply"]) * elements(instr.shape) * window
    if op == "dot":
        lhs = instr.operand(0).shape
        contracting = math.prod(hinted_dims(lhs)[d] for d in instr.attrs.get("lhs_contracting_dims", ()))
        return 2.0 * elements(instr.shape) * contracting
    if op == "convolution":
        kernel = instr.operand(1).shape
        output_features = hinted_dims(instr.shape)[instr.attrs["dim_labels"].output_feature] or 1
        return 2.0 * elements(instr.shape) * elements(kernel) / output_features
    if op == "scatter":
        return computation_flops(instr.attrs["to_apply"]) * elements(instr.operands[-1].shape)
    return 0.0


def operand_utilization(instr: HloInstruction, index: int) -> float:
    """How many times, on average, one element of operand `index` is read by a complete evaluation
    of `instr` (module doc)."""
    operand = instr.operand(index)
    n_in = elements(operand.shape)
    if n_in == 0:
        return 0.0
    n_out = elements(instr.shape)
    op = instr.opcode
    if op in ("broadcast", "slice", "dynamic-slice") or (OPCODES.get(op) and OPCODES[op].is_elementwise) \
            or op == "map":
        return n_out / n_in
    if op == "gather":
        return n_out / n_in if index == 0 else 1.0
    if op == "reduce":
        return 1.0 if index < len(instr.operands) // 2 else n_out / n_in
    if op == "pad":
        return 1.0 if index == 0 else max(n_out - n_in, 0)
    if op == "dynamic-update-slice":
        if index == 0:
            return max(0.0, 1.0 - elements(instr.operand(1).shape) / max(n_out, 1))
        return 1.0
    if op == "reduce-window":
        window = math.prod(d.size for d in instr.attrs.get("window", ()))
        return n_out * window / n_in if index < len(instr.operands) // 2 else n_out / n_in
    if op == "dot":
        lhs = instr.operand(0).shape
        contracting = math.prod(hinted_dims(lhs)[d] for d in instr.attrs.get("lhs_contracting_dims", ()))
        return n_out * contracting / n_in
    return 1.0


# -- instruction and fusion costs ----------------------------------------------------------------------


@dataclass
class InstructionCost:
    """Counts for one kernel: flops, bytes read per operand (with re-reads), bytes written, the
    utilization of each operand, and whether it holds a transpose that breaks coalescing."""

    flops: float
    operand_bytes: list[float]
    utilization: list[float]
    bytes_written: float
    bad_transpose: bool
    reduction: bool = False
    exec_time: float = 0.0
    time_parts: dict[str, float] = field(default_factory=dict)
    # per operand: read at the output's index (elementwise from the root), a read that every other
    # elementwise read of the same operand in one fusion shares
    elementwise: list[bool] = field(default_factory=list)
    read_map: tuple | None = field(default=None, repr=False, compare=False)  # (fusion_reads.py)


def _is_broadcast_chain(instr: HloInstruction) -> bool:
    while True:
        if instr.opcode in ("broadcast", "iota"):
            return True
        if len(instr.operands) != 1 or not (instr.opcode == "bitcast" or _elementwise(instr)):
            return False
        instr = instr.operand(0)


def _elementwise(instr: HloInstruction) -> bool:
    info = OPCODES.get(instr.opcode)
    return info is not None and info.is_elementwise


def _bad_transpose(instr: HloInstruction) -> bool:
    return transposes_minor_dimension(instr) and not _is_broadcast_chain(instr.operand(0))


def fusion_utilizations(computation: HloComputation) -> tuple[dict[HloInstruction, float], float]:
    """(utilization of every instruction, total flops) of a fused computation (module doc)."""
    utilization, flops, _ = _fusion_walk(computation)
    return utilization, flops


def _passes_through(instr: HloInstruction) -> bool:
    """Whether `instr` reads its operands at its own output index (shares its reads, module doc)."""
    return (_elementwise(instr) or instr.opcode in ("tuple", "get-tuple-element", "map")
            or (instr.opcode in ("bitcast", "bitcast-convert", "reshape")
                and static_dims(instr.shape) == static_dims(instr.operand(0).shape)))


def _fusion_walk(computation: HloComputation):
    """(utilizations, flops, the instructions reached elementwise from the root) of a fused
    computation."""
    order = list(reversed(computation.post_order()))
    use_roots: dict[HloInstruction, dict[HloInstruction, None]] = {instr: {} for instr in order}
    root_utilization: dict[HloInstruction, float] = {computation.root: 1.0}
    use_roots[computation.root][computation.root] = None
    utilization: dict[HloInstruction, float] = {}
    flops = 0.0
    for instr in order:
        util = sum(root_utilization.get(r, 0.0) for r in use_roots[instr])
        utilization[instr] = util
        flops += util * instruction_flops(instr)
        passes_through = _passes_through(instr)
        for k, operand in enumerate(instr.operands):
            if passes_through:
                use_roots[operand].update(use_roots[instr])
                continue
            use_roots[operand][operand] = None
            n = elements(operand.shape)
            u = util * operand_utilization(instr, k)
            root_utilization[operand] = root_utilization.get(operand, 0.0) + (math.ceil(u * n - 1e-9) / n if n else 0)
    root = computation.root
    return utilization, flops, {instr for instr, roots in use_roots.items() if root in roots}


def instruction_cost(instr: HloInstruction) -> InstructionCost:
    """The counts of an unfused instruction or of a fusion instruction (module doc)."""
    if instr.opcode == "fusion":
        comp = instr.attrs["calls"]
        utilization, flops, from_root = _fusion_walk(comp)
        params = {p.parameter_number: p for p in comp.instructions if p.opcode == "parameter"}
        utils = [utilization.get(params[k], 0.0) if k in params else 0.0 for k in range(len(instr.operands))]
        elementwise = [k in params and params[k] in from_root for k in range(len(instr.operands))]
        bad = any(i.opcode in ("copy", "transpose") and _bad_transpose(i) for i in comp.instructions)
        reduction = any(i.opcode == "reduce" for i in comp.instructions)
    else:
        utils = [operand_utilization(instr, k) for k in range(len(instr.operands))]
        elementwise = [_passes_through(instr)] * len(instr.operands)
        flops = instruction_flops(instr)
        bad = instr.opcode in ("copy", "transpose") and _bad_transpose(instr)
        reduction = instr.opcode == "reduce"
    operand_bytes = [byte_size(op.shape) * u for op, u in zip(instr.operands, utils)]
    return InstructionCost(flops, operand_bytes, utils, float(byte_size(instr.shape)), bad, reduction,
                           elementwise=elementwise)


@dataclass(frozen=True)
class RunTimes:
    """Estimated seconds of a producer and its consumers run apart and fused."""

    time_unfused: float
    time_fused: float

    @property
    def benefit(self) -> float:
        return self.time_unfused - self.time_fused


class CostModel:
    """Cached per-instruction costs and the producer/consumer fusion estimates (module doc).
    Call `invalidate(instr)` when an instruction changes (a fusion grows or is created)."""

    def __init__(self, machine: MachineModel = DEFAULT_MACHINE):
        self.machine = machine
        self._costs: dict[HloInstruction, InstructionCost] = {}
        self._fused: dict[tuple[HloInstruction, HloInstruction, bool], float] = {}
        self._by_member: dict[HloInstruction, set[tuple[HloInstruction, HloInstruction, bool]]] = {}
        self._sizes: dict[HloInstruction, tuple[Shape, int]] = {}

    # -- caching ------------------------------------------------------------------------------------
    def cost(self, instr: HloInstruction) -> InstructionCost:
        cost = self._costs.get(instr)
        if cost is None:
            cost = instruction_cost(instr)
            coalesced = not cost.bad_transpose or self._own_kind_is_transpose(instr)
            reads = [self._read_time(op, b, coalesced) for op, b in zip(instr.operands, cost.operand_bytes)]
            cost.exec_time = self._combine(cost.flops, sum(reads), cost.bytes_written, cost.time_parts)
            self._costs[instr] = cost
        return cost

    def invalidate(self, instr: HloInstruction) -> None:
        self._costs.pop(instr, None)
        for key in self._by_member.pop(instr, ()):
            self._fused.pop(key, None)

    # -- time formulas ----------------------------------------------------------------------------------
    def _size(self, instr: HloInstruction) -> int:
        known = self._sizes.get(instr)  # (shape, bytes): kept while a growing fusion keeps its shape
        shape = instr.shape
        if known is None or known[0] is not shape:
            known = self._sizes[instr] = (shape, byte_size(shape))
        return known[1]

    def _read_time(self, operand: HloInstruction, total: float, coalesced: bool, size: int | None = None) -> float:
        """Seconds to read `total` bytes of `operand` (module doc); `size`: its bytes, if known."""
        if total <= 0:
            return 0.0
        m = self.machine
        if size is None:
            size = self._size(operand)
        net = size if size < total else total  # min(size, total)
        if coalesced:  # the common case, without the element size
            bandwidth = m.memory_bandwidth
            rest = bandwidth * (m.cache_speedup if net < m.cache_bytes else 1.0)
            return net / bandwidth + (total - net) / rest
        leaf = operand.shape.leaves()[0]
        element_bytes = leaf.element_type.byte_size if leaf.is_array else 4
        rate = min(1.0, element_bytes / m.transaction_bytes)
        dram = m.memory_bandwidth * rate
        rest = m.memory_bandwidth * (m.cache_speedup if net < m.cache_bytes else rate)
        return net / dram + (total - net) / rest

    def _combine(self, flops: float, read: float, written: float, parts: dict | None = None) -> float:
        m = self.machine
        compute = flops / m.flop_rate
        memory = read + written / m.memory_bandwidth
        if parts is not None:
            parts.update(compute=compute, memory=memory)
        return compute + memory - m.memory_compute_overlap * min(compute, memory)

    def run_time(self, instr: HloInstruction) -> float:
        """Seconds one execution of `instr`'s kernel takes, without the launch."""
        return self.cost(instr).exec_time

    def consumer_utilization(self, producer: HloInstruction, consumer: HloInstruction) -> float:
        """How many times each element of `producer` is evaluated inside `consumer`."""
        return self._utilization_of(producer, consumer, self.cost(consumer))

    def fused_run_time(self, producer: HloInstruction, consumer: HloInstruction, *,
                       side_output: bool = False) -> float:
        """Seconds of the kernel `producer` fused into `consumer` (plus the producer's output when
        `side_output`, for a producer-consumer multi-output fusion)."""
        key = (producer, consumer, side_output)
        cached = self._fused.get(key)
        if cached is not None:
            return cached
        p, c = self._costs.get(producer) or self.cost(producer), self._costs.get(consumer) or self.cost(consumer)
        u, reads = merged_reads(producer, consumer.operands, p, c)
        flops = p.flops * u + c.flops
        coalesced = self._coalesced(producer, consumer, p, c)
        read = 0.0
        sizes, size_of = self._sizes, self._size  # (the hottest loop of priority fusion: `_size` and,
        m = self.machine  # when coalesced, `_read_time` inlined, the same arithmetic)
        bandwidth, cache_bytes = m.memory_bandwidth, m.cache_bytes
        cached_bandwidth = bandwidth * m.cache_speedup
        for op, (v, _) in reads.items():
            if v > 0:
                known = sizes.get(op)
                size = known[1] if known is not None and known[0] is op.shape else size_of(op)
                total = size * v
                if not coalesced:
                    read += self._read_time(op, total, False, size)
                elif total > 0:
                    net = size if size < total else total
                    read += net / bandwidth + (total - net) / (cached_bandwidth if net < cache_bytes else bandwidth)
        written = c.bytes_written + (p.bytes_written if side_output else 0.0)
        compute, memory = flops / m.flop_rate, read + written / bandwidth  # (`_combine` inlined)
        time = compute + memory - m.memory_compute_overlap * (memory if memory < compute else compute)
        self._fused[key] = time
        by_member = self._by_member
        for member in (producer, consumer):
            keys = by_member.get(member)
            if keys is None:
                keys = by_member[member] = set()
            keys.add(key)
        return time

    @staticmethod
    def _own_kind_is_transpose(instr: HloInstruction) -> bool:
        return analyze_fusion(FusionAdaptor.for_instruction(instr)).kind is EmitterKind.TRANSPOSE

    def _coalesced(self, producer, consumer, p: InstructionCost, c: InstructionCost) -> bool:
        if not (p.bad_transpose or c.bad_transpose or (p.reduction and c.reduction)):
            return True
        kind = analyze_fusion(FusionAdaptor.for_producer_consumer(producer, consumer)).kind
        if (p.bad_transpose or c.bad_transpose) and kind is not EmitterKind.TRANSPOSE:
            return False
        return not (kind is EmitterKind.REDUCTION and p.reduction and c.reduction)

    def record_fusion(self, fusion: HloInstruction, producer: HloInstruction, consumer_operands,
                      producer_cost: InstructionCost, consumer_cost: InstructionCost, *, side_output: bool = False,
                      coalesced: bool | None = None) -> None:
        """Set the cost of `fusion`, just made by fusing `producer` into a consumer that had
        `consumer_operands` and `consumer_cost`, from the costs the two had before (the fused
        estimate's formula) instead of re-analysing the whole fusion: growing a fusion one
        producer at a time then costs time linear in the producers."""
        u, reads = merged_reads(producer, consumer_operands, producer_cost, consumer_cost)
        util_by = {op: v for op, (v, _) in reads.items()}
        bytes_by = {op: self._size(op) * v for op, v in util_by.items()}
        self.set_merged_cost(fusion, producer_cost.flops * u + consumer_cost.flops, bytes_by, util_by,
                             consumer_cost.bytes_written + (producer_cost.bytes_written if side_output else 0.0),
                             producer_cost, consumer_cost, coalesced,
                             elementwise_by={op: e for op, (_, e) in reads.items()})

    def record_siblings(self, fusion: HloInstruction, first_operands, first_cost: InstructionCost,
                        second_operands, second_cost: InstructionCost) -> None:
        """Set the cost of `fusion`, the sibling fusion of two instructions that had these operands
        and costs: shared operands are read once per element (the larger utilization), flops and
        writes add up."""
        bytes_by: dict[HloInstruction, float] = {}
        util_by: dict[HloInstruction, float] = {}
        for operands, cost in ((first_operands, first_cost), (second_operands, second_cost)):
            for op, b, v in zip(operands, cost.operand_bytes, cost.utilization):
                bytes_by[op] = max(bytes_by.get(op, 0.0), b)
                util_by[op] = max(util_by.get(op, 0.0), v)
        self.set_merged_cost(fusion, first_cost.flops + second_cost.flops, bytes_by, util_by,
                             first_cost.bytes_written + second_cost.bytes_written, first_cost, second_cost, None)

    def set_merged_cost(self, fusion, flops, bytes_by, util_by, written, a: InstructionCost, b: InstructionCost,
                        coalesced: bool | None, elementwise_by: dict | None = None) -> None:
        operand_bytes = [bytes_by.get(op, 0.0) for op in fusion.operands]
        utilization = [util_by.get(op, 0.0) for op in fusion.operands]
        elementwise = [bool(elementwise_by and elementwise_by.get(op)) for op in fusion.operands]
        cost = InstructionCost(flops, operand_bytes, utilization, written, a.bad_transpose or b.bad_transpose,
                               a.reduction or b.reduction, elementwise=elementwise)
        if coalesced is None:
            coalesced = not cost.bad_transpose or self._own_kind_is_transpose(fusion)
        reads = [self._read_time(op, nbytes, coalesced) for op, nbytes in zip(fusion.operands, operand_bytes)]
        cost.exec_time = self._combine(flops, sum(reads), written, cost.time_parts)
        self.invalidate(fusion)
        self._costs[fusion] = cost

    def _utilization_of(self, producer: HloInstruction, consumer: HloInstruction, cost: InstructionCost) -> float:
        return sum(v for op, v in zip(consumer.operands, cost.utilization) if _reads_from(op, producer))

    def estimate_run_times(self, producer: HloInstruction, consumers) -> RunTimes:
        """Unfused vs fused time of `producer` fused into every one of `consumers` (module doc)."""
        return RunTimes(*self._run_times(producer, consumers))

    def fusion_benefit(self, producer: HloInstruction, consumers) -> float:
        """`estimate_run_times(producer, consumers).benefit` (priority fusion asks it per priority)."""
        unfused, fused = self._run_times(producer, consumers)
        return unfused - fused

    def _run_times(self, producer: HloInstruction, consumers) -> tuple[float, float]:
        launch = self.machine.launch_overhead
        costs, cost, fused_run_time = self._costs, self.cost, self.fused_run_time
        unfused = launch * (len(consumers) + 1) + (costs.get(producer) or cost(producer)).exec_time
        fused = launch * len(consumers)
        for consumer in consumers:
            unfused += (costs.get(consumer) or cost(consumer)).exec_time
            fused += fused_run_time(producer, consumer)
        return unfused, fused

    def fusion_always_pays(self, producer: HloInstruction, consumer: HloInstruction, *,
                           duplicated: bool = False) -> bool:
        """Whether fusing `producer` into `consumer` saves time however either grows before it is
        done, so that its benefit need not be computed: the consumer evaluates each producer
        element at most once and the fused reads stay coalesced. For the producer's only user,
        the fused kernel's flops are then at most the two kernels' and its reads at most theirs (a
        shared read is counted once), and it writes less; as a kernel's time (`_combine`) grows
        with flops and bytes and is subadditive, t(fused) ≤ t(producer) + t(consumer), less than
        the unfused time, which adds a launch. `duplicated`: the producer goes into each of
        several users, so it must also compute nothing (no flops) and read no more than the user
        read of it (the caller's check, priority_fusion `_free_to_duplicate`): then each fused
        kernel is at most as slow as its user alone. Priority fusion fuses such producers first."""
        p, c = self._costs.get(producer) or self.cost(producer), self._costs.get(consumer) or self.cost(consumer)
        if p.bad_transpose or c.bad_transpose or (p.reduction and c.reduction) or (duplicated and p.flops):
            return False  # (`_coalesced` might say no)
        return self._utilization_of(producer, consumer, c) <= 1.0 + 1e-9

    def estimate_multi_output(self, producer: HloInstruction, consumer: HloInstruction) -> RunTimes:
        """Unfused vs fused time of a producer-consumer multi-output fusion (the producer's
        output is still written, for its other users)."""
        launch = self.machine.launch_overhead
        unfused = 2 * launch + self.run_time(producer) + self.run_time(consumer)
        fused = launch + self.fused_run_time(producer, consumer, side_output=True)
        return RunTimes(unfused, fused)


def _reads_from(operand: HloInstruction, producer: HloInstruction) -> bool:
    """Whether a consumer's `operand` is `producer` or one of its outputs."""
    return operand is producer or (operand.opcode == "get-tuple-element" and operand.operand(0) is producer)


# -- stitch fusion ------------------------------------------------------------------------------------

CPU_L2_BYTES = 1 << 20
"""L2 cache per core of the host CPU model (1 MiB: Skylake-SP to Sapphire Rapids have 1-2 MiB)."""

CPU_VECTOR_BYTES = 64
"""The widest vector the CPU kernels use (AVX-512)."""


def stitch_min_row(bits: int) -> int:
    """The shortest row a CPU stitch kernel takes: one vector of the row's statistics (f32 at
    least, as JAX computes bf16 norms). Rows shorter than two vectors were once reduced by a
    serial loop per stage (softmax f32[1024, 16] 3x and f32[1024, 24] 6.6x slower than the
    unstitched plan); they now take vector partials and a lane tree in both plans
    (emitters/reduce_partials.py `SHORT_ROW_MIN`). Softmax f32[1024, n] (loaded machine, µs,
    stitched / unstitched): n = 12 25 / 20, 16 20-23 / 21-23, 17 32 / 54, 20 32 / 27.5,
    24 32 / 28.5, 25 32 / 76, 28 32.5 / 33, 30 33 / 42, 31 33 / 92. The stitch runs at a
    steady pace where the unstitched loop kernels, whose vectors straddle rows when the row
    is no multiple of the vector, swing by 3x; below one vector (n = 12) it lost."""
    return CPU_VECTOR_BYTES * 8 // max(bits, 32)


SPECULATED_MIN_ROW = 2
"""The shortest runtime row a speculated stitch takes. `stitch_min_row` is about static rows, which
a stitch kernel reduces serially below two vectors; a runtime row has vector partials and a
runtime tail at every length, and the stitched symbolic kernel ran faster than the generic
multi-kernel plan (symbolic too) from 2 elements on (same process, loaded machine: softmax
[256, n] 1.09x at n = 2, 1.2x at 7-15, 1.9-2.7x at 24-31; layernorm 1.4-2.4x at 2-31; at n = 1
softmax [4096, 1] ran 0.89x)."""


def stitch_row_range(dtype, live_rows: int = 1) -> tuple[int, int]:
    """The row lengths (least, most) over which a speculated stitch over a symbolic row length
    runs (runtime/plan_speculation.py): from `SPECULATED_MIN_ROW` up to the longest row for which
    `stitch_fits(n, dtype, "cpu", live_rows=)` holds."""
    bits = (primitive_type(dtype) if isinstance(dtype, str) else dtype).bits
    return SPECULATED_MIN_ROW, CPU_L2_BYTES // 2 // (max(bits, 8) // 8 * live_rows)


def stitch_fits(row_elements, dtype, target, *, live_rows: int = 1) -> bool:
    """Whether a stitch kernel's rows stay on chip (passes/stitch_fusion.py; the runtime speculation
    asks the same of a symbolic row length at run time): `live_rows` row-long values of `dtype`
    (an element type or its name) per thread — the row-shaped inputs, which each stage re-reads —
    within half of a core's L2 on the CPU (`target` "cpu", or a Target of kind "cpu"; and a row of at
    least `stitch_min_row` elements there, shorter ones run faster unstitched), within a
    block's shared memory on a GPU. A symbolic row length (not an int) does not fit: its size is
    known only at run time."""
    if not isinstance(row_elements, int):
        return False
    bits = (primitive_type(dtype) if isinstance(dtype, str) else dtype).bits
    row_bytes = row_elements * max(bits, 8) // 8 * live_rows
    kind = target if isinstance(target, str) else target.kind
    if kind == "cpu":
        return stitch_min_row(bits) <= row_elements and row_bytes <= CPU_L2_BYTES // 2
    shared = 48 * 1024 if isinstance(target, str) else target.shared_memory_bytes
    return row_bytes <= shared

