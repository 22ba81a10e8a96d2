"""The kernel lowering passes, one per module, and `PASSES`: every pass runnable by name (as xDSL's
`get_all_passes`). codegen/pipeline.py lists their order; the maths the float passes expand into is
in codegen/math/, and helpers the passes share are in transforms/util.py.

Adding a pass means writing its module and adding its class to the table below; nothing registers
itself on import.
"""

from __future__ import annotations

from xdsl.passes import ModulePass
from xdsl.transforms.canonicalize import CanonicalizePass

from hlocc.codegen.schedule.interpreter import TransformInterpreterPass
from hlocc.codegen.transforms.check_bounds import CheckBoundsPass
from hlocc.codegen.transforms.cse import CommonSubexpressionEliminationPass
from hlocc.codegen.transforms.dce import DeadCodeEliminationPass
from hlocc.codegen.transforms.expand_float_ops import ExpandFloatOpsFmaPass, ExpandFloatOpsPass
from hlocc.codegen.transforms.flatten_tensors import FlattenTensorsPass
from hlocc.codegen.transforms.inline import InlinePass
from hlocc.codegen.transforms.lower_loops import LowerLoopsToScfPass
from hlocc.codegen.transforms.lower_matmul import LowerMatmulPass
from hlocc.codegen.transforms.lower_narrow_floats import LowerNarrowFloatsPass
from hlocc.codegen.transforms.lower_symbol_values import LowerSymbolValuesPass
from hlocc.codegen.transforms.lower_tensors import LowerTensorsPass
from hlocc.codegen.transforms.lower_xla_to_arith import LowerXlaToArithPass
from hlocc.codegen.transforms.outline_math import OutlineMathPass
from hlocc.codegen.transforms.unroll_loops import UnrollLoopsPass
from hlocc.codegen.transforms.vectorize_elementwise import VectorizeElementwisePass
from hlocc.codegen.transforms.vectorize_loads_stores import (
    VectorizeLoadsStoresPass,
    VectorizeUnalignedLoadsStoresPass,
)
from hlocc.codegen.transforms.verify import VerifyPass

PASSES: dict[str, type[ModulePass]] = {cls.name: cls for cls in (
    # hlocc's kernel passes
    TransformInterpreterPass,
    LowerMatmulPass,
    InlinePass,
    LowerLoopsToScfPass,
    FlattenTensorsPass,
    VectorizeLoadsStoresPass,
    VectorizeUnalignedLoadsStoresPass,
    VectorizeElementwisePass,
    UnrollLoopsPass,
    LowerNarrowFloatsPass,
    OutlineMathPass,
    ExpandFloatOpsPass,
    ExpandFloatOpsFmaPass,
    CheckBoundsPass,
    LowerTensorsPass,
    LowerXlaToArithPass,
    LowerSymbolValuesPass,
    VerifyPass,
    CommonSubexpressionEliminationPass,  # xDSL's cse with cheaper keys
    DeadCodeEliminationPass,  # xDSL's dce in one walk
    # xDSL's generic pass, for `hlocc opt`
    CanonicalizePass,
)}
"""Every kernel pass by its `name` (what `hlocc opt --passes` and the pipelines refer to)."""
