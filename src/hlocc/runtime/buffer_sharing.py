"""May an instruction write an output into the buffer of one of its operands?

Two kinds of sharing, as in XLA (alias_info.cc GetInPlaceInputOutputPairs,
HloDataflowAnalysis::CanShareOperandBufferWithUser, gpu/buffer_sharing.cc):

- **In-place pairs** (`in_place_pairs`): ops that write only part of an output, the rest being an
  operand's content: dynamic-update-slice (operand 0), scatter (operands 0..n-1), a fusion whose
  root (through bitcasts) is one of those with its base a fusion parameter, and the
  `output_to_operand_aliasing` of fusions and custom calls. Where buffer assignment cannot give the
  output the operand's buffer, the runtime copies the operand into the output first
  (`BufferAssignment.copies_before`); XLA's copy insertion does the same with HLO copies.
- **Operand reuse** (optional): an elementwise op, or a fusion whose every path from the parameter
  to the output is elementwise (or bitcast, or the exact slice a root dynamic-update-slice writes),
  reads each element of the operand only in the iteration that writes the same element of the
  output, so the output may overwrite a dying operand. `copy` never shares: it exists to make a
  distinct buffer.

The operand must also *die* at the instruction; liveness is alias_analysis.py's business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.types import Shape
from hlocc.runtime.dataflow import ShapeIndex, is_bitcast, leaf_indices, subshape


@dataclass(frozen=True)
class InPlacePair:
    """Output leaf `output_index` is operand `operand_number`'s leaf `operand_index`, updated in place."""

    output_index: ShapeIndex
    operand_number: int
    operand_index: ShapeIndex = ()


_ALIAS_ENTRY_RE = re.compile(r"\{([\d,\s]*)\}\s*:\s*\(\s*(\d+)\s*,\s*\{([\d,\s]*)\}")


def _ints(text: str) -> ShapeIndex:
    return tuple(int(t) for t in text.replace(" ", "").split(",") if t)


def output_to_operand_aliasing(instr: HloInstruction) -> list[InPlacePair]:
    """`output_to_operand_aliasing={{1}: (0, {}), ...}` of a fusion or custom call."""
    raw = instr.attrs.get("output_to_operand_aliasing")
    if raw is None:
        return []
    return [InPlacePair(_ints(out), int(operand), _ints(op_index))
            for out, operand, op_index in _ALIAS_ENTRY_RE.findall(str(raw))]


def _skip_bitcasts(instr: HloInstruction) -> HloInstruction:
    while is_bitcast(instr):
        instr = instr.operands[0]
    return instr


def _num_scatter_operands(scatter: HloInstruction) -> int:
    return (len(scatter.operands) - 1) // 2


def _fusion_outputs(fusion: HloInstruction) -> list[tuple[ShapeIndex, HloInstruction]]:
    root = fusion.fused_computation.root
    if root.opcode == "tuple":
        return [((i,), op) for i, op in enumerate(root.operands)]
    return [((), root)]


def _fusion_in_place_pairs(fusion: HloInstruction) -> list[InPlacePair]:
    pairs = []
    for out_index, output in _fusion_outputs(fusion):
        hero = _skip_bitcasts(output)
        if hero.opcode == "dynamic-update-slice":
            bases = [(out_index, hero.operands[0])]
        elif hero.opcode == "scatter" and not hero.shape.is_tuple:
            bases = [(out_index, hero.operands[0])]
        elif hero.opcode == "scatter" and out_index == ():
            bases = [((i,), hero.operands[i]) for i in range(_num_scatter_operands(hero))]
        else:
            continue
        for index, base in bases:
            base = _skip_bitcasts(base)
            if base.opcode != "parameter":
                continue
            operand = fusion.operands[base.parameter_number]
            if sum(1 for o in fusion.operands if o is operand) == 1:
                pairs.append(InPlacePair(index, base.parameter_number))
    return pairs


def in_place_pairs(instr: HloInstruction) -> list[InPlacePair]:
    """The output leaves `instr` updates in place (see the module docstring)."""
    op = instr.opcode
    if op == "dynamic-update-slice":
        return [InPlacePair((), 0)]
    if op == "scatter":
        n = _num_scatter_operands(instr)
        return [InPlacePair(() if n == 1 else (i,), i) for i in range(n)]
    pairs = _fusion_in_place_pairs(instr) if op == "fusion" else []
    if op in ("fusion", "custom-call"):
        pairs += [p for p in output_to_operand_aliasing(instr) if p not in pairs]
    return pairs


def same_storage(a: Shape, b: Shape) -> bool:
    """Same bytes in the same element order: equal dims, element width and layout."""
    return (a.dims == b.dims and a.element_type.byte_size == b.element_type.byte_size
            and a.minor_to_major == b.minor_to_major)


def _same_element_order(a: Shape, b: Shape) -> bool:
    """Logical element i of `a` and of `b` sit at the same byte offset: equal dims and layout, or
    (reshaped through bitcasts) both in the default row-major layout. An elementwise path between
    shapes whose layouts differ reads element i from another place than it writes it."""
    if a.dims == b.dims:
        return a.minor_to_major == b.minor_to_major
    default = lambda s: list(s.minor_to_major) == list(range(s.rank))[::-1]  # noqa: E731
    return default(a) and default(b)


def _is_elementwise_op(instr: HloInstruction) -> bool:
    info = OPCODES.get(instr.opcode)
    return info is not None and info.is_elementwise and instr.opcode != "copy"


def _elementwise_on(user: HloInstruction, operand: HloInstruction) -> bool:
    """Every read of `operand` by `user` is at the index `user` writes (XLA's IsElementwiseOnOperand)."""
    if user.opcode == "dynamic-update-slice":
        return all(k == 0 for k, o in enumerate(user.operands) if o is operand)
    return _is_elementwise_op(user)


def _fusion_can_share(fusion: HloInstruction, operand_number: int, output_index: ShapeIndex) -> bool:
    """Whether fusion output `output_index` may overwrite operand `operand_number` (after XLA's GPU
    FusionCanShareBufferHint, without its reduction-emitter exception): walk every use of the
    fused parameter; each must read element i only to write element i of this output."""
    operand = fusion.operands[operand_number]
    if operand.shape.is_tuple or sum(1 for o in fusion.operands if o is operand) != 1:
        return False
    out_shape = subshape(fusion.shape, output_index)
    if (out_shape.is_tuple or not out_shape.element_type.is_array_type
            or out_shape.num_elements != operand.shape.num_elements
            or out_shape.element_type.byte_size != operand.shape.element_type.byte_size):
        return False
    if not _same_element_order(operand.shape, out_shape):
        return False
    comp = fusion.fused_computation
    params = [p for p in comp.instructions if p.opcode == "parameter" and p.parameter_number == operand_number]
    if len(params) != 1:
        return False
    outputs = dict(_fusion_outputs(fusion))
    if output_index not in outputs:
        return False
    output = outputs[output_index]
    hero = _skip_bitcasts(output)
    found = False
    seen = {id(params[0])}
    queue = [params[0]]
    while queue:
        node = queue.pop()
        found = found or node is output
        for user in node.users:
            if id(user) not in seen:
                seen.add(id(user))
                queue.append(user)
            positions = [k for k, o in enumerate(user.operands) if o is node]
            if user is hero and user.opcode == "scatter":
                if len(positions) == 1 and positions[0] < _num_scatter_operands(user):
                    continue
                return False
            if (hero.opcode == "dynamic-update-slice" and user.opcode == "dynamic-slice"
                    and user.operands[0] is hero.operands[0] and user.shape == hero.operands[1].shape):
                # Reads exactly the window the root writes: each element is read before it is written.
                if user.shape.num_elements > 1 and user.operands[1:] != hero.operands[2:]:
                    return False
                continue
            if user.opcode == "tuple" or is_bitcast(user) or _elementwise_on(user, node):
                continue
            if user is hero and user.opcode == "dynamic-update-slice" and positions == [1]:
                continue
            return False
    if comp.root.opcode == "tuple" and not _is_elementwise_op(hero):
        # Another output reached from the parameter may be written in a different order.
        if any(o is not output and id(o) in seen for o in comp.root.operands):
            return False
    return found


class BufferSharing:
    """Which operand buffers each instruction may write its outputs into; answers are cached."""

    def __init__(self, reuse_operand_buffers: bool = True):
        self.reuse_operand_buffers = reuse_operand_buffers
        self._candidates: dict[tuple[HloInstruction, ShapeIndex], list[tuple[int, ShapeIndex]]] = {}
        self._fusion: dict[tuple[HloInstruction, int, ShapeIndex], bool] = {}

    def candidates(self, instr: HloInstruction, output_index: ShapeIndex) -> list[tuple[int, ShapeIndex]]:
        """Operand positions `(operand_number, operand_index)` that output leaf `output_index` may
        share, in-place pairs first."""
        key = (instr, output_index)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = self._find_candidates(instr, output_index)
        return found

    def can_share(self, instr: HloInstruction, output_index: ShapeIndex, operand_number: int,
                  operand_index: ShapeIndex) -> bool:
        if (operand_number, operand_index) not in self.candidates(instr, output_index):
            return False
        if instr.opcode != "fusion" or (output_index, operand_number) in self._aliasing_attr(instr):
            return True
        key = (instr, operand_number, output_index)
        if key not in self._fusion:
            self._fusion[key] = _fusion_can_share(instr, operand_number, output_index)
        return self._fusion[key]

    @staticmethod
    def _aliasing_attr(instr: HloInstruction) -> set[tuple[ShapeIndex, int]]:
        return {(p.output_index, p.operand_number) for p in output_to_operand_aliasing(instr)}

    def _find_candidates(self, instr: HloInstruction, output_index: ShapeIndex) -> list[tuple[int, ShapeIndex]]:
        found = [(p.operand_number, p.operand_index) for p in in_place_pairs(instr)
                 if p.output_index == output_index]
        if found or not self.reuse_operand_buffers:
            # An in-place output that cannot share its operand gets that operand copied in before the
            # op runs: it must not sit in the buffer of another operand the op still reads.
            return found
        out_shape = subshape(instr.shape, output_index)
        if _is_elementwise_op(instr):
            found += [(k, ()) for k, op in enumerate(instr.operands) if same_storage(op.shape, out_shape)]
        elif instr.opcode == "fusion":
            found += [(k, ()) for k, op in enumerate(instr.operands)
                      if not op.shape.is_tuple and op.shape.element_type.is_array_type
                      and leaf_indices(op.shape) == ((),)]
        unique = []
        for position in found:
            if position not in unique:
                unique.append(position)
        return unique
