"""A view of HLO instructions as one fusion without building it (XLA's HloFusionAdaptor).

Fusion decisions ask "what would the fusion of this producer into that consumer look like?"
many times; cloning both into a scratch computation for every question would make fusion
quadratic. A `FusionAdaptor` answers the questions hero analysis asks — the roots, an
instruction's operands and users *inside the fusion* — directly on the existing IR:

- `FusionAdaptor.for_instruction(i)`: one fusion instruction (its fused computation), or a
  single unfused instruction seen as a one-op fusion;
- `FusionAdaptor.for_producer_consumer(p, c)`: `p` fused into `c` (fusions or plain ops); a
  parameter of `c` bound to `p` leads to `p`'s root. With `multi_output=True` the producer's
  roots are outputs too (producer-consumer multi-output fusion);
- `FusionAdaptor.for_siblings(a, b)`: two instructions merged side by side (sibling fusion);
- `FusionAdaptor.for_computation(comp)`: a fused computation without a fusion instruction (an
  emitter test's body); its parameters are the boundary.

Nodes are the real instructions (inside fused computations or top-level); a fused
computation's parameters and its root tuple are not nodes. `operand()` returns None for a value
from outside the fusion. Every query is local: it touches the instruction and its neighbours.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hlocc.hlo.ir import HloComputation, HloInstruction


def fusion_roots(computation: HloComputation) -> list[HloInstruction]:
    """The output instructions of a fused computation: the root, or the operands of a root tuple
    (nested tuples flattened, get-tuple-element of a tuple looked through; XLA's GetFusionRoots)."""
    out: list[HloInstruction] = []

    def visit(instr: HloInstruction) -> None:
        if instr.opcode == "get-tuple-element" and instr.operand(0).opcode == "tuple":
            visit(instr.operand(0).operand(instr.attrs["index"]))
        elif instr.opcode == "get-tuple-element":
            out.append(instr.operand(0))
        elif instr.opcode == "tuple":
            for op in instr.operands:
                visit(op)
        else:
            out.append(instr)

    visit(computation.root)
    return out


class _Part:
    """One member of the fusion: a fusion instruction, a plain instruction, or a bare computation."""

    __slots__ = ("instr", "comp", "outputs")

    def __init__(self, instr: HloInstruction | None, comp: HloComputation | None):
        self.instr = instr
        self.comp = comp
        self.outputs: list[HloInstruction] = fusion_roots(comp) if comp is not None else [instr]


class FusionAdaptor:
    """See the module doc."""

    def __init__(self, parts: Sequence[_Part], output_parts: Sequence[_Part]):
        self._parts = list(parts)
        self._by_comp = {id(p.comp): p for p in self._parts if p.comp is not None}
        self._by_instr = {id(p.instr): p for p in self._parts if p.comp is None}
        self._fused_instrs = {id(p.instr): p for p in self._parts if p.instr is not None}
        self._output_parts = list(output_parts)
        self._params: dict[int, dict[int, HloInstruction]] = {}

    # -- construction ---------------------------------------------------------------------------
    @staticmethod
    def _part(instr: HloInstruction) -> _Part:
        if instr.opcode == "fusion":
            return _Part(instr, instr.attrs["calls"])
        return _Part(instr, None)

    @classmethod
    def for_instruction(cls, instr: HloInstruction) -> FusionAdaptor:
        part = cls._part(instr)
        return cls([part], [part])

    @classmethod
    def for_computation(cls, computation: HloComputation) -> FusionAdaptor:
        part = _Part(None, computation)
        return cls([part], [part])

    @classmethod
    def for_producer_consumer(cls, producer: HloInstruction, consumer: HloInstruction, *,
                              multi_output: bool = False) -> FusionAdaptor:
        p, c = cls._part(producer), cls._part(consumer)
        return cls([p, c], [c, p] if multi_output else [c])

    @classmethod
    def for_siblings(cls, first: HloInstruction, second: HloInstruction) -> FusionAdaptor:
        a, b = cls._part(first), cls._part(second)
        return cls([a, b], [a, b])

    # -- queries --------------------------------------------------------------------------------
    def _part_of(self, node: HloInstruction) -> _Part | None:
        part = self._by_comp.get(id(node.parent))
        if part is not None:
            return part
        return self._by_instr.get(id(node))

    def contains(self, node: HloInstruction) -> bool:
        part = self._part_of(node)
        if part is None:
            return False
        if part.comp is None:
            return True
        return node.opcode != "parameter" and not (node is part.comp.root and node.opcode == "tuple")

    def _resolve_outer(self, value: HloInstruction) -> HloInstruction | None:
        """The node that computes a top-level value inside this fusion, or None if it comes from
        outside: a member instruction's single output, or a get-tuple-element of a member's tuple."""
        part = self._fused_instrs.get(id(value))
        if part is not None:
            return part.outputs[0] if len(part.outputs) == 1 and not _is_tuple_root(part) else None
        if value.opcode == "get-tuple-element":
            part = self._fused_instrs.get(id(value.operand(0)))
            if part is not None and _is_tuple_root(part):
                root = part.comp.root
                return _follow_tuple(root, value.attrs["index"])
        return None

    def operand(self, node: HloInstruction, i: int) -> HloInstruction | None:
        """Operand `i` of `node` as a node of the fusion, or None when it comes from outside."""
        part = self._part_of(node)
        op = node.operands[i]
        if part is None:
            return None
        if part.comp is not None:
            if op.opcode == "parameter" and op.parent is part.comp:
                if part.instr is None:
                    return None
                return self._resolve_outer(part.instr.operands[op.parameter_number])
            return op
        return self._resolve_outer(op)

    def operands(self, node: HloInstruction) -> list[HloInstruction | None]:
        return [self.operand(node, i) for i in range(len(node.operands))]

    def users(self, node: HloInstruction) -> list[HloInstruction]:
        """The users of `node` inside the fusion (a root tuple is not a user)."""
        part = self._part_of(node)
        if part is None:
            return []
        result: list[HloInstruction] = []
        if part.comp is not None:
            root = part.comp.root
            result = [u for u in node.users if not (u is root and u.opcode == "tuple") and u.parent is part.comp]
        if part.instr is not None and len(self._parts) > 1:
            for index, out in enumerate(part.outputs):
                if out is node:
                    result.extend(self._users_across(part, index))
        seen: set[int] = set()
        return [u for u in result if not (id(u) in seen or seen.add(id(u)))]

    def _users_across(self, part: _Part, index: int) -> list[HloInstruction]:
        """Nodes of other members that read output `index` of `part`."""
        found: list[HloInstruction] = []
        tuple_root = _is_tuple_root(part)
        for other in self._parts:
            if other is part or other.instr is None:
                continue
            for j, outer in enumerate(other.instr.operands):
                reads = (outer is part.instr and not tuple_root) or (
                    tuple_root and outer.opcode == "get-tuple-element" and outer.operand(0) is part.instr
                    and _follow_tuple(part.comp.root, outer.attrs["index"]) is part.outputs[index])
                if not reads:
                    continue
                if other.comp is None:
                    found.append(other.instr)
                else:
                    param = self._parameter(other.comp, j)
                    root = other.comp.root
                    found.extend(u for u in param.users if not (u is root and u.opcode == "tuple"))
        return found

    def _parameter(self, comp: HloComputation, number: int) -> HloInstruction:
        params = self._params.get(id(comp))
        if params is None:
            params = {i.parameter_number: i for i in comp.instructions if i.opcode == "parameter"}
            self._params[id(comp)] = params
        return params[number]

    def roots(self) -> list[HloInstruction]:
        """The fusion's outputs: the output members' roots, parameters resolved through members."""
        result: list[HloInstruction] = []
        seen: set[int] = set()
        for part in self._output_parts:
            for out in part.outputs:
                node = out
                if part.comp is not None and out.opcode == "parameter" and part.instr is not None:
                    node = self._resolve_outer(part.instr.operands[out.parameter_number]) or out
                if id(node) not in seen:
                    seen.add(id(node))
                    result.append(node)
        return result

    def instructions(self) -> Iterator[HloInstruction]:
        """Every node of the fusion (fused instructions of member fusions, member ops)."""
        for part in self._parts:
            if part.comp is None:
                yield part.instr
                continue
            for instr in part.comp.instructions:
                if self.contains(instr):
                    yield instr

    def parameters(self) -> list[HloInstruction]:
        """The values the fusion reads from outside (distinct), in member order."""
        result: list[HloInstruction] = []
        seen: set[int] = set()
        for part in self._parts:
            if part.instr is None:
                outer_values = list(part.comp.parameters)
            else:
                outer_values = [op for op in part.instr.operands if self._resolve_outer(op) is None]
            for value in outer_values:
                if id(value) not in seen:
                    seen.add(id(value))
                    result.append(value)
        return result

    @property
    def member_instructions(self) -> list[HloInstruction]:
        """The top-level instructions this fusion is made of."""
        return [p.instr for p in self._parts if p.instr is not None]


def _is_tuple_root(part: _Part) -> bool:
    return part.comp is not None and part.comp.root.opcode == "tuple"


def _follow_tuple(root: HloInstruction, index: int) -> HloInstruction:
    return root.operand(index)
