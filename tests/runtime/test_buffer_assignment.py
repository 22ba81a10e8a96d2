"""Buffer assignment on graphs whose best reuse and peak memory are known by hand. Every case also
runs on its assigned memory (memory_runtime.py) and must give the reference evaluator's bits."""

import numpy as np
import pytest
from memory_runtime import assert_no_live_overlap, assert_runs_like_the_evaluator

import hlocc
from hlocc.cli import random_inputs
from hlocc.errors import HloError, UnsupportedError
from hlocc.runtime.buffer_assignment import AllocationKind, BufferSlice, assign_buffers
from hlocc.runtime.schedule import schedule_module

OPTIONS = [
    {},
    {"temp_layout": "allocations"},
    {"reuse_operand_buffers": False},
    {"heap_algorithm": "best-fit"},
    {"heap_algorithm": "decreasing-size", "reuse_operand_buffers": False},
]


def assign(text: str, schedule: str = "post-order", args=None, **options):
    """Assign with a pinned schedule algorithm, check the invariants, and run on the memory."""
    module = hlocc.parse_hlo(text)
    assignment = assign_buffers(module, schedule_module(module, schedule), **options)
    assignment.verify()
    assert_no_live_overlap(assignment)
    assert_runs_like_the_evaluator(module, assignment, args if args is not None else random_inputs(module, 0))
    return module, assignment


def instr(module, name):
    return next(i for c in module.computations for i in c.instructions if i.name == name)


def temps(assignment):
    return [a for a in assignment.allocations if a.kind in (AllocationKind.TEMP, AllocationKind.ARENA)]


# -- reuse of dead temporaries --------------------------------------------------------------------

CHAIN = """HloModule chain
ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] reverse(p), dimensions={0}
  b = f32[16] reverse(a), dimensions={0}
  c = f32[16] reverse(b), dimensions={0}
  ROOT d = f32[16] reverse(c), dimensions={0}
}"""


def test_chain_of_temporaries_needs_two_buffers():
    module, a = assign(CHAIN)
    (arena,) = temps(a)
    assert arena.kind is AllocationKind.ARENA and arena.size == 2 * 64
    assert a.slice_for(instr(module, "a")) == a.slice_for(instr(module, "c")) == BufferSlice(arena.index, 0, 64)
    assert a.slice_for(instr(module, "b")) == BufferSlice(arena.index, 64, 64)
    assert a.peak_bytes == 128 + 64 and a.temp_lower_bound_bytes == 128
    _, per_buffer = assign(CHAIN, temp_layout="allocations")
    assert [t.size for t in temps(per_buffer)] == [64, 64]


ELEMENTWISE_CHAIN = CHAIN.replace("reverse", "negate").replace(", dimensions={0}", "")


def test_elementwise_chain_writes_over_its_dying_operands():
    module, a = assign(ELEMENTWISE_CHAIN)
    assert temps(a) == [], "a, b, c and d are one buffer: the output"
    assert len({a.slice_for(instr(module, n)) for n in "abcd"}) == 1
    assert a.peak_bytes == 64
    _, no_reuse = assign(ELEMENTWISE_CHAIN, reuse_operand_buffers=False)
    assert no_reuse.temp_bytes == 128


DIAMOND = """HloModule diamond
ENTRY e {
  p = f32[16] parameter(0)
  a = f32[16] reverse(p), dimensions={0}
  b = f32[16] reverse(a), dimensions={0}
  c = f32[16] sine(a)
  ROOT d = f32[16] add(b, c)
}"""


def test_diamond():
    # Ticks: a 1, b 2, c 3, d 4. c overwrites a (its last reader); d overwrites b.
    module, a = assign(DIAMOND)
    assert a.same_buffer(instr(module, "c"), instr(module, "a"))
    assert a.same_buffer(instr(module, "d"), instr(module, "b"))
    assert a.temp_bytes == 64 and a.peak_bytes == 128
    # Without reuse a, b and c are live together at c.
    _, no_reuse = assign(DIAMOND, reuse_operand_buffers=False)
    assert no_reuse.temp_bytes == 192 and no_reuse.temp_lower_bound_bytes == 192 and no_reuse.peak_bytes == 256


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("text", [CHAIN, ELEMENTWISE_CHAIN, DIAMOND], ids=["chain", "elementwise", "diamond"])
def test_every_option_runs_correctly(text, options):
    assign(text, **options)


# -- in-place updates -----------------------------------------------------------------------------

DUS = """HloModule dus
ENTRY e {
  p = f32[16] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  x = f32[16] negate(p)
  d = f32[16] dynamic-update-slice(x, u, i)
  ROOT r = f32[16] exponential(d)
}"""

DUS_OPERAND_LIVE = """HloModule dus_live
ENTRY e {
  p = f32[16] parameter(0)
  u = f32[4] parameter(1)
  i = s32[] parameter(2)
  x = f32[16] negate(p)
  d = f32[16] dynamic-update-slice(x, u, i)
  ROOT r = f32[16] add(d, x)
}"""


def test_dynamic_update_slice_in_place():
    module, a = assign(DUS)
    d, x = instr(module, "d"), instr(module, "x")
    assert a.slice_for(d) == a.slice_for(x) and a.same_buffer(d, x)
    assert a.copies_before(d) == []


def test_dynamic_update_slice_whose_operand_is_read_later_gets_a_copy():
    module, a = assign(DUS_OPERAND_LIVE)
    d, x = instr(module, "d"), instr(module, "x")
    assert not a.slices_alias(a.slice_for(d), a.slice_for(x))
    (copy,) = a.copies_before(d)
    assert (copy.source, copy.destination) == (a.slice_for(x), a.slice_for(d))


FUSED_DUS = """HloModule fused_dus
fused_dus {
  p0 = f32[16,8] parameter(0)
  p1 = f32[1,8] parameter(1)
  p2 = s32[] parameter(2)
  z = s32[] constant(0)
  ds = f32[1,8] dynamic-slice(p0, p2, z), dynamic_slice_sizes={1,8}
  add = f32[1,8] add(ds, p1)
  ROOT dus = f32[16,8] dynamic-update-slice(p0, add, p2, z)
}
ENTRY e {
  p = f32[16,8] parameter(0)
  u = f32[1,8] parameter(1)
  i = s32[] parameter(2)
  x = f32[16,8] sine(p)
  ROOT f = f32[16,8] fusion(x, u, i), kind=kLoop, calls=fused_dus
}"""


def test_fusion_with_in_place_root_shares_its_operand():
    module, a = assign(FUSED_DUS)
    f, x = instr(module, "f"), instr(module, "x")
    assert a.same_buffer(f, x) and a.copies_before(f) == []
    with pytest.raises(HloError, match="fused or embedded computation 'fused_dus'"):
        a.slice_for(instr(module, "dus"))


def test_fusion_reading_another_window_is_copied_not_shared():
    # The dynamic-slice reads row i+1 while the root writes row i: not safe in place.
    text = FUSED_DUS.replace("ds = f32[1,8] dynamic-slice(p0, p2, z)",
                             "one = s32[] constant(1)\n  i1 = s32[] add(p2, one)\n"
                             "  ds = f32[1,8] dynamic-slice(p0, i1, z)")
    module, a = assign(text)
    f, x = instr(module, "f"), instr(module, "x")
    assert not a.same_buffer(f, x)
    assert [(c.source, c.destination) for c in a.copies_before(f)] == [(a.slice_for(x), a.slice_for(f))]


def test_scatter_in_place():
    text = """HloModule s
add {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT s = f32[] add(l, r)
}
ENTRY e {
  p = f32[8] parameter(0)
  idx = s32[2,1] parameter(1)
  upd = f32[2] parameter(2)
  x = f32[8] negate(p)
  ROOT sc = f32[8] scatter(x, idx, upd), update_window_dims={}, inserted_window_dims={0},
      scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
}"""
    module, a = assign(text)
    assert a.same_buffer(instr(module, "sc"), instr(module, "x"))


# -- tuples, forwarding ---------------------------------------------------------------------------

TUPLES = """HloModule tuples
ENTRY e {
  p = f32[4,4] parameter(0)
  q = f32[16] parameter(1)
  n = f32[4,4] negate(p)
  t = (f32[4,4], f32[16]) tuple(n, q)
  g = f32[4,4] get-tuple-element(t), index=0
  r = f32[16] reshape(g)
  b = f32[2,8] bitcast(r)
  s = f32[16] reshape(f32[16,1]{0,1} reshape(b))
  ROOT o = (f32[2,8], f32[16]) tuple(b, s)
}"""


def test_tuples_and_bitcasts_forward_their_operands_buffers():
    module, a = assign(TUPLES)
    n = instr(module, "n")
    for name in ("g", "r", "b"):
        assert a.slice_for(instr(module, name)) == a.slice_for(n), name
    assert a.slice_for(instr(module, "t"), (0,)) == a.slice_for(n)
    assert a.slice_for(instr(module, "t"), (1,)) == a.slice_for(instr(module, "q"))
    assert a.output_slices[0] == a.slice_for(n)
    with pytest.raises(HloError, match="tuples have no storage of their own"):
        a.slice_for(instr(module, "t"))
    assert a.has_slice(instr(module, "t"), (1,)) and not a.has_slice(instr(module, "t"))


def test_reshape_to_a_non_row_major_layout_is_not_a_bitcast():
    module, a = assign(TUPLES)
    inner = instr(module, "s").operands[0]  # f32[16,1]{0,1}: size-1 minor dim, still a bitcast
    assert a.slice_for(inner) == a.slice_for(instr(module, "b"))
    text = TUPLES.replace("f32[16,1]{0,1} reshape(b)", "f32[4,4]{0,1} reshape(b)")
    module, a = assign(text)
    assert a.slice_for(instr(module, "s").operands[0]) != a.slice_for(instr(module, "b"))


def test_outputs_get_storage_of_their_own():
    text = """HloModule outs
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[4] constant({1, 2, 3, 4})
  n = f32[4] negate(p)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(p, n, n, c)
}"""
    module, a = assign(text)
    out = a.output_slices
    assert len(set(out)) == 4 and all(a.allocations[s.allocation_index].kind is AllocationKind.OUTPUT for s in out)
    assert a.allocations[out[1].allocation_index].output_indices == [(1,)]
    copies = {(c.source, c.destination) for c in a.exit_copies}
    p, c, n = (a.slice_for(instr(module, x)) for x in "pcn")
    assert copies == {(p, out[0]), (n, out[2]), (c, out[3])}
    assert a.slice_for(instr(module, "n")) == out[1]
    assert a.allocations[c.allocation_index].is_read_only


# -- while loops ----------------------------------------------------------------------------------

WHILE = """HloModule loop
cond {
  s = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ROOT lt = pred[] compare(i, s32[] constant(10)), direction=LT
}
body {
  s = (s32[], f32[16]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[16] get-tuple-element(s), index=1
  i2 = s32[] add(i, s32[] constant(1))
  u = f32[1] reshape(f32[] convert(i))
  x2 = f32[16] dynamic-update-slice(x, u, i)
  ROOT t = (s32[], f32[16]) tuple(i2, x2)
}
ENTRY e {
  p = f32[16] parameter(0)
  neg = f32[16] negate(p)
  w = (s32[], f32[16]) while((s32[], f32[16]) tuple(s32[] constant(0), neg)), condition=cond, body=body
  ROOT r = f32[16] get-tuple-element(w), index=1
}"""


def test_while_state_aliases_init_parameters_root_and_result():
    module, a = assign(WHILE)
    body, cond = module.computation("body"), module.computation("cond")
    w = instr(module, "w")
    state = a.slice_for(w, (1,))
    for where in [(body.parameters[0], (1,)), (cond.parameters[0], (1,)), (body.root, (1,)),
                  (instr(module, "neg"), ()), (instr(module, "x2"), ()), (module.entry.root, ())]:
        assert a.slice_for(*where) == state, where[0].name
    assert a.output_slices == (state,)
    # The counter: i2 is computed while i is still read (by the convert and the update), so the
    # new value is copied into the state after each iteration; the init is a constant, copied in.
    counter = a.slice_for(w, (0,))
    assert [(c.source, c.destination) for c in a.copies_after(w)] == [(a.slice_for(instr(module, "i2")), counter)]
    (init,) = a.copies_before(w)
    assert init.destination == counter and a.allocations[init.source.allocation_index].kind is AllocationKind.CONSTANT


def test_condition_never_writes_over_the_state():
    # `sub` reads the condition's parameter for the last time, but the body and the result inherit
    # that state: it must not be overwritten in the condition.
    text = """HloModule cond_reads
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  sub = f32[4] negate(x)
  m = f32[] reduce(sub, f32[] constant(-inf)), dimensions={0}, to_apply=max
  big = pred[] compare(m, f32[] constant(100)), direction=LT
  small = pred[] compare(i, s32[] constant(4)), direction=LT
  ROOT both = pred[] and(big, small)
}
max {
  l = f32[] parameter(0)
  r = f32[] parameter(1)
  ROOT m = f32[] maximum(l, r)
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  ROOT t = (s32[], f32[4]) tuple(s32[] add(i, s32[] constant(1)), f32[4] add(x, x))
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT w = (s32[], f32[4]) while((s32[], f32[4]) tuple(s32[] constant(0), p)), condition=cond, body=body
}"""
    module, a = assign(text)
    assert not a.same_buffer(instr(module, "sub"), module.computation("cond").parameters[0], (), (1,))


SWAP = """HloModule swap
cond {
  s = (f32[8], f32[8], s32[]) parameter(0)
  i = s32[] get-tuple-element(s), index=2
  ROOT lt = pred[] compare(i, s32[] constant(5)), direction=LT
}
body {
  s = (f32[8], f32[8], s32[]) parameter(0)
  a = f32[8] get-tuple-element(s), index=0
  b = f32[8] get-tuple-element(s), index=1
  i = s32[] get-tuple-element(s), index=2
  ROOT t = (f32[8], f32[8], s32[]) tuple(b, a, s32[] add(i, s32[] constant(1)))
}
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  ROOT w = (f32[8], f32[8], s32[]) while((f32[8], f32[8], s32[]) tuple(p0, p1, s32[] constant(0))),
      condition=cond, body=body
}"""


def test_swapping_loop_state_goes_through_a_scratch_buffer():
    module, a = assign(SWAP)
    w = instr(module, "w")
    s0, s1 = a.slice_for(w, (0,)), a.slice_for(w, (1,))
    moves = [(c.source, c.destination) for c in a.copies_after(w)]
    assert len(moves) == 3
    scratch = moves[0][1]
    assert moves == [(s0, scratch), (s1, s0), (scratch, s1)]
    assert not scratch.overlaps(s0) and not scratch.overlaps(s1)


def test_loop_result_forwards_a_parameter():
    # The parameter is the init and stays untouched (caller-owned); the state is a copy of it.
    module, a = assign(SWAP)
    p0 = instr(module, "p0")
    assert a.slice_for(p0) != a.slice_for(instr(module, "w"), (0,))
    assert a.parameter_allocation(0).size == 32 and a.parameter_allocation(1).parameter_number == 1
    with pytest.raises(HloError, match="entry parameter 2 has no array"):
        a.parameter_allocation(2)


# -- conditionals and calls -----------------------------------------------------------------------

CONDITIONAL = """HloModule cond
t {
  x = f32[8] parameter(0)
  ROOT y = f32[8] exponential(x)
}
f {
  x = f32[8] parameter(0)
  ROOT y = f32[8] negate(x)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[8] parameter(1)
  a = f32[8] sine(x)
  c = f32[8] conditional(p, a, a), true_computation=t, false_computation=f
  ROOT r = f32[8] add(c, a)
}"""


@pytest.mark.parametrize("predicate", [True, False])
def test_branch_results_share_the_conditional_buffer(predicate):
    module = hlocc.parse_hlo(CONDITIONAL)
    args = [np.bool_(predicate), random_inputs(module, 0)[1]]
    module, a = assign(CONDITIONAL, args=args)
    c = instr(module, "c")
    for branch in ("t", "f"):
        assert a.slice_for(module.computation(branch).root) == a.slice_for(c)
        assert a.slice_for(module.computation(branch).parameters[0]) == a.slice_for(instr(module, "a"))
    assert a.copies_after(c, 0) == a.copies_after(c, 1) == []


CALLS = """HloModule calls
helper {
  x = f32[8] parameter(0)
  ROOT y = f32[8] sqrt(x)
}
once {
  x = f32[8] parameter(0)
  ROOT y = f32[8] abs(x)
}
ENTRY e {
  p = f32[8] parameter(0)
  a = f32[8] call(p), to_apply=once
  c1 = f32[8] call(a), to_apply=helper
  c2 = f32[8] call(c1), to_apply=helper
  ROOT r = f32[8] add(c2, c2)
}"""


def test_calls_forward_with_one_site_and_copy_with_several():
    module, a = assign(CALLS)
    once, helper = module.computation("once"), module.computation("helper")
    assert a.slice_for(instr(module, "a")) == a.slice_for(once.root)
    assert a.slice_for(once.parameters[0]) == a.slice_for(instr(module, "p"))
    c1, c2 = instr(module, "c1"), instr(module, "c2")
    assert [(c.source, c.destination) for c in a.copies_before(c1)] == [
        (a.slice_for(instr(module, "a")), a.slice_for(helper.parameters[0]))]
    assert [(c.source, c.destination) for c in a.copies_after(c2)] == [(a.slice_for(helper.root), a.slice_for(c2))]


# -- input/output aliasing ------------------------------------------------------------------------

ALIASED = """HloModule donated, input_output_alias={ {0}: (0, {}, must-alias), {1}: (1, {}, may-alias) }
ENTRY e {
  p0 = f32[8] parameter(0)
  p1 = f32[8] parameter(1)
  u = f32[2] parameter(2)
  i = s32[] parameter(3)
  d = f32[8] dynamic-update-slice(p0, u, i)
  m = f32[8] multiply(p1, p1)
  ROOT t = (f32[8], f32[8]) tuple(d, m)
}"""


def test_input_output_alias_updates_the_parameter_in_place():
    module, a = assign(ALIASED)
    p0, p1 = a.parameter_allocation(0), a.parameter_allocation(1)
    assert a.output_slices == (BufferSlice(p0.index, 0, 32), BufferSlice(p1.index, 0, 32))
    assert p0.output_indices == [(0,)] and p0.is_live_out and p1.output_indices == [(1,)]
    assert a.copies_before(instr(module, "d")) == [] and a.exit_copies == []
    assert a.peak_bytes == 0, "everything happens in the caller's buffers"


def test_must_alias_that_cannot_be_in_place_copies_at_exit():
    # p0 is read after the update, so the update cannot happen in p0; must-alias still puts the
    # output in p0 (by a copy at exit); may-alias p1 is read by the output tuple: own output.
    text = ALIASED.replace("m = f32[8] multiply(p1, p1)", "m = f32[8] multiply(p1, p0)").replace(
        "tuple(d, m)", "tuple(d, m, p1)").replace("(f32[8], f32[8]) tuple", "(f32[8], f32[8], f32[8]) tuple")
    module, a = assign(text)
    p0 = a.parameter_allocation(0)
    assert a.output_slices[0] == BufferSlice(p0.index, 0, 32)
    assert a.allocations[a.output_slices[1].allocation_index].kind is AllocationKind.OUTPUT
    assert (a.slice_for(instr(module, "d")), a.output_slices[0]) in {(c.source, c.destination) for c in a.exit_copies}


# -- errors ---------------------------------------------------------------------------------------

def test_unknown_options_are_refused():
    module = hlocc.parse_hlo(CHAIN)
    with pytest.raises(HloError, match="unknown temp layout 'pool'"):
        assign_buffers(module, temp_layout="pool")
    with pytest.raises(HloError, match="unknown heap algorithm 'first-fit'"):
        assign_buffers(module, temp_layout="allocations", heap_algorithm="first-fit")


def test_unbounded_dimensions_are_refused():
    module = hlocc.parse_hlo("HloModule m\nENTRY e {\n  p = f32[?] parameter(0)\n  ROOT n = f32[?] negate(p)\n}")
    with pytest.raises(UnsupportedError, match="unbounded dynamic dimension"):
        assign_buffers(module)


def test_bounded_dimensions_take_their_bound():
    module = hlocc.parse_hlo("HloModule m\nENTRY e {\n  p = f32[<=8] parameter(0)\n"
                             "  ROOT n = f32[<=8] reverse(p), dimensions={0}\n}")
    assert assign_buffers(module).output_slices[0].size == 32


def test_a_loop_body_shared_by_two_loops_is_refused():
    text = SWAP.replace("  ROOT w =", "  w0 = (f32[8], f32[8], s32[]) while((f32[8], f32[8], s32[]) tuple(p1, p0, "
                        "s32[] constant(1))), condition=cond, body=body\n  w =").replace(
        "condition=cond, body=body\n}", "condition=cond, body=body\n  ROOT r = (f32[8], f32[8], s32[]) "
        "opt-barrier(w)\n}")
    text = text.replace("  ROOT w = ", "  w = ")
    module = hlocc.parse_hlo(text)
    with pytest.raises(UnsupportedError, match="computation 'cond' is called by 2 instructions \\(w0, w\\)"):
        assign_buffers(module)


def test_tokens_and_empty_arrays_take_no_bytes():
    text = """HloModule m
ENTRY e {
  p = f32[0,4] parameter(0)
  t = token[] after-all()
  n = f32[0,4] negate(p)
  ROOT r = (f32[0,4], token[]) tuple(n, t)
}"""
    module = hlocc.parse_hlo(text)
    a = assign_buffers(module)
    a.verify()
    assert [s.size for s in a.output_slices] == [0, 0] and a.peak_bytes == 0
