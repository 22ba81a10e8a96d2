"""The StableHLO frontend: StableHLO text (pretty or generic form), a `jax.export.Exported` or a
parsed MLIR module → hlocc's HloModule, the same IR the HLO text parser builds for the module XLA
would convert it to.

    module = import_stablehlo(jax.jit(f).lower(x).as_text())
    hlocc.compile(module, backend="cpu")(x)

The walk: `@main` becomes the entry computation (one parameter per argument; one result is the
root, several a root tuple); every private function it calls (`func.call`) becomes a computation
called by an HLO `call`; every region (reducers, comparators, loop condition and body, branches)
becomes a sub-computation. Each op is converted by its entry in `stablehlo_ops.OP_CONVERSIONS`
(rules as data). A value of a multi-result op is a `get-tuple-element` of the op's tuple, made at
its first use. Values that a `while`/`case`/`if` region uses from the enclosing scope (MLIR
regions may capture them; HLO computations may not) are passed in explicitly: appended to the
loop's carried tuple, or packed as each branch's tuple operand, as XLA's converter does; captured
constants are made inside the region instead, and splat constants become a broadcast scalar, as
XLA's export prepares them.

Dynamic shapes (JAX's shape-polymorphic export): each `?` dimension of @main's arguments becomes
a symbolic size (hlo/symbolic.py) named by the dimension variable JAX passes for it (the
`jax.global_constant` argument of the function @main calls), and every other `?` is resolved from
the operands: by HLO shape inference, or from the values of shape tensors, which
frontends/dynamic_shapes.py tracks as symbolic sizes. A function is converted once per distinct
signature (operand shapes and dimension-variable values). `@shape_assertion`s become the module's
`guards`. Module and argument attributes (`mhlo.sharding`, `jax.result_info`, `mhlo.layout_mode`,
...) are ignored. jax is imported on first use only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hlocc.errors import HloError, HloVerifyError, UnsupportedError
from hlocc.frontends import mlir_support as ms
from hlocc.frontends.dynamic_shapes import (
    dimension_renaming,
    drop_settled_guards,
    entry_parameter_shapes,
    record_dimension_variable,
    record_sizes,
)
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.opcodes import infer_shape
from hlocc.hlo.types import Shape


def import_stablehlo(source: Any, filename: str = "<stablehlo>", *, verify: bool = True) -> HloModule:
    """Convert StableHLO (text, bytes, a `jax.export.Exported` or an `ir.Module`) into an HloModule.

    Raises UnsupportedError naming the op and its `file:line:col` for an op the frontend does not
    convert (and when jax is missing, naming the `[jax]` extra), HloParseError for text MLIR cannot
    parse, and HloVerifyError when `verify` and the result breaks an HLO shape rule."""
    mlir_module = ms.parse_module(source, filename)
    with mlir_module.context:
        module = _Importer(mlir_module, filename).run()
    if verify:
        from hlocc.hlo.verifier import verify_module

        verify_module(module)
    return module


def import_stablehlo_file(path) -> HloModule:
    """`import_stablehlo` of a file: StableHLO text (`.mlir`), MLIR bytecode or a portable artifact
    (`Exported.mlir_module_serialized`)."""
    from pathlib import Path

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise HloError(f"cannot read '{path}': {e.strerror}") from None
    if not data.startswith(_BYTECODE_MAGIC):
        try:
            data = data.decode()  # (mlir_support.parse_module drops a byte-order mark)
        except UnicodeDecodeError:
            raise HloError(f"'{path}' is neither StableHLO text nor MLIR bytecode") from None
    return import_stablehlo(data, str(path))


_BYTECODE_MAGIC = b"ML\xefR"
_MLIR_START = re.compile(r"\ufeff?\s*(?://[^\n]*\n\s*)*(?:module\b|#loc|func\.func\b|\"builtin\.module\")")


def is_stablehlo_text(text: str) -> bool:
    """Whether `text` is MLIR (StableHLO) rather than HLO text: it starts, after comments, with
    `module`, a `#loc` alias, `func.func` or the generic `"builtin.module"` (HLO text starts with
    `HloModule`, `ENTRY` or a computation name)."""
    return _MLIR_START.match(text) is not None


@dataclass
class Scope:
    """The MLIR values visible in one HLO computation: each maps to an instruction, or to
    (tuple instruction, index) until its get-tuple-element is made."""

    computation: HloComputation
    values: dict = field(default_factory=dict)
    # The known values of integer (and predicate) shape tensors: value → tuple of symbolic sizes.
    sizes: dict = field(default_factory=dict)
    # Why a shape tensor has no known value where the rules refused it: value → the cause's text
    # (a min/max of sizes the symbolic algebra cannot decide), for the error of the op that needs it.
    unknown_sizes: dict = field(default_factory=dict)
    # The known values of the block's returned shape tensors (None where unknown).
    returned_sizes: list = field(default_factory=list)


@dataclass
class OpContext:
    """What an op conversion sees: the op, its converted operands and result shape (a tuple
    shape for several results), and `add` to create instructions in the current computation."""

    importer: _Importer
    scope: Scope
    op: Any
    operands: list[HloInstruction]
    shape: Shape

    @property
    def name(self) -> str:
        return self.op.operation.name

    def add(self, opcode: str, operands=(), attrs=None, *, shape: Shape | None = None,
            literal: Any = None) -> HloInstruction:
        """A new instruction of `shape` (default: the op's result shape; inferred from the operands
        where that has a `?` no symbolic size replaced yet), named after its opcode."""
        shape = shape or self.shape
        instr = self.scope.computation.add(opcode, list(operands), attrs, shape=shape, name=opcode, literal=literal)
        if ms.unresolved(shape):
            try:
                instr.shape = infer_shape(instr)
            except HloVerifyError as e:
                raise self.unsupported(f"cannot infer the symbolic result shape of {opcode}: {e}") from None
            if ms.unresolved(instr.shape):
                what = f"custom-call '{attrs['custom_call_target']}'" if opcode == "custom-call" else opcode
                raise self.unsupported(f"the result shape {instr.shape} of {what} has a dimension no symbolic "
                                       "size was found for")
        return instr

    def sizes(self, index: int):
        """The symbolic values of operand `index` (a shape tensor), or None when not known."""
        return self.scope.sizes.get(self.op.operands[index])

    def region(self, index: int, **options) -> HloComputation:
        """The computation of the op's region `index` (options: see `_Importer.region`); captured
        values keep the symbolic shapes and shape-tensor values they have here."""
        return self.importer.region(self.op.regions[index], outer=self.scope, **options)

    def location(self) -> str:
        return self.importer.location(self.op)

    def unsupported(self, why: str) -> UnsupportedError:
        return UnsupportedError(f"{self.location()}: {self.name}: {why}")


class _Importer:
    """One import: the MLIR module's functions by name, the computations made of them so far and
    the call sites being converted (for locations)."""

    def __init__(self, mlir_module, filename: str, entry_rename: dict | None = None):
        self.mlir_module = mlir_module
        self.filename = filename
        self.entry_rename = entry_rename or {}  # entry dimension symbol → its expression (dimension_renaming)
        self.module = HloModule(_identifier(ms.string_attr(mlir_module.operation, "sym_name") or "stablehlo"))
        self.functions = {ms.string_attr(op, "sym_name"): op for op in mlir_module.body.operations
                          if op.operation.name == "func.func"}
        self.converted: dict[tuple, HloComputation] = {}
        self.returned_sizes: dict[int, list] = {}  # id(computation of a function) → its results' sizes
        self.dimension_variables: dict[str, object] = {}  # JAX's dimension variable → its symbolic value
        self._numbers = 0
        self._call_sites: list = []  # the func.call ops being converted, innermost last

    def run(self) -> HloModule:
        if "main" not in self.functions:
            raise HloError(f"{self.filename}: the StableHLO module has no @main function")
        try:
            self.function("main", is_entry=True)
        except HloError as e:
            failure = e
        else:
            failure = None
        rename = {} if self.entry_rename else dimension_renaming(self)
        if rename:  # (dimension variables are recorded at the call that passes them, before a failure)
            return _Importer(self.mlir_module, self.filename, rename).run()
        if failure is not None:
            raise failure
        drop_settled_guards(self.module)
        # Callees before callers, as XLA prints them; the entry comes last.
        self.module.computations[:] = self.module.computation_post_order()
        return self.module

    # -- functions and regions ------------------------------------------------------------------
    def function(self, name: str, *, is_entry: bool = False, arg_shapes=None, arg_sizes=None) -> HloComputation:
        """The computation of `func.func @name` for arguments of `arg_shapes` (default: the
        function's types; the entry's `?` dims get symbols) whose shape-tensor values are
        `arg_sizes`: converted once per such signature, later calls share it."""
        func = self.functions.get(name)
        if func is None:
            raise HloError(f"{self.filename}: call of undefined function @{name}")
        block = func.regions[0].blocks[0]
        args = list(block.arguments)
        if arg_shapes is None:
            arg_shapes = (entry_parameter_shapes(self, func, self.entry_rename) if is_entry
                          else [ms.to_shape(a.type) for a in args])
        arg_sizes = arg_sizes or [None] * len(args)
        key = (name, tuple(arg_shapes), tuple(arg_sizes))
        if key in self.converted:
            return self.converted[key]
        comp = self._computation(name, is_entry=is_entry)
        self.converted[key] = comp
        scope = Scope(comp)
        for i, (arg, shape, sizes) in enumerate(zip(args, arg_shapes, arg_sizes)):
            scope.values[arg] = self._parameter(comp, i, shape, f"Arg_{i}")
            if sizes is not None:
                scope.sizes[arg] = sizes
                record_dimension_variable(self, func, i, sizes)
        self._finish(comp, self.block(block, scope))
        self.returned_sizes[id(comp)] = scope.returned_sizes
        return comp

    def region(self, region, *, tuple_param: bool = False, captures=(), tuple_root: bool | None = None,
               return_captures: bool = False, arg_shapes=None, outer: Scope | None = None) -> HloComputation:
        """A sub-computation of a region. Block arguments become parameters, or with `tuple_param`
        elements of one tuple parameter followed by the `captures` (outer values the region uses).
        The returned values (then the captures, with `return_captures`) are the root: a tuple when
        `tuple_root`, or by default when there are several. Block arguments have `arg_shapes`
        (default: their types); captures the symbolic shapes and shape-tensor values they have in
        the `outer` scope (a `?` of an MLIR type alone has no symbol)."""
        comp = self._computation("region", numbered=True)
        block = region.blocks[0]
        scope = Scope(comp)
        args = list(block.arguments)
        if tuple_param:
            shapes = list(arg_shapes) if arg_shapes is not None else [ms.to_shape(a.type) for a in args]
            for v in captures:
                shapes.append(self.value(outer, v).shape if outer is not None else ms.to_shape(v.type))
                if outer is not None and outer.sizes.get(v) is not None:
                    scope.sizes[v] = outer.sizes[v]
            param = self._parameter(comp, 0, Shape.tuple(shapes), "arg_tuple")
            for i, value in enumerate(args + list(captures)):
                scope.values[value] = (param, i)
        else:
            for i, arg in enumerate(args):
                scope.values[arg] = self._parameter(comp, i, ms.to_shape(arg.type), f"Arg_{i}")
        self._sink_constants(region, scope)
        results = self.block(block, scope)
        if return_captures:
            results += [self.value(scope, v) for v in captures]
        self._finish(comp, results, force_tuple=bool(tuple_root))
        return comp

    def location(self, op) -> str:
        """`file:line:col` of `op`, or where its function was called from when the op has only a
        name location (JAX gives ops of private functions their primitive's name)."""
        for candidate in [op, *reversed(self._call_sites)]:
            text = ms.location_text(candidate.location, self.filename)
            if text != self.filename:
                return text
        return self.filename

    def call(self, call_op, name: str, arg_shapes=None, arg_sizes=None) -> HloComputation:
        """The computation of function @name, converted (once per signature) on behalf of `call_op`."""
        self._call_sites.append(call_op)
        try:
            return self.function(name, arg_shapes=arg_shapes, arg_sizes=arg_sizes)
        finally:
            self._call_sites.pop()

    def _sink_constants(self, region, scope: Scope) -> None:
        """Constants the region uses from the enclosing scope are made inside it (as XLA sinks
        them into control flow) rather than passed in."""
        from hlocc.frontends.stablehlo_ops import OP_CONVERSIONS

        for value in ms.used_from_above(region):
            if ms.is_constant(value):
                op = value.owner
                cx = OpContext(self, scope, op, [], ms.to_shape(value.type))
                scope.values[value] = OP_CONVERSIONS["stablehlo.constant"](cx)
                record_sizes(cx)  # a shape tensor's constant part (JAX's `[b, 4]` in a loop body)

    def _computation(self, name: str, *, is_entry: bool = False, numbered: bool = False) -> HloComputation:
        """A new computation of the module named `name`, or `name_N` when `numbered` or taken."""
        base = _identifier(name)
        taken = {c.name for c in self.module.computations}
        unique = f"{base}_{self._next_number()}" if numbered else base
        while unique in taken:
            unique = f"{base}_{self._next_number()}"
        return self.module.add_computation(HloComputation(unique, is_entry=is_entry))

    def _next_number(self) -> int:
        self._numbers += 1
        return self._numbers

    def _parameter(self, comp: HloComputation, number: int, shape: Shape, name: str) -> HloInstruction:
        instr = HloInstruction(self.module.unique_name(name), "parameter", shape, parameter_number=number)
        return comp.add_fresh(instr)

    def _finish(self, comp: HloComputation, results: list[HloInstruction], *, force_tuple: bool = False) -> None:
        if len(results) == 1 and not force_tuple:
            comp.root = results[0]
        else:
            comp.root = comp.add("tuple", results, shape=Shape.tuple([r.shape for r in results]), name="tuple")

    def block(self, block, scope: Scope) -> list[HloInstruction]:
        """Convert the ops of `block`; the converted operands of its terminator."""
        from hlocc.frontends.stablehlo_ops import OP_CONVERSIONS

        for op in block.operations:
            name = op.operation.name
            if name in ("func.return", "stablehlo.return"):
                scope.returned_sizes = [scope.sizes.get(v) for v in op.operands]
                return [self.value(scope, v) for v in op.operands]
            convert = OP_CONVERSIONS.get(name)
            if convert is None:
                loc = self.location(op)
                raise UnsupportedError(f"{loc}: StableHLO op '{name}' is not supported by hlocc's frontend")
            cx = OpContext(self, scope, op, [self.value(scope, v) for v in op.operands], ms.result_shape(op))
            self._bind(scope, op, convert(cx))
            record_sizes(cx)
        raise HloError(f"{self.filename}: a block without terminator")

    def _bind(self, scope: Scope, op, converted) -> None:
        results = list(op.results)
        if isinstance(converted, (list, tuple)):
            assert len(converted) == len(results), op.operation.name
            scope.values.update(zip(results, converted))
        elif len(results) == 1 and not (converted.shape.is_tuple and not ms.to_shape(results[0].type).is_tuple):
            scope.values[results[0]] = converted
        else:
            for i, r in enumerate(results):
                scope.values[r] = (converted, i)

    def value(self, scope: Scope, value) -> HloInstruction:
        """The instruction of an MLIR value in `scope` (its get-tuple-element made on first use)."""
        try:
            found = scope.values[value]
        except KeyError:
            raise HloError(f"{self.filename}: a value is used outside the computation that defines it") from None
        if isinstance(found, tuple):
            tup, index = found
            found = scope.computation.add("get-tuple-element", [tup], {"index": index},
                                          shape=tup.shape.tuple_shapes[index], name="get-tuple-element")
            scope.values[value] = found
        return found


def _identifier(name: str) -> str:
    """An HLO identifier from a symbol name (HLO names are [A-Za-z_][A-Za-z0-9_.-]*)."""
    out = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return out if out and (out[0].isalpha() or out[0] == "_") else "_" + out
