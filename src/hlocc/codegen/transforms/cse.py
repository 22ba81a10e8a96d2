"""`cse`: xDSL's common subexpression elimination with each lookup's key hashed once.

xDSL's `CSEDriver` (xdsl/transforms/common_subexpression_elimination.py) keys its table of known
ops by an `OperationInfo` that recomputes the op's structural hash (name, attributes, properties,
result types, operands) on every `hash` and twice more in every `__eq__`, and asks "was this use
visited?" by building such a key for every use of a replaced result. The kernel pipeline runs CSE
four times, and on the 6800-op probe (loop__large_loop_slow_compile_time) that hashing was most
of the 1.7 s the four runs took.

Here the key computes its hash once, and "visited" is the identity of the ops entered into the
table (scoped per region as the table is). Both give the same rewrites as xDSL's driver: equal
keys still compare structurally; and a use whose op is structurally equal to a known op K has
K's operands, so K itself uses the same result and is known: the replacement is skipped either way.

One fold beyond xDSL's: a select whose condition compares two integer constants is replaced by the
operand it picks (`_constant_choice`). The elemental emitter folds its range checks (a shift's
amount, a divisor against zero) when it sees a constant, and it emits a broadcast constant where it
is read (element_emitter.py), but a constant can still reach a check only through a call the
inliner removes; such checks would be carried through every later pass to LLVM.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, UnregisteredOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.traits import (
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    NoMemoryEffect,
    RecursiveMemoryEffect,
    SymbolOpInterface,
    get_effects,
    is_side_effect_free,
    only_has_effect,
)
from xdsl.transforms.common_subexpression_elimination import (
    CSEDriver,
    KnownOps,
    has_other_side_effecting_op_in_between,
)
from xdsl.transforms.dead_code_elimination import is_trivially_dead


class _Key:
    """An op's structural key, hashed once (xDSL's `OperationInfo` with a cached hash)."""

    __slots__ = ("op", "name", "hash")

    def __init__(self, op: Operation):
        self.op = op
        self.name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
        attributes, properties = op.attributes, op.properties
        self.hash = hash((
            self.name,
            sum(map(hash, attributes.items())) if attributes else 0,
            sum(map(hash, properties.items())) if properties else 0,
            tuple(map(_type_hash, op.results)),
            op.operands,
        ))

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Key) or self.hash != other.hash or self.name != other.name:
            return False
        a, b = self.op, other.op
        return (a.attributes == b.attributes and a.properties == b.properties and a.operands == b.operands
                and a.result_types == b.result_types
                and all(s.is_structurally_equivalent(o) for s, o in zip(a.regions, b.regions, strict=True)))


_TYPE_HASHES: dict[int, tuple] = {}
"""Hash of a type attribute by its object, for one run of the pass (a type's dataclass hash walks
its parameters every time; the entry keeps the type alive, so its id is not reused)."""


def _type_hash(result) -> int:
    t = result.type
    entry = _TYPE_HASHES.get(id(t))
    if entry is None:
        entry = _TYPE_HASHES[id(t)] = (t, hash(t))
    return entry[1]


class _KnownOps(KnownOps):
    """The driver's table of known ops, keyed by `_Key`; `in` asks whether the op itself was
    entered (module doc), the only question the driver asks with `in`."""

    def __init__(self, known_ops: _KnownOps | None = None):
        super().__init__(known_ops)
        self._entered: set[Operation] = set() if known_ops is None else set(known_ops._entered)
        self._last: _Key | None = None

    def __getitem__(self, k: Operation):
        return self._known_ops[_Key(k)]

    def __setitem__(self, k: Operation, v: Operation):
        last = self._last  # the driver enters an op right after looking it up
        self._known_ops[last if last is not None and last.op is k else _Key(k)] = v
        self._entered.add(k)

    def __contains__(self, k: Operation):
        return k in self._entered

    def get(self, k: Operation, default=None):
        self._last = key = _Key(k)
        return self._known_ops.get(key, default)

    def pop(self, k: Operation):
        return self._known_ops.pop(_Key(k))


@dataclass
class _Driver(CSEDriver):
    _known_ops: KnownOps = field(default_factory=_KnownOps)
    _region_effects: dict[Operation, frozenset | None] = field(default_factory=dict)

    def _effects(self, op: Operation) -> AbstractSet | None:
        """xDSL's `get_effects(op)`, for an op with regions remembered for the run and gathered
        from its nested ops by `_pure`'s per-class answer where it has one. xDSL finds a recursive
        op's effects (an `scf.for`, `scf.if`) by asking every nested op for its traits, once for
        `is_trivially_dead` and again for `is_side_effect_free`: for a kernel's loop, most of the
        kernel, a fifth of the pass. The driver only replaces uses and marks ops for erasure until
        its end, so no op's effects change during the run."""
        if not op.regions:
            return _NONE if _pure_class(type(op)) else get_effects(op)
        memo = self._region_effects
        if op in memo:
            return memo[op]
        traits = op.get_traits_of_type(MemoryEffect)
        effects: set | None = set() if traits else None
        for trait in traits:
            if getattr(type(trait).get_effects, "__func__", None) is _RECURSIVE_EFFECTS:
                found = self._nested_effects(op)
            else:
                found = trait.get_effects(op)
            if found is None:
                effects = None
                break
            effects.update(found)
        memo[op] = None if effects is None else frozenset(effects)
        return memo[op]

    def _nested_effects(self, op: Operation) -> set | None:
        """The union of the effects of the ops in `op`'s regions, None if one's are unknown."""
        effects: set = set()
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    found = self._effects(child)
                    if found is None:
                        return None
                    effects.update(found)
        return effects

    def _trivially_dead(self, op: Operation) -> bool:
        """xDSL's `is_trivially_dead`, the effects of an op with regions from `_effects`."""
        if not op.regions:
            return is_trivially_dead(op)
        if any(result.first_use is not None for result in op.results):
            return False
        if (op.has_trait(IsTerminator, value_if_unregistered=False)
                or op.has_trait(SymbolOpInterface, value_if_unregistered=False)):
            return False
        effects = self._effects(op)  # xDSL's result_only_effects
        return effects is not None and all(
            e.kind == MemoryEffectKind.READ
            or (e.kind == MemoryEffectKind.ALLOC and isinstance(v := e.value, SSAValue) and op.is_ancestor(v.owner))
            for e in effects)

    def _only_reads(self, op: Operation) -> bool:
        """`only_has_effect(op, READ)`, the effects of an op with regions from `_effects`."""
        if not op.regions:
            return only_has_effect(op, MemoryEffectKind.READ)
        effects = self._effects(op)
        return effects is not None and all(e.kind == MemoryEffectKind.READ for e in effects)

    def _pure(self, op: Operation) -> bool:
        """`_pure(op)`, the effects of an op with regions from `_effects`."""
        if not op.regions:
            return _pure(op)
        effects = self._effects(op)
        return effects is not None and not effects

    def _simplify_block(self, block):
        # xDSL's opens a plain `KnownOps()` for an isolated op's regions; ours keeps the key type
        # (an isolated op's regions start from an empty table either way).
        for op in block.ops:
            if op.regions:
                if op.has_trait(IsolatedFromAbove, value_if_unregistered=True):
                    old_scope, self._known_ops = self._known_ops, _KnownOps()
                    for region in op.regions:
                        self._simplify_region(region)
                    self._known_ops = old_scope
                else:
                    for region in op.regions:
                        self._simplify_region(region)
            self._simplify_operation(op)

    def _simplify_region(self, region):
        if len(region.blocks) == 1:
            old_scope = self._known_ops
            self._known_ops = _KnownOps(old_scope)
            self._simplify_block(region.block)
            self._known_ops = old_scope


    def _simplify_operation(self, op: Operation):
        # xDSL's, with `_pure` for its `is_side_effect_free` (a fifth of the pass's time) and the
        # terminator trait (a class's) looked up once per class.
        cls = type(op)
        terminator = _TERMINATORS.get(cls)
        if terminator is None:
            terminator = _TERMINATORS[cls] = op.has_trait(IsTerminator)
        if terminator:
            return
        if self._trivially_dead(op):
            self._mark_erasure(op)
            return
        if cls is arith.SelectOp and (chosen := _constant_choice(op)) is not None:
            op.results[0].replace_all_uses_with(chosen)
            self._mark_erasure(op)
            return
        if any(len(region.blocks) > 1 for region in op.regions):
            return
        if not self._pure(op):
            if not self._only_reads(op):
                return
            if existing := self._known_ops.get(op):
                if (op.parent_block() is existing.parent_block()
                        and not has_other_side_effecting_op_in_between(existing, op)):
                    self._replace_and_delete(op, existing)
                    return
            self._known_ops[op] = op
            return
        if existing := self._known_ops.get(op):
            self._replace_and_delete(op, existing)
            return
        self._known_ops[op] = op


_COMPARE = {
    "eq": lambda a, b: a == b, "ne": lambda a, b: a != b,
    "slt": lambda a, b: a < b, "sle": lambda a, b: a <= b, "sgt": lambda a, b: a > b, "sge": lambda a, b: a >= b,
    "ult": lambda a, b: a < b, "ule": lambda a, b: a <= b, "ugt": lambda a, b: a > b, "uge": lambda a, b: a >= b,
}


def _scalar_int(value: SSAValue, width: int) -> int | None:
    """The bits of a scalar integer `arith.constant` as an unsigned number, else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data & ((1 << width) - 1)
    return None


def _constant_choice(select: arith.SelectOp) -> SSAValue | None:
    """The operand a select picks when its condition compares two integer constants (a shift's
    range check on a constant amount once its subgraph is inlined: codegen/elemental/ops.py), else
    None. Folding it here, the one canonicalization the pipeline needs before LLVM, spares every
    later pass the compare and the selects."""
    compare = select.cond.owner
    if not isinstance(compare, arith.CmpiOp) or not isinstance(compare.lhs.type, IntegerType):
        return None
    width = compare.lhs.type.width.data
    a, b = _scalar_int(compare.lhs, width), _scalar_int(compare.rhs, width)
    if a is None or b is None:
        return None
    predicate = arith.CMPI_COMPARISON_OPERATIONS[compare.predicate.value.data]
    if predicate[0] == "s":  # signed: two's complement
        a, b = (v - (1 << width) if v >> (width - 1) else v for v in (a, b))
    return select.lhs if _COMPARE[predicate](a, b) else select.rhs


_NO_EFFECTS = NoMemoryEffect.get_effects.__func__
_RECURSIVE_EFFECTS = RecursiveMemoryEffect.get_effects.__func__
_NONE: frozenset = frozenset()
_PURE_CLASSES: dict[type, bool] = {}
_TERMINATORS: dict[type, bool] = {}


def _pure_class(cls: type[Operation]) -> bool:
    """Whether the memory-effect traits of op class `cls` all say "none" whatever the op
    (NoMemoryEffect, Pure), answered once per class."""
    always = _PURE_CLASSES.get(cls)
    if always is None:
        traits = cls.get_traits_of_type(MemoryEffect) if hasattr(cls, "traits") else ()
        always = _PURE_CLASSES[cls] = bool(traits) and all(
            getattr(type(t).get_effects, "__func__", None) is _NO_EFFECTS for t in traits)
    return always


def _pure(op: Operation) -> bool:
    """`is_side_effect_free(op)`, answered once per op class when the class's memory-effect traits
    all say "none" whatever the op (`_pure_class`); asked per op otherwise (a recursive or
    conditional effect depends on the op)."""
    return _pure_class(type(op)) or is_side_effect_free(op)


class CommonSubexpressionEliminationPass(ModulePass):
    """xDSL's `cse`, with cheaper keys (module doc)."""

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            _Driver().simplify(op)
        finally:
            _TYPE_HASHES.clear()
