"""Every bug the random-program differential tester found, as the reduced module that shows it, kept
as a regression test once fixed (none is open; an open one would go here as a strict xfail naming
what is wrong, so that its fix shows as an XPASS)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlocc.testing.differential import differential

BACKENDS = ("cpu", "cuda-sim")

FIXED = {
    # The reduction emitter's input map folded a size-1 extent to the constant 0 and asked the
    # range of a plain int (AttributeError in affine_expr.expr_range): a reduce of a scalar with
    # no reduced dimension. Fixed in codegen/emitters/reduction.py.
    "scalar_reduce_no_dimensions": ("""HloModule scalar_reduce
mul {
  a = f16[] parameter(0)
  b = f16[] parameter(1)
  ROOT r = f16[] multiply(a, b)
}
ENTRY main {
  p0 = f16[] parameter(0)
  c0 = f16[] constant(3)
  v1 = f16[] reduce(p0, c0), dimensions={}, to_apply=mul
  ROOT v3 = f16[] cosine(v1)
}""", [np.float16(2)]),
    # Buffer assignment let a one-op fusion write its output into its operand's buffer although
    # their layouts differ ({0,2,1} in, {2,1,0} out): the loop kernel overwrote elements it had not
    # read yet. Found as a permuted result with NaN in other places; reduced by `hlocc reduce`.
    # Fixed in runtime/buffer_sharing.py (a fusion shares only an operand with the same element order).
    "fusion_shares_operand_with_another_layout": ("""HloModule random
ENTRY main {
  p0 = f32[3,2,3]{1,2,0} parameter(0)
  p1 = f32[3,3,3]{0,2,1} parameter(1)
  v0 = f32[3,2,3]{0,2,1} dot(p0, p1), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_contracting_dims={1}
  ROOT v4 = f32[3,2,3]{2,1,0} erf(v0)
}""", [np.random.default_rng(0).standard_normal((3, 2, 3)).astype(np.float32),
       np.random.default_rng(1).standard_normal((3, 3, 3)).astype(np.float32)]),
    # reduce-window: the indexing simplifier narrowed an output dimension whose other positions see
    # only padding (`d2 in [1, 1]` for a size-1 operand dimension padded 1 low) and the kernel did not
    # check the output index against that domain, so padding-only windows read the operand.
    # Fixed in codegen/emitters/elemental_reduce.py (_window_check checks the narrowed dimensions).
    "reduce_window_padding_only_window": ("""HloModule rw_pad
min {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT r = s32[] minimum(a, b)
}
ENTRY main {
  p = s32[1,5,1]{1,2,0} parameter(0)
  c = s32[] constant(0)
  ROOT v = s32[1,5,2]{1,2,0} reduce-window(p, c), window={size=1x2x1 stride=2x1x1 pad=0_0x0_1x1_0}, to_apply=min
}""", [np.array([3, -1, 4, -5, 9], np.int32).reshape(1, 5, 1)]),
    # reduce-window: the simplifier started a window symbol past its padding (`s1 in [1, 2]`) but the
    # kernel's window loop counted from 0, so it visited the padding and missed the last position.
    # Fixed in codegen/emitters/elemental_reduce.py (the loop adds the symbol's lower bound).
    "reduce_window_symbol_starts_past_padding": ("""HloModule rw_symbol
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT r = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[3,2] parameter(0)
  c = f32[] constant(0)
  ROOT v = f32[2,1] reduce-window(x, c), window={size=2x3 stride=1x2 pad=0_0x1_1}, to_apply=max
}""", [np.array([0.3, 5, -2.45, -3.08, 1, 2], np.float32).reshape(3, 2)]),
    # An entry result whose tuple element declares another layout than its operand: the leaf aliases
    # the operand's buffer and was read back with the tuple's layout (a permuted output). Fixed in
    # runtime/executable.py (output_leaf_shape: read with the forwarded value's layout).
    "tuple_element_layout_differs_from_operand": ("""HloModule tuple_layout
ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  n = f32[2,3]{0,1} negate(p)
  ROOT out = (f32[2,3]{1,0}) tuple(n)
}""", [np.arange(6, dtype=np.float32).reshape(2, 3)]),
    # A value forwarded through a tuple and get-tuple-element whose declared layout differs from the
    # layout its bytes are in: buffer assignment aliased the forwarded leaf to the operand's buffer and
    # the kernel reading the get-tuple-element used the declared layout (elements read permuted).
    # Fixed by passes/layout_copies.py (a copy to the declared layout at each forwarding position,
    # as XLA's layout assignment inserts).
    "forwarded_value_read_with_another_layout": ("""HloModule forwarded_layout
ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  n = f32[2,3]{0,1} negate(p)
  t = (f32[2,3]{1,0}) tuple(n)
  g = f32[2,3]{1,0} get-tuple-element(t), index=0
  ROOT e = f32[2,3] exponential(g)
}""", [np.arange(6, dtype=np.float32).reshape(2, 3)]),
    # The same through a while: its init, body parameter and body root declare other layouts than
    # the values they receive (found while fixing the one above; layout-copies covers it too).
    "while_state_read_with_another_layout": ("""HloModule while_layout
cond {
  s = (s32[], f32[2,3]{1,0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2,3]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  j = s32[] add(i, one)
  x = f32[2,3]{0,1} get-tuple-element(s), index=1
  y = f32[2,3]{1,0} add(x, x)
  ROOT r = (s32[], f32[2,3]{1,0}) tuple(j, y)
}
ENTRY main {
  p = f32[2,3]{1,0} parameter(0)
  n = f32[2,3]{0,1} negate(p)
  z = s32[] constant(0)
  t = (s32[], f32[2,3]{0,1}) tuple(z, n)
  w = (s32[], f32[2,3]{1,0}) while(t), condition=cond, body=body
  g = f32[2,3]{0,1} get-tuple-element(w), index=1
  ROOT e = f32[2,3] exponential(g)
}""", [np.arange(6, dtype=np.float32).reshape(2, 3) / 7]),
    # sine (and cosine) of huge f32 arguments: the kernels' Cody-Waite reduction gave sin(±1) = ∓0.841
    # for |x| = 3.4e38 or 1e30 where the interpreter (numpy, an exact reduction) gives -0.522 and
    # -0.791. Found while f32 max was one of the random programs' special inputs. Fixed in
    # codegen/math/approx_trig.py (an exact reduction for every f32: 2/pi in 29-bit parts, in f64).
    "sine_of_huge_arguments": ("""HloModule huge_sine
ENTRY main {
  p = f32[4] parameter(0)
  ROOT s = f32[4] sine(p)
}""", [np.array([3.4028235e38, -3.4028235e38, 1e30, 12345.678], np.float32)]),
    # A CPU column reduction whose column chunks (3 of 8 lanes) are no multiple of its block (2
    # threads): the spare thread of the last block ran the row loop unchecked, reading the rows
    # after the input's last and writing the side output (tanh) past its end, into the reduce's
    # output buffer (its first 8 columns wrong, depending on thread order). Found by the JAX
    # program hunt as `tanh(x) * 2 + x.mean(), jnp.max(x, axis=0)` on f32[1000,1000]. Fixed in
    # codegen/emitters/reduction.py (_emit_cpu_columns checks the thread's first column).
    "column_reduction_spare_thread": ("""HloModule column_spare_thread
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[1000,24] parameter(0)
  t = f32[1000,24] tanh(x)
  c = f32[] constant(-inf)
  r = f32[24] reduce(x, c), dimensions={0}, to_apply=max
  ROOT out = (f32[1000,24], f32[24]) tuple(t, r)
}""", [np.random.default_rng(0).standard_normal((1000, 24)).astype(np.float32)]),
    # bf16 sums accumulated in bf16 stall once the running sum reaches 256 (its ulp is 2): a column
    # sum and a cumsum (`jnp.cumsum` on bf16 is this reduce-window, not widened by JAX) of 200 values
    # in [1, 2) gave 256 where XLA and the evaluator give ~300. Found by the JAX program hunt. Fixed
    # by passes/narrow_float_reductions.py (bf16/f16 sums and products accumulate in f32).
    "bf16_sums_stall_at_256": ("""HloModule bf16_sums
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}
ENTRY e {
  x = bf16[200,2] parameter(0)
  z = bf16[] constant(0)
  s = bf16[2] reduce(x, z), dimensions={0}, to_apply=add
  c = bf16[200,2] reduce-window(x, z), window={size=200x1 pad=199_0x0_0}, to_apply=add
  ROOT t = (bf16[2], bf16[200,2]) tuple(s, c)
}""", [(np.random.default_rng(0).random((200, 2)) + 1).astype(ml_dtypes.bfloat16)]),
    # A TensorFlow-style module whose reduce names its operand as a control predecessor: the reduce
    # became a fusion with that control predecessor, the add was fused into it, and the schedule
    # refused the name ("control predecessor 'add.5' is not in computation"). Fixed in
    # passes/fusion_utils.py (control predecessors fused away are dropped).
    "control_predecessor_fused_away": ("""HloModule tf_control
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
ENTRY e {
  p = f32[4,3] parameter(0)
  c = f32[] constant(2)
  b = f32[4,3] broadcast(c), dimensions={}
  add.5 = f32[4,3] add(p, b)
  lo = f32[] constant(-inf)
  r = f32[] reduce(add.5, lo), dimensions={0,1}, to_apply=max, control-predecessors={%add.5}
  ROOT t = (f32[4,3], f32[]) tuple(add.5, r)
}""", [np.arange(12, dtype=np.float32).reshape(4, 3)]),
}


@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_bug_stays_fixed(name):
    text, args = FIXED[name]
    outcomes = differential(text, args, BACKENDS)
    assert not outcomes, "\n".join(map(str, outcomes))


def test_column_reduction_spare_thread_stays_in_bounds():
    """The column reduction above in bounds-checked mode: the spare thread read element 24000 of
    the f32[1000,24] input (a BoundsCheckError) before the fix."""
    text, args = FIXED["column_reduction_spare_thread"]
    outcomes = differential(text, args, ("cpu",), check_bounds=True)
    assert not outcomes, "\n".join(map(str, outcomes))
