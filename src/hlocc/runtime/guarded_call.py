"""The steady call's guard: one generated function that takes a call's arguments as they are when
each is a numpy array of exactly the dtype (and shape, and C order) a compiled program expects,
and otherwise returns None so that the caller takes its general path (the checks and conversions of
backends/arguments.py, the signature's lookup).

Why generated: at a small program's call (~5 µs on the cpu backend), a Python loop over the
arguments and their expectations cost ~0.3 µs, and the general path's layers (argument plans,
binding keys, the executable's dispatch) ~1-2 µs more. The guard is straight-line code for the
parameter count, its expectations bound as constants; the call it guards is `body`, which sees the
arguments as `args` and as `a0`, `a1`, ...

A dtype is compared by identity (`is`): numpy's built-in dtypes, and ml_dtypes' bfloat16 and
friends, are one object each; an equal dtype that is another object (a byte-swapped one, one with
metadata) takes the general path, which checks it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


def guarded_call(name: str, dtypes: Sequence[np.dtype], body: Sequence[str], scope: dict[str, Any], *,
                 shapes: Sequence[tuple[int, ...]] | None = None, contiguous: bool = False) -> Callable[[tuple], Any]:
    """`def name(args)`: None unless there are len(dtypes) arguments, the k-th a numpy array of
    exactly dtypes[k] (and of shapes[k], and C-contiguous, where asked); else the lines of `body`
    (indented by the caller's four spaces), run with `scope`'s names."""
    names = [f"a{k}" for k in range(len(dtypes))]
    lines = [f"def {name}(args):", f"    if len(args) != {len(names)}:", "        return None"]
    if names:
        lines.append(f"    {', '.join(names)}, = args")
    for k, a in enumerate(names):
        test = f"type({a}) is not ndarray or {a}.dtype is not d{k}"
        if shapes is not None:
            test += f" or {a}.shape != s{k}"
        if contiguous:
            test += f" or not {a}.flags.c_contiguous"
        lines += [f"    if {test}:", "        return None"]
    lines += [f"    {line}" for line in body]
    namespace = {"ndarray": np.ndarray, **scope, **{f"d{k}": np.dtype(d) for k, d in enumerate(dtypes)},
                 **({f"s{k}": tuple(s) for k, s in enumerate(shapes)} if shapes is not None else {})}
    exec(compile("\n".join(lines), f"<{name}>", "exec"), namespace)
    return namespace[name]


__all__ = ["guarded_call"]
