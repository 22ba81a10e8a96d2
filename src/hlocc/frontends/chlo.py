"""CHLO ops that JAX leaves in StableHLO, converted as XLA's converter does.

Where HLO (hlocc's) has the op, it is used: `chlo.top_k` → `topk`, `chlo.square` of a real type →
`multiply(x, x)`, and the real-typed `chlo.erf`, `asin`, `acos`, `asinh`, `acosh`, `atanh`, `sinh`,
`cosh`, `tan` → hlocc's opcodes of those names. Every other elementwise CHLO op (`erf_inv`,
`lgamma`, `digamma`, `erfc`, `atan`, `next_after`, `bessel_i1e`, `zeta`, `polygamma`, complex
variants, ...) is expanded with XLA's own CHLO legalization: the op is put alone into a module on
scalars, jaxlib converts that module to HLO, and the scalar computation is replayed over the
operands' shape (constants broadcast, every other instruction elementwise). Expanding on scalars
keeps the expansion independent of the shape, so the dynamic-shape work can reuse it unchanged.
"""

from __future__ import annotations

import functools

from hlocc.frontends import mlir_support as ms
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import OPCODES
from hlocc.hlo.types import Shape

# CHLO op → hlocc opcode, for real floating types (the opcodes accept no complex operands).
DIRECT_REAL = {
    "chlo.erf": "erf", "chlo.asin": "asin", "chlo.acos": "acos", "chlo.asinh": "asinh", "chlo.acosh": "acosh",
    "chlo.atanh": "atanh", "chlo.sinh": "sinh", "chlo.cosh": "cosh", "chlo.tan": "tan",
}
# Elementwise CHLO ops expanded by XLA's legalization (and DIRECT_REAL ones on complex types).
EXPANDED = (
    "chlo.erf_inv", "chlo.erfc", "chlo.lgamma", "chlo.digamma", "chlo.atan", "chlo.next_after",
    "chlo.bessel_i1e", "chlo.zeta", "chlo.polygamma", "chlo.conj", "chlo.is_inf", "chlo.is_neg_inf",
    "chlo.is_pos_inf", "chlo.mulhi",
)
# Scalar-to-scalar data movement an expansion may contain: the identity on scalars.
_SCALAR_IDENTITY = {"broadcast", "reshape", "copy", "bitcast"}


def convert_elementwise(cx) -> HloInstruction:
    real = cx.shape.element_type.is_float and all(o.shape.element_type.is_float for o in cx.operands)
    if real and cx.name in DIRECT_REAL:
        return cx.add(DIRECT_REAL[cx.name], cx.operands)
    if real and cx.name == "chlo.square":
        return cx.add("multiply", [cx.operands[0], cx.operands[0]])
    return replay_scalar(cx, xla_expansion(_scalar_module_text(cx.op)))


def convert_top_k(cx) -> HloInstruction:
    """chlo.top_k (values and int32 indices of the k largest along the last dimension) → topk."""
    return cx.add("topk", cx.operands, {"k": ms.int_attr(cx.op, "k"), "largest": True})


def _scalar_module_text(op) -> str:
    """A module whose @main applies `op` (generic form, same attributes) to scalars."""
    ir = ms.mlir_modules()[0]
    return scalar_module_text(op.operation.name, [str(ir.ShapedType(v.type).element_type) for v in op.operands],
                              [str(ir.ShapedType(r.type).element_type) for r in op.results],
                              ", ".join(f"{na.name} = {na.attr}" for na in op.operation.attributes))


def scalar_module_text(name: str, operand_types: list[str], result_types: list[str], attrs: str = "") -> str:
    """A module whose @main applies the op `name` (generic form, `attrs`) to scalars of these
    element types: what `xla_expansion` takes."""
    operands = [f"tensor<{t}>" for t in operand_types]
    results = [f"tensor<{t}>" for t in result_types]
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operands))
    returned = ", ".join(f"%r#{i}" for i in range(len(results))) if len(results) > 1 else "%r"
    count = f":{len(results)}" if len(results) > 1 else ""
    return (f"module @chlo_expansion {{\n  func.func public @main({args}) -> ({', '.join(results)}) {{\n"
            f"    %r{count} = \"{name}\"({', '.join(f'%a{i}' for i in range(len(operands)))})"
            f" {{{attrs}}} : ({', '.join(operands)}) -> ({', '.join(results)})\n"
            f"    func.return {returned} : {', '.join(results)}\n  }}\n}}\n")


@functools.lru_cache(maxsize=256)
def xla_expansion(module_text: str) -> HloComputation:
    """The HLO entry computation XLA's converter makes of a (scalar) StableHLO/CHLO module."""
    from jax._src.lib import _jax

    from hlocc.hlo.parser import parse_hlo

    hlo_text = _jax.mlir.mlir_module_to_xla_computation(module_text, use_tuple_args=False,
                                                        return_tuple=False).as_hlo_text()
    return parse_hlo(hlo_text).entry


def replay_scalar(cx, comp: HloComputation) -> HloInstruction:
    """The scalar computation `comp` applied elementwise to the op's operands (all of the op's
    result dimensions): parameters are the operands, constants are broadcast, scalar reshapes and
    broadcasts vanish, every other instruction becomes the same elementwise op on full shapes."""
    # The operands' dims: symbolic where the result type has a bare `?` (elementwise: all alike).
    dims = cx.operands[0].shape.dims if cx.operands else cx.shape.dims
    mapped: dict[int, HloInstruction] = {}
    for instr in comp.post_order():
        if instr.opcode == "parameter":
            out = cx.operands[instr.parameter_number]
        elif instr.opcode == "constant":
            out = cx.add("constant", shape=instr.shape, literal=instr.literal)
            if dims:
                out = cx.add("broadcast", [out], {"dimensions": ()}, shape=instr.shape.with_dims(dims))
        elif instr.opcode in _SCALAR_IDENTITY and instr.shape.rank == 0:
            out = mapped[id(instr.operands[0])]
        elif OPCODES[instr.opcode].is_elementwise or instr.opcode == "bitcast-convert":
            shape = Shape.array(instr.shape.element_type, dims)
            out = cx.add(instr.opcode, [mapped[id(o)] for o in instr.operands], instr.attrs, shape=shape)
        else:
            raise cx.unsupported(f"XLA's expansion contains '{instr.opcode}', which is not elementwise")
        mapped[id(instr)] = out
    return mapped[id(comp.root)]
