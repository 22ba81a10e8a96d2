"""The HLO text parser: everything XLA and JAX print, into an HloModule.

Accepts unoptimized dumps (`jax.jit(f).lower(...).as_text(dialect="hlo")`), optimized and scheduled
dumps (`compiled.as_text()`: `%` names, metadata, backend_config, sharding, frontend_attributes,
input_output_alias, the FileNames/FunctionNames/FileLocations/StackFrames tables), and XLA's
header-less forms (xla_facts.md §2.1): text starting with `ENTRY` or `name {` is a module without
header named `module_<entry>`; without `ENTRY` the last computation is the entry. The grammar of
attributes is the table in hlo/attribute_syntax.py. Errors are HloParseError with line:column.
"""

from __future__ import annotations

import re
import sys
from functools import partial

from hlocc.errors import HloError, HloParseError, SourceLocation
from hlocc.hlo.attribute_syntax import ATTRIBUTE_KINDS, GENERIC_ATTRIBUTES, parse_attribute_value
from hlocc.hlo.guards import parse_guard
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.literals import LiteralSyntaxError, parse_literal
from hlocc.hlo.opcodes import OPCODES, infer_shape
from hlocc.hlo.scanner import INT_RE, NAME_RE, Scanner
from hlocc.hlo.symbolic import parse_dim_expr
from hlocc.hlo.types import PRIMITIVE_TYPES, UNBOUNDED, Layout, Shape

_TYPE_RE = re.compile(r"(" + "|".join(sorted(PRIMITIVE_TYPES, key=len, reverse=True)) + r")\[")
_PLAIN_SHAPE_RE = re.compile(r"[a-z][a-z0-9]*\[[0-9,]*\](?:\{[0-9,]*\})?")
"""The text of a static array shape with at most a plain layout (`f32[8,128]{1,0}`): the common case,
which `_Parser.shape` parses once per distinct text of a module."""
_SYMBOL_START = frozenset("(_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_ATTR_NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-]*)\s*=")
_STACK_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")
_HEADER_ATTRS = {
    "is_scheduled", "replica_count", "num_partitions", "input_output_alias", "buffer_donor",
    "alias_passthrough_params", "entry_computation_layout", "frontend_attributes",
    "allow_spmd_sharding_propagation_to_parameters", "allow_spmd_sharding_propagation_to_output",
    "origin_recovery_table",
}


def parse_hlo(text: str, filename: str = "<hlo>") -> HloModule:
    """Parse HLO module text. Raises HloParseError (with line:column and a caret) on bad input."""
    return _Parser(text.removeprefix("\ufeff"), filename).module()


def read_text_file(path, what: str = "an HLO text file") -> str:
    """The text of a UTF-8 file (its byte-order mark dropped; '-' reads stdin), or an HloError naming
    the file and the cause: every tool reads its input through this."""
    try:
        if str(path) == "-":
            return sys.stdin.read().removeprefix("\ufeff")
        with open(path, encoding="utf-8") as f:
            return f.read().removeprefix("\ufeff")
    except OSError as e:
        raise HloError(f"cannot read '{path}': {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise HloError(f"'{path}' is not {what} (not UTF-8)") from None


def parse_hlo_file(path) -> HloModule:
    return parse_hlo(read_text_file(path), str(path))


def parse_shape(text: str) -> Shape:
    p = _Parser(text, "<shape>")
    shape = p.shape()
    if not p.s.at_end():
        raise p.s.expected("end of shape")
    return shape


def _source_location(scanner: Scanner, positions: dict[tuple[str, str], int], computation: str,
                     instruction: str) -> SourceLocation | None:
    """Where the text defines an instruction's name (a verifier error's place), or None where it
    has no such instruction."""
    pos = positions.get((computation, instruction))
    return None if pos is None else scanner.source_location(pos)


class _Parser:
    def __init__(self, text: str, filename: str):
        self.s = Scanner(text, filename)
        self.module_obj: HloModule | None = None
        self._computations: dict[str, HloComputation] = {}
        # (instr, attribute name, [computation names], position) to resolve after all are parsed
        self._pending_calls: list[tuple[HloInstruction, str, list[str] | str, int]] = []
        self._anon = 0
        self._parameter_numbers: dict[int, set[int]] = {}
        self._shapes: dict[str, Shape] = {}  # plain shape text -> its Shape (shapes are immutable)
        self._positions: dict[tuple[str, str], int] = {}  # (computation, instruction) -> where its name is

    # -- module -------------------------------------------------------------------------------
    def module(self) -> HloModule:
        s = self.s
        if s.keyword("HloModule"):
            module = HloModule(s.name("a module name"))
            s.accept(":")  # XLA's lexer also takes `HloModule name:` (a name token ending in ':')
            self.module_obj = module
            self._header_attrs(module)
            self._stack_frame_tables(module)
        else:
            module = HloModule("")
            self.module_obj = module
        self._guards(module)
        if s.at_end():
            raise s.expected("a computation")
        while not s.at_end():
            comp = self.computation()
            if comp.name in self._computations:
                raise s.error(f"computation '{comp.name}' is defined twice", self._last_comp_pos)
            self._computations[comp.name] = comp
            module.add_computation(comp)
        self._resolve_calls()
        entries = [c for c in module.computations if c.is_entry]
        if len(entries) > 1:
            raise HloParseError("more than one ENTRY computation", line=1, column=1,
                                source_line=s.text.split("\n", 1)[0], filename=s.filename)
        if not entries:
            module.computations[-1].is_entry = True
        module.entry = next(c for c in module.computations if c.is_entry)
        if not module.name:
            module.name = f"module_{module.entry.name}"
        module.source_location = partial(_source_location, s, self._positions)
        return module

    def _guards(self, module: HloModule) -> None:
        """The `// guard:` lines the printer writes after the header (hlo/guards.py)."""
        for m in re.finditer(r"^[ \t]*// guard: ([^\n]*)", self.s.text, re.MULTILINE):
            try:
                module.guards.append(parse_guard(m.group(1).rstrip()))
            except HloError as e:
                raise self.s.error(str(e), m.start(1)) from None

    def _header_attrs(self, module: HloModule) -> None:
        s = self.s
        while s.accept(","):
            s.skip()
            pos = s.pos
            name = s.name("a module attribute")
            if name not in _HEADER_ATTRS:
                raise s.error(f"unknown module attribute '{name}'", pos)
            s.expect("=")
            if name == "input_output_alias":
                module.input_output_alias = self._input_output_alias()
            elif name in ("is_scheduled", "alias_passthrough_params"):
                module.header_attrs[name] = self._bool()
            elif name in ("replica_count", "num_partitions"):
                module.header_attrs[name] = s.integer()
            else:
                module.header_attrs[name] = s.raw_balanced()

    def _input_output_alias(self) -> list:
        """`{ {0}: (0, {}, may-alias), {1, 2}: (1, {0}) }` → [(out_index, param, param_index, kind)]."""
        s = self.s
        out = []
        s.expect("{")
        while not s.accept("}"):
            if out:
                s.expect(",")
            out_index = self._index_list()
            s.expect(":")
            s.expect("(")
            param = s.integer("a parameter number")
            s.expect(",")
            param_index = self._index_list()
            kind = "may-alias"
            if s.accept(","):
                kind = s.name("may-alias or must-alias")
                if kind not in ("may-alias", "must-alias"):
                    raise s.error(f"unknown alias kind '{kind}'")
            s.expect(")")
            out.append((out_index, param, param_index, kind))
        return out

    def _index_list(self) -> tuple[int, ...]:
        s = self.s
        s.expect("{")
        values = []
        while not s.accept("}"):
            if values:
                s.expect(",")
            values.append(s.integer())
        return tuple(values)

    def _stack_frame_tables(self, module: HloModule) -> None:
        s = self.s
        start = None
        while True:
            s.skip()
            word = s.peek_name()
            if word not in _STACK_TABLES:
                break
            start = s.pos if start is None else start
            s.keyword(word)
            while s.peek_match(INT_RE):
                s.integer()
                if s.peek() == '"':
                    s.string()
                else:
                    s.raw_balanced()
        if start is not None:
            module.stack_frame_tables = s.text[start:s.pos].strip()

    # -- computations -------------------------------------------------------------------------
    def computation(self) -> HloComputation:
        s = self.s
        s.skip()
        self._last_comp_pos = s.pos
        is_entry = s.keyword("ENTRY")
        name = s.name("a computation name")
        comp = HloComputation(name, is_entry=is_entry)
        if s.peek() == "(":
            self._signature()
        self._body(comp)
        if s.accept(","):
            pos = s.pos
            if s.name() != "execution_thread":
                raise s.error("expected 'execution_thread' after a computation", pos)
            s.expect("=")
            comp.execution_thread = s.string()
        return comp

    def _signature(self) -> None:
        """`(p0: f32[2], p1: s32[]) -> f32[2]`: checked against the body by the verifier; skipped."""
        s = self.s
        s.expect("(")
        first = True
        while not s.accept(")"):
            if not first:
                s.expect(",")
            first = False
            s.name("a parameter name")
            s.expect(":")
            self.shape()
        s.expect("->")
        self.shape()

    def _body(self, comp: HloComputation) -> None:
        s = self.s
        s.expect("{", "'{' to start the computation body")
        names: dict[str, HloInstruction] = {}
        pending: list[tuple[HloInstruction, list[tuple[str, int]]]] = []
        root = None
        while not s.accept("}"):
            if s.at_end():
                raise s.expected("'}' to close computation '" + comp.name + "'")
            instr, operand_refs, is_root = self.instruction(comp, names)
            pending.append((instr, operand_refs))
            if is_root:
                if root is not None:
                    raise s.error(f"computation '{comp.name}' has more than one ROOT")
                root = instr
        for instr, refs in pending:
            for name, pos in refs:
                if name not in names:
                    raise s.error(f"instruction '{instr.name}' uses undefined operand '{name}'", pos)
                instr.operands.append(names[name])
        if not comp.instructions:
            raise s.error(f"computation '{comp.name}' has no instructions")
        for instr in comp.instructions:
            for op in instr.operands:
                op.users.append(instr)
        comp.root = root if root is not None else comp.instructions[-1]
        self._infer_missing_shapes(comp)

    def _infer_missing_shapes(self, comp: HloComputation) -> None:
        missing = [i for i in comp.instructions if i.shape is None]
        if not missing:
            return
        for instr in comp.post_order():
            if instr.shape is None:
                instr.shape = infer_shape(instr)

    # -- instructions -------------------------------------------------------------------------
    def instruction(self, comp: HloComputation, names: dict) -> tuple[HloInstruction, list, bool]:
        s = self.s
        is_root = s.keyword("ROOT")
        s.skip()
        name_pos = s.pos
        name = s.name("an instruction name")
        if name in names:
            raise s.error(f"instruction name '{name}' is defined twice in computation '{comp.name}'", name_pos)
        s.expect("=", f"'=' after instruction name '{name}'")
        shape = None
        if not self._at_opcode():
            shape = self.shape()
        instr, refs = self._op_and_operands(name, shape, comp, names)
        self._attributes(instr)
        if instr.opcode == "parameter":
            taken = self._parameter_numbers.setdefault(id(comp), set())
            if instr.parameter_number in taken:
                raise s.error(f"parameter number {instr.parameter_number} is used twice in '{comp.name}'", name_pos)
            taken.add(instr.parameter_number)
        names[name] = instr
        self._positions[(comp.name, name)] = name_pos
        return instr, refs, is_root

    def _at_opcode(self) -> bool:
        """After `=`: is the next token an opcode (shape omitted) rather than a shape?"""
        s = self.s
        if s.peek() == "(" or s.peek(2) == "b(" or s.peek_match(_TYPE_RE):
            return False
        word = s.peek_name()
        return word is not None and s.text[s.pos + len(word):s.pos + len(word) + 1] == "("

    def _opcode(self) -> tuple[str, str | None]:
        """The opcode and, for the `<op>-start/-update/-done` async form, the wrapped opcode."""
        s = self.s
        s.skip()
        pos = s.pos
        word = s.name("an opcode")
        if word in OPCODES:
            return word, None
        for suffix in ("-start", "-update", "-done"):
            if word.endswith(suffix) and word[: -len(suffix)] in OPCODES:
                return "async" + suffix, word[: -len(suffix)]
        raise s.error(f"unknown opcode '{word}'", pos)

    def _op_and_operands(self, name, shape, comp, names) -> tuple[HloInstruction, list]:
        s = self.s
        op_pos = s.pos
        opcode, wrapped = self._opcode()
        instr = HloInstruction(name, opcode, shape)
        instr.wrapped_opcode = wrapped
        s.expect("(", f"'(' after opcode '{opcode}'")
        refs: list[tuple[str, int]] = []
        if opcode == "constant":
            self._constant_literal(instr)
        elif opcode == "parameter":
            instr.parameter_number = s.integer("a parameter number")
            s.expect(")")
        else:
            while not s.accept(")"):
                if refs:
                    s.expect(",", "',' or ')' in the operand list")
                refs.append(self._operand(comp, names))
        if shape is None and opcode in ("constant", "parameter"):
            raise s.error(f"instruction '{name}': a {opcode} needs an explicit shape", op_pos)
        info = OPCODES[opcode]
        if info.arity is not None and opcode not in ("constant", "parameter") and len(refs) != info.arity:
            raise s.error(f"'{opcode}' takes {info.arity} operand{'s' if info.arity != 1 else ''}, "
                          f"but instruction '{name}' has {len(refs)}", op_pos)
        comp.add_instruction(instr)
        return instr, refs

    def _operand(self, comp, names) -> tuple[str, int]:
        s = self.s
        s.skip()
        if s.peek() == "(" or s.peek(2) == "b(" or s.peek_match(_TYPE_RE):
            shape = self.shape()
            s.skip()
            pos = s.pos
            m = s.peek_match(NAME_RE)
            if m is not None and s.text.startswith("(", m.end()):
                return self._nested_instruction(shape, comp, names), pos
            return s.name("an operand name"), pos
        pos = s.pos
        return s.name("an operand"), pos

    def _nested_instruction(self, shape, comp, names) -> str:
        """An operand written as an instruction without name, e.g. `add(f32[] constant(1), x)`."""
        self._anon += 1
        name = f"__nested.{self._anon}"
        instr, refs = self._op_and_operands(name, shape, comp, names)
        for ref, pos in refs:
            if ref not in names:
                raise self.s.error(f"nested instruction uses undefined operand '{ref}'", pos)
            instr.operands.append(names[ref])
        # operands were appended directly; users are wired when the body is finished
        names[name] = instr
        return name

    def _constant_literal(self, instr: HloInstruction) -> None:
        s = self.s
        s.skip()
        start = s.pos
        depth = 1
        i = start
        while i < len(s.text) and depth:
            c = s.text[i]
            depth += c == "("
            depth -= c == ")"
            i += 1
        if depth:
            raise s.error("unterminated constant literal", start)
        text = s.text[start:i - 1]
        if instr.shape is None:
            raise s.error(f"constant '{instr.name}' has no shape: a literal is read against its shape "
                          "(write e.g. 'f32[2] constant({1, 2})')", start)
        try:
            instr.literal = parse_literal(text, instr.shape)
        except LiteralSyntaxError as e:
            raise s.error(str(e), start + e.offset) from None
        if "..." in text and self.module_obj is not None:
            self.module_obj.elided_constants.append(instr.name)
        s.pos = i

    def _attributes(self, instr: HloInstruction) -> None:
        s = self.s
        while s.peek() == ",":
            save = s.pos
            s.accept(",")
            s.skip()
            pos = s.pos
            m = _ATTR_NAME_RE.match(s.text, s.pos)
            if not m:
                s.pos = save
                raise s.expected("an attribute 'name=value'")
            name = m.group(1)
            s.pos = m.end()
            if name in instr.attrs:
                raise s.error(f"attribute '{name}' is given twice on '{instr.name}'", pos)
            kind = ATTRIBUTE_KINDS.get(name) or GENERIC_ATTRIBUTES.get(name)
            if kind is None:
                raise s.error(f"unknown attribute '{name}' on instruction '{instr.name}' ({instr.opcode})", pos)
            if kind in ("computation", "computations"):
                s.skip()
                ref_pos = s.pos
                self._pending_calls.append((instr, name, self._computation_refs(kind), ref_pos))
                continue
            value_pos = s.pos
            try:
                instr.attrs[name] = parse_attribute_value(kind, s, self)
            except ValueError as e:
                raise s.error(f"bad value for attribute '{name}': {e}", value_pos) from None

    def _computation_refs(self, kind: str):
        s = self.s
        if kind == "computation":
            if s.peek() == "{":
                return self._inline_computation()
            return s.name("a computation name")
        names = []
        s.expect("{")
        while not s.accept("}"):
            if names:
                s.expect(",")
            names.append(s.name("a computation name"))
        return names

    def _inline_computation(self) -> str:
        self._anon += 1
        comp = HloComputation(f"_inline.{self._anon}")
        self._body(comp)
        self._computations[comp.name] = comp
        self.module_obj.add_computation(comp)
        return comp.name

    def _resolve_calls(self) -> None:
        for instr, attr, ref, pos in self._pending_calls:
            refs = [ref] if isinstance(ref, str) else ref
            comps = []
            for name in refs:
                if name not in self._computations:
                    raise self.s.error(f"instruction '{instr.name}' calls undefined computation '{name}'", pos)
                comps.append(self._computations[name])
            instr.attrs[attr] = comps[0] if isinstance(ref, str) else tuple(comps)

    def _bool(self) -> bool:
        s = self.s
        if s.keyword("true"):
            return True
        if s.keyword("false"):
            return False
        raise s.expected("true or false")

    # -- shapes -------------------------------------------------------------------------------
    def shape(self) -> Shape:
        """A shape. A plain one (`_PLAIN_SHAPE_RE`, not followed by more layout) is parsed once per
        distinct text and shared: a module repeats a few shapes on every instruction, and parsing
        them was half of parsing the 6800-op probe."""
        s = self.s
        s.skip()
        m = _PLAIN_SHAPE_RE.match(s.text, s.pos)
        if m is None:
            return self._shape()
        text, end = m.group(), m.end()
        after = s.text[end:end + 1]
        if after == "{" or (text[-1] != "}" and (after.isspace() or after == "/")):
            return self._shape()  # a layout may follow (after blanks or a comment), or one not plain
        shape = self._shapes.get(text)
        if shape is not None:
            s.pos = end
            return shape
        shape = self._shape()
        if s.pos == end:
            self._shapes[text] = shape
        return shape

    def _shape(self) -> Shape:
        s = self.s
        s.skip()
        if s.accept("("):
            elems = []
            while not s.accept(")"):
                if elems:
                    s.expect(",", "',' or ')' in a tuple shape")
                elems.append(self.shape())
            return Shape.tuple(elems)
        if s.peek(2) == "b(":
            s.expect("b(")
            inner = self.shape()
            s.expect(")", "')' to close a buffer shape")
            return inner.as_buffer()
        m = s.match(_TYPE_RE)
        if not m:
            if s.keyword("token"):
                return Shape.token()
            raise s.expected("a shape")
        et = PRIMITIVE_TYPES[m.group(1)]
        dims, dynamic = [], []
        while not s.accept("]"):
            if dims:
                s.expect(",", "',' or ']' in shape dimensions")
            if s.accept("?"):
                dims.append(self._symbolic_dim() if s.text[s.pos:s.pos + 1] in _SYMBOL_START else UNBOUNDED)
                dynamic.append(True)
            elif s.accept("<="):
                dims.append(s.integer("a dimension bound"))
                dynamic.append(True)
            else:
                pos = s.pos
                d = s.integer("a dimension size")
                if d < 0:
                    raise s.error(f"negative dimension size {d}", pos)
                dims.append(d)
                dynamic.append(False)
        layout = None
        s.skip()
        if s.text.startswith("{", s.pos) and re.match(r"\{\s*[\d:}]", s.text[s.pos:s.pos + 64]):
            layout = self._layout(len(dims))
        return Shape.array(et, dims, layout, dynamic)

    def _symbolic_dim(self):
        """A symbolic size after `?`: a variable name, or a parenthesized expression (types.py)."""
        s = self.s
        start = s.pos
        if s.text[start] == "(":
            depth, i = 0, start
            while i < len(s.text):
                depth += (s.text[i] == "(") - (s.text[i] == ")")
                i += 1
                if depth == 0:
                    break
            text = s.text[start + 1:i - 1]
        else:
            i = start
            while i < len(s.text) and (s.text[i].isalnum() or s.text[i] == "_"):
                i += 1
            text = s.text[start:i]
        try:
            value = parse_dim_expr(text)
        except HloError as e:
            raise s.error(str(e), start) from None
        s.pos = i
        return value

    def _layout(self, rank: int) -> Layout:
        s = self.s
        s.skip()
        start = s.pos
        s.expect("{")
        order = []
        while s.peek() not in ("}", ":"):
            if order:
                s.expect(",", "',' in a layout")
            order.append(s.integer("a layout dimension"))
        extra = ""
        if s.accept(":"):
            depth = 0
            i = s.pos
            while i < len(s.text) and not (s.text[i] == "}" and depth == 0):
                depth += s.text[i] == "("
                depth -= s.text[i] == ")"
                i += 1
            extra = s.text[s.pos:i].strip()
            s.pos = i
        s.expect("}")
        if order and sorted(order) != list(range(rank)):
            raise s.error(f"layout {{{','.join(map(str, order))}}} is not a permutation of the {rank} dimensions",
                          start)
        return Layout(tuple(order), extra)
