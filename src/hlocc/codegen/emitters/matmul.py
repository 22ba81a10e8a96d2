"""The matmul emitter: a dot fusion (passes/gemm_fusion.py; hero analysis's GEMM kind) as one
`xla.matmul` whose epilogue region computes the fusion root from the accumulator (issue 17).

Every dot is a (b, m, n, k) problem: the batch dimensions linearised into b (in lhs_batch order),
lhs's free dimensions into m, rhs's into n, the contracting dimensions into k (row-major in each
group). The op's maps go from (b, m, n, k) straight to the *physical* index of each fusion
parameter: through the dot's dimension numbers, then back through the operand's fused transposes,
copies, bitcasts, reshapes and widening converts (their output-to-input indexing maps), then the
parameter's layout. So a transposed operand costs no copy; how the panels are packed for speed
is the schedule's business (codegen/schedule/), not the emitter's.

A convolution (`convolution-gemm-fusion`, passes/convolution_to_gemm.py) is an *implicit gemm*:
`convolution_problem` gives its (b, m, n, k) maps, the kernel and the input read through them
(the input's map is the im2col: `n` the output position, `k` the input feature and kernel tap),
so the packing of the B panel reads the patches straight from the input and no patch matrix
exists (through a per-block table of the output positions' offsets: transforms/matmul/packed.py).
Its window has no padding or lhs dilation left (the pass moved them into a `pad`).

The epilogue block (acc, b, m, n) rounds the accumulator to the dot's type, as XLA does, injects
it as the dot's value into element emission (the reduction emitter's mechanism) and computes the
root at the dot's logical index: bias reads, activations and converts are emitted inline there.

The launch is one thread, or with a parallel schedule one block per block tile (the thread pool
runs them; `transform.hlocc.parallelize` maps the tile loops to the block id). When
`codegen/schedule/choice.schedule_for` gives one, its transform script (`transform.hlocc.*`) is
added to the kernel module and `transform-interpreter` applies it first in the pipeline; without
one the naive lowering (`lower-matmul`) is exact, not fast.
"""

from __future__ import annotations

import functools
import math

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import Float64Type, FunctionType, ModuleOp
from xdsl.ir import Region

from hlocc.analysis.affine_expr import Const, Expr, dim
from hlocc.analysis.fusion_adaptor import FusionAdaptor
from hlocc.analysis.hero import gemm_hero
from hlocc.analysis.indexing_map import IndexingMap, Variable, compose
from hlocc.analysis.indexing_map_text import map_to_text
from hlocc.analysis.interval import Interval
from hlocc.analysis.launch import LaunchDims
from hlocc.analysis.linearize import delinearize
from hlocc.analysis.op_indexing import output_to_input
from hlocc.codegen.context import parse_module
from hlocc.codegen.elemental.element_emitter import ElementEmitter, deep_recursion
from hlocc.codegen.elemental.storage import array_leaves, to_storage
from hlocc.codegen.emitters.base import FusionEmitterBase, KernelModule, entry_block, thread_and_block_ids
from hlocc.codegen.ir import YieldOp
from hlocc.codegen.ir.builder import KernelBuilder
from hlocc.codegen.ir.matmul_ops import MATMUL_DIMS, MatmulOp
from hlocc.codegen.ir.mlir_types import element_type
from hlocc.codegen.schedule import schedule_for
from hlocc.codegen.schedule.choice import MatmulProblem
from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.printer import computation_fingerprint
from hlocc.hlo.types import F32, Shape

_ABSORBED = frozenset({"transpose", "copy", "bitcast", "reshape", "convert"})


def problem_of(dot: HloInstruction) -> tuple[list[int], list[list[Expr]]]:
    """(B, M, N, K) and, over the dimensions (b, m, n, k), the logical index expressions of lhs,
    rhs and the dot's output (module doc)."""
    lhs, rhs = dot.operand(0).shape, dot.operand(1).shape
    attrs = dot.attrs
    lb, rb = list(attrs.get("lhs_batch_dims", ())), list(attrs.get("rhs_batch_dims", ()))
    lc, rc = list(attrs.get("lhs_contracting_dims", ())), list(attrs.get("rhs_contracting_dims", ()))
    lf = [d for d in range(lhs.rank) if d not in lb and d not in lc]
    rf = [d for d in range(rhs.rank) if d not in rb and d not in rc]
    groups = ([lhs.dims[d] for d in lb], [lhs.dims[d] for d in lf], [rhs.dims[d] for d in rf],
              [lhs.dims[d] for d in lc])
    sizes = [math.prod(g) for g in groups]
    b_idx, m_idx, n_idx, k_idx = (delinearize(dim(i), g) if g else [] for i, g in enumerate(groups))

    def place(rank: int, parts) -> list[Expr]:
        exprs: list[Expr] = [Const(0)] * rank
        for dims, idx in parts:
            for d, e in zip(dims, idx):
                exprs[d] = e
        return exprs

    lhs_exprs = place(lhs.rank, [(lb, b_idx), (lf, m_idx), (lc, k_idx)])
    rhs_exprs = place(rhs.rank, [(rb, b_idx), (rf, n_idx), (rc, k_idx)])
    return sizes, [lhs_exprs, rhs_exprs, [*b_idx, *m_idx, *n_idx]]


def convolution_problem(conv: HloInstruction) -> tuple[list[int], tuple[int, int], list[list[Expr]]]:
    """(B, M, N, K), which convolution operand is the matmul's lhs and which its rhs, and over
    (b, m, n, k) the logical index expressions of those two and of the output.

    k is (input feature in the group, kernel taps), taps minor unless the input's feature
    dimension is its minor one (then k's reads of the input are contiguous). Two orientations:
    - features along m, output positions along n, b = (batch, feature group); lhs = kernel,
      rhs = input: an NCHW-like output is stored along its rows (n its unit stride);
    - (batch, positions) along m, features along n, b = the feature group; lhs = input,
      rhs = kernel (packed once per block, not once per image), where
      passes/convolution_to_gemm.py `features_on_n` says (an NHWC-like output, or few positions,
      with a kernel whose output features are contiguous)."""
    from hlocc.evaluator.convolution import conv_dimension_numbers
    from hlocc.passes.convolution_to_gemm import features_on_n as features_along_n

    x, w = conv.operand(0).shape, conv.operand(1).shape
    dn = conv_dimension_numbers(conv)
    window = list(conv.attrs.get("window", ()))
    groups = int(conv.attrs.get("feature_group_count", 1))
    batch, cg = x.dims[dn.input_batch], w.dims[dn.kernel_input_feature]
    fg = w.dims[dn.kernel_output_feature] // groups
    taps = [w.dims[d] for d in dn.kernel_spatial]
    positions = [conv.shape.dims[d] for d in dn.output_spatial]
    features_on_n = features_along_n(conv)
    input_feature_minor = x.rank > 1 and x.minor_to_major[0] == dn.input_feature
    k = cg * math.prod(taps)
    if features_on_n:
        sizes = [groups, batch * math.prod(positions), fg, k]
        g, f_idx = dim(0), dim(2)
        nb, *p_idx = delinearize(dim(1), [batch, *positions])
    else:
        sizes = [batch * groups, fg, math.prod(positions), k]
        (nb, g), f_idx = delinearize(dim(0), [batch, groups]), dim(1)
        p_idx = delinearize(dim(2), positions) if positions else []
    k_groups = [*taps, cg] if input_feature_minor else [cg, *taps]
    k_idx = delinearize(dim(3), k_groups)
    c_idx, t_idx = (k_idx[-1], k_idx[:-1]) if input_feature_minor else (k_idx[0], k_idx[1:])
    kernel: list[Expr] = [Const(0)] * w.rank
    kernel[dn.kernel_output_feature] = g * fg + f_idx
    kernel[dn.kernel_input_feature] = c_idx
    inputs: list[Expr] = [Const(0)] * x.rank
    inputs[dn.input_batch] = nb
    inputs[dn.input_feature] = g * cg + c_idx
    out: list[Expr] = [Const(0)] * conv.shape.rank
    out[dn.output_batch] = nb
    out[dn.output_feature] = g * fg + f_idx
    for i, wd in enumerate(window):
        kernel[dn.kernel_spatial[i]] = (taps[i] - 1 - t_idx[i]) if wd.reversal else t_idx[i]
        inputs[dn.input_spatial[i]] = p_idx[i] * wd.stride + t_idx[i] * wd.rhs_dilate
        out[dn.output_spatial[i]] = p_idx[i]
    if features_on_n:
        return sizes, (0, 1), [inputs, kernel, out]
    return sizes, (1, 0), [kernel, inputs, out]


def problem_variables(sizes: list[int]) -> tuple[Variable, ...]:
    """The (b, m, n, k) dimensions; an empty extent gets the range [0, 0] (its loop runs 0 times)."""
    return tuple(Variable(Interval(0, max(s, 1) - 1), name) for s, name in zip(sizes, MATMUL_DIMS))


def physical(m: IndexingMap, shape: Shape) -> IndexingMap:
    """`m` (to logical indices of `shape`) continued to its physical indices; constraints dropped
    (they hold by construction: every (b, m, n, k) in range reads an element in range)."""
    results = tuple(m.results[d] for d in reversed(shape.minor_to_major))
    return IndexingMap(m.dims, results)


def trace_to_parameter(operand: HloInstruction, m: IndexingMap) -> tuple[HloInstruction, IndexingMap]:
    """The fusion parameter a dot operand reads, and `m` continued to that parameter's logical
    indices through the fused layout changes and converts above it."""
    node = operand
    while node.opcode != "parameter":
        if node.opcode not in _ABSORBED:
            raise UnsupportedError(f"unsupported: '{node.name}' ({node.opcode}) computes a dot operand in a dot "
                                   "fusion; only transposes, copies, bitcasts, reshapes and converts are absorbed")
        m = compose(m, output_to_input(node)[0])
        node = node.operand(0)
    return node, m


class MatmulEmitter(FusionEmitterBase):
    def dot(self) -> HloInstruction:
        fusion = self.fusion
        dot = gemm_hero(FusionAdaptor.for_computation(fusion), [fusion.root])
        if dot is None:
            raise UnsupportedError(f"unsupported: fusion '{fusion.name}' is not a dot with an elementwise epilogue")
        return dot

    def emit(self) -> KernelModule:
        dot = self.dot()
        if dot.opcode == "convolution":
            sizes, order, (lhs_exprs, rhs_exprs, out_exprs) = convolution_problem(dot)
        else:
            (sizes, (lhs_exprs, rhs_exprs, out_exprs)), order = problem_of(dot), (0, 1)
        operands = [dot.operand(i) for i in order]
        types = {dot.shape.element_type.name, *(o.shape.element_type.name for o in operands)}
        if not types <= {"f16", "bf16", "f32", "f64"}:
            raise UnsupportedError(f"unsupported: dot '{dot.name}' of {', '.join(sorted(types))} in the matmul "
                                   "emitter (floats only)")
        partitioned = self.partition()
        root = self.fusion.root
        out_shape = array_leaves(root.shape)[0]
        variables = problem_variables(sizes)
        params = self.fusion.parameters
        maps = []
        for operand, exprs in zip(operands, (lhs_exprs, rhs_exprs)):
            param, m = trace_to_parameter(operand, IndexingMap(variables, tuple(exprs)))
            maps.append((param, physical(m, param.shape)))
        out_map = physical(IndexingMap(variables, tuple(out_exprs)), out_shape)

        element_types = (*(o.shape.element_type.name for o in operands), dot.shape.element_type.name)
        problem = MatmulProblem(tuple(sizes), element_types, " ; ".join(map_to_text(m) for _, m in maps) + " ; "
                                + map_to_text(out_map), computation_fingerprint(self.fusion), self.fusion)
        if self.target.kind == "gpu":  # the GPU kernel stages the parameters themselves: their types decide
            stored = (*(p.shape.element_type.name for p, _ in maps), dot.shape.element_type.name)
            schedule = schedule_for(sizes, stored, problem, gpu=self.target)
        else:
            schedule = schedule_for(sizes, element_types, problem)
        launch = LaunchDims(schedule.threads, schedule.blocks(sizes)) if schedule is not None else LaunchDims(1, 1)
        block, param_types, out_types = entry_block(self.fusion, [out_shape])
        b = KernelBuilder(block)
        # transform.hlocc.parallelize maps the block loops to the block id; packed panels are block
        # scratch (xla.allocate_shared), which the CPU's block functions need a thread id for.
        if schedule is not None and (schedule.parallel or schedule.pack or schedule.warp_grid):
            thread_and_block_ids(b, launch)
        args = list(block.args)
        acc_type = Float64Type() if "f64" in types else element_type(F32)
        epilogue = MatmulOp.epilogue_block(acc_type)
        e = ElementEmitter(KernelBuilder(epilogue), partitioned.fusion, None, args[:len(params)])
        acc = epilogue.args[0]
        dot_type = element_type(dot.shape.element_type)
        e.overrides[id(dot)] = [acc if dot_type == acc_type else e.b.add(arith.TruncFOp(acc, dot_type))]
        index = e.apply(IndexingMap(variables[:3], tuple(out_exprs)), list(epilogue.args[1:]))
        with deep_recursion():
            value = e.scalar(root, index)
        e.b.insert(YieldOp(to_storage(e.b, value, out_shape.element_type)))
        lhs_param, rhs_param = (p for p, _ in maps)
        matmul = MatmulOp(args[lhs_param.parameter_number], args[rhs_param.parameter_number], args[len(params)],
                          [maps[0][1], maps[1][1], out_map], sizes, Region(epilogue))
        b.insert(matmul)
        b.insert(func.ReturnOp(matmul.result))
        entry = func.FuncOp(self.name, FunctionType.from_lists([*param_types, *out_types], out_types), Region(block))
        module = ModuleOp([entry])
        if schedule is not None:
            attach_script(module, schedule.script())
        return KernelModule(module, self.name, launch, len(params), 1, emitter="gemm")


def attach_script(module: ModuleOp, script: str) -> None:
    """Add a transform script's ops to a kernel module: `transform-interpreter`, first in the
    kernel pipeline, runs it on the matmul and removes it. The script is parsed once per text
    (`_parsed_script`) and cloned: a program's kernels share a few schedules, and cloning the
    dozen ops costs a tenth of parsing them (0.2 against 1.7 ms, 5 ms for the first)."""
    for op in _parsed_script(script).ops:
        module.body.block.add_op(op.clone())


@functools.lru_cache(maxsize=64)
def _parsed_script(script: str) -> ModuleOp:
    """The parsed transform script (read only: `attach_script` adds clones of its ops)."""
    return parse_module(script)


__all__ = ["MatmulEmitter", "convolution_problem", "problem_of", "trace_to_parameter"]
