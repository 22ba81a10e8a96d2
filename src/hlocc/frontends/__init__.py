"""Frontends: every way a program comes into hlocc, converted into its HLO IR.

- HLO text (what JAX, XLA and TensorFlow dump): `hlo/parser.py`;
- StableHLO (text, generic form, bytecode, `jax.export` artifacts and `Exported` objects):
  `stablehlo.import_stablehlo`, with jaxlib's MLIR bindings; jax is needed only there (the `[jax]`
  extra) and is imported on first use. Its op table is `stablehlo_ops.py` (CHLO in `chlo.py`);
  shape-polymorphic programs (symbolic dimensions, shape tensors, dynamic ops, shape assertions)
  are handled by `dynamic_shapes.py`.

`load_module` and `load_module_file` pick the frontend from what they are given, for `hlocc.compile`
and the command line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hlocc.frontends.stablehlo import import_stablehlo, import_stablehlo_file, is_stablehlo_text
from hlocc.hlo.ir import HloModule
from hlocc.hlo.parser import parse_hlo, parse_hlo_file

MLIR_SUFFIXES = (".mlir", ".mlirbc", ".stablehlo")


def load_module(source: Any) -> HloModule:
    """An HloModule (returned as is), HLO text, or anything `import_stablehlo` takes: StableHLO
    text, MLIR bytecode, a `jax.export.Exported` or an `ir.Module`."""
    if isinstance(source, HloModule):
        return source
    if isinstance(source, str) and not is_stablehlo_text(source):
        return parse_hlo(source)
    return import_stablehlo(source)


def load_module_file(path: str | Path) -> HloModule:
    """A module file: StableHLO by its suffix (.mlir, .mlirbc) or its first line, else HLO text."""
    path = Path(path)
    if path.suffix in MLIR_SUFFIXES:
        return import_stablehlo_file(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
    except OSError:
        head = ""  # parse_hlo_file reports the error
    return import_stablehlo_file(path) if head and is_stablehlo_text(head) else parse_hlo_file(path)


__all__ = ["MLIR_SUFFIXES", "import_stablehlo", "import_stablehlo_file", "is_stablehlo_text", "load_module",
           "load_module_file"]
