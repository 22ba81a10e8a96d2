"""`gemm-fusion`: a dot, the layout changes of its operands and its elementwise epilogue (bias add,
activation, convert, scale) as one fusion, which the matmul emitter (codegen/emitters/matmul.py)
compiles into one kernel (issue 17). XLA:CPU calls a library for the dot and runs the epilogue as
separate kernels; XLA:GPU's Triton gemm fusions are the closest counterpart.

For each dot whose operands and result are f16, bf16, f32 or f64 arrays of static shape:

- the **epilogue** is the largest set S of elementwise ops with the dot's dimensions, reachable
  from the dot through such ops, with a single exit: every member of S and the dot has all its
  users in S except the last one (the fusion root). Operands of S from outside that do not depend
  on the dot become fusion parameters; a broadcast or a constant among them is fused too (cheap to
  recompute, and the bias is then read as a vector, not a materialised matrix);
- **operand producers**: a transpose, copy, bitcast, reshape or widening float convert chain above
  an operand, used only by it, is fused too: the emitter absorbs it into the operand's indexing
  map (no copy is made).

`gemm-fusion-auto` (`gemm="auto"`) fuses only the dots where the generated kernel is the faster
choice on the CPU, decided by measurement (`auto_fuses`: up to `AUTO_MAX_WORK` multiply-adds, and
up to `AUTO_MAX_NAIVE_WORK` for a dot the emitter lowers naively: today both are the small products
whose library call costs more than the product); the others stay library calls.

The fusion is `kind=kCustom`; its dot gets `backend_config={"__hlocc_gemm":{}}` (hero analysis's
`GEMM_DOT_MARKER`: the fused computation alone then says it is a dot fusion, hero kind GEMM), and
`inline-library-fusions` leaves it alone. The pass runs only in the cpu and cuda
pipelines with `gemm="codegen"` (passes/pipeline.py `cpu_pipeline`, `cuda_pipeline`), before
priority fusion.
"""

from __future__ import annotations

from hlocc.analysis.hero import GEMM_DOT_MARKER, GEMM_HERO_OPCODES, EmitterKind, emitter_kind, is_elementwise
from hlocc.hlo.attributes import RawAttr
from hlocc.hlo.ir import HloInstruction, HloModule
from hlocc.hlo.shape_util import static_dims
from hlocc.passes.base import HloPass, register_hlo_pass
from hlocc.passes.fusion_utils import FusionBuilder

GEMM_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
"""Element types the matmul emitter computes (in f32, or f64 for f64)."""

_OPERAND_PRODUCERS = frozenset({"transpose", "copy", "bitcast", "reshape", "convert"})


AUTO_MAX_WORK = 1 << 14
"""Multiply-adds (B x M x N x K) up to which `gemm-fusion-auto` fuses a dot: the naive kernels'
bound (AUTO_MAX_NAIVE_WORK), so no register-blocked kernel is generated under auto. Measured on the
2-vCPU AVX-512 host on a quiet machine (benchmarks/programs.py --cases matmul --gemm library,auto):
mlp_f32's 4.2M-products ran as fast through numpy's OpenBLAS as generated (0.155 vs 0.158 ms; an
earlier loaded run, where OpenBLAS' second thread waited on a busy core, gave the kernels 1.2x),
while each register-blocked kernel costs 0.3-0.5 s of compilation (mlp_f32 77 -> 379 ms cold; the
torch transformer block 1.9 -> 2.5 s) and the library call none. `gemm="codegen"` still generates
every dot."""

NAIVE_BELOW = 32 ** 3
"""Per batch, M x N x K under which the matmul emitter keeps the naive lowering: the value of
codegen/schedule/choice.py's NAIVE_BELOW (which this layer cannot import; a test checks they agree)."""

AUTO_MAX_NAIVE_WORK = 1 << 14
"""Multiply-adds up to which `gemm-fusion-auto` fuses a dot that gets the naive lowering. Its
scalar k loop runs about 0.3-0.4 ns per multiply-add (one thread): the corpus's batched bf16
product (8 x 32x24x16, 98K) took 35 us as a kernel against the library call's 23 us, a 8x32x96
product 15 us against ~6 us, while attention_f32's 4K-products gain 2x as kernels; each such
kernel also costs ~0.15-0.3 s of compilation where the library call costs none."""


def dot_work(dot: HloInstruction) -> int:
    """B x M x N x K of a dot: the result's elements times the contracted elements."""
    lhs = dot.operand(0).shape
    contracted = 1
    for d in dot.attrs.get("lhs_contracting_dims", ()):
        contracted *= lhs.dims[d]
    return dot.shape.num_elements * contracted


def batch_size(dot: HloInstruction) -> int:
    """B of a dot: the product of its batch dimensions."""
    lhs = dot.operand(0).shape
    size = 1
    for d in dot.attrs.get("lhs_batch_dims", ()):
        size *= lhs.dims[d]
    return size


def auto_fuses(dot: HloInstruction) -> bool:
    """Whether `gemm-fusion-auto` makes `dot` a generated kernel (AUTO_MAX_WORK, AUTO_MAX_NAIVE_WORK)."""
    work = dot_work(dot)
    naive = work < NAIVE_BELOW * batch_size(dot)
    return is_gemm_dot(dot) and work <= (AUTO_MAX_NAIVE_WORK if naive else AUTO_MAX_WORK)


def is_gemm_fusion(instr: HloInstruction) -> bool:
    """Whether `instr` is a dot fusion this pass made (hero analysis's GEMM kind)."""
    return instr.opcode == "fusion" and emitter_kind(instr) is EmitterKind.GEMM


def _type(instr: HloInstruction) -> str:
    return instr.shape.element_type.name


def is_gemm_dot(dot: HloInstruction) -> bool:
    """Whether the matmul emitter computes `dot`: float arrays of static shape."""
    shapes = [dot.shape, *(o.shape for o in dot.operands)]
    return (dot.opcode == "dot" and all(s.is_array and not any(s.dynamic) for s in shapes)
            and all(s.element_type.name in GEMM_TYPES for s in shapes) and "sparsity" not in dot.attrs)


def _absorbable_producer(instr: HloInstruction) -> bool:
    if instr.opcode not in _OPERAND_PRODUCERS or len(instr.users) != 1 or not instr.shape.is_array:
        return False
    if instr.opcode == "convert":  # exact only when it widens a float
        source = instr.operand(0).shape.element_type
        return _type(instr.operand(0)) in GEMM_TYPES and _type(instr) in GEMM_TYPES and \
            source.bits <= instr.shape.element_type.bits
    return True


def _ancestors_within(exit_: HloInstruction, members: set[int]) -> list[HloInstruction]:
    """The members that reach `exit_` (inclusive), through members only."""
    found, pending = {}, [exit_]
    while pending:
        node = pending.pop()
        if id(node) in found or id(node) not in members:
            continue
        found[id(node)] = node
        pending += node.operands
    return list(found.values())


def epilogue(dot: HloInstruction) -> list[HloInstruction]:
    """The epilogue's ops in def-before-use order, its root last (empty: the dot alone)."""
    dims = static_dims(dot.shape)
    candidates: list[HloInstruction] = []
    seen = {id(dot)}
    pending = [dot]
    while pending:
        for user in pending.pop().users:
            if id(user) not in seen and is_elementwise(user) and user.shape.is_array \
                    and static_dims(user.shape) == dims and not any(user.shape.dynamic):
                seen.add(id(user))
                candidates.append(user)
                pending.append(user)
    order = {id(i): k for k, i in enumerate(dot.parent.instructions)}
    candidates.sort(key=lambda i: order[id(i)])
    allowed = {id(c) for c in candidates} | {id(dot)}
    for exit_ in reversed(candidates):  # the furthest valid exit gives the largest epilogue
        members = _ancestors_within(exit_, allowed)
        ids = {id(m) for m in members}
        if id(dot) not in ids:
            continue
        inner = [m for m in members if m is not exit_]
        if all(id(u) in ids for m in inner for u in m.users) and not _side_inputs_depend_on(dot, members, ids):
            return sorted((m for m in members if m is not dot), key=lambda i: order[id(i)])
    return []


def _side_inputs_depend_on(dot: HloInstruction, members: list[HloInstruction], ids: set[int]) -> bool:
    """Whether an operand from outside the epilogue is computed from the dot (fusing would cycle)."""
    pending = [o for m in members for o in m.operands if id(o) not in ids]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if node is dot:
            return True
        if id(node) not in seen:
            seen.add(id(node))
            pending += node.operands
    return False


def fuse_dot(builder: FusionBuilder, dot: HloInstruction) -> HloInstruction:
    """Make `dot` (or a convolution: passes/convolution_to_gemm.py), its epilogue and its operands'
    layout changes one fusion; returns it."""
    ops = epilogue(dot)
    root = ops[-1] if ops else dot
    fusion = builder.create_fusion(root, "kCustom")
    for producer in reversed([dot, *ops[:-1]] if ops else []):
        builder.fuse_producer(fusion, producer)
        if not producer.users:
            builder.remove(producer)
    for side in [o for o in fusion.operands if o.opcode in ("broadcast", "constant") and o.shape.is_array]:
        builder.fuse_producer(fusion, side)
        if not side.users:
            builder.remove(side)
    for scalar in [o for o in fusion.operands if o.opcode == "constant" and o.shape.is_array and o.shape.rank == 0]:
        builder.fuse_producer(fusion, scalar)
        if not scalar.users:
            builder.remove(scalar)
    changed = True
    while changed:  # operand transposes, copies, bitcasts and widening converts
        changed = False
        fused_dot = next(i for i in fusion.attrs["calls"].instructions if i.opcode in GEMM_HERO_OPCODES)
        for operand in fused_dot.operands:
            node = operand
            while node.opcode != "parameter" and node.operands:
                node = node.operand(0)
            if node.opcode != "parameter":  # a fused constant (a convolution's baked-in weights) or iota
                continue
            outer = fusion.operands[node.parameter_number]
            if _absorbable_producer(outer) and outer.users == [fusion]:
                builder.fuse_producer(fusion, outer)
                builder.remove(outer)
                changed = True
                break
    fused = fusion.attrs["calls"]
    next(i for i in fused.instructions if i.opcode in GEMM_HERO_OPCODES).attrs["backend_config"] = \
        RawAttr(f'{{"{GEMM_DOT_MARKER}":{{}}}}')
    return fusion


@register_hlo_pass
class GemmFusion(HloPass):
    """Dot fusions for the matmul emitter (module doc)."""

    name = "gemm-fusion"

    def fuses(self, dot: HloInstruction) -> bool:
        return is_gemm_dot(dot)

    def run(self, module: HloModule) -> bool:
        builder = FusionBuilder(module)
        changed = False
        fused = {id(i.attrs["calls"]) for c in module.computations for i in c.instructions if i.opcode == "fusion"}
        for comp in [c for c in module.computations if id(c) not in fused]:
            for dot in [i for i in comp.instructions if i.opcode == "dot" and self.fuses(i)]:
                fuse_dot(builder, dot)
                changed = True
        builder.finish()
        return changed


@register_hlo_pass
class GemmFusionAuto(GemmFusion):
    """Dot fusions only where the generated kernel wins (`auto_fuses`, module doc)."""

    name = "gemm-fusion-auto"

    def fuses(self, dot: HloInstruction) -> bool:
        return auto_fuses(dot)


__all__ = ["AUTO_MAX_NAIVE_WORK", "AUTO_MAX_WORK", "NAIVE_BELOW", "GemmFusion", "GemmFusionAuto", "auto_fuses",
           "batch_size", "dot_work", "epilogue", "fuse_dot", "is_gemm_dot",
           "is_gemm_fusion"]
