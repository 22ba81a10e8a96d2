"""Building fusions in the HLO IR: the operations XLA's HloInstruction offers for fusion passes
(CreateFusion, FuseInstruction, FuseInstructionIntoMultiOutput, MergeFusionInstruction...), as a
`FusionBuilder` that a pass creates once per module.

- `create_fusion(consumer, kind)`: a new fusion instruction `fusion` (calls `fused_computation`)
  holding a clone of `consumer`, one parameter per distinct operand; `consumer` is replaced;
- `fuse_producer(fusion, producer)`: clone `producer` (an operand of `fusion`; a fusion is inlined)
  into the fused computation in place of its parameter. The producer stays for its other users
  (it is *duplicated*); the caller removes it when it has none left;
- `fuse_producer_multi_output(fusion, producer)`: the same, and the producer's value becomes an
  extra output of the fusion that its other users read through `get-tuple-element`; the producer
  is removed;
- `merge_sibling(fusion, other)`: `other` (an op or fusion sharing operands with `fusion`, not
  connected to it) joins `fusion` as extra outputs; its users read them through
  `get-tuple-element`.

A multi-output fusion's root is a tuple of array values (no nested tuples); its users are
`get-tuple-element`s. Names follow XLA: `fusion`, `fusion.1`, ... for fusion instructions and
`fused_computation`, `fused_computation.1`, ... for their computations (module-wide unique), fused
parameters `param_0`, `param_1`, ...; cloned instructions keep their names (unique within their
computation). Names come from the IR's name uniquer (hlo/name_uniquer.py, with the fusion
builders' suffix policy); uses move and
instructions are unregistered through the IR's methods (`replace_all_uses_with`, `detach`).

Bookkeeping is linear: removed top-level instructions are dropped from their computation's
instruction list, and the list is put back in a def-before-use order close to the original one, by
`finish()`, which a pass calls once at its end; computations of fusions that were merged away are
removed from the module there too. Until then, `is_removed(instr)` tells whether an instruction is
gone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hlocc.hlo.attributes import RawAttr
from hlocc.hlo.call_graph import control_predecessor_names
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.name_uniquer import NameUniquer
from hlocc.hlo.types import Shape


def distinct(values: Iterable[HloInstruction]) -> list[HloInstruction]:
    """`values` without repeats, in order (users lists may name a user once per use)."""
    return list(dict.fromkeys(values))  # instructions hash by identity


def clone_instruction(instr: HloInstruction, operands: Sequence[HloInstruction], name: str) -> HloInstruction:
    """A copy of `instr` with new operands and name (called computations such as reducers are
    referenced, not copied; control dependencies stay with the fusion instruction, see
    `FusionBuilder.create_fusion`)."""
    attrs = dict(instr.attrs)
    attrs.pop("control-predecessors", None)
    clone = HloInstruction(name, instr.opcode, instr.shape, operands, attrs, literal=instr.literal,
                           parameter_number=instr.parameter_number)
    clone.wrapped_opcode = instr.wrapped_opcode
    return clone


def attach(comp: HloComputation, instr: HloInstruction) -> HloInstruction:
    """Add a new instruction to `comp` and register it with its operands (linear in operands)."""
    instr.parent = comp
    comp.instructions.append(instr)
    operands = instr.operands
    for op in (operands if len(operands) < 2 or (len(operands) == 2 and operands[0] is not operands[1])
               else distinct(operands)):  # (one or two distinct operands: most clones)
        op.users.append(instr)
    return instr


def fusion_outputs(fusion: HloInstruction) -> list[HloInstruction]:
    """The values a fusion computes: its root tuple's operands, or its root."""
    root = fusion.attrs["calls"].root
    return list(root.operands) if root.opcode == "tuple" else [root]


def is_multi_output_fusion(instr: HloInstruction) -> bool:
    return instr.opcode == "fusion" and instr.attrs["calls"].root.opcode == "tuple"


class FusionBuilder:
    """Fusion operations on one module (module doc)."""

    def __init__(self, module: HloModule):
        self.module = module
        self.instruction_names = NameUniquer((i.name for i in module.all_instructions()), after_suffix=False)
        self.computation_names = NameUniquer((c.name for c in module.computations), after_suffix=False)
        self._order: dict[HloInstruction, float] = {}
        self._ordered: set[int] = set()
        self._removed: set[int] = set()
        self._touched: dict[int, HloComputation] = {}
        self._orphans: set[int] = set()
        self._params: dict[int, list[HloInstruction]] = {}
        self._local_names: dict[int, NameUniquer] = {}
        self._fused_touched: dict[int, HloComputation] = {}

    # -- bookkeeping ------------------------------------------------------------------------------
    def _key(self, instr: HloInstruction) -> float:
        comp = instr.parent
        if id(comp) not in self._ordered:
            self._ordered.add(id(comp))
            for i, x in enumerate(comp.instructions):
                self._order.setdefault(x, float(i))
        return self._order.get(instr, float(len(comp.instructions)))

    def _place(self, new: HloInstruction, like: HloInstruction, offset: float = 0.0) -> None:
        self._order[new] = self._key(like) + offset
        self._touched[id(like.parent)] = like.parent

    def is_removed(self, instr: HloInstruction) -> bool:
        return id(instr) in self._removed

    def remove(self, instr: HloInstruction) -> None:
        """Remove a top-level instruction without users (its fused computation, if any, goes too)."""
        instr.detach()
        self._removed.add(id(instr))
        self._touched[id(instr.parent)] = instr.parent
        if instr.opcode == "fusion":
            self._orphans.add(id(instr.attrs["calls"]))

    def _params_of(self, fusion: HloInstruction) -> list[HloInstruction]:
        comp = fusion.attrs["calls"]
        self._fused_touched[id(comp)] = comp
        params = self._params.get(id(comp))
        if params is None:
            found = {i.parameter_number: i for i in comp.instructions if i.opcode == "parameter"}
            params = [found[k] for k in range(len(fusion.operands))]
            self._params[id(comp)] = params
        return params

    def fused_parameter(self, fusion: HloInstruction, operand_index: int) -> HloInstruction:
        return self._params_of(fusion)[operand_index]

    def _local(self, comp: HloComputation) -> NameUniquer:
        names = self._local_names.get(id(comp))
        if names is None:
            names = NameUniquer((i.name for i in comp.instructions), after_suffix=False)
            self._local_names[id(comp)] = names
        return names

    def _new_parameter(self, fusion: HloInstruction, value: HloInstruction) -> HloInstruction:
        comp = fusion.attrs["calls"]
        params = self._params_of(fusion)
        number = len(fusion.operands)
        param = HloInstruction(self._local(comp).unique(f"param_{number}"), "parameter", value.shape,
                               parameter_number=number)
        attach(comp, param)
        params.append(param)
        fusion.operands.append(value)
        value.users.append(fusion)  # not an operand before (see _parameter_for), so not a user yet
        return param

    def _parameter_for(self, fusion: HloInstruction, value: HloInstruction) -> HloInstruction:
        for k, op in enumerate(fusion.operands):
            if op is value:
                return self._params_of(fusion)[k]
        return self._new_parameter(fusion, value)

    def _drop_operand(self, fusion: HloInstruction, index: int) -> None:
        """Remove operand `index` (its parameter must be unused) and renumber the parameters."""
        comp = fusion.attrs["calls"]
        params = self._params_of(fusion)
        param = params.pop(index)
        assert not param.users and comp.root is not param
        comp.instructions.remove(param)
        value = fusion.operands.pop(index)
        for k in range(index, len(params)):
            params[k].parameter_number = k
        if not any(op is value for op in fusion.operands):
            value.remove_user(fusion)

    # -- creating and growing fusions -------------------------------------------------------------
    def create_fusion(self, consumer: HloInstruction, kind: str) -> HloInstruction:
        """Replace `consumer` by a fusion instruction of `kind` holding a clone of it."""
        outer = consumer.parent
        comp = HloComputation(self.computation_names.unique("fused_computation"),
                              execution_thread=outer.execution_thread)
        self.module.add_computation(comp)
        operands = distinct(consumer.operands)
        params = []
        for k, op in enumerate(operands):
            params.append(attach(comp, HloInstruction(f"param_{k}", "parameter", op.shape, parameter_number=k)))
        by_id = {id(op): p for op, p in zip(operands, params)}
        clone = attach(comp, clone_instruction(consumer, [by_id[id(op)] for op in consumer.operands],
                                               consumer.name))
        comp.root = clone
        self._params[id(comp)] = params
        attrs = {"kind": kind, "calls": comp}
        if "control-predecessors" in consumer.attrs:  # XLA moves control dependencies to the fusion
            attrs["control-predecessors"] = consumer.attrs["control-predecessors"]
        fusion = HloInstruction(self.instruction_names.unique("fusion"), "fusion", consumer.shape, operands, attrs)
        attach(outer, fusion)
        self._place(fusion, consumer)
        consumer.replace_all_uses_with(fusion)
        self.remove(consumer)
        return fusion

    def set_kind(self, fusion: HloInstruction, kind: str) -> None:
        fusion.attrs["kind"] = kind

    def _clone_into(self, fusion: HloInstruction, instr: HloInstruction) -> list[HloInstruction]:
        """Clone `instr` (a fusion is inlined) into `fusion`'s computation, reading its operands
        through parameters; returns the clones of its outputs."""
        comp = fusion.attrs["calls"]
        names = self._local(comp)
        if instr.opcode != "fusion":
            operands = [self._parameter_for(fusion, op) for op in instr.operands]
            return [attach(comp, clone_instruction(instr, operands, names.unique(instr.name)))]
        inner = instr.attrs["calls"]
        mapping: dict[int, HloInstruction] = {}
        for param in inner.instructions:
            if param.opcode == "parameter":
                mapping[id(param)] = self._parameter_for(fusion, instr.operands[param.parameter_number])
        for x in inner.post_order():
            if id(x) in mapping:
                continue
            if x is inner.root and x.opcode == "tuple":
                continue
            operands = [mapping[id(op)] for op in x.operands]
            mapping[id(x)] = attach(comp, clone_instruction(x, operands, names.unique(x.name)))
        return [mapping[id(out)] for out in fusion_outputs(instr)]

    def _replace_parameter_of(self, fusion: HloInstruction, producer: HloInstruction,
                              value: HloInstruction) -> None:
        """Uses of the parameter bound to `producer` read `value` instead; drop that operand."""
        index = next(k for k, op in enumerate(fusion.operands) if op is producer)
        param = self._params_of(fusion)[index]
        param.replace_all_uses_with(value)
        self._drop_operand(fusion, index)

    def fuse_producer(self, fusion: HloInstruction, producer: HloInstruction) -> None:
        """Fuse a single-output `producer` into `fusion`, duplicating it when it has other users."""
        assert any(op is producer for op in fusion.operands), f"'{producer.name}' is not an operand of '{fusion.name}'"
        outputs = self._clone_into(fusion, producer)
        assert len(outputs) == 1, f"'{producer.name}' has several outputs; use fuse_producer_multi_output"
        self._replace_parameter_of(fusion, producer, outputs[0])

    def absorb_consumer(self, producer: HloInstruction, consumer: HloInstruction) -> HloInstruction:
        """The result of `fuse_producer(consumer, producer)` when `consumer` is the producer
        fusion's only user, built the other way round: `consumer` (an op or a fusion) is cloned
        into the producer's computation on top of its root, and the producer fusion takes the
        consumer's place. This costs the consumer's size instead of the producer's, so growing a
        large fusion by one op at a time stays linear. Returns the fusion (the producer)."""
        assert producer.opcode == "fusion" and all(u is consumer for u in producer.users)
        comp = producer.attrs["calls"]
        assert comp.root.opcode != "tuple", f"'{producer.name}' is a multi-output fusion"
        old_root = comp.root
        names = self._local(comp)

        def value_of(outer: HloInstruction) -> HloInstruction:
            return old_root if outer is producer else self._parameter_for(producer, outer)

        if consumer.opcode != "fusion":
            new_root = attach(comp, clone_instruction(consumer, [value_of(op) for op in consumer.operands],
                                                      names.unique(consumer.name)))
        else:
            inner = consumer.attrs["calls"]
            mapping: dict[int, HloInstruction] = {}
            for x in inner.post_order():
                if x.opcode == "parameter":
                    mapping[id(x)] = value_of(consumer.operands[x.parameter_number])
                    continue
                operands = [mapping[id(op)] for op in x.operands]
                mapping[id(x)] = attach(comp, clone_instruction(x, operands, names.unique(x.name)))
            new_root = mapping[id(inner.root)]
        comp.root = new_root
        producer.shape = consumer.shape
        self._place(producer, consumer)
        consumer.replace_all_uses_with(producer)
        producer.users = [u for u in producer.users if u is not consumer]
        self.remove(consumer)
        return producer

    # -- multi-output fusions ------------------------------------------------------------------------
    def _make_multi_output(self, fusion: HloInstruction) -> None:
        """Turn a single-output fusion into one with a root tuple; its users read output 0."""
        comp = fusion.attrs["calls"]
        if comp.root.opcode == "tuple":
            return
        old_root = comp.root
        assert not old_root.shape.is_tuple, f"'{fusion.name}': the root of a fusion to extend may not be a tuple"
        users = distinct(fusion.users)
        was_root = fusion.parent.root is fusion
        root = attach(comp, HloInstruction(self._local(comp).unique("tuple"), "tuple",
                                           Shape.tuple([old_root.shape]), [old_root]))
        comp.root = root
        fusion.shape = root.shape
        gte = self._get_tuple_element(fusion, 0)
        for user in users:
            user.operands = [gte if op is fusion else op for op in user.operands]
            gte.users.append(user)
        fusion.users = [gte]
        if was_root:
            fusion.parent.root = gte

    def _get_tuple_element(self, fusion: HloInstruction, index: int) -> HloInstruction:
        gte = HloInstruction(self.instruction_names.unique("get-tuple-element"), "get-tuple-element",
                             fusion.shape.tuple_shapes[index], [fusion], {"index": index})
        attach(fusion.parent, gte)
        self._place(gte, fusion, 0.5)
        return gte

    def _add_output(self, fusion: HloInstruction, value: HloInstruction) -> int:
        """Make `value` (in the fused computation) an output of the multi-output `fusion`."""
        root = fusion.attrs["calls"].root
        for k, op in enumerate(root.operands):
            if op is value:
                return k
        root.operands.append(value)
        if root not in value.users:
            value.users.append(root)
        root.shape = Shape.tuple([op.shape for op in root.operands])
        fusion.shape = root.shape
        return len(root.operands) - 1

    def _redirect_users(self, fusion: HloInstruction, old: HloInstruction, new_indices: list[int]) -> None:
        """Users of `old` (a removed op or fusion) read the fusion's outputs `new_indices` instead."""
        if is_multi_output_fusion(old):
            for gte in distinct(old.users):
                assert gte.opcode == "get-tuple-element", f"'{old.name}' is used by '{gte.name}'"
                gte.attrs["index"] = new_indices[gte.attrs["index"]]
                gte.operands = [fusion]
                fusion.users.append(gte)
            old.users = []
            return
        if not old.users and old.parent.root is not old:
            return
        gte = self._get_tuple_element(fusion, new_indices[0])
        old.replace_all_uses_with(gte)

    def fuse_producer_multi_output(self, fusion: HloInstruction, producer: HloInstruction) -> None:
        """Fuse `producer` into `fusion` and make it an output too; its other users read it from the
        fusion; `producer` is removed."""
        self._make_multi_output(fusion)
        outputs = self._clone_into(fusion, producer)
        indices = [self._add_output(fusion, out) for out in outputs]
        if len(outputs) == 1:
            self._replace_parameter_of(fusion, producer, outputs[0])
        else:  # the fusion read the multi-output producer through get-tuple-elements
            raise ValueError(f"'{producer.name}' is a multi-output fusion; it cannot be fused as a producer")
        self._redirect_users(fusion, producer, indices)
        self.remove(producer)

    def merge_sibling(self, fusion: HloInstruction, other: HloInstruction) -> None:
        """Fuse `other` into `fusion` side by side (no data flows between them)."""
        assert not any(op is other for op in fusion.operands) and not any(op is fusion for op in other.operands)
        self._make_multi_output(fusion)
        outputs = self._clone_into(fusion, other)
        indices = [self._add_output(fusion, out) for out in outputs]
        self._redirect_users(fusion, other, indices)
        self.remove(other)

    # -- finishing ------------------------------------------------------------------------------------------
    def finish(self) -> None:
        """Drop removed instructions and merged-away computations; restore a def-before-use order."""
        for comp in self._touched.values():
            live = [i for i in comp.instructions if id(i) not in self._removed]
            live.sort(key=self._key)  # the intended order, then the nearest def-before-use one
            comp.instructions = live
            _drop_fused_control_predecessors(comp)
            comp.sort_instructions()
        for comp in self._fused_touched.values():
            if id(comp) not in self._orphans:
                _name_parameters(comp)
        if self._orphans:
            self.module.computations = [c for c in self.module.computations if id(c) not in self._orphans]
        self._fused_touched.clear()
        self._params.clear()
        self._local_names.clear()
        self._touched.clear()
        self._orphans.clear()
        self._ordered.clear()
        self._order.clear()


def _drop_fused_control_predecessors(comp: HloComputation) -> None:
    """Control predecessors that were fused away (into the fusion that names them, or another) are
    dropped from `control-predecessors`: the ordering is kept inside the fusion or by its data, and
    the schedule refuses a name that is not in the computation. (A TensorFlow module's reduce with
    `control-predecessors={%add.5}` became a fusion naming the add fused into it.)"""
    names = None
    for instr in comp.instructions:
        if "control-predecessors" not in instr.attrs:
            continue
        names = names if names is not None else {i.name for i in comp.instructions}
        wanted = control_predecessor_names(instr)
        kept = [n for n in wanted if n in names and n != instr.name]
        if len(kept) == len(wanted):
            continue
        if kept:
            instr.attrs["control-predecessors"] = RawAttr("{" + ", ".join(kept) + "}")
        else:
            del instr.attrs["control-predecessors"]


def _name_parameters(comp: HloComputation) -> None:
    """Name a fused computation's parameters `param_<number>` (after merges renumbered them),
    keeping names unique."""
    params = sorted((i for i in comp.instructions if i.opcode == "parameter"), key=lambda p: p.parameter_number)
    names = NameUniquer((i.name for i in comp.instructions if i.opcode != "parameter"), after_suffix=False)
    for param in params:
        param.name = names.unique(f"param_{param.parameter_number}")


