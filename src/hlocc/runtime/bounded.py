"""XLA's bounded dynamism (`f32[<=1801]`, `set-dimension-size`, the `SliceToDynamic` and
`PadToStatic` custom calls) on the symbolic-dimension machinery: one compile that runs every size
up to the bound, at the runtime size.

XLA keeps a bounded array in a buffer of its bound with the runtime sizes as metadata after the
data; the elements are dense at the runtime shape (XLA:CPU's PadToStatic linearizes its source
with the runtime dims), and the dynamic padder rewrites the ops in between to work on padded data
with masks. hlocc instead gives each `<=N` dimension a dimension variable (hlo/symbolic.py) and
compiles the module as any module with symbolic dimensions (runtime/dynamic_program.py): kernels
read the variables from their dims table and do the work at the runtime size, buffers are sized
per call, and results come back at their runtime shapes (an argument [1,1,700] for
f32[1,1,<=1801] gives a [1,16,1,700] result, as XLA's PjRt returns).

`symbolize_bounded(module)` rewrites the module in place:

1. each `<=N` dimension of an entry parameter becomes a variable (`arg0_d2`) that the argument's
   dimension binds, with a guard `arg0_d2 <= N` whose failure names the parameter, the dimension
   and the bound (an unbounded `?` the same, without a guard);
2. a size the program computes — the s32[] operand of `set-dimension-size`, the size operands of
   `SliceToDynamic` — becomes a variable too (a constant operand: its value). Its value is read on
   the host before the call from the arguments (a parameter directly; any other pure scalar
   computation by the evaluator on its operand cone) and passed to the plan as the dimension of one
   extra `u8[?v]` *size parameter*, so the shape function binds it like any argument dimension,
   and a new value is a new binding, not a new compile (`SizeArguments.extend`). A value outside
   [0, N] is an ArgumentError naming the instruction;
3. every other `<=N` dimension is left unknown (`?`) and solved by the `shape-constraints` pass
   from the op semantics (union-find with the variables of 1 and 2); one that no argument or size
   determines is an UnsupportedError naming the instruction;
4. the size-setting ops become static ops on the symbolic shapes: `set-dimension-size` and
   `SliceToDynamic` a `pad` whose (possibly negative) high padding takes the operand dimension to
   the new size (elements past the operand's size are zeros), `PadToStatic` a `pad` to the bound
   and the sizes as constants or `get-dimension-size`s.

A module inside whose non-entry computations a size is set (a loop body) is refused with the
instruction's name: its value would change per iteration.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hlocc.errors import ArgumentError, HloError, UnsupportedError
from hlocc.hlo.attributes import PadDim
from hlocc.hlo.guards import ShapeGuard, SizeComparison, SizePredicate
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule, operands_post_order
from hlocc.hlo.specialize import bind_shapes, specialize_computation
from hlocc.hlo.symbolic import DimExpr, symbol
from hlocc.hlo.types import S32, UNBOUNDED, Shape, primitive_type

SIZE_SETTING_CALLS = ("SliceToDynamic", "PadToStatic")
"""The custom-call targets of XLA's dynamic padder that this module lowers."""

_U8 = primitive_type("u8")


def has_bounded_dynamism(module: HloModule) -> bool:
    """Whether `module` (what its entry reaches) has one of XLA's dynamic dimensions (`<=N`, or `?`
    without a symbol) or a size-setting op."""
    for comp in module.entry.reachable_computations():
        for instr in comp.instructions:
            if instr.shape.has_bounded_dims or _is_size_setter(instr):
                return True
    return False


def _is_size_setter(instr: HloInstruction) -> bool:
    return instr.opcode == "set-dimension-size" or (
        instr.opcode == "custom-call" and instr.attrs.get("custom_call_target") in SIZE_SETTING_CALLS)


@dataclass(frozen=True)
class SizeSource:
    """A dimension variable whose value the program computes, from the s32[] size operand of the
    instruction `where` names."""

    variable: str
    bound: int
    where: str  # "set-dimension-size 'x' dimension 1", for errors
    parameter: int | None  # the scalar is this entry parameter (read directly), else:
    cone: HloComputation | None = None  # its operand cone, evaluated on the host
    cone_parameters: tuple[int, ...] = ()  # the entry parameters the cone reads, in its order


@dataclass
class SizeArguments:
    """What a call of a bounded module passes to its plan: the user's arguments, checked against the
    declared `<=N` shapes (so errors speak of the bounds, not of the variables), and one `u8[v]`
    array per `SizeSource` (only its dimension is read), in the order of the size parameters
    `symbolize_bounded` appended."""

    user_parameters: list[Shape]  # as declared (`<=N`)
    parameter_names: list[str]
    symbolic_parameters: list[Shape]  # as solved (their variables bind the cones' shapes)
    sources: list[SizeSource]
    _arrays: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _accepted: set = field(default_factory=set, repr=False)  # argument shapes checked before
    _cones: dict = field(default_factory=dict, repr=False)  # (variable, binding) -> its specialized cone

    def extend(self, args: Sequence[Any]) -> tuple:
        key = tuple([getattr(a, "shape", None) for a in args])
        if key not in self._accepted:
            self._check_all(args)
            if None not in key and len(self._accepted) < 1024:
                self._accepted.add(key)
        if not self.sources:
            return tuple(args)
        return (*args, *[self._array(v) for v in self.values(args)])

    def _check_all(self, args: Sequence[Any]) -> None:
        if len(args) != len(self.user_parameters):
            n = len(self.user_parameters)
            raise ArgumentError(f"the module takes {n} argument{'s' if n != 1 else ''}, got {len(args)}")
        for index, (shape, arg) in enumerate(zip(self.user_parameters, args)):  # before any size is computed
            if shape.is_array and shape.rank:
                self._check(index, shape, np.shape(arg))

    def _check(self, index: int, shape: Shape, dims: tuple[int, ...]) -> None:
        where = f"argument {index} ('{self.parameter_names[index]}')"
        if len(dims) != shape.rank:
            raise ArgumentError(f"{where}: expected shape {shape.to_string(False)}, got an array of shape {list(dims)}")
        for d, (size, declared, dyn) in enumerate(zip(dims, shape.dims, shape.dynamic)):
            if dyn and declared != UNBOUNDED and size > declared:
                raise ArgumentError(f"{where} dimension {d}: size {size} exceeds its bound {declared} "
                                    f"({shape.to_string(False)})")
            if not dyn and size != declared:
                raise ArgumentError(f"{where}: expected shape {shape.to_string(False)}, got an array of shape "
                                    f"{list(dims)}")

    def values(self, args: Sequence[Any]) -> list[int]:
        """Each source's value for `args`, checked against its bound (in order: a cone may read
        the arrays an earlier size shaped)."""
        binding: dict[str, int] | None = None  # the argument dimensions' variables, once a cone needs them
        known: dict[str, int] = {}
        for source in self.sources:
            if source.parameter is not None:
                value = np.asarray(args[source.parameter])
            else:
                if binding is None:
                    binding = bind_shapes(self.symbolic_parameters, [_dims(a) for a in args])
                value = self._evaluate(source, {**binding, **known}, args)
            if np.shape(value) != ():
                raise ArgumentError(f"{source.where}: the size is not a scalar (shape {list(np.shape(value))})")
            value = int(value)
            if not 0 <= value <= source.bound:
                raise ArgumentError(f"{source.where}: size {value} is outside [0, {source.bound}] (its bound)")
            known[source.variable] = value
        return list(known.values())

    def _evaluate(self, source: SizeSource, binding: dict[str, int], args: Sequence[Any]) -> Any:
        """The source's cone on the host, specialized to `binding` (cached per binding)."""
        from hlocc.evaluator import Evaluator

        key = (source.variable, tuple(sorted(binding.items())))
        cone = self._cones.get(key)
        if cone is None:
            if len(self._cones) >= 256:
                self._cones.clear()
            cone = self._cones[key] = specialize_computation(source.cone, binding)
        return Evaluator().call(cone, [np.asarray(args[p]) for p in source.cone_parameters])

    def _array(self, n: int) -> np.ndarray:
        array = self._arrays.get(n)
        if array is None:
            array = self._arrays[n] = np.zeros(n, np.uint8)
            array.flags.writeable = False
        return array


def _dims(value: Any) -> tuple[int, ...] | None:
    return None if isinstance(value, tuple) else tuple(np.shape(value))


def symbolize_bounded(module: HloModule) -> SizeArguments:
    """Rewrite `module` (module doc); what a call passes to it (SizeArguments)."""
    from hlocc.hlo.verifier import verify_module
    from hlocc.passes.shape_constraints import ShapeConstraints

    entry = module.entry
    reachable = {id(c) for c in entry.reachable_computations()}
    module.remove_computations([c for c in module.computations if id(c) not in reachable])  # dead code
    taken = set().union(*(i.shape.symbols for i in module.all_instructions()))
    names = _Names(taken)
    user_parameters = [p.shape for p in entry.parameters]
    bounded = [place for index, param in enumerate(entry.parameters)
               for place in _symbolize_parameter(index, param, names)]
    for comp in module.computations:
        for instr in comp.instructions:
            if comp is not entry and _is_size_setter(instr):
                raise UnsupportedError(f"{_what(instr)} '{instr.name}' in computation '{comp.name}': a size "
                                       "set outside the entry computation (e.g. per loop iteration) is not "
                                       "supported")
    setters = [i for i in entry.post_order() if _is_size_setter(i)]
    sources: list[tuple[SizeSource, HloInstruction, HloInstruction, int]] = []  # (source, setter, scalar, dim)
    for instr in setters:
        _declare_setter(instr, names, sources)
    for instr in module.all_instructions():
        instr.shape = _unknown_bounded(instr.shape)
    ShapeConstraints().run(module)  # names and solves the `?`s; may merge variables (a == b)
    known = {v for p in entry.parameters for v in p.shape.symbols} | {s.variable for s, _, _, _ in sources}
    for instr in module.all_instructions():
        if instr.shape.symbols - known - taken:
            raise UnsupportedError(f"instruction '{instr.name}' ({instr.shape}): its dynamic dimension is set by "
                                   "neither an argument nor a set-dimension-size/SliceToDynamic")
    # Guards and size parameters on the sizes as solved (a variable may now be another's name).
    for param, d, bound in bounded:
        _bound_guard(module, param.shape.dims[d], bound, f"argument {param.parameter_number} ('{param.name}') "
                     f"dimension {d}: size {{0}} exceeds its bound {bound}")
    sizes = []
    for source, setter, _, d in sources:
        size = setter.shape.dims[d]
        _bound_guard(module, size, source.bound, f"{source.where}: size {{0}} exceeds its bound {source.bound}")
        sizes.append(size)
    for instr in setters:
        _lower_setter(entry, instr)
    out = [_with_cone(source, scalar, len(user_parameters)) for source, _, scalar, _ in sources]
    for k, (source, size) in enumerate(zip(out, sizes)):
        entry.add_fresh(HloInstruction(entry.unique_name(f"size.{source.variable}"), "parameter",
                                       Shape.array(_U8, [size]), parameter_number=len(user_parameters) + k))
    module.header_attrs.pop("entry_computation_layout", None)  # it spells the `<=N` types
    verify_module(module)
    params = entry.parameters[:len(user_parameters)]
    return SizeArguments(user_parameters, [p.name for p in params], [p.shape for p in params], out)


class _Names:
    """Fresh variable names: identifiers derived from a place, never one the module uses."""

    def __init__(self, taken: set[str]):
        self.taken = set(taken)

    def __call__(self, base: str) -> str:
        base = re.sub(r"\W", "_", base)
        base = base if base[:1].isalpha() else f"v{base}"
        for name in itertools.chain([base], (f"{base}_{k}" for k in itertools.count(1))):
            if name not in self.taken:
                self.taken.add(name)
                return name
        raise AssertionError("unreachable")


def _symbolize_parameter(index: int, param: HloInstruction, names: _Names) -> list[tuple[HloInstruction, int, int]]:
    """Give each dynamic dimension (`<=N`, `?`) of an entry parameter a variable; (parameter,
    dimension, bound) of each bounded one."""
    shape = param.shape
    if shape.is_tuple:
        if shape.has_bounded_dims:
            raise UnsupportedError(f"parameter {index} ('{param.name}', {shape}): bounded dimensions inside a "
                                   "tuple parameter are not supported")
        return []
    dims, places = list(shape.dims), []
    for d, (size, dyn) in enumerate(zip(shape.dims, shape.dynamic)):
        if dyn and isinstance(size, int):
            dims[d] = symbol(names(f"arg{index}_d{d}"))
            if size != UNBOUNDED:
                places.append((param, d, size))
    param.shape = Shape.array(shape.element_type, dims, shape.layout, shape.dynamic)
    return places


def _bound_guard(module: HloModule, size, bound: int, message: str) -> None:
    """A guard `size <= bound` (nothing where `size` is a constant: the verifier checked it)."""
    if isinstance(size, DimExpr):
        module.guards.append(ShapeGuard(SizePredicate((SizeComparison("LE", size, bound),)), message, (size,)))


def _what(instr: HloInstruction) -> str:
    return instr.attrs["custom_call_target"] if instr.opcode == "custom-call" else instr.opcode


def _declare_setter(instr: HloInstruction, names: _Names,
                    sources: list[tuple[SizeSource, HloInstruction, HloInstruction, int]]) -> None:
    """Give a size-setting op's result its sizes: a constant, or a new variable whose value is
    computed (appended to `sources` with the setter, its s32[] operand and the dimension)."""
    target = _what(instr)
    shape = instr.shape
    if target == "PadToStatic":
        data = shape.tuple_shapes[0] if shape.is_tuple and shape.tuple_shapes else None
        if data is None or not data.is_static or len(shape.tuple_shapes) != 1 + data.rank or len(instr.operands) != 1:
            raise HloError(f"PadToStatic '{instr.name}': takes one array and gives (static array, s32[] per "
                           f"dimension), got {len(instr.operands)} operand(s) and {shape}")
        return
    if target == "set-dimension-size":
        scalars = {instr.attrs["dimensions"][0]: instr.operands[1]}
    else:  # SliceToDynamic(operand, size of dimension 0, ...)
        if shape.is_tuple or len(instr.operands) != 1 + shape.rank:
            raise HloError(f"SliceToDynamic '{instr.name}': takes the operand and one s32[] size per dimension "
                           f"of its array result, got {len(instr.operands)} operands for {shape}")
        scalars = {d: instr.operands[1 + d] for d in range(shape.rank) if shape.dynamic[d]}
    dims, dynamic = list(shape.dims), list(shape.dynamic)
    for d, scalar in scalars.items():
        bound = shape.dims[d]
        if not isinstance(bound, int) or bound == UNBOUNDED:
            raise UnsupportedError(f"{target} '{instr.name}': dimension {d} of {shape} needs a bound (<=N)")
        if scalar.shape != Shape.array(S32, ()):
            raise HloError(f"{target} '{instr.name}': the size of dimension {d} must be s32[], got {scalar.shape}")
        where = f"{target} '{instr.name}' dimension {d}"
        if scalar.opcode == "constant":
            value = int(np.asarray(scalar.literal))
            if not 0 <= value <= bound:
                raise HloError(f"{where}: size {value} is outside [0, {bound}] (its bound)")
            dims[d], dynamic[d] = value, False
            continue
        variable = names(f"{instr.name}_d{d}")
        parameter = scalar.parameter_number if scalar.opcode == "parameter" else None
        sources.append((SizeSource(variable, bound, where, parameter), instr, scalar, d))
        dims[d] = symbol(variable)
    instr.shape = Shape.array(shape.element_type, dims, shape.layout, dynamic)


def _unknown_bounded(shape: Shape) -> Shape:
    """`shape` with each `<=N` dimension unknown (`?`), for the shape-constraints pass to solve
    (which names the `?`s)."""
    if shape is None or not shape.has_bounded_dims:
        return shape
    if shape.is_tuple:
        return Shape.tuple([_unknown_bounded(s) for s in shape.tuple_shapes])
    dims = [UNBOUNDED if dyn and isinstance(d, int) else d for d, dyn in zip(shape.dims, shape.dynamic)]
    out = Shape.array(shape.element_type, dims, shape.layout, shape.dynamic)
    return out.as_buffer() if shape.is_buffer else out


def _lower_setter(comp: HloComputation, instr: HloInstruction) -> None:
    """Replace a size-setting op by a pad to its (solved) sizes; PadToStatic: a pad to its static
    shape, and the operand's sizes."""
    operand = instr.operands[0]
    if _what(instr) == "PadToStatic":
        data = _resized(comp, operand, instr.shape.tuple_shapes[0].dims, f"{instr.name}.data")
        sizes = [comp.add("constant", shape=Shape.array(S32, ()), literal=np.int32(d), name=f"{instr.name}.size")
                 if isinstance(d, int) else
                 comp.add("get-dimension-size", [operand], {"dimensions": (i,)}, name=f"{instr.name}.size")
                 for i, d in enumerate(operand.shape.dims)]
        new = comp.add("tuple", [data, *sizes], name=instr.name)
    else:
        new = _resized(comp, operand, instr.shape.dims, instr.name)
    comp.replace_instruction(instr, new)
    if new is not operand:
        new.name = instr.name  # (free again: `instr` is gone)


def _resized(comp: HloComputation, operand: HloInstruction, dims: list, name: str) -> HloInstruction:
    """`operand` cut or extended with zeros (at the high end of each dimension) to `dims`."""
    if list(operand.shape.dims) == list(dims):
        return operand
    zero = comp.add("constant", shape=Shape.array(operand.shape.element_type, ()),
                    literal=np.zeros((), operand.shape.dtype), name=f"{name}.zero")
    padding = tuple(PadDim(0, new - old) for old, new in zip(operand.shape.dims, dims))
    # (declared: the pad rule keeps a dynamic operand dimension dynamic, even one padded to a constant)
    return comp.add("pad", [operand, zero], {"padding": padding}, name=name,
                    shape=Shape.array(operand.shape.element_type, dims))


def _with_cone(source: SizeSource, scalar: HloInstruction, n_user: int) -> SizeSource:
    """`source` with the host computation of its value: the scalar's operand cone in a computation
    of its own, whose parameters are the entry parameters it reads."""
    if source.parameter is not None:
        return source
    cone = HloComputation(f"size_of_{source.variable}")
    clones: dict[int, HloInstruction] = {}
    read: list[int] = []
    for instr in operands_post_order([scalar]):
        if instr.has_side_effect():
            raise UnsupportedError(f"{source.where}: the size is computed with '{instr.name}' ({instr.opcode}), "
                                   "which has a side effect; it cannot be computed again on the host")
        if instr.opcode == "parameter":
            if instr.parameter_number >= n_user:
                raise UnsupportedError(f"{source.where}: the size depends on another computed size")
            clone = HloInstruction(instr.name, "parameter", instr.shape, parameter_number=len(read))
            read.append(instr.parameter_number)
        else:
            clone = instr.clone([clones[id(o)] for o in instr.operands])
        clones[id(instr)] = cone.add_fresh(clone)
    cone.root = clones[id(scalar)]
    return SizeSource(source.variable, source.bound, source.where, None, cone, tuple(read))



__all__ = ["SIZE_SETTING_CALLS", "SizeArguments", "SizeSource", "has_bounded_dynamism", "symbolize_bounded"]
