"""`cse`: common subexpression elimination (XLA's HloCSE).

Within each computation, two instructions are the same expression when they have the same opcode,
the same shape (with layout), the same operands (after earlier merges), equal attributes (metadata
aside) and, for constants, bitwise-equal literals; called computations compare structurally, so two
reduces whose reducers are separate but identical computations merge. For the commutative binary
ops (add, multiply, maximum, minimum, and, or, xor) the operand order does not matter: IEEE
addition and multiplication are commutative, NaN results aside, which are NaN either way.

Never merged: parameters, instructions with a side effect (rng, send/recv, infeed/outfeed, ...,
see `HloInstruction.has_side_effect`), the halves of asynchronous start/done pairs, and
instructions with control dependencies. Each instruction
is hashed once, in post order, so the pass is linear in the module size.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hlocc.hlo.call_graph import control_referenced_names, has_control_dependencies
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.pattern import COMMUTATIVE

_IGNORED_ATTRS = frozenset({"metadata"})
# Halves of an asynchronous pair (async-start/-done, copy-start/-done, all-gather-start/-done, ...):
# merging two starts would give one start two dones.
_ASYNC_SUFFIXES = ("-start", "-update", "-done")


class ComputationKeys:
    """Structural keys of computations: equal keys mean the computations compute the same thing
    (same instructions, shapes, attributes, literals and wiring; names and metadata aside)."""

    def __init__(self):
        self._keys: dict[int, tuple] = {}
        self._shape_texts: dict[int, tuple] = {}
        self._array_texts: dict[tuple, str] = {}

    def shape_text(self, shape) -> str:
        """The shape's text with its layout (shapes are shared by many instructions; printing each
        was a third of the pass). The entry keeps the shape alive, so its id is not reused."""
        entry = self._shape_texts.get(id(shape))
        if entry is None:
            text = None
            if shape.tuple_shapes is None and not shape.is_buffer and not any(shape.dynamic):
                # A static array's text is a function of these (the parser shares one object per
                # plain shape text, but shapes the passes make are mostly objects of their own).
                fields = (shape.element_type, shape.dims, shape.layout)
                text = self._array_texts.get(fields)
                if text is None:
                    text = self._array_texts[fields] = shape.to_string()
            entry = self._shape_texts[id(shape)] = (shape, text or shape.to_string())
        return entry[1]

    def key(self, comp: HloComputation) -> tuple:
        key = self._keys.get(id(comp))
        if key is None:
            order = comp.post_order()
            position = {id(instr): n for n, instr in enumerate(order)}
            key = tuple(instruction_key(i, tuple(position[id(o)] for o in i.operands), self) + (i is comp.root,)
                        for i in order)
            self._keys[id(comp)] = key
        return key


def instruction_key(instr: HloInstruction, operand_ids: tuple, computations: ComputationKeys) -> tuple:
    """What an instruction computes given its operands (named by `operand_ids`)."""
    if len(operand_ids) == 2 and instr.opcode in COMMUTATIVE and operand_ids[1] < operand_ids[0]:
        operand_ids = (operand_ids[1], operand_ids[0])
    attrs = instr.attrs
    attrs = tuple(sorted((k, _attr_key(v, computations)) for k, v in attrs.items() if k not in _IGNORED_ATTRS)
                  ) if attrs else ()
    return (instr.opcode, computations.shape_text(instr.shape), operand_ids, attrs, _literal_key(instr.literal),
            instr.parameter_number, instr.wrapped_opcode)


def _attr_key(value: Any, computations: ComputationKeys) -> Any:
    if isinstance(value, HloComputation):
        return ("computation", computations.key(value))
    if isinstance(value, (list, tuple)):
        return tuple(_attr_key(v, computations) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _attr_key(v, computations)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _literal_key(literal: Any) -> Any:
    if literal is None:
        return None
    if isinstance(literal, tuple):
        return tuple(_literal_key(x) for x in literal)
    array = np.asarray(literal)
    # (the dtype object, not its name: equal dtypes compare equal, and `str(dtype)` cost 6 µs, a
    # sixth of the pass on the constant-heavy fusions of the 6800-op probe)
    return (array.dtype, array.shape, array.tobytes())


def cse_computation(comp: HloComputation, computations: ComputationKeys, memo: dict[int, bool]) -> bool:
    """Merge the duplicate expressions of `comp`; returns whether any was merged."""
    referenced = control_referenced_names(comp)
    canonical: dict[tuple, HloInstruction] = {}
    merged: list[HloInstruction] = []
    for instr in comp.post_order():
        if (instr.opcode == "parameter" or instr.opcode.endswith(_ASYNC_SUFFIXES)
                or has_control_dependencies(instr, referenced) or instr.has_side_effect(memo)):
            continue
        key = instruction_key(instr, tuple(id(o) for o in instr.operands), computations)
        first = canonical.setdefault(key, instr)
        if first is not instr:
            instr.replace_all_uses_with(first)
            merged.append(instr)
    # A merged instruction's operands are its canonical twin's, so nothing else becomes dead.
    comp.remove_instructions(merged)
    return bool(merged)


@register_hlo_pass
class HloCSE(HloPass):
    """Merges identical instructions within each computation."""

    name = "cse"

    def run(self, module: HloModule) -> bool:
        computations = ComputationKeys()
        memo: dict[int, bool] = {}
        changed = False
        for comp in module.computation_post_order():
            changed |= cse_computation(comp, computations, memo)
        return changed
