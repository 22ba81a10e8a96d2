"""Table entries for the special functions HLO has no opcode for (erfc, lgamma, digamma, erfinv,
polygamma): XLA's own expansion of the CHLO op (frontends/chlo.py, which needs jax), replayed
elementwise over the operands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.types import primitive_type

if TYPE_CHECKING:  # (the rules' context; lowering.py imports this table)
    from hlocc.frontends.torch.lowering import LoweringContext


class _ChloContext:
    """What chlo.py's `replay_scalar` asks of a converter's context, over a torch lowering's."""

    def __init__(self, cx: LoweringContext, operands: list[HloInstruction]):
        self.cx, self.operands, self.shape = cx, operands, operands[0].shape
        self.add = cx.add

    def unsupported(self, why: str) -> Exception:
        return self.cx.error(why)


def _chlo(op: str):
    """A special function HLO has no opcode for (erfc, lgamma, digamma, erfinv, polygamma) as XLA
    expands its CHLO op (frontends/chlo.py: XLA's own expansion on scalars, replayed elementwise;
    it needs jax), computed in f32 for a half type and rounded once, as ATen's opmath does."""
    def rule(cx: LoweringContext, *args):
        try:
            from hlocc.frontends.chlo import replay_scalar, scalar_module_text, xla_expansion
        except ImportError:
            raise cx.error(f"{op} is expanded with XLA's own CHLO legalization, which needs jax") from None
        et = cx.element_type
        compute = "f32" if et in ("f16", "bf16") or not cx.shape.element_type.is_float else et
        operands = [cx.operand(a, compute, cx.shape.dims) for a in args]
        expansion = xla_expansion(scalar_module_text(f"chlo.{op}", [compute] * len(operands), [compute]))
        return cx.convert(replay_scalar(_ChloContext(cx, operands), expansion), et)
    return rule


def _polygamma(cx: LoweringContext, n, x):
    return _chlo("polygamma")(cx, cx.full(n, cx.shape.with_element_type(primitive_type("f32"))), x)


OPS = {
    **{f"aten.{name}.default": _chlo(op) for name, op in
       {"erfc": "erfc", "lgamma": "lgamma", "digamma": "digamma", "erfinv": "erf_inv"}.items()},
    "aten.polygamma.default": _polygamma,
}
