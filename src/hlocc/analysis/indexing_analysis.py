"""Fusion-level indexing analysis and input-to-output maps.

`fusion_output_to_input(computation, start)` answers, for one output element of `start` (a root
or the hero of a fused computation), which elements of every instruction and parameter it reads:
the per-op maps of `op_indexing` composed along every use-def path from `start`. An instruction
reached through different indexing keeps each distinct map (simplified, so equal maps written
differently collapse); the computation partitioner emits an instruction inside its user's function
only when it has one map. A None in a set means some path has no indexing map (an undefined
access, e.g. through a sort); everything below it is undefined too.

`input_to_output(instr)` is the inverse direction for the ops where hero analysis needs it
(transpose, and the elementwise, broadcast, reshape and bitcast ops around a hero).
"""

from __future__ import annotations

from hlocc.analysis.affine_expr import Expr, IndexingError, dim, sym
from hlocc.analysis.indexing_map import IndexingMap, compose, variables_from_sizes
from hlocc.analysis.linearize import delinearize, linear_index
from hlocc.analysis.op_indexing import output_dims, output_to_input
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import OPCODES

MapSet = set  # set[IndexingMap | None]


def fusion_roots(computation: HloComputation) -> list[HloInstruction]:
    """The roots of a fused computation: the tuple's operands for a multi-output fusion."""
    root = computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


def fusion_output_to_input(computation: HloComputation,
                           start: HloInstruction | None = None) -> dict[HloInstruction, MapSet]:
    """Map from an output index of `start` (default: the single root) to every instruction it
    reaches, as {instruction: set of maps}. `start` itself maps by the identity."""
    if start is None:
        roots = fusion_roots(computation)
        if len(roots) != 1:
            raise IndexingError(f"computation '{computation.name}' has {len(roots)} roots; name the start")
        start = roots[0]
    if start.shape.is_tuple:
        raise IndexingError(f"cannot index from '{start.name}': its result is a tuple")
    result: dict[HloInstruction, MapSet] = {start: {IndexingMap.identity(start.shape.dims)}}
    for instr in reversed(computation.post_order()):
        maps = result.get(instr)
        if not maps:
            continue
        for operand, op_map in _operand_maps(instr):
            target = result.setdefault(operand, set())
            for m in maps:
                target.add(None if m is None or op_map is None else compose(m, op_map))
    return result


def _operand_maps(instr: HloInstruction) -> list[tuple[HloInstruction, IndexingMap | None]]:
    if instr.opcode == "get-tuple-element":
        source = instr.operand(0)
        dims = output_dims(source, instr.attrs["index"])
        return [(source, IndexingMap.identity(dims))]
    if instr.opcode == "tuple":
        return [(op, None) for op in instr.operands]
    return list(zip(instr.operands, output_to_input(instr)))


def fusion_parameter_maps(computation: HloComputation,
                          start: HloInstruction | None = None) -> list[MapSet]:
    """The maps of every parameter of the computation (empty set: the parameter is not read)."""
    analysis = fusion_output_to_input(computation, start)
    return [analysis.get(p, set()) for p in computation.parameters]


# -- input -> output -----------------------------------------------------------------------------

def input_to_output(instr: HloInstruction, operand_number: int = 0) -> IndexingMap | None:
    """Map from an index of operand `operand_number` to the output elements that read it, for
    elementwise ops, transpose, broadcast (range variables over the new dims), reshape and bitcast;
    None for other ops."""
    operand = instr.operand(operand_number).shape
    out = instr.shape.dims
    info = OPCODES.get(instr.opcode)
    if info is not None and info.is_elementwise:
        if operand.rank != len(out):
            return IndexingMap(variables_from_sizes(()), tuple(sym(i) for i in range(len(out))),
                               variables_from_sizes(out)).simplify()
        return IndexingMap.identity(out)
    fn = _INPUT_TO_OUTPUT.get(instr.opcode)
    return fn(instr, operand.dims, out).simplify() if fn else None


def transpose_input_to_output(instr: HloInstruction) -> IndexingMap:
    """Operand index -> output index of a transpose: output dim i <- d[perm[i]]."""
    return _transpose_in_out(instr, instr.operand(0).shape.dims, instr.shape.dims)


def _transpose_in_out(instr, in_dims, out):
    return IndexingMap(variables_from_sizes(in_dims), tuple(dim(p) for p in instr.attrs["dimensions"]))


def _broadcast_in_out(instr, in_dims, out):
    mapped = list(instr.attrs.get("dimensions", ()))
    new_dims = [i for i in range(len(out)) if i not in mapped]
    results: list[Expr] = []
    for i in range(len(out)):
        results.append(dim(mapped.index(i)) if i in mapped else sym(new_dims.index(i)))
    return IndexingMap(variables_from_sizes(in_dims), tuple(results),
                       variables_from_sizes([out[i] for i in new_dims]))


def _reshape_in_out(instr, in_dims, out):
    linear = linear_index(in_dims, [dim(i) for i in range(len(in_dims))])
    return IndexingMap(variables_from_sizes(in_dims), tuple(delinearize(linear, out)))


def _bitcast_in_out(instr, in_dims, out):
    operand = instr.operand(0).shape
    linear = linear_index(in_dims, [dim(i) for i in range(len(in_dims))], operand.minor_to_major)
    return IndexingMap(variables_from_sizes(in_dims), tuple(delinearize(linear, out, instr.shape.minor_to_major)))


_INPUT_TO_OUTPUT = {
    "transpose": _transpose_in_out,
    "broadcast": _broadcast_in_out,
    "reshape": _reshape_in_out,
    "bitcast": _bitcast_in_out,
}
