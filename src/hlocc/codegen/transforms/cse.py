"""`cse`: common subexpression elimination, xDSL's rewrites in one walk with cheap keys.

xDSL's `CSEDriver` (xdsl/transforms/common_subexpression_elimination.py) walks each block in order
(an op's regions before the op), keeps a table of the ops seen (copied for every nested region,
empty in an isolated op's), replaces an op by an equal one in the table, erases the ops that are
trivially dead, and CSEs an op that only reads memory when the equal op is in the same block with
no write in between. Its key, an `OperationInfo`, recomputes the op's structural hash (name,
attributes, properties, result types, operands) on every `hash` and twice more in every `__eq__`,
and it asks "was this use visited?" by building such a key for every use of a replaced result. The
kernel pipeline runs CSE four times, and that hashing was most of the pass.

This is the same walk with:
- a region-free op's key a plain tuple (name, operand tuple, result types, properties and
  attributes: each type and attribute by a per-run token that equal ones share, looked up by the
  object's id; properties and attributes as one (name, token) pair or a frozenset of several, so
  equal dicts give equal keys), hashed once per op by the table's `setdefault`; an op with regions
  keeps the structural `_Key` (its regions compared as xDSL does);
- one table for the whole walk, each nested region's entries undone when it is left (a log of
  (key, previous op)) instead of a copy per region;
- every use of a replaced op's results replaced: in SSA form with single-block regions (the only
  regions CSE enters) a use comes after its definition in the walk, so none has been visited, which
  is what xDSL's per-use test asks;
- the facts of an op class (terminator, pure with no symbol: dead when its results are unused)
  looked up once per class, and an op with regions' effects gathered once per run (`_effects`).
`tests/codegen/transforms/test_cse.py` runs xDSL's pass beside this one at every `cse` of real
kernels and asserts the same IR.

One fold beyond xDSL's: a select whose condition compares two integer constants is replaced by the
operand it picks (`_constant_choice`). The elemental emitter folds its range checks (a shift's
amount, a divisor against zero) when it sees a constant, and it emits a broadcast constant where it
is read (element_emitter.py), but a constant can still reach a check only through a call the
inliner removes; such checks would be carried through every later pass to LLVM.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, IntegerType, ModuleOp, UnregisteredOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
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
from xdsl.transforms.common_subexpression_elimination import has_other_side_effecting_op_in_between
from xdsl.transforms.dead_code_elimination import is_trivially_dead


class _Key:
    """The structural key of an op with regions (xDSL's `OperationInfo` with its hash computed
    once); region-free ops are keyed by `_Cse._key`'s tuple, which never equals a `_Key`."""

    __slots__ = ("op", "name", "hash")

    def __init__(self, op: Operation):
        self.op = op
        self.name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
        attributes, properties = op.attributes, op.properties
        self.hash = hash((
            self.name,
            sum(map(hash, attributes.items())) if attributes else 0,
            sum(map(hash, properties.items())) if properties else 0,
            tuple(op.result_types),
            tuple(op.operands),
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


class _Cse:
    """One run of the pass (module doc)."""

    def __init__(self):
        self.table: dict = {}
        self.undo: list[tuple[object, Operation | None]] = []
        self.to_erase: list[Operation] = []
        self.tokens: dict[int, tuple] = {}
        """id of a type or attribute → (it, its token): equal ones share a token (`canonical`); the
        entry keeps the object alive, so its id is not reused during the run."""
        self.canonical: dict = {}
        self.region_effects: dict[Operation, frozenset | None] = {}

    def run(self, op: Operation) -> None:
        for region in op.regions:
            self.region(region)
        for o in self.to_erase:
            if o.parent is not None:
                Rewriter.erase_op(o)

    # -- the walk ---------------------------------------------------------------------------------
    def region(self, region: Region) -> None:
        block = region.first_block
        if block is None or block.next_block is not None:  # a CFG: left as it is, as xDSL does
            return
        mark = len(self.undo)
        self.block(block)
        table, undo = self.table, self.undo
        while len(undo) > mark:
            key, previous = undo.pop()
            if previous is None:
                del table[key]
            else:
                table[key] = previous

    def block(self, block: Block) -> None:
        op = block.first_op
        while op is not None:  # nothing is erased before the end of the run
            if op.regions:
                if op.has_trait(IsolatedFromAbove, value_if_unregistered=True):
                    saved = self.table, self.undo
                    self.table, self.undo = {}, []
                    for region in op.regions:
                        self.region(region)
                    self.table, self.undo = saved
                else:
                    for region in op.regions:
                        self.region(region)
                self.general(op)
            else:
                cls = type(op)
                facts = _FACTS.get(cls)
                if facts is None:
                    facts = _class_facts(cls)
                if facts is _PLAIN:
                    self.plain(op, cls)
                elif facts is not _TERMINATOR:
                    self.general(op)
            op = op.next_op

    def plain(self, op: Operation, cls: type) -> None:
        """A region-free op of a class without memory effects, symbols or terminators: xDSL's
        `_simplify_operation`, whose tests are then answered by the class."""
        for result in op.results:
            if result.first_use is not None:
                break
        else:  # trivially dead
            self.to_erase.append(op)
            return
        if cls is arith.SelectOp and self.folded_select(op):
            return
        self.merge(op)

    def folded_select(self, op: Operation) -> bool:
        """Replace a select whose condition compares integer constants by the operand it picks (`_constant_choice`)."""
        chosen = _constant_choice(op)
        if chosen is None:
            return False
        op.results[0].replace_all_uses_with(chosen)
        self.to_erase.append(op)
        return True

    def merge(self, op: Operation) -> None:
        """A pure op: replaced by an equal one the table holds, else entered in it (undoably)."""
        key = self.key(op)
        existing = self.table.setdefault(key, op)
        if existing is op:
            self.undo.append((key, None))
        else:
            self.replace(op, existing)

    def general(self, op: Operation) -> None:
        """xDSL's `_simplify_operation` for any other op."""
        if op.has_trait(IsTerminator):
            return
        if self.trivially_dead(op):
            self.to_erase.append(op)
            return
        if type(op) is arith.SelectOp and self.folded_select(op):
            return
        if any(region.first_block is not None and region.first_block.next_block is not None for region in op.regions):
            return
        if not self.pure(op):
            if not self.only_reads(op):
                return
            key = self.key(op)
            existing = self.table.get(key)
            if existing is not None:
                if (op.parent_block() is existing.parent_block()
                        and not has_other_side_effecting_op_in_between(existing, op)):
                    self.replace(op, existing)
                    return
            self.table[key] = op
            self.undo.append((key, existing))
            return
        self.merge(op)

    def key(self, op: Operation) -> object:
        if op.regions:
            return _Key(op)
        token, results = self.token, op.results
        types = token(results[0].type) if len(results) == 1 else tuple(token(r.type) for r in results)
        # `_operands`: the operand tuple itself (`operands` builds a view to copy it from)
        return op.name, op._operands, types, self.items(op.properties), self.items(op.attributes)

    def items(self, attributes: dict) -> object:
        """Equal dicts give equal values (xDSL compares the dicts), in the cheapest form that does."""
        if not attributes:
            return ()
        token = self.token
        if len(attributes) == 1:
            ((name, value),) = attributes.items()
            return name, token(value)
        return frozenset((name, token(value)) for name, value in attributes.items())

    def token(self, attribute: object) -> int:
        """The attribute's (or type's) token: equal ones share it (`canonical`), and one object's is
        looked up by its id (hashing an attribute walks its parameters: 0.2-1.6 µs)."""
        entry = self.tokens.get(id(attribute))
        if entry is None:
            entry = self.tokens[id(attribute)] = (attribute, self.canonical.setdefault(attribute, len(self.canonical)))
        return entry[1]

    def replace(self, op: Operation, existing: Operation) -> None:
        """Replace `op`'s results by `existing`'s and erase `op` (every use is still to be visited:
        module doc)."""
        for old, new in zip(op.results, existing.results, strict=True):
            old.replace_all_uses_with(new)
        self.to_erase.append(op)

    # -- memory effects ---------------------------------------------------------------------------
    def effects(self, op: Operation) -> AbstractSet | None:
        """xDSL's `get_effects(op)`, for an op with regions remembered for the run and gathered
        from its nested ops by `_pure`'s per-class answer where it has one. xDSL finds a recursive
        op's effects (an `scf.for`, `scf.if`) by asking every nested op for its traits, once for
        `is_trivially_dead` and again for `is_side_effect_free`: for a kernel's loop, most of the
        kernel, a fifth of the pass. The run only replaces uses and erases ops at its end, so no
        op's effects change during the run."""
        if not op.regions:
            return _NONE if _pure_class(type(op)) else get_effects(op)
        memo = self.region_effects
        if op in memo:
            return memo[op]
        traits = op.get_traits_of_type(MemoryEffect)
        effects: set | None = set() if traits else None
        for trait in traits:
            if getattr(type(trait).get_effects, "__func__", None) is _RECURSIVE_EFFECTS:
                found = self.nested_effects(op)
            else:
                found = trait.get_effects(op)
            if found is None:
                effects = None
                break
            effects.update(found)
        memo[op] = None if effects is None else frozenset(effects)
        return memo[op]

    def nested_effects(self, op: Operation) -> set | None:
        """The union of the effects of the ops in `op`'s regions, None if one's are unknown."""
        effects: set = set()
        for region in op.regions:
            for block in region.blocks:
                for child in block.ops:
                    found = self.effects(child)
                    if found is None:
                        return None
                    effects.update(found)
        return effects

    def trivially_dead(self, op: Operation) -> bool:
        """xDSL's `is_trivially_dead`, the effects of an op with regions from `effects`."""
        if not op.regions:
            return is_trivially_dead(op)
        if any(result.first_use is not None for result in op.results):
            return False
        if (op.has_trait(IsTerminator, value_if_unregistered=False)
                or op.has_trait(SymbolOpInterface, value_if_unregistered=False)):
            return False
        effects = self.effects(op)  # xDSL's result_only_effects
        return effects is not None and all(
            e.kind == MemoryEffectKind.READ
            or (e.kind == MemoryEffectKind.ALLOC and isinstance(v := e.value, SSAValue) and op.is_ancestor(v.owner))
            for e in effects)

    def only_reads(self, op: Operation) -> bool:
        """`only_has_effect(op, READ)`, the effects of an op with regions from `effects`."""
        if not op.regions:
            return only_has_effect(op, MemoryEffectKind.READ)
        effects = self.effects(op)
        return effects is not None and all(e.kind == MemoryEffectKind.READ for e in effects)

    def pure(self, op: Operation) -> bool:
        """`is_side_effect_free(op)`, the effects of an op with regions from `effects`."""
        if not op.regions:
            return _pure(op)
        effects = self.effects(op)
        return effects is not None and not effects


_PLAIN, _TERMINATOR, _OTHER = "plain", "terminator", "other"
_FACTS: dict[type, str] = {}
"""Op class → what `_Cse.block` does with its region-free ops: `_PLAIN` (pure, no symbol, no
terminator), `_TERMINATOR` (nothing) or `_OTHER` (`_Cse.general`)."""


def _class_facts(cls: type[Operation]) -> str:
    if cls.has_trait(IsTerminator):
        facts = _TERMINATOR
    elif _pure_class(cls) and not cls.has_trait(SymbolOpInterface, value_if_unregistered=False):
        facts = _PLAIN
    else:
        facts = _OTHER
    _FACTS[cls] = facts
    return facts


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
    """xDSL's `cse` in one walk with cheap keys (module doc)."""

    name = "cse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _Cse().run(op)
