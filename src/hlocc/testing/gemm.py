"""HLO text of a dot fusion as `gemm-fusion` marks it, for the matmul code generation tests (the
CPU schedule's and the GPU mma.sync kernel's)."""

from __future__ import annotations


def gemm_fusion_text(lhs: str, rhs: str, out: str, dims: str, epilogue: str = "") -> str:
    """A module whose entry is a dot fusion's computation: `a` ({lhs}) · `b` ({rhs}) -> `d` ({out})
    with the dimension numbers `dims`, marked with the `__hlocc_gemm` backend config; `epilogue`
    (instruction lines ending in a ROOT) reads `d`, else `d` is the root."""
    root = "ROOT d" if not epilogue else "d"
    return f"""HloModule m
ENTRY fused {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
  {root} = {out} dot(a, b), {dims}, backend_config={{"__hlocc_gemm":{{}}}}
{epilogue}}}"""
