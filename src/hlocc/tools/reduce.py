"""`hlocc reduce`: shrink an HLO module that fails on a backend to a minimal one that still fails
(in the spirit of XLA's hlo-bisect and of C-Reduce).

    hlocc reduce MODULE.hlo --backend cpu [--seed N] [-o OUT.hlo]

"Fails" is what `hlocc.testing.differential` reports for the backend against the interpreter on
seeded inputs with special values (`differential.random_arguments`): a mismatch, a crash (an exception
that is not an HloError) or an HloError on a valid module. A candidate must fail *the same way*
(the same kind, and for an exception the same exception type), so the reduction does not wander
off to another bug; a candidate the verifier rejects does not count.

The reduction is greedy, repeated until no step applies (each step keeps only what the new root
needs: dead instructions, unused parameters and unreachable computations are removed):

1. an instruction of the entry becomes the root (earliest first: the biggest cuts first);
2. a tuple root loses an element;
3. an instruction's value is replaced by a new parameter of its shape (cutting what computes it);
4. an instruction's value is replaced by a constant zero broadcast to its shape;
5. a dimension of a parameter shrinks when every user is elementwise, so every shape follows.

The result prints as canonical HLO text, ready to become a regression test. Not done: reducing
inside called computations (fusions, loop bodies), and shrinking shapes through non-elementwise
users (reshape, dot, ...), which would need their attributes rewritten.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence

from hlocc.errors import HloError
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.parser import parse_hlo, read_text_file
from hlocc.hlo.types import Shape
from hlocc.hlo.verifier import verify_module
from hlocc.passes.dce import remove_dead_instructions, remove_unreachable_computations
from hlocc.testing.differential import Outcome, differential, random_arguments


def signature(outcome: Outcome) -> str:
    """What must stay the same while reducing: the kind, and for an exception its type."""
    if outcome.kind in ("crash", "error", "unsupported"):
        return f"{outcome.kind}: {outcome.detail.split(':')[0]}"
    return outcome.kind


def failure(text: str, backend: str, seed: int) -> Outcome | None:
    """How `text` fails on `backend` (None when it runs correctly or is not a valid module)."""
    try:
        module = parse_hlo(text)
        verify_module(module)
    except HloError:
        return None
    outcomes = differential(text, random_arguments(module, seed), [backend])
    return outcomes[0] if outcomes else None


def _cleanup(module: HloModule) -> str:
    """Dead code, unused parameters (renumbered) and unreachable computations removed; the text."""
    entry = module.entry
    remove_dead_instructions(entry)
    for p in [p for p in entry.parameters if not p.users and p is not entry.root]:
        entry.remove_instruction(p)
    for number, p in enumerate(entry.parameters):
        p.parameter_number = number
    remove_unreachable_computations(module)
    return module.to_string()


def _edit(text: str, change: Callable[[HloModule, HloInstruction], bool], index: int) -> str | None:
    """`text` with `change` applied to the index-th instruction of the entry, cleaned up; None when
    the change does not apply."""
    module = parse_hlo(text)
    instr = module.entry.instructions[index]
    if not change(module, instr):
        return None
    return _cleanup(module)


def _make_root(module: HloModule, instr: HloInstruction) -> bool:
    if instr is module.entry.root or instr.opcode == "parameter":
        return False
    module.entry.root = instr
    return True


def _replace_by(module: HloModule, instr: HloInstruction, make: Callable[[HloModule, Shape], HloInstruction]) -> bool:
    if instr.opcode in ("parameter", "constant") or not instr.shape.is_array or instr is module.entry.root:
        return False
    new = make(module, instr.shape)
    instr.replace_all_uses_with(new)
    return True


def _parameter(module: HloModule, shape: Shape) -> HloInstruction:
    entry = module.entry
    param = HloInstruction(entry.unique_name("cut"), "parameter", shape, parameter_number=entry.num_parameters)
    return entry.add_fresh(param)


def _zeros(module: HloModule, shape: Shape) -> HloInstruction:
    import numpy as np

    entry = module.entry
    scalar = Shape.array(shape.element_type, ())
    zero = entry.add("constant", shape=scalar, literal=np.zeros((), shape.dtype), name="zero")
    return entry.add("broadcast", [zero], {"dimensions": ()}, shape=shape, name="zeros")


def _drop_tuple_element(k: int) -> Callable[[HloModule, HloInstruction], bool]:
    def change(module: HloModule, instr: HloInstruction) -> bool:
        if instr is not module.entry.root or instr.opcode != "tuple" or len(instr.operands) < 2:
            return False
        operands = instr.operands[:k] + instr.operands[k + 1:]
        shapes = instr.shape.tuple_shapes[:k] + instr.shape.tuple_shapes[k + 1:]  # as declared, layouts too
        root = module.entry.add("tuple", operands, name="out", shape=Shape.tuple(shapes))
        module.entry.root = root
        return True

    return change


def _shrink_parameter(dim: int) -> Callable[[HloModule, HloInstruction], bool]:
    """Halve dimension `dim` of a parameter whose users are all elementwise, and of every
    elementwise instruction its value flows through (their shapes are re-inferred)."""

    def change(module: HloModule, instr: HloInstruction) -> bool:
        if instr.opcode != "parameter" or not instr.shape.is_array or dim >= instr.shape.rank:
            return False
        size = instr.shape.dims[dim]
        if size <= 1:
            return False
        region, stack = [], list(instr.users)
        while stack:
            user = stack.pop()
            if user in region:
                continue
            info = OPCODES[user.opcode]
            if not info.is_elementwise or any(o.shape.dims != instr.shape.dims for o in user.operands):
                return False
            region.append(user)
            stack.extend(user.users)
        new_dims = list(instr.shape.dims)
        new_dims[dim] = size // 2
        for node in [instr, *region]:
            node.shape = Shape.array(node.shape.element_type, new_dims, node.shape.layout)
        return all(o.shape.dims == tuple(new_dims) for n in region for o in n.operands)

    return change


def candidates(text: str) -> Iterator[str]:
    """Every one-step reduction of `text` (module doc), biggest cuts first."""
    module = parse_hlo(text)
    count = len(module.entry.instructions)
    root = module.entry.root
    changes: list[Callable] = [_make_root]
    if root.opcode == "tuple":
        changes += [_drop_tuple_element(k) for k in range(len(root.operands))]
    changes += [lambda m, i: _replace_by(m, i, _parameter), lambda m, i: _replace_by(m, i, _zeros)]
    changes += [_shrink_parameter(d) for d in range(4)]
    for change in changes:
        for index in range(count):
            try:
                new = _edit(text, change, index)
            except (HloError, AssertionError, ValueError):
                continue
            if new is not None and new != text:
                yield new


def reduce_module(text: str, backend: str = "cpu", seed: int = 0,
                  log: Callable[[str], None] | None = None) -> tuple[str, Outcome]:
    """The smallest module reachable by the steps of the module doc that still fails on `backend`
    as `text` does, and how it fails. An HloError when `text` does not fail."""
    original = failure(text, backend, seed)
    if original is None:
        raise HloError(f"the module does not fail on backend '{backend}' (it matches the interpreter on the inputs "
                       f"of seed {seed}): nothing to reduce")
    target = signature(original)
    current, outcome = _cleanup(parse_hlo(text)), original
    progress = True
    while progress:
        progress = False
        for candidate in candidates(current):
            if len(candidate) >= len(current) and candidate.count("\n") >= current.count("\n"):
                continue
            found = failure(candidate, backend, seed)
            if found is not None and signature(found) == target:
                current, outcome, progress = candidate, found, True
                if log:
                    log(f"{current.count(chr(10))} lines: {found}")
                break
    return current, outcome


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(prog="hlocc reduce", description="Shrink a module that fails on a backend "
                                     "(mismatch with the interpreter, or crash) to a minimal one that still fails.")
    parser.add_argument("module", help="HLO text file")
    parser.add_argument("--backend", default="cpu", choices=("cpu", "cuda-sim", "cuda"))
    parser.add_argument("--seed", type=int, default=0, help="seed of the inputs (with special values)")
    parser.add_argument("-o", "--output", default="-", help="where to write the reduced module ('-': stdout)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each step to stderr")
    args = parser.parse_args(argv)
    try:
        text = read_text_file(args.module)
        log = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
        reduced, outcome = reduce_module(text, args.backend, args.seed, log)
    except (HloError, OSError) as e:
        print(f"hlocc reduce: error: {e}", file=sys.stderr)
        return 1
    if args.output == "-":
        sys.stdout.write(reduced)
    else:
        with open(args.output, "w") as f:
            f.write(reduced)
    print(f"hlocc reduce: {outcome}", file=sys.stderr)
    return 0


__all__ = ["candidates", "failure", "main", "reduce_module", "signature"]
