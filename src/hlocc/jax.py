"""`hlocc.jax.jit`: a JAX function compiled by hlocc, the JAX user's entry point (needs the `[jax]` extra).

    import hlocc.jax
    f = hlocc.jax.jit(lambda x: jax.nn.softmax(x, axis=-1), polymorphic_shapes=["b, 128"])
    f(np.ones((3, 128), np.float32)); f(np.ones((500, 128), np.float32))   # one export, one Executable

With `polymorphic_shapes` (one `jax.export` shape spec per positional argument, as
`jax.export.symbolic_args_specs` takes them; None for an argument of fixed shape), the function is
exported once with symbolic dimensions, per argument dtypes, and imported into one hlocc
Executable that runs every size the specs allow: on the cpu backend one plan for every size, its
kernels compiled once or, for fusions the kernel compiler cannot yet compile symbolically, per size
(`compilations` counts them; see compiler.DynamicExecutable and runtime/dynamic_program.py). Without it, it behaves
like `jax.jit`: one lowering and one compilation per argument shapes and dtypes.

Arguments are arrays (numpy, JAX or anything `np.asarray` takes), positional only; results come back
as numpy arrays in the function's output pytree. `executables()` lists what was compiled, with the
signature each was compiled for.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.compiler import Executable, compile
from hlocc.errors import ArgumentError, UnsupportedError


def _jax():
    try:
        import jax
    except ImportError:
        raise UnsupportedError("hlocc.jax needs jax: pip install 'hlocc[jax]'") from None
    return jax


class JitFunction:
    """A function compiled by hlocc on first call per signature (see the module docstring)."""

    def __init__(self, fn: Callable, polymorphic_shapes: Sequence[str | None] | None, backend: str, options: dict):
        self.fn, self.polymorphic_shapes, self.backend, self.options = fn, polymorphic_shapes, backend, options
        self._compiled: dict[tuple, tuple[Executable, Any, bool]] = {}  # key: (it, out_tree, one array)

    def __call__(self, *args: Any) -> Any:
        arrays = [a if type(a) is np.ndarray else np.asarray(a) for a in args]
        if self.polymorphic_shapes is not None and len(self.polymorphic_shapes) != len(arrays):
            raise ArgumentError(f"{len(arrays)} arguments for {len(self.polymorphic_shapes)} polymorphic shapes")
        executable, out_tree, lone = self._executable(arrays)
        result = executable(*arrays)
        if lone and type(result) is np.ndarray:  # one array: no pytree to rebuild (`_executable`)
            return result
        leaves = list(result) if isinstance(result, tuple) else [result]
        return _jax().tree_util.tree_unflatten(out_tree, [np.asarray(x) for x in leaves])

    def executables(self) -> list[tuple[tuple, Executable]]:
        """(signature, Executable) of every compilation so far; a signature names each argument's
        dtype (with its shape when not polymorphic) as a string, e.g. `(((4,), "float32"),)`."""
        return [(_signature(key), exe) for key, (exe, _, _) in self._compiled.items()]

    def _executable(self, arrays: list[np.ndarray]) -> tuple[Executable, Any, bool]:
        # Symbolic: one export per argument dtypes (a size change is the Executable's business). Keyed
        # by the dtype objects: `str(dtype)` runs numpy's Python formatting, 3.6 µs per argument per call.
        key = tuple([a.dtype for a in arrays]) if self.polymorphic_shapes is not None else \
            tuple([(a.shape, a.dtype) for a in arrays])
        if key not in self._compiled:
            jax = _jax()
            jitted = jax.jit(self.fn)
            if self.polymorphic_shapes is not None:
                specs = jax.export.symbolic_args_specs(arrays, list(self.polymorphic_shapes))
                exported = jax.export.export(jitted)(*specs)
                source, out_tree = exported, exported.out_tree
            else:
                lowered = jitted.lower(*arrays)
                source, out_tree = lowered.as_text(), lowered.out_tree
            # a function returning one array has no tree to rebuild (`lone`): that spares every call
            # JAX's tree_unflatten, two lists and an import (~1 µs hot of a ~10 µs call, more cold:
            # the first call at a new size runs with cold caches)
            lone = out_tree.num_nodes == 1 and out_tree.num_leaves == 1
            self._compiled[key] = (compile(source, self.backend, **self.options), out_tree, lone)
        return self._compiled[key]


def _signature(key: tuple) -> tuple:
    """A `_compiled` key with its dtypes as strings (what `executables` shows)."""
    return tuple(str(k) if isinstance(k, np.dtype) else (k[0], str(k[1])) for k in key)


def jit(fn: Callable, polymorphic_shapes: Sequence[str | None] | None = None, *, backend: str = "cpu",
        **options: Any) -> JitFunction:
    """`fn` compiled by hlocc for `backend`; `options` go to `hlocc.compile` (e.g. gemm="codegen")."""
    return JitFunction(fn, polymorphic_shapes, backend, options)


__all__ = ["JitFunction", "jit"]
