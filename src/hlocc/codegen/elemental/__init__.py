"""Elemental emission (XLA's elemental_hlo_to_mlir): the scalar value of an HLO instruction at an index.

registry.py holds the tables (`ELEMENTAL`, `ELEMENTAL_COMPLEX`, `INDEX_OPS`); ops.py (elementwise
ops on real values), complex.py (on complex values) and math_functions.py (functions composed of
other ops) fill the elementwise tables; index_ops.py fills `INDEX_OPS`; element_emitter.py walks a
partitioned computation; storage.py maps HLO shapes to kernel tensors. Importing this package fills
the registries.
"""

from hlocc.codegen.elemental import complex, index_ops, math_functions, ops  # noqa: F401  (fill the registries)
from hlocc.codegen.elemental.registry import ELEMENTAL, ELEMENTAL_COMPLEX, INDEX_OPS, emit_elementwise

__all__ = ["ELEMENTAL", "ELEMENTAL_COMPLEX", "INDEX_OPS", "emit_elementwise"]
