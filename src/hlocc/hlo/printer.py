"""Canonical HLO text. `parse_hlo(print_module(m))` is structurally equal to `m` (see
`structural_fingerprint`). Computations print callees first, the entry last, as XLA does."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hlocc.hlo.attribute_syntax import attribute_kind, format_attribute_value
from hlocc.hlo.literals import format_literal

if TYPE_CHECKING:
    from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule

_LARGE_CONSTANT = 1000


def print_module(module: HloModule, *, print_metadata: bool = True, elide_large_constants: bool = False) -> str:
    header = f"HloModule {module.name}"
    attrs = []
    for key, value in module.header_attrs.items():
        attrs.append(f"{key}={format_attribute_value('bool', value) if isinstance(value, bool) else value}")
    if module.input_output_alias:
        attrs.append("input_output_alias=" + _alias_str(module.input_output_alias))
    if attrs:
        header += ", " + ", ".join(attrs)
    comments = [f"// guard: {g}" for g in module.guards] + [f"// fact: {f}" for f in module.shape_facts]
    parts = ["\n".join([header] + comments)]
    if module.stack_frame_tables:
        parts.append(module.stack_frame_tables)
    order = module.computation_post_order()
    order = [c for c in order if c is not module.entry] + [module.entry]
    for comp in order:
        parts.append(print_computation(comp, print_metadata=print_metadata,
                                       elide_large_constants=elide_large_constants))
    return "\n\n".join(parts) + "\n"


def _alias_str(aliases) -> str:
    def idx(t):
        return "{" + ", ".join(map(str, t)) + "}"

    items = [f"{idx(o)}: ({p}, {idx(pi)}, {kind})" for o, p, pi, kind in aliases]
    return "{ " + ", ".join(items) + " }"


def print_computation(comp: HloComputation, **kwargs) -> str:
    head = ("ENTRY " if comp.is_entry else "") + comp.name + " {"
    lines = [head]
    for instr in _instruction_order(comp):
        prefix = "ROOT " if instr is comp.root else ""
        lines.append("  " + prefix + print_instruction(instr, **kwargs))
    lines.append("}")
    text = "\n".join(lines)
    if comp.execution_thread:
        text += f', execution_thread="{comp.execution_thread}"'
    return text


def _instruction_order(comp: HloComputation) -> list[HloInstruction]:
    """The stored order when it is already a valid def-before-use order, else post order."""
    seen: set[int] = set()
    for instr in comp.instructions:
        if any(id(op) not in seen for op in instr.operands):
            return comp.post_order()
        seen.add(id(instr))
    return comp.instructions


def print_instruction(instr: HloInstruction, *, print_metadata: bool = True,
                      elide_large_constants: bool = False) -> str:
    if instr.opcode == "constant":
        if elide_large_constants and not instr.shape.is_tuple and instr.shape.num_elements > _LARGE_CONSTANT:
            args = "{...}"
        else:
            args = format_literal(instr.literal, instr.shape)
    elif instr.opcode == "parameter":
        args = str(instr.parameter_number)
    else:
        args = ", ".join(op.name for op in instr.operands)
    opcode = instr.opcode
    if instr.wrapped_opcode:  # `custom-call-start` form of an async op
        opcode = instr.wrapped_opcode + opcode[len("async"):]
    text = f"{instr.name} = {instr.shape.to_string()} {opcode}({args})"
    for key, value in instr.attrs.items():
        if key == "metadata" and not print_metadata:
            continue
        text += f", {key}={format_attribute_value(attribute_kind(key), value)}"
    return text


def structural_fingerprint(module: HloModule) -> list:
    """A comparable summary of everything the IR holds: computations, instructions (opcode, name,
    shape with layout, operand positions, attributes, literal bytes) — used for round-trip tests."""
    out = []
    comps = sorted(module.computations, key=lambda c: (c.is_entry, c.name))
    for comp in comps:
        index = {id(i): n for n, i in enumerate(_instruction_order(comp))}
        instrs = []
        for instr in _instruction_order(comp):
            attrs = {}
            for k, v in instr.attrs.items():
                kind = attribute_kind(k)
                attrs[k] = format_attribute_value(kind, v) if kind.startswith("computation") else v
            lit = None
            if instr.literal is not None:
                lit = format_literal(instr.literal, instr.shape)
            operands = tuple(index[id(o)] for o in instr.operands)
            instrs.append((instr.name, instr.opcode, instr.shape.to_string(), operands,
                           tuple(sorted((k, str(v)) for k, v in attrs.items())), lit, instr.parameter_number,
                           instr is comp.root))
        out.append((comp.name if not comp.name.startswith("_inline.") else "_inline", comp.is_entry, instrs))
    return out


def computation_fingerprint(computation: HloComputation) -> str:
    """A hash of what a computation computes, independent of instruction and computation names:
    opcodes, shapes with layouts, operand positions, attributes and literals, and the same for every
    computation it calls. Two fusions with equal fingerprints compile to the same kernel."""
    import hashlib

    h = hashlib.sha256()
    seen: dict[int, int] = {}

    def visit(comp: HloComputation) -> int:
        if id(comp) in seen:
            return seen[id(comp)]
        order = comp.post_order()
        index = {id(i): n for n, i in enumerate(order)}
        lines = []
        for instr in order:
            attrs = []
            for k, v in sorted(instr.attrs.items()):
                if k == "metadata":
                    continue
                kind = attribute_kind(k)
                if kind.startswith("computation"):
                    called = v if isinstance(v, (list, tuple)) else [v]
                    attrs.append(f"{k}=" + ",".join(str(visit(c)) for c in called))
                else:
                    attrs.append(f"{k}={format_attribute_value(kind, v)}")
            lit = format_literal(instr.literal, instr.shape) if instr.literal is not None else ""
            operands = ",".join(str(index[id(o)]) for o in instr.operands)
            lines.append(f"{instr.opcode}|{instr.shape.to_string()}|{operands}|{';'.join(attrs)}|{lit}|"
                         f"{instr.parameter_number}|{instr is comp.root}")
        h.update("\n".join(lines).encode())
        seen[id(comp)] = len(seen)
        return seen[id(comp)]

    visit(computation)
    return h.hexdigest()
