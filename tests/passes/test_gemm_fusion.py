"""gemm-fusion's choices (the FileCheck file filecheck/gemm_fusion.hlo shows the usual case):
which dots it takes, where the epilogue stops, and that inline-library-fusions keeps its fusions
while the cpu pipeline runs it only with gemm="codegen"."""

from __future__ import annotations

import pytest

from hlocc.hlo.parser import parse_hlo
from hlocc.passes.gemm_fusion import GemmFusion, epilogue, is_gemm_fusion
from hlocc.passes.inline_library_fusions import inline_library_fusions
from hlocc.passes.pipeline import BACKEND_PIPELINES, PassPipelineError, cpu_pipeline


def _run(text: str):
    module = parse_hlo(text)
    changed = GemmFusion().run(module)
    return module, changed


def _fusions(module):
    return [i for i in module.entry.instructions if i.opcode == "fusion"]


def test_integer_dots_stay_library_calls():
    module, changed = _run("""HloModule i
ENTRY e {
  a = s8[4,3] parameter(0)
  b = s8[3,5] parameter(1)
  ROOT d = s32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    assert not changed and not _fusions(module)


def test_epilogue_stops_where_the_dot_value_escapes():
    # d is read by the add and by the reduce: fusing the add would leave d's value needed outside,
    # so the fusion holds the dot alone and the add stays a consumer.
    text = """HloModule x
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  s = f32[4,5] add(d, d)
  zero = f32[] constant(0)
  red = f32[4] reduce(d, zero), dimensions={1}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT sum = f32[] add(x, y)
  }
  ROOT t = (f32[4,5], f32[4]) tuple(s, red)
}"""
    module = parse_hlo(text)
    dot = next(i for i in module.entry.instructions if i.opcode == "dot")
    assert epilogue(dot) == []
    GemmFusion().run(module)
    (fusion,) = _fusions(module)
    assert fusion.fused_computation.root.opcode == "dot" and is_gemm_fusion(fusion)
    assert {u.opcode for u in fusion.users} == {"add", "reduce"}


def test_epilogue_takes_the_largest_single_exit_set():
    module, _ = _run("""HloModule y
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  c = f32[4,5] parameter(2)
  d = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  n = f32[4,5] negate(d)
  m = f32[4,5] multiply(d, c)
  ROOT r = f32[4,5] maximum(n, m)
}""")
    (fusion,) = _fusions(module)
    assert sorted(i.opcode for i in fusion.fused_computation.instructions) == \
        ["dot", "maximum", "multiply", "negate", "parameter", "parameter", "parameter"]
    assert module.entry.root is fusion


def test_inline_library_fusions_keeps_gemm_fusions_only():
    module, _ = _run("""HloModule z
f {
  p = f32[4,3] parameter(0)
  q = f32[3,5] parameter(1)
  ROOT d = f32[4,5] dot(p, q), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY e {
  a = f32[4,3] parameter(0)
  b = f32[3,5] parameter(1)
  x = f32[4,5] fusion(a, b), kind=kOutput, calls=f
  ROOT d2 = f32[4,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}""")
    assert inline_library_fusions(module) == ["x"]  # XLA's dot fusion (unmarked dot): inlined, ours kept
    (kept,) = _fusions(module)
    assert is_gemm_fusion(kept)


def test_cpu_pipeline_choice():
    assert cpu_pipeline("library") is BACKEND_PIPELINES["cpu"]
    assert "gemm-fusion" in cpu_pipeline("codegen").optimization
    assert cpu_pipeline("codegen").optimization.index("gemm-fusion") < \
        cpu_pipeline("codegen").optimization.index("priority-fusion")
    with pytest.raises(PassPipelineError, match="unknown gemm mode 'blas'"):
        cpu_pipeline("blas")


def _dot(m: int, n: int, k: int) -> str:
    return f"""HloModule a
ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  b = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}"""


def test_auto_fuses_the_dots_up_to_the_measured_size():
    from hlocc.passes.gemm_fusion import AUTO_MAX_WORK, GemmFusionAuto, dot_work

    small, large = parse_hlo(_dot(8, 32, 32)), parse_hlo(_dot(64, 512, 128))
    assert dot_work(small.entry.root) == 8 * 32 * 32 <= AUTO_MAX_WORK < dot_work(large.entry.root)
    assert GemmFusionAuto().run(small) and is_gemm_fusion(_fusions(small)[0])
    assert not GemmFusionAuto().run(large) and not _fusions(large)
    assert "gemm-fusion-auto" in cpu_pipeline("auto").optimization
    assert "gemm-fusion" not in cpu_pipeline("auto").optimization


def _batched_dot(b: int, m: int, n: int, k: int) -> str:
    return f"""HloModule b
ENTRY e {{
  a = bf16[{b},{m},{k}] parameter(0)
  w = bf16[{b},{n},{k}] parameter(1)
  ROOT d = f32[{b},{m},{n}] dot(a, w), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}},
      rhs_contracting_dims={{2}}
}}"""


@pytest.mark.parametrize("text,fused", [
    (_dot(16, 16, 8), True),  # attention_f32's products (4K): naive, fused
    (_dot(8, 32, 32), True),  # llama_block's projections (8K)
    (_dot(8, 32, 96), False),  # naive above AUTO_MAX_NAIVE_WORK (24K): the library call is faster
    (_batched_dot(8, 32, 24, 16), False),  # batched_matmul_bf16_f32acc: 12K per batch (naive), 98K in all
    (_batched_dot(2, 64, 64, 64), False),  # packed per batch (256K): above AUTO_MAX_WORK
])
def test_auto_leaves_naive_dots_above_their_bound_to_the_library(text, fused):
    from hlocc.passes.gemm_fusion import GemmFusionAuto

    module = parse_hlo(text)
    assert GemmFusionAuto().run(module) == fused
    assert bool(_fusions(module)) == fused


def test_the_naive_bound_is_the_emitters():
    from hlocc.codegen.schedule import choice
    from hlocc.passes.gemm_fusion import NAIVE_BELOW

    assert NAIVE_BELOW == choice.NAIVE_BELOW
