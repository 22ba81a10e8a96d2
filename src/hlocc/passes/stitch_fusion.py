"""`stitch-fusion`: BladeDISC's stitch fusion (issue 18; seed 001): a row reduction fusion and the
fusions that read its result along the same rows (another reduction of the rows, the elementwise
ops that read the reduced values broadcast back along the row) become ONE fusion, which the stitch
emitter (codegen/emitters/stitch.py) compiles into one kernel: a softmax's max, its sum of
exponentials and its division, three kernels after priority and multi-output fusion, become one.

It runs after multi-output fusion (passes/pipeline.py `CPU_FUSION`). For each fusion that computes
a reduce (a reduction fusion, or a loop fusion at small sizes), in a computation's order, a group
grows from it through its users: a user
fusion (loop or reduction) joins when

- every operand it takes from outside the group does not depend on the group (no cycle), and
- the joined computation is stitchable (analysis/stitch_info.py: every reduce reduces the same
  minor dimension of the same shape, and every value computed from a reduce is read only at its
  own row), and its rows fit the on-chip budget (analysis/cost_model.py `stitch_fits`: the
  row-shaped inputs of a row within half of a core's L2). A symbolic row count stitches; a
  symbolic row length on the cpu only within `speculative_rows()`: the dynamic program then runs
  the stitched plan where the runtime row fits (`cost_model.stitch_row_range`, evaluated per
  binding) and a plan built without it elsewhere (runtime/plan_speculation.py). On the GPU
  (`stitch-fusion-gpu`) a symbolic row length always stitches: the GPU form keeps no row on chip
  (each pass re-reads the row from global memory, L1/L2), and a warp or a block per row with a
  runtime trip count (codegen/emitters/stitch_gpu.py) is the GPU's only schedule for such a row
  (the symbolic loop emitter runs a thread per row). For the same reason a lone reduction fusion
  over a runtime row length becomes a stitch fusion of its own there.

A group of two fusions or more is replaced by one fusion of kind kCustom named
`stitch_<root opcodes>_fusion`, whose reduces carry `STITCH_MARKER` in their backend config (the
fused computation alone then says it is a stitch fusion). Its outputs are the group's values that
are read outside it (tuple root when there are several); its parameters the distinct values it reads.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from hlocc.analysis.cost_model import stitch_fits
from hlocc.analysis.hero import STITCH_MARKER, EmitterKind, analyze, is_elementwise
from hlocc.analysis.stitch_info import NotStitchable, StitchPlan, stitch_plan
from hlocc.hlo.attributes import RawAttr
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.name_uniquer import NameUniquer
from hlocc.hlo.symbolic import DimExpr
from hlocc.hlo.types import Shape
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.fusion_utils import attach, clone_instruction, distinct, fusion_outputs

_MEMBER_KINDS = (EmitterKind.LOOP, EmitterKind.REDUCTION)


def _member_kind(instr: HloInstruction) -> EmitterKind | None:
    """LOOP or REDUCTION for a fusion that may join a group (an unfused elementwise op, which
    fusion-wrapper would make a loop fusion of its own, is a LOOP member too), else None."""
    if instr.opcode != "fusion":
        return EmitterKind.LOOP if is_elementwise(instr) and instr.shape.is_array else None
    if instr.attrs.get("kind") not in ("kLoop", "kInput"):
        return None
    root = instr.attrs["calls"].root
    if root.shape.is_tuple and root.opcode != "tuple":  # a variadic reduce's tuple (argmax): not one value
        return None
    kind = analyze(instr).kind
    return kind if kind in _MEMBER_KINDS else None


def _holds_reduce(instr: HloInstruction) -> bool:
    """A fusion that may join a group and computes a reduce: a group starts from it (a reduction
    fusion, or at small sizes a loop fusion computing its reduce elementally)."""
    return _member_kind(instr) is not None and instr.opcode == "fusion" and any(
        i.opcode == "reduce" for i in instr.attrs["calls"].instructions)


class _Merged:
    """The computation a group of fusions becomes, built apart from the module (nothing outside it
    changes until `StitchFusion._replace`): its external operands and the (member, output index)
    each of its outputs stands for."""

    def __init__(self, members: list[HloInstruction], name: str):
        self.members = members
        ids = {id(m) for m in members}
        self.comp = HloComputation(name)
        names = NameUniquer(after_suffix=False)
        self.operands: list[HloInstruction] = []
        self.sizes: list[HloInstruction] = []  # the get-dimension-sizes it computes itself
        params: dict[int, HloInstruction] = {}
        outputs: dict[int, list[HloInstruction]] = {}
        read = {id(op) for m in members for op in m.operands}

        def resolve(outer: HloInstruction) -> HloInstruction:
            if id(outer) in ids:
                return outputs[id(outer)][0]
            if outer.opcode == "get-tuple-element" and id(outer.operand(0)) in ids:
                return outputs[id(outer.operand(0))][outer.attrs["index"]]
            if _runtime_size(outer) and id(outer.operand(0)) in read:
                if id(outer) not in params:  # (the kernel reads the size from its dims, no host step)
                    params[id(outer)] = attach(self.comp, clone_instruction(
                        outer, [resolve(outer.operand(0))], names.unique(outer.name)))
                    self.sizes.append(outer)
                return params[id(outer)]
            if id(outer) not in params:
                k = len(self.operands)
                self.operands.append(outer)
                params[id(outer)] = attach(self.comp, HloInstruction(names.unique(f"param_{k}"), "parameter",
                                                                     outer.shape, parameter_number=k))
            return params[id(outer)]

        for m in members:
            if m.opcode != "fusion":
                outputs[id(m)] = [attach(self.comp, clone_instruction(
                    m, [resolve(op) for op in m.operands], names.unique(m.name)))]
                continue
            inner = m.attrs["calls"]
            mapping: dict[int, HloInstruction] = {}
            for x in inner.post_order():
                if x.opcode == "parameter":
                    mapping[id(x)] = resolve(m.operands[x.parameter_number])
                elif not (x is inner.root and x.opcode == "tuple"):
                    mapping[id(x)] = attach(self.comp, clone_instruction(
                        x, [mapping[id(op)] for op in x.operands], names.unique(x.name)))
            outputs[id(m)] = [mapping[id(o)] for o in fusion_outputs(m)]
        # Outputs: the members' values read outside the group (or the computation's root).
        self.outputs: list[tuple[HloInstruction, int]] = []
        values: list[HloInstruction] = []
        for m in members:
            for k, value in enumerate(outputs[id(m)]):
                if any(_used_outside(v, ids) for v in _outer_values(m, k)):
                    self.outputs.append((m, k))
                    values.append(value)
        if len(values) == 1:
            self.comp.root = values[0]
        else:
            self.comp.root = attach(self.comp, HloInstruction(names.unique("tuple"), "tuple",
                                                              Shape.tuple([v.shape for v in values]), values))


def _runtime_size(instr: HloInstruction) -> bool:
    """A get-dimension-size of a symbolic dimension: a group that reads it and its operand computes
    it in the kernel (JAX's mean over [b, n] divides by it), not in a host step of its own."""
    return instr.opcode == "get-dimension-size" and isinstance(
        instr.operand(0).shape.dims[instr.attrs["dimensions"][0]], DimExpr)


def _outer_values(m: HloInstruction, k: int) -> list[HloInstruction]:
    """The instructions outside `m` that stand for its output k (itself, or its get-tuple-elements)."""
    if m.opcode != "fusion" or m.attrs["calls"].root.opcode != "tuple":
        return [m]
    return [u for u in distinct(m.users) if u.opcode == "get-tuple-element" and u.attrs["index"] == k]


def _used_outside(v: HloInstruction, members: set[int]) -> bool:
    if v.parent is not None and v.parent.root is v:
        return True
    return any(id(u) not in members and not (u.opcode == "get-tuple-element" and u.operand(0) is v)
               for u in v.users)


def _depends_on_group(members: list[HloInstruction]) -> set[int]:
    """Ids of the instructions that read the group's values, directly or not."""
    seen: set[int] = set()
    pending = [u for m in members for u in m.users]
    while pending:
        x = pending.pop()
        if id(x) not in seen:
            seen.add(id(x))
            pending.extend(x.users)
    return seen


_SPECULATIVE_ROWS: ContextVar[bool] = ContextVar("speculative_rows", default=False)


@contextmanager
def speculative_rows(enabled: bool = True) -> Iterator[None]:
    """Within it, the cpu `stitch-fusion` also stitches rows of symbolic length, which it cannot
    check against the budget: the dynamic program that asks for it (runtime/plan_speculation.py)
    runs the stitched plan only at the sizes where `stitch_row_range` holds, and a plan built
    without it elsewhere."""
    token = _SPECULATIVE_ROWS.set(enabled)
    try:
        yield
    finally:
        _SPECULATIVE_ROWS.reset(token)


def row_inputs(plan: StitchPlan, operands: list[HloInstruction]) -> int:
    """The row-shaped inputs of a stitch group (each stage re-reads them): its live rows."""
    return max(1, sum(1 for p in operands if p.shape.is_array and p.shape.dims == plan.row_shape.dims))


def _fits(plan: StitchPlan, merged: _Merged, target: str) -> bool:
    if isinstance(plan.row_length, DimExpr):  # (the GPU form keeps no row on chip: module doc)
        return target == "gpu" or _SPECULATIVE_ROWS.get()
    live_rows = row_inputs(plan, merged.operands)
    return stitch_fits(plan.row_length, plan.row_shape.element_type, target, live_rows=live_rows)


@register_hlo_pass
class StitchFusion(HloPass):
    """See the module doc."""

    name = "stitch-fusion"
    target = "cpu"  # whose on-chip budget the rows must fit (cost_model.stitch_fits)

    def run(self, module: HloModule) -> bool:
        fused = {id(i.attrs["calls"]) for i in module.all_instructions() if i.opcode == "fusion"}
        changed = False
        self._names = NameUniquer((c.name for c in module.computations), after_suffix=False)
        for comp in list(module.computations):
            if id(comp) not in fused:
                changed |= self._run_on(module, comp)
        return changed

    def _run_on(self, module: HloModule, comp: HloComputation) -> bool:
        changed = False
        done: set[int] = set()
        for seed in comp.post_order():
            if id(seed) in done or seed.parent is None or not _holds_reduce(seed):
                continue
            group = self._grow(seed)
            done.update(id(m) for m in group)
            if len(group) > 1 or self._runtime_row(seed):
                self._replace(module, comp, group)
                changed = True
        return changed

    def _runtime_row(self, seed: HloInstruction) -> bool:
        """A lone reduction over a runtime row length is a stitch fusion of its own on the GPU: the
        GPU stitch form is the row schedule over a runtime length (a warp or a block per row,
        strided), where the reduction emitter's is static and a symbolic reduction would be the
        loop emitter's, one thread per row."""
        if self.target != "gpu":
            return False
        try:
            return isinstance(stitch_plan(_Merged([seed], "trial").comp).row_length, DimExpr)
        except NotStitchable:
            return False

    def _grow(self, seed: HloInstruction) -> list[HloInstruction]:
        group = [seed]
        tried: set[int] = set()
        while True:
            ids = {id(m) for m in group}
            readers = _depends_on_group(group)
            candidates = [u for m in group for u in distinct(m.users)]
            candidates = [c for x in candidates
                          for c in (distinct(x.users) if x.opcode == "get-tuple-element" else [x])]
            added = False
            for c in distinct(candidates):
                if id(c) in ids or id(c) in tried or _member_kind(c) is None:
                    continue
                external = [op for op in c.operands if id(op) not in ids and not (
                    op.opcode == "get-tuple-element" and id(op.operand(0)) in ids)]
                if any(id(op) in readers for op in external):
                    continue  # it also reads a value computed from the group elsewhere: a cycle
                trial = [*group, c]
                try:
                    merged = _Merged(trial, "trial")
                    fits = _fits(stitch_plan(merged.comp), merged, self.target)
                except NotStitchable:
                    fits = False
                if not fits:
                    tried.add(id(c))
                    continue
                group = trial
                added = True
                break
            if not added:
                return group

    def _replace(self, module: HloModule, comp: HloComputation, group: list[HloInstruction]) -> None:
        merged = _Merged(group, "")
        roots = merged.comp.root.operands if merged.comp.root.opcode == "tuple" else [merged.comp.root]
        words = "_".join(sorted({r.opcode for r in roots})).replace("-", "_")
        merged.comp.name = self._names.unique(f"fused_stitch_{words}")
        for instr in merged.comp.instructions:
            if instr.opcode == "reduce":
                instr.attrs["backend_config"] = RawAttr(f'{{"{STITCH_MARKER}":{{}}}}')
        module.add_computation(merged.comp)
        fusion = attach(comp, HloInstruction(module.unique_name(f"stitch_{words}_fusion"), "fusion",
                                             merged.comp.root.shape, list(merged.operands),
                                             {"kind": "kCustom", "calls": merged.comp}))
        ids = {id(m) for m in group}
        for k, (m, index) in enumerate(merged.outputs):
            if len(merged.outputs) == 1:
                new = fusion
            else:
                new = attach(comp, HloInstruction(module.unique_name("get-tuple-element"), "get-tuple-element",
                                                  fusion.shape.tuple_shapes[k], [fusion], {"index": k}))
            for old in _outer_values(m, index):
                for user in distinct(old.users):
                    if id(user) not in ids:
                        user.operands = [new if op is old else op for op in user.operands]
                        new.users.append(user)
                old.users = [u for u in old.users if id(u) in ids]
                if comp.root is old:
                    comp.root = new
        dead = [*group, *(u for m in group if m.opcode == "fusion"
                          for u in distinct(m.users) if u.opcode == "get-tuple-element")]
        for x in dead:
            x.users = []
        comp.remove_instructions(distinct(dead))
        comp.remove_instructions([g for g in merged.sizes if not g.users and g is not comp.root])
        module.remove_computations([m.attrs["calls"] for m in group if m.opcode == "fusion"])


@register_hlo_pass
class GpuStitchFusion(StitchFusion):
    """`stitch-fusion` with the GPU's budget (a block's shared memory), for the cuda pipeline."""

    name = "stitch-fusion-gpu"
    target = "gpu"


__all__ = ["GpuStitchFusion", "StitchFusion", "row_inputs", "speculative_rows"]
