"""Binding dimension variables to argument sizes, and specializing a module with symbolic shapes
to one binding.

`bind_symbols(module, shapes)` reads each variable's value from the argument dimensions
(a dimension whose size is a lone variable binds it; one of the form `k*v + c` binds `v` when it
divides; every other symbolic dimension is then checked), and raises ArgumentError naming the
variable and both values on inconsistent sizes. `specialize(module, binding)` returns a copy of
the module with every symbolic size (shapes, slice/pad/window attributes) replaced by its value,
then verified: the static module the existing compilers take. The guards are not copied (they are
checked before a specialization runs). `specialize_computation` does the same to one (fused)
computation: the per-binding fallback kernel of a fusion that cannot be compiled symbolically
(runtime/dynamic_program.py). `substitute_instructions` is the rewrite all of them and the
`shape-constraints` pass use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from hlocc.errors import ArgumentError
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.symbolic import Dim, DimExpr, InconclusiveDimensionError, evaluate, substitute, symbol
from hlocc.hlo.types import Shape


def bind_symbols(module: HloModule, arg_shapes: Sequence[tuple[int, ...] | None]) -> dict[str, int]:
    """The value of every dimension variable of the entry's parameters, from the argument array
    shapes (None for a tuple or token argument, which carry no symbols here)."""
    return bind_shapes([p.shape for p in module.entry.parameters], arg_shapes)


def bind_shapes(shapes: Sequence[Shape], arg_shapes: Sequence[tuple[int, ...] | None]) -> dict[str, int]:
    """`bind_symbols` over parameter shapes (a module's entry, or a kernel's buffers)."""
    binding: dict[str, int] = {}
    origin: dict[str, str] = {}
    pending = []
    for index, (shape, dims) in enumerate(zip(shapes, arg_shapes)):
        if dims is None or shape.is_tuple or not shape.is_symbolic:
            continue
        if len(dims) != shape.rank:
            raise ArgumentError(f"argument {index}: expected rank {shape.rank} ({shape.to_string(False)}), got an "
                                f"array of shape {list(dims)}: a new rank needs a new compilation")
        for d, (size, actual) in enumerate(zip(shape.dims, dims)):
            if isinstance(size, DimExpr):
                pending.append((index, d, size, int(actual)))
    for _ in range(2):  # lone variables first, then k*v + c forms whose other terms are bound
        for index, d, size, actual in pending:
            _solve(size, actual, binding, origin, f"argument {index} dimension {d}")
    for index, d, size, actual in pending:
        try:
            expected = evaluate(size, binding)
        except (KeyError, InconclusiveDimensionError):
            raise ArgumentError(f"argument {index} dimension {d}: cannot find the dimension variables of "
                                f"'{size}' from the argument sizes") from None
        if expected != actual:
            names = ", ".join(f"{v} = {binding[v]} (from {origin[v]})" for v in sorted(size.variables))
            raise ArgumentError(f"argument {index} dimension {d}: size {actual} does not match '{size}' = "
                                f"{expected} with {names}")
    return binding


def _solve(size: DimExpr, actual: int, binding: dict, origin: dict, where: str) -> None:
    free = [v for v in size.variables if v not in binding]
    if len(free) != 1:
        return
    name = free[0]
    rest = substitute(size, {**binding, name: 0})
    coefficient = substitute(size, {**binding, name: 1})
    if not isinstance(rest, int) or not isinstance(coefficient, int) or coefficient - rest == 0:
        return
    k = coefficient - rest
    if substitute(size, binding) != k * symbol(name) + rest:  # not linear in `name`
        return
    if (actual - rest) % k:
        raise ArgumentError(f"{where}: size {actual} is not of the form '{size}'")
    binding[name] = (actual - rest) // k
    origin[name] = f"{where} = {actual}"


def specialize(module: HloModule, binding: Mapping[str, int]) -> HloModule:
    """A static copy of `module` with the dimension variables set to `binding`, verified."""
    from hlocc.hlo.parser import parse_hlo
    from hlocc.hlo.verifier import verify_module

    copy = parse_hlo(module.to_string())
    copy.guards = []
    substitute_instructions([i for comp in copy.computations for i in comp.instructions], binding)
    verify_module(copy)
    return copy


def specialize_computation(computation: HloComputation, binding: Mapping[str, int]) -> HloComputation:
    """A copy of `computation` (its instructions cloned; computations it calls, which hold scalars,
    shared) with the dimension variables set to `binding`."""
    copy = HloComputation(computation.name)
    clones: dict[int, HloInstruction] = {}
    for instr in computation.post_order():
        clones[id(instr)] = copy.add_instruction(instr.clone([clones[id(o)] for o in instr.operands]))
    copy.root = clones[id(computation.root)]
    substitute_instructions(copy.instructions, binding)
    return copy


def substitute_instructions(instructions, mapping: Mapping[str, Dim]) -> None:
    """Replace the variables of `mapping` in the instructions' shapes and size attributes."""
    for instr in instructions:
        instr.shape = substitute_shape(instr.shape, mapping)
        instr.attrs = {k: _substitute_attr(v, mapping) for k, v in instr.attrs.items()}


def substitute_shape(shape: Shape | None, mapping: Mapping[str, Dim]) -> Shape | None:
    """`shape` with the variables of `mapping` replaced; a dimension that becomes a constant is static."""
    if shape is None or not shape.is_symbolic:
        return shape
    if shape.is_tuple:
        return Shape(None, tuple_shapes=tuple(substitute_shape(s, mapping) for s in shape.tuple_shapes))
    dims = [substitute(d, mapping) for d in shape.dims]
    dynamic = [dyn and not (isinstance(old, DimExpr) and isinstance(new, int))
               for old, new, dyn in zip(shape.dims, dims, shape.dynamic)]
    out = Shape.array(shape.element_type, dims, shape.layout, dynamic)
    return out.as_buffer() if shape.is_buffer else out


def _substitute_attr(value, mapping: Mapping[str, Dim]):
    """An attribute value (sizes, tuples of them, SliceDim/PadDim/WindowDim) with `mapping` applied."""
    if isinstance(value, DimExpr):
        return substitute(value, mapping)
    if isinstance(value, tuple):
        return tuple(_substitute_attr(v, mapping) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, (type, Shape)):
        changes = {f.name: substitute(getattr(value, f.name), mapping) for f in dataclasses.fields(value)
                   if isinstance(getattr(value, f.name), DimExpr)}
        return dataclasses.replace(value, **changes) if changes else value
    return value
