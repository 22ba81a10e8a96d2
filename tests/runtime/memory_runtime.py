"""A byte-level executor for tests: runs a module on the memory layout of a BufferAssignment.

Every array lives only in the bytes of its slice (allocations start filled with garbage), each
instruction reads its operands from their slices and writes its results into its own, and the
runtime makes exactly the copies the assignment asks for. If buffer assignment let a value be
overwritten while still live, or forgot a copy, the results differ from the reference evaluator's.
Each instruction reads all its operands before writing, which is the contract of an in-place or
reusing kernel; pure forwarding instructions do nothing (their positions share bytes). Arrays are
stored in their layout's physical order, so a bitcast reads the bytes XLA's would.
"""

from __future__ import annotations

import numpy as np

import hlocc.evaluator  # noqa: F401  (registers every op's evaluation)
from hlocc.evaluator.core import TOKEN, Evaluator
from hlocc.hlo.call_graph import sequential_callees
from hlocc.runtime.buffer_assignment import BufferAssignment, BufferCopy, BufferSlice
from hlocc.runtime.dataflow import is_pure_forwarding, leaf_indices, subshape

MAX_ITERATIONS = 100_000


def leaf_of(value, index):
    for i in index:
        value = value[i]
    return value


class MemoryRuntime:
    def __init__(self, assignment: BufferAssignment):
        self.a = assignment
        rng = np.random.default_rng(1)
        self.memory = [rng.integers(0, 256, a.size, dtype=np.uint8) for a in assignment.allocations]
        self.evaluator = Evaluator(seed=0)

    # -- bytes ---------------------------------------------------------------------------------
    def read(self, where: BufferSlice, shape):
        if shape.is_token or not shape.element_type.is_array_type:
            return TOKEN
        raw = self.memory[where.allocation_index][where.offset:where.offset + where.size]
        assert raw.size == shape.byte_size(), (where, shape)
        major_to_minor = shape.minor_to_major[::-1]
        physical = np.frombuffer(raw.tobytes(), dtype=shape.dtype).reshape([shape.dims[d] for d in major_to_minor])
        return physical.transpose(np.argsort(major_to_minor)).copy(order="C")

    def write(self, where: BufferSlice, shape, array) -> None:
        if shape.is_token or not shape.element_type.is_array_type or where.size == 0:
            return
        physical = np.asarray(array, dtype=shape.dtype).reshape(shape.dims).transpose(shape.minor_to_major[::-1])
        data = np.ascontiguousarray(physical).reshape(-1).view(np.uint8)
        assert data.size == where.size, (where, shape)
        self.memory[where.allocation_index][where.offset:where.offset + where.size] = data

    def copy(self, copy: BufferCopy) -> None:
        src, dst = copy.source, copy.destination
        data = self.memory[src.allocation_index][src.offset:src.offset + src.size].copy()
        self.memory[dst.allocation_index][dst.offset:dst.offset + dst.size] = data

    def value(self, instr, index=()):
        shape = subshape(instr.shape, index)
        if shape.is_tuple:
            return tuple(self.value(instr, index + (i,)) for i in range(len(shape.tuple_shapes)))
        return self.read(self.a.slice_for(instr, index), shape)

    # -- execution -----------------------------------------------------------------------------
    def run(self, args: list) -> list:
        entry = self.a.module.entry
        for param in entry.parameters:
            for index in leaf_indices(param.shape):
                self.write(self.a.slice_for(param, index), subshape(param.shape, index),
                           leaf_of(args[param.parameter_number], index))
        for value in self.a.dataflow.values:
            if value.is_constant:
                self.write(self.a.slice_of_value(value), value.shape, leaf_of(value.instruction.literal, value.index))
        self.run_computation(entry)
        for copy in self.a.exit_copies:
            self.copy(copy)
        shapes = [subshape(entry.root.shape, i) for i in self.a.output_indices]
        return [self.read(s, shape) for s, shape in zip(self.a.output_slices, shapes)]

    def run_computation(self, comp) -> None:
        for instr in self.a.schedule.sequence(comp):
            op = instr.opcode
            if op in ("parameter", "constant") or is_pure_forwarding(instr):
                continue
            for copy in self.a.copies_before(instr):
                self.copy(copy)
            callees = sequential_callees(instr)
            if op == "while":
                cond, body = callees
                for _ in range(MAX_ITERATIONS):
                    self.run_computation(cond)
                    if not bool(self.value(cond.root)):
                        break
                    self.run_computation(body)
                    for copy in self.a.copies_after(instr):
                        self.copy(copy)
                else:
                    raise AssertionError(f"while '{instr.name}' ran past {MAX_ITERATIONS} iterations")
            elif op == "conditional":
                selector = self.value(instr.operands[0])
                if selector.dtype == np.bool_:
                    branch = 0 if bool(selector) else 1
                else:
                    branch = int(selector)
                    branch = branch if 0 <= branch < len(callees) else len(callees) - 1
                self.run_computation(callees[branch])
                for copy in self.a.copies_after(instr, branch):
                    self.copy(copy)
            elif callees:  # call, async-start
                self.run_computation(callees[0])
                for copy in self.a.copies_after(instr):
                    self.copy(copy)
            else:
                operands = [self.value(o) for o in instr.operands]
                result = self.evaluator.evaluate_instruction(instr, operands)
                for value in self.a.dataflow.values_defined_by(instr):
                    self.write(self.a.slice_of_value(value), value.shape, leaf_of(result, value.index))


def assert_no_live_overlap(assignment: BufferAssignment) -> None:
    """Independent of the assignment's own `verify`: no two values live at one tick share a byte,
    unless they are one buffer's values handing over at the tick where one dies and the next is
    defined."""
    values = sorted(assignment.dataflow.values, key=assignment.live_range)
    active: list = []
    for value in values:
        start, end = assignment.live_range(value)
        where = assignment.slice_of_value(value)
        active = [a for a in active if a[1] >= start]
        for _, other_end, other_where, other in active:
            if assignment.buffer_of(other) is assignment.buffer_of(value):
                assert other_end == start, f"{other} and {value} share a buffer and are live together"
            else:
                assert not where.overlaps(other_where), (
                    f"{other} {other_where} and {value} {where} are live together in overlapping bytes")
        active.append((start, end, where, value))


def run_both(module, assignment: BufferAssignment, args: list) -> tuple[list, list]:
    """(reference evaluator's flattened result, the memory runtime's)."""
    from hlocc.evaluator.core import evaluate

    def flatten(v):
        return [leaf for x in v for leaf in flatten(x)] if isinstance(v, tuple) else [v]

    return flatten(evaluate(module, args)), MemoryRuntime(assignment).run(list(args))


def assert_runs_like_the_evaluator(module, assignment: BufferAssignment, args: list) -> None:
    expected, got = run_both(module, assignment, args)
    assert len(expected) == len(got)
    for i, (x, y) in enumerate(zip(expected, got)):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f"output {i} differs"
