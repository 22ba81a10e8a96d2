"""Frontends: programs in other IRs converted into hlocc's HLO IR.

`stablehlo.import_stablehlo` reads StableHLO (as JAX prints or exports it) with jaxlib's MLIR
bindings; jax is needed only there (the `[jax]` extra) and is imported on first use. Its op table
is `stablehlo_ops.py` (CHLO in `chlo.py`); shape-polymorphic programs (symbolic dimensions, shape
tensors, dynamic ops, shape assertions) are handled by `dynamic_shapes.py`.
"""

from hlocc.frontends.stablehlo import import_stablehlo, import_stablehlo_file, is_stablehlo_text

__all__ = ["import_stablehlo", "import_stablehlo_file", "is_stablehlo_text"]
