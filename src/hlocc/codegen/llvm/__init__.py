"""Lowered kernel IR → LLVM IR (codegen/llvm/), by a direct visitor to llvmlite.ir (DESIGN: not through xDSL's llvm
dialect conversions). Input: func/arith/math/scf/vector plus the `llvm` memory ops that
`lower-tensors` produces, `xla.pure_call`, `xla.remf`, the `xla` stand-ins for arith ops on vectors
(`VECTOR_FORMS`: xla.cmpf, xla.select, xla.extui, ...; LLVM vector compares, selects and casts), and
`gpu.thread_id`/`gpu.block_id`.

Types: `index` is i64; integers and f16/f32/f64 map directly; bf16, the f8 types and f4E2M1FN only
appear as storage after `lower-narrow-floats` and map to i16/i8/i4; vectors map to LLVM vectors;
`complex<fN>` is the struct `{fN, fN}` (real part first: the memory layout of numpy's and XLA's
complex numbers), built and taken apart by `complex.create`/`complex.re`/`complex.im` (insertvalue
and extractvalue, which LLVM's SROA folds); `expand-float-ops` leaves no other complex op.

A kernel entry function (one using `gpu.thread_id`/`gpu.block_id`) becomes an internal
`always_inline` function whose last two parameters are the thread and block id. The caller (the
CPU backend's block loop, or the NVPTX wrapper) supplies them. One that uses shared memory,
barriers or shuffles becomes a *block function* that runs all threads of its block in phases
(`block_simulation.py`; its thread parameter is unused; see `LlvmTranslator.block_functions`).
Buffer arguments are `noalias` unless the caller says otherwise: buffers of one kernel never
overlap unless aliased on purpose.

Math ops that `expand-float-ops` leaves (fabs, sqrt, fma, floor, ceil, copysign, roundeven, round,
trunc) become LLVM intrinsics, which vectorize. Any other math op is an error unless
`allow_libm` is set (then it becomes an LLVM intrinsic that may call libm).

Modules: types.py (LLVM types and constants, intrinsic declarations, `TranslationError`), one
module per op family (arith_ops, scf_ops, vector_ops, memory_ops, complex_ops, gpu_ops, func_ops:
each a table of handlers), translator.py (`LlvmTranslator`, `FunctionTranslator`, the dispatch
table), block_simulation.py (CPU block functions). This package re-exports the public names.
"""

from hlocc.codegen.llvm.translator import FunctionTranslator, LlvmTranslator, TranslateOptions, translate_module
from hlocc.codegen.llvm.types import I64, TranslationError, llvm_type

__all__ = ["I64", "FunctionTranslator", "LlvmTranslator", "TranslateOptions", "TranslationError", "llvm_type",
           "translate_module"]
