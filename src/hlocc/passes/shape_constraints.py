"""`shape-constraints`: dimension equality classes of a module with dynamic dimensions, each class
canonicalized to one symbol (BladeDISC's shape optimization, on HLO).

1. Every unnamed `?` dimension gets a fresh symbol (`d0`, `d1`, ...; a symbol the module uses
   already is never reused).
2. The ops' semantics say which sizes are equal (rules as data, `_EQUALITIES`): the operands and
   result of an elementwise op, a broadcast's operand dimension and the result dimension it maps
   to, transpose by its permutation, the kept dimensions of reduce, dot's batch and contracting
   dimensions, concatenate's other dimensions, select/clamp, a call's operands and its callee's
   parameters. They are merged with union-find.
3. Reshapes add product equality: when one side's element count has exactly one unknown fresh
   symbol left, it is solved from the other side (`?*4` → `[b, 2, 2]` gives `? = b`).
4. Each class is replaced by one member: a constant if it has one, else a named symbol (the
   alphabetically first), else the expression with fewest fresh symbols; shapes and size
   attributes are rewritten, and broadcasts and reshapes proven to be identities are removed.

The facts are kept in `module.shape_facts` (printed as `// fact:` lines after the header): per
symbolic size, the symbols merged into it and the first places it sizes, e.g.
`// fact: d0 == d1 == d2 at x[0], m[0], mb[0], ...`.
"""

from __future__ import annotations

import itertools

from hlocc.errors import HloError
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.opcodes import OPCODES, infer_shape
from hlocc.hlo.specialize import substitute_instructions
from hlocc.hlo.symbolic import DimExpr, floordiv, substitute, symbol, variables_of
from hlocc.hlo.types import UNBOUNDED, Shape
from hlocc.passes.base import HloPass, register_hlo_pass


def _same_shape(instr: HloInstruction):
    """Elementwise ops (and select, clamp): every array operand has the result's dimensions."""
    out = instr.shape.dims
    for op in instr.operands:
        if not op.shape.is_tuple and op.shape.rank == len(out):
            yield from zip(op.shape.dims, out)


def _broadcast(instr):
    yield from ((instr.operands[0].shape.dims[i], instr.shape.dims[d]) for i, d in
                enumerate(instr.attrs.get("dimensions", ())))


def _transpose(instr):
    yield from ((instr.operands[0].shape.dims[p], instr.shape.dims[i]) for i, p in
                enumerate(instr.attrs["dimensions"]))


def _reduce(instr):
    reduced = set(instr.attrs["dimensions"])
    outs = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
    n = len(outs)
    for operand in instr.operands[:n]:
        kept = [d for i, d in enumerate(operand.shape.dims) if i not in reduced]
        for out in outs:
            yield from zip(kept, out.dims)


def _dot(instr):
    lhs, rhs = (o.shape.dims for o in instr.operands)
    a = instr.attrs
    lb, rb = a.get("lhs_batch_dims", ()), a.get("rhs_batch_dims", ())
    lc, rc = a.get("lhs_contracting_dims", ()), a.get("rhs_contracting_dims", ())
    yield from ((lhs[i], rhs[j]) for i, j in zip(lb + lc, rb + rc))
    free_l = [d for i, d in enumerate(lhs) if i not in lb + lc]
    free_r = [d for i, d in enumerate(rhs) if i not in rb + rc]
    yield from zip([lhs[i] for i in lb] + free_l + free_r, instr.shape.dims)


def _concatenate(instr):
    axis = instr.attrs["dimensions"][0]
    for op in instr.operands:
        yield from ((d, o) for i, (d, o) in enumerate(zip(op.shape.dims, instr.shape.dims)) if i != axis)


def _call(instr):
    callee = instr.attrs["to_apply"]
    for op, param in zip(instr.operands, callee.parameters):
        yield from _leaf_pairs(op.shape, param.shape)
    yield from _leaf_pairs(callee.root.shape, instr.shape)


def _leaf_pairs(a: Shape, b: Shape):
    for x, y in zip(a.leaves(), b.leaves()):
        if not x.is_token and x.rank == y.rank:
            yield from zip(x.dims, y.dims)


_EQUALITIES = {"broadcast": _broadcast, "transpose": _transpose, "reduce": _reduce, "dot": _dot,
               "concatenate": _concatenate, "call": _call, "select": _same_shape, "clamp": _same_shape,
               "convert": _same_shape, "copy": _same_shape, "bitcast-convert": _same_shape}
"""Opcode → the pairs of sizes its semantics make equal (elementwise ops use `_same_shape`)."""


class _Classes:
    """Union-find over sizes (ints and symbolic expressions)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        self.parent.setdefault(x, x)
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a, b) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb

    def groups(self) -> list[list]:
        out: dict = {}
        for x in self.parent:
            out.setdefault(self.find(x), []).append(x)
        return [g for g in out.values() if len(g) > 1]


@register_hlo_pass
class ShapeConstraints(HloPass):
    name = "shape-constraints"

    def run(self, module: HloModule) -> bool:
        instrs = [i for comp in module.computations for i in comp.instructions]
        taken = frozenset().union(*(i.shape.symbols for i in instrs if i.shape is not None))
        fresh_names = (n for n in (f"d{k}" for k in itertools.count()) if n not in taken)
        fresh: set[str] = set()
        changed = False
        for instr in instrs:
            shape, made = _name_unknown(instr.shape, fresh_names)
            if made:
                instr.shape, changed = shape, True
                fresh |= made
        if not fresh and not any(i.shape.is_symbolic for i in instrs):
            return changed
        mapping = _solve(instrs, fresh)
        if mapping:
            substitute_instructions(instrs, mapping)
            changed = True
        changed = _remove_identities(module) or changed
        module.shape_facts = _facts([i for comp in module.computations for i in comp.instructions], mapping)
        return changed


def _name_unknown(shape: Shape, names) -> tuple[Shape, set[str]]:
    if shape is None or shape.is_token:
        return shape, set()
    if shape.is_tuple:
        parts = [_name_unknown(s, names) for s in shape.tuple_shapes]
        return Shape.tuple([p[0] for p in parts]), set().union(*(p[1] for p in parts))
    if UNBOUNDED not in shape.dims:
        return shape, set()
    made, dims = set(), []
    for d, dyn in zip(shape.dims, shape.dynamic):
        if d == UNBOUNDED and dyn:
            name = next(names)
            made.add(name)
            d = symbol(name)
        dims.append(d)
    out = Shape.array(shape.element_type, dims, shape.layout, shape.dynamic)
    return (out.as_buffer() if shape.is_buffer else out), made


def _pairs(instr: HloInstruction):
    """The op's equalities, and the result's sizes equal to what shape inference derives from the
    operands (concatenate's sum, pad's and slice's arithmetic, ...)."""
    if instr.shape is None or instr.shape.is_token:
        return
    rule = _EQUALITIES.get(instr.opcode)
    if rule is None and OPCODES.get(instr.opcode) is not None and OPCODES[instr.opcode].is_elementwise:
        rule = _same_shape
    if rule is not None:
        yield from rule(instr)
    try:
        inferred = infer_shape(instr)
    except (HloError, IndexError, KeyError, TypeError):
        return
    yield from _leaf_pairs(inferred, instr.shape)


def _solve(instrs, fresh: set[str]) -> dict:
    """fresh/named symbol → its class representative, to a fixed point with reshape products."""
    mapping: dict = {}
    for _ in range(8):
        classes = _Classes()
        for instr in instrs:
            for a, b in _pairs(instr):
                classes.union(substitute(a, mapping), substitute(b, mapping))
        step = {}
        for group in classes.groups():
            rep = min(group, key=lambda d: _rank(d, fresh))
            for d in group:
                name = _lone_variable(d)
                if name is not None and d != rep:
                    step[name] = rep
        step.update(_reshape_products(instrs, mapping, fresh))
        step = {k: v for k, v in step.items() if mapping.get(k) != v}
        if not step:
            break
        mapping = {k: substitute(v, step) for k, v in mapping.items()} | step
        mapping = {k: substitute(v, mapping) for k, v in mapping.items()}
    return mapping


def _lone_variable(d) -> str | None:
    """The variable's name when `d` is one variable alone."""
    if isinstance(d, DimExpr) and len(d.variables) == 1:
        name = next(iter(d.variables))
        return name if d == symbol(name) else None
    return None


def _rank(d, fresh: set[str]):
    """Which member of a class represents it: constants, then named symbols, then fresh ones."""
    if isinstance(d, int):
        return (0, 0, "")
    n_fresh = len(d.variables & fresh)
    return (1 + (n_fresh > 0), n_fresh, str(d))


def _reshape_products(instrs, mapping: dict, fresh: set[str]) -> dict:
    out = {}
    for instr in instrs:
        if instr.opcode != "reshape":
            continue
        a = _product(substitute(d, mapping) for d in instr.operands[0].shape.dims)
        b = _product(substitute(d, mapping) for d in instr.shape.dims)
        for known, unknown in ((a, b), (b, a)):
            free = variables_of([unknown]) & fresh
            if len(free) != 1 or variables_of([known]) & fresh:
                continue
            name = next(iter(free))
            coefficient = substitute(unknown, {name: 1})
            if substitute(unknown, {name: 0}) == 0 and coefficient != 0:
                value = floordiv(known, coefficient)
                if value * coefficient == known:
                    out[name] = value
    return out


def _product(dims):
    out = 1
    for d in dims:
        out = out * d
    return out


def _facts(instrs, mapping: dict) -> list[str]:
    """Per symbolic size of the rewritten module: the symbols merged into it and where it occurs
    (`instruction[dimension]`, the first few)."""
    where: dict = {}
    for instr in instrs:
        if instr.shape is not None and not instr.shape.is_tuple and instr.shape.is_symbolic:
            for i, d in enumerate(instr.shape.dims):
                if isinstance(d, DimExpr):
                    where.setdefault(d, []).append(f"{instr.name}[{i}]")
    lines = []
    for size, places in sorted(where.items(), key=lambda kv: str(kv[0])):
        merged = sorted(k for k, v in mapping.items() if v == size)
        shown = ", ".join(places[:6]) + (f", ... ({len(places) - 6} more)" if len(places) > 6 else "")
        lines.append(" == ".join([str(size)] + merged) + f" at {shown}")
    return lines


def _remove_identities(module: HloModule) -> bool:
    """Broadcasts and reshapes whose result has the operand's shape (in order) are no-ops."""
    changed = False
    for comp in module.computations:
        for instr in list(comp.instructions):
            if instr.opcode not in ("broadcast", "reshape") or instr.shape.is_tuple:
                continue
            operand = instr.operands[0]
            identity = instr.attrs.get("dimensions", tuple(range(instr.shape.rank))) == tuple(range(instr.shape.rank))
            if identity and operand.shape.dims == instr.shape.dims and instr.shape.is_symbolic:
                comp.replace_instruction(instr, operand)
                changed = True
    return changed
