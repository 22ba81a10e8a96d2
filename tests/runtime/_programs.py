"""HLO programs the dynamic-program tests share."""


def softmax_text(n: str) -> str:
    """A softmax over the rows of f32[?b, n] (`n` a number or a symbolic dim such as "?n"), as written,
    unfused: a max reduce, exp(x - max), a sum reduce, the divide."""
    return SOFTMAX_TEMPLATE.format(n=n)


SOFTMAX_TEMPLATE = """HloModule softmax
max_f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}
add_f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  x = f32[?b,{n}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[?b] reduce(x, ninf), dimensions={{1}}, to_apply=max_f
  mb = f32[?b,{n}] broadcast(mx), dimensions={{0}}
  ex = f32[?b,{n}] exponential(f32[?b,{n}] subtract(x, mb))
  zero = f32[] constant(0)
  s = f32[?b] reduce(ex, zero), dimensions={{1}}, to_apply=add_f
  sb = f32[?b,{n}] broadcast(s), dimensions={{0}}
  ROOT r = f32[?b,{n}] divide(ex, sb)
}}
"""


MLP = """HloModule mlp
ENTRY e {
  x = f32[?b,16] parameter(0)
  w1 = f32[16,32] parameter(1)
  w2 = f32[32,8] parameter(2)
  h = f32[?b,32] dot(x, w1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  zero = f32[] constant(0)
  zeros = f32[?b,32] broadcast(zero), dimensions={}
  r = f32[?b,32] maximum(h, zeros)
  ROOT o = f32[?b,8] dot(r, w2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def filecheck(text: str, checks: str, tmp_path) -> None:
    """`text` matches the FileCheck `checks` (skipped where filecheck is not installed)."""
    import shutil
    import subprocess

    import pytest

    if shutil.which("filecheck") is None:
        pytest.skip("filecheck is not installed")
    path = tmp_path / "checks.txt"
    path.write_text(checks)
    done = subprocess.run(["filecheck", str(path)], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + text
