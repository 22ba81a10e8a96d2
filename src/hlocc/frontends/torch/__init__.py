"""The PyTorch frontend: FX graphs of core ATen ops (from `torch.compile` through `aot_autograd`,
or a `torch.export.ExportedProgram`) → hlocc's HLO IR, through one op table (`table.ATEN_OPS`).

torch is needed only here and in `hlocc.torch` (the `[torch]` extra); the modules import it on
use. `hlocc.torch` (top level, which may import the compiler) holds the dynamo backend,
`compile_exported` and `explain`; this package only lowers graphs and converts tensors.
"""

from __future__ import annotations

from hlocc.frontends.torch.lowering import LoweredGraph, Output, lower_graph, op_name, unsupported_ops

__all__ = ["LoweredGraph", "Output", "lower_graph", "op_name", "unsupported_ops"]
