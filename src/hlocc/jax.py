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

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hlocc.compiler import Executable, compile
from hlocc.errors import ArgumentError, UnsupportedError
from hlocc.runtime.guarded_call import guarded_call


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
        self._repeat: Callable[[tuple], Any] | None = None  # `_repeat_call` of the last signature called
        self._repeats: dict[int, Callable[[tuple], Any] | None] = {}  # by id of each Executable: made once

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        repeat = self._repeat
        if repeat is not None and not kwargs:
            result = repeat(args)
            if result is not None:
                return result
        if kwargs:
            raise ArgumentError(f"keyword argument '{next(iter(kwargs))}': hlocc.jax.jit takes arrays as positional "
                                "arguments only")
        arrays = [a if type(a) is np.ndarray and a.dtype in _CANONICAL else _as_jax_would(a, k)
                  for k, a in enumerate(args)]
        if self.polymorphic_shapes is not None and len(self.polymorphic_shapes) != len(arrays):
            raise ArgumentError(f"{len(arrays)} arguments for {len(self.polymorphic_shapes)} polymorphic shapes")
        executable, out_tree, lone = self._executable(arrays, args)
        if all(a is x for a, x in zip(arrays, args)):  # (calls alternating signatures build none twice)
            if id(executable) not in self._repeats:
                self._repeats[id(executable)] = _repeat_call(executable, arrays, lone, self.polymorphic_shapes is None)
            self._repeat = self._repeats[id(executable)]
        result = executable(*arrays)
        if lone and type(result) is np.ndarray:  # one array: no pytree to rebuild (`_executable`)
            return result
        leaves = list(result) if isinstance(result, tuple) else [result]
        return _jax().tree_util.tree_unflatten(out_tree, [np.asarray(x) for x in leaves])

    def executables(self) -> list[tuple[tuple, Executable]]:
        """(signature, Executable) of every compilation so far; a signature names each argument's
        dtype (with its shape when not polymorphic) as a string, e.g. `(((4,), "float32"),)`."""
        return [(_signature(key), exe) for key, (exe, _, _) in self._compiled.items()]

    def _executable(self, arrays: list[np.ndarray], args: tuple) -> tuple[Executable, Any, bool]:
        # Symbolic: one export per argument dtypes (a size change is the Executable's business). Keyed
        # by the dtype objects: `str(dtype)` runs numpy's Python formatting, 3.6 µs per argument per call.
        # A Python scalar is weakly typed, as in jax.jit (`x * 2.0` keeps a bf16 x bf16): its own key.
        key = tuple([a.dtype if type(x) not in _WEAK else type(x) for a, x in zip(arrays, args)]) \
            if self.polymorphic_shapes is not None else \
            tuple([(a.shape, a.dtype) if type(x) not in _WEAK else type(x) for a, x in zip(arrays, args)])
        if key not in self._compiled:
            jax = _jax()
            jitted = jax.jit(self.fn, keep_unused=True)  # every argument a parameter, as the call passes them
            if self.polymorphic_shapes is not None:
                try:
                    specs = jax.export.symbolic_args_specs(arrays, list(self.polymorphic_shapes))
                except (ValueError, IndexError) as e:
                    raise _spec_mismatch(arrays, self.polymorphic_shapes, e) from None
                specs = [jax.ShapeDtypeStruct((), a.dtype, weak_type=True) if type(x) in _WEAK else spec
                         for spec, a, x in zip(specs, arrays, args)]
                exported = jax.export.export(jitted)(*specs)
                source, out_tree = exported, exported.out_tree
            else:
                lowered = jitted.lower(*[x if type(x) in _WEAK else a for a, x in zip(arrays, args)])
                source, out_tree = lowered.as_text(), lowered.out_tree
            # a function returning one array has no tree to rebuild (`lone`): that spares every call
            # JAX's tree_unflatten, two lists and an import (~1 µs hot of a ~10 µs call, more cold:
            # the first call at a new size runs with cold caches)
            lone = out_tree.num_nodes == 1 and out_tree.num_leaves == 1
            self._compiled[key] = (compile(source, self.backend, **self.options), out_tree, lone)
        return self._compiled[key]


def _repeat_call(executable: Executable, arrays: list[np.ndarray], lone: bool,
                 static: bool) -> Callable[[tuple], Any] | None:
    """A call of `executable` for arguments like `arrays` (numpy arrays taken as they are): the
    same count, each a numpy array of exactly its dtype (and shape, for a static `executable`);
    it returns None for any other arguments, which then take `__call__`'s general path (the
    conversions, the signature's key and its lookup: ~2 µs of a ~7 µs call of a small program).
    None where the function does not return one array."""
    if not lone:
        return None
    names = ", ".join(f"a{k}" for k in range(len(arrays)))
    return guarded_call("repeat_call", [a.dtype for a in arrays], [
        f"result = executable({names})",
        "return result if type(result) is ndarray else asarray(result)"],
        {"executable": executable, "asarray": np.asarray}, shapes=[a.shape for a in arrays] if static else None)


_WEAK = (bool, int, float, complex)  # Python scalars: weakly typed arguments in JAX
_CANONICAL = {np.dtype(t) for t in ("bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16",
                                    "float32", "complex64")}  # dtypes JAX keeps without x64 (and with it)


def _as_jax_would(value: Any, index: int) -> np.ndarray:
    """`value` as the array jax.jit passes on: numpy's 64-bit types as JAX's canonical ones
    (int32, float32, complex64 unless `jax_enable_x64`), a Python scalar at its type's canonical
    dtype (an int beyond it an ArgumentError, as JAX's OverflowError), anything else through
    `np.asarray`. A list, tuple or dict is a pytree to jax.jit, not an array: an ArgumentError
    (`np.asarray` would stack it, promoting its leaves to one dtype)."""
    if isinstance(value, (list, tuple, dict)):
        raise ArgumentError(f"argument {index} is a {type(value).__name__}: hlocc.jax.jit takes arrays (pytree "
                            "arguments are not supported yet; pass their leaves as arguments, or np.asarray it)")
    try:
        array = value if isinstance(value, np.ndarray) else np.asarray(value)
    except ValueError as e:
        raise ArgumentError(f"argument {value!r:.60} is not an array: {e}") from None
    if array.dtype in _CANONICAL:
        return array
    canonical = np.dtype(_jax().dtypes.canonicalize_dtype(array.dtype))
    if canonical == array.dtype:
        return array
    if type(value) is int and not np.iinfo(canonical).min <= value <= np.iinfo(canonical).max:
        raise ArgumentError(f"Python int {value} is out of range for {canonical} (jax_enable_x64 is off)")
    return array.astype(canonical)


def _spec_mismatch(arrays: list[np.ndarray], specs: Sequence[str | None], error: Exception) -> Exception:
    """The ArgumentError for the first argument whose shape its polymorphic shape rules out (a
    different rank, or another size where the spec fixes one), as a later call's shape check says
    it: JAX's `symbolic_args_specs` says "syntax error in symbolic shape ... different size 3 for
    known dimension" (or an IndexError for too few dimensions). `error` itself where no argument
    is at fault (a spec JAX cannot read)."""
    symbolic_shape = _jax().export.symbolic_shape
    for k, (array, spec) in enumerate(zip(arrays, specs)):
        if spec is None:
            continue
        try:
            symbolic_shape(spec, like=array.shape)
            continue
        except (ValueError, IndexError) as e:
            reason = e
        try:
            dims = None if "..." in spec else symbolic_shape(spec)
        except ValueError:
            return error  # the spec itself is wrong, whatever the argument
        got = f"got an array of shape {list(array.shape)} ({array.dtype})"
        shape = f"shape ({', '.join(map(str, dims))}) (polymorphic shape '{spec}')" if dims is not None \
            else f"polymorphic shape '{spec}'"
        head = f"argument {k}: expected {shape}, {got}"
        if dims is not None and len(dims) != array.ndim:
            return ArgumentError(f"{head}: {array.ndim} dimensions, not {len(dims)}")
        fixed = re.search(r"in dimension (\d+): different size (\d+)", str(reason))
        if fixed:
            d, size = int(fixed.group(1)), int(fixed.group(2))
            return ArgumentError(f"{head}: dimension {d} is {array.shape[d]}, where the spec fixes {size}")
        return ArgumentError(f"{head}: {reason}")
    return error


def _signature(key: tuple) -> tuple:
    """A `_compiled` key with its dtypes as strings (what `executables` shows; a Python scalar type
    by its name)."""
    return tuple(str(k) if isinstance(k, np.dtype) else k.__name__ if isinstance(k, type) else (k[0], str(k[1]))
                 for k in key)


def jit(fn: Callable, polymorphic_shapes: Sequence[str | None] | None = None, *, backend: str = "cpu",
        **options: Any) -> JitFunction:
    """`fn` compiled by hlocc for `backend`; `options` go to `hlocc.compile` (e.g. gemm="codegen"): an
    option it does not take is an ArgumentError here, not at the first call (jax.jit's own options,
    static_argnums or donate_argnums, are not supported)."""
    import inspect

    from hlocc.compiler import compile as compile_module

    known = set(inspect.signature(compile_module).parameters) - {"module_or_text", "backend"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ArgumentError(f"hlocc.jax.jit: unknown option(s) {', '.join(unknown)} (hlocc.compile takes "
                            f"{', '.join(sorted(known))}; jax.jit's static_argnums and donate_argnums are not "
                            "supported)")
    return JitFunction(fn, polymorphic_shapes, backend, options)


__all__ = ["JitFunction", "jit"]
