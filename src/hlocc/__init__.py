"""hlocc: a compiler for XLA HLO programs, written in Python.

    import hlocc
    module = hlocc.parse_hlo(text)                       # HloModule
    exe = hlocc.compile(text, backend="interpreter")     # Executable
    result = exe(x, y)                                   # numpy array(s)
    exe = hlocc.compile(jax.jit(f).lower(x).as_text(), backend="cpu")   # StableHLO too ([jax] extra)
"""

from hlocc.compiler import Executable, compile
from hlocc.errors import (
    ArgumentError,
    ElidedConstantsWarning,
    HloError,
    HloParseError,
    HloVerifyError,
    UnsupportedError,
)
from hlocc.frontends import import_stablehlo, load_module
from hlocc.hlo.ir import HloComputation, HloInstruction, HloModule
from hlocc.hlo.parser import parse_hlo, parse_hlo_file
from hlocc.hlo.printer import print_module
from hlocc.hlo.types import PrimitiveType, Shape

__all__ = [
    "ArgumentError", "ElidedConstantsWarning", "Executable", "HloComputation", "HloError", "HloInstruction",
    "HloModule", "HloParseError", "HloVerifyError", "PrimitiveType", "Shape", "UnsupportedError", "compile",
    "import_stablehlo", "load_module", "parse_hlo", "parse_hlo_file", "print_module",
]
__version__ = "0.1.0"
