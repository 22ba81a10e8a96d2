"""`expand-float-ops`: math functions on f32 and f64 (scalars and vectors) become arith ops plus the
primitive math ops the LLVM translator maps to vectorizable intrinsics (math.absf, math.sqrt,
math.floor, math.ceil, math.trunc, math.roundeven, math.round, math.copysign). No libm call and
no llvm.tanh-like intrinsic remains, so kernels vectorize on the CPU and need no libdevice on
NVPTX. Runs after `lower-narrow-floats` (which computes bf16/f16/f8 math in f32).

Each function is written once over `FloatBuilder` (modules approx_exp_log, approx_trig,
approx_special); tests/codegen/math/test_math_accuracy.py runs the same functions on numpy and checks
these bounds, in ulps between the result and the correctly rounded value, over the whole domain
(subnormals, specials, overflow and underflow included):

    function   f32  f64   notes
    exp         1    2
    exp2        1    2
    expm1       2    3    f32: 2^n (e^r - 1) + (2^n - 1); f64: Kahan's (u - 1) x / log u
    log         1    1
    log2        1    1
    log10       1    1
    log1p       2    2
    sin, cos    1    1    for |x| < 2^33 * pi/2 (~1.35e10); beyond, not accurate
    tan         1    2    same range
    atan        2    1
    atan2       2    2
    tanh        7    8    XLA's rational approximations, evaluated without FMA contraction;
                5         on FMA targets (expand-float-ops-fma, the host CPU's): XLA:CPU's FMA form
    erf         5    2    f32: XLA's rational approximation; f64: Cephes
    cbrt        1    1
    rsqrt       1    1    1 / sqrt(x)
    powf        1    2

A math op that lower-narrow-floats promoted from bf16 (attribute `xla.bf16_rounded`: a widened bf16
argument, a result rounded straight to bf16) may take a cheaper form that is equal after that
rounding for all 65,536 bf16 inputs (`BF16_APPROXIMATIONS`: tanh without its clamp and small-|x|
select).

Specials follow C99 Annex F (NaN in, NaN out; signed zeros; exact infinities; overflow to inf;
gradual underflow), powf's included (pow(x, 0) = 1, pow(1, y) = 1, negative bases with integral
exponents, ...).

The `complex` dialect's arithmetic and functions (complex.add/sub/mul/div/neg/abs/exp/expm1/log/
log1p/sqrt/sin/cos/tan/tanh) become the same on their parts (`approx_complex`, numpy's and glibc's
algorithms: see there), taken apart with complex.re/complex.im (or the operands of the
complex.create that built them) and put together with complex.create; complex.mul and complex.abs
take their fused multiply-add forms in expand-float-ops-fma, as numpy does on FMA hosts; the part of
a complex.create folds to its operand. Only complex.create/re/im and complex values in memory,
selects and control flow remain (the LLVM translator's `{fN, fN}` structs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects import complex as complex_dialect
from xdsl.dialects.builtin import ModuleOp, VectorType
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter, PatternRewriteWalker, RewritePattern

from hlocc.codegen.math import approx_complex, approx_exp_log, approx_special, approx_trig
from hlocc.codegen.math.float_builder import F32, F64, FloatBuilder, Val
from hlocc.codegen.math.float_builder_xdsl import XdslBackend, complex_parts, expand_elementwise, format_of
from hlocc.codegen.transforms.util import walk_ops

#: math op name -> its approximation (operands in order).
MATH_APPROXIMATIONS: dict[str, Callable[..., Val]] = {
    "math.exp": approx_exp_log.exp,
    "math.exp2": approx_exp_log.exp2,
    "math.expm1": approx_exp_log.expm1,
    "math.log": approx_exp_log.log,
    "math.log2": approx_exp_log.log2,
    "math.log10": approx_exp_log.log10,
    "math.log1p": approx_exp_log.log1p,
    "math.powf": approx_exp_log.powf,
    "math.sin": approx_trig.sin,
    "math.cos": approx_trig.cos,
    "math.tan": approx_trig.tan,
    "math.atan": approx_trig.atan,
    "math.atan2": approx_trig.atan2,
    "math.tanh": approx_special.tanh,
    "math.erf": approx_special.erf,
    "math.cbrt": approx_special.cbrt,
    "math.rsqrt": approx_special.rsqrt,
}

#: On FMA targets: the variants XLA:CPU emits there.
FMA_APPROXIMATIONS: dict[str, Callable[..., Val]] = {**MATH_APPROXIMATIONS, "math.tanh": approx_special.tanh_fma,
                                                     "math.exp": approx_exp_log.exp_fma,
                                                     "math.exp2": approx_exp_log.exp2_fma}

#: Discardable unit attribute that lower-narrow-floats puts on a math op it promoted from bf16: its
#: operands are widened bf16 values and its result is rounded straight to bf16.
BF16_ROUNDED = "xla.bf16_rounded"

#: For ops tagged `BF16_ROUNDED`: cheaper forms, equal after the rounding to bf16 for every input.
BF16_APPROXIMATIONS: dict[str, Callable[..., Val]] = {"math.tanh": approx_special.tanh_bf16}
BF16_FMA_APPROXIMATIONS: dict[str, Callable[..., Val]] = {"math.tanh": approx_special.tanh_bf16_fma}

#: The math ops left after this pass (the LLVM translator's vocabulary besides arith).
PRIMITIVE_MATH_OPS = frozenset({
    "math.absf", "math.sqrt", "math.floor", "math.ceil", "math.trunc", "math.roundeven", "math.round",
    "math.copysign", "math.fma",
})  # fmt: skip


def complex_expansions(fma: bool) -> dict[str, Callable[..., object]]:
    """complex op name -> its expansion on (re, im) pairs (`fma`: the fused forms of mul and abs)."""
    c = approx_complex
    return {
        "complex.add": c.add, "complex.sub": c.sub, "complex.neg": c.neg, "complex.div": c.div,
        "complex.mul": functools.partial(c.mul, fma=fma), "complex.abs": functools.partial(c.abs_, fma=fma),
        "complex.exp": c.exp, "complex.expm1": c.expm1, "complex.log": c.log, "complex.log1p": c.log1p,
        "complex.sqrt": c.sqrt, "complex.sin": c.sin, "complex.cos": c.cos, "complex.tan": c.tan,
        "complex.tanh": c.tanh,
    }  # fmt: skip


@dataclass
class ExpandMathFunction(RewritePattern):
    """Replaces one f32/f64 math function op by its approximation."""

    approximations: dict[str, Callable[..., Val]]
    bf16_approximations: dict[str, Callable[..., Val]]  # for ops tagged BF16_ROUNDED

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        fn = self.approximations.get(op.name)
        if BF16_ROUNDED in op.attributes:
            fn = self.bf16_approximations.get(op.name, fn)
        if fn is None or len(op.results) != 1:
            return
        result_type = op.results[0].type
        elem = result_type.get_element_type() if isinstance(result_type, VectorType) else result_type
        fmt = format_of(elem)
        if fmt not in (F32, F64):
            return
        value = expand_elementwise(rewriter, op, fn, [fmt] * len(op.operands), result_type)
        rewriter.replace(op, [], [value])


@dataclass
class ExpandComplexOp(RewritePattern):
    """Replaces one complex arithmetic op or function by the same on its parts; folds complex.re and
    complex.im of a complex.create."""

    expansions: dict[str, Callable[..., object]]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if isinstance(op, complex_dialect.ReOp | complex_dialect.ImOp) \
                and isinstance(op.complex.owner, complex_dialect.CreateOp):
            create = op.complex.owner
            rewriter.replace(op, [], [create.real if isinstance(op, complex_dialect.ReOp) else create.imaginary])
            return
        fn = self.expansions.get(op.name)
        if fn is None:
            return
        fmt = format_of(op.operands[0].type.element_type)
        b = FloatBuilder(XdslBackend(rewriter))
        out = fn(b, *(tuple(b.wrap(p, fmt) for p in complex_parts(v, rewriter.insert)) for v in op.operands))
        if isinstance(out, tuple):
            rewriter.replace(op, complex_dialect.CreateOp(out[0].raw, out[1].raw, op.results[0].type))
        else:
            rewriter.replace(op, [], [out.raw])


@dataclass(frozen=True)
class ExpandFloatOpsPass(ModulePass):
    """Expands f32/f64 math functions into arith and primitive math ops (see the module docstring)."""

    name = "expand-float-ops"
    fma: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        # Complex expansions call the real approximations directly: no math function op is left.
        # (Their walk only where a complex op is: a scan of op names costs a fraction of it.)
        if any(o.name.startswith("complex.") for o in walk_ops(op)):
            PatternRewriteWalker(ExpandComplexOp(complex_expansions(self.fma)),
                                 apply_recursively=False).rewrite_module(op)
        table = FMA_APPROXIMATIONS if self.fma else MATH_APPROXIMATIONS
        bf16_table = BF16_FMA_APPROXIMATIONS if self.fma else BF16_APPROXIMATIONS
        PatternRewriteWalker(ExpandMathFunction(table, bf16_table), apply_recursively=False).rewrite_module(op)


@dataclass(frozen=True)
class ExpandFloatOpsFmaPass(ExpandFloatOpsPass):
    """expand-float-ops for targets with fused multiply-add (the host CPU's pipeline)."""

    name = "expand-float-ops-fma"
    fma: bool = True
