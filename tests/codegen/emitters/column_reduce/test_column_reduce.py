"""The tiled column reduction emitter's analysis (`column_plan`) and how a version reaches it
(the marker on its reduces, `registry.emitter_for`); its kernels against the evaluator are in
tests/runtime/test_column_tiling.py, its IR in emit_column_reduce_speculated.hlo."""

import pytest

from hlocc.codegen.emitters.column_reduce import ColumnReduceEmitter, column_plan, is_column_tile_marked
from hlocc.codegen.emitters.registry import emitter_for
from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.errors import UnsupportedError
from hlocc.hlo.parser import parse_hlo
from hlocc.runtime.speculation import AtLeast, column_tile_version

ADD = "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"


def entry(body: str):
    return parse_hlo("HloModule m\n" + ADD + "ENTRY e {\n" + body + "}\n").entry


MEAN = entry("""  x = f32[?b,?n] parameter(0)
  c = s32[] parameter(1)
  z = f32[] constant(0)
  s = f32[?n] reduce(x, z), dimensions={0}, to_apply=add_f
  cf = f32[] convert(c)
  cb = f32[?n] broadcast(cf), dimensions={}
  ROOT m = f32[?n] divide(s, cb)
""")


def test_a_mean_over_the_batch_is_a_column_reduction_with_an_epilogue():
    plan = column_plan(MEAN)
    assert plan is not None and [r.name for r in plan.reduces] == ["s"] and plan.kept == (1,)
    assert str(plan.rows) == "b" and str(plan.columns) == "n" and [r.name for r in plan.roots] == ["m"]


@pytest.mark.parametrize("body", [
    # the reduce's value broadcast back over the rows: a stitch pattern, not an epilogue
    "  x = f32[?b,?n] parameter(0)\n  z = f32[] constant(0)\n"
    "  s = f32[?n] reduce(x, z), dimensions={0}, to_apply=add_f\n"
    "  ROOT sb = f32[?b,?n] broadcast(s), dimensions={1}\n",
    # a root not computed from the reduce beside it
    "  x = f32[?b,?n] parameter(0)\n  z = f32[] constant(0)\n"
    "  s = f32[?n] reduce(x, z), dimensions={0}, to_apply=add_f\n"
    "  ROOT t = (f32[?n], f32[?b,?n]) tuple(s, x)\n",
    # no reduce at all
    "  x = f32[?b,?n] parameter(0)\n  ROOT y = f32[?b,?n] negate(x)\n",
])
def test_what_the_column_emitter_refuses(body):
    assert column_plan(entry(body)) is None
    assert column_tile_version(entry(body)) is None


def test_the_version_marks_its_reduces_and_the_registry_sends_it_to_the_column_emitter():
    version = column_tile_version(MEAN)
    assert version.conditions == (AtLeast(MEAN.root.operand(0).operand(0).shape.dims[1], 16),)
    assert version.holds({"b": 3, "n": 16}) and not version.holds({"b": 3, "n": 15})
    fused = version.specialize(MEAN)
    assert is_column_tile_marked(fused) and not is_column_tile_marked(MEAN)  # (a copy is marked)
    assert isinstance(emitter_for(fused, cpu_target()), ColumnReduceEmitter)
    assert not isinstance(emitter_for(MEAN, cpu_target()), ColumnReduceEmitter)
    with pytest.raises(UnsupportedError, match="tiled column reduction .* [(]CPU[)]"):
        emitter_for(fused, gpu_target())
