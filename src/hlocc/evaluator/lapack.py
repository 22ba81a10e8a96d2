"""The LAPACK custom calls of JAX's CPU lowering (`lapack_<t><routine>_ffi`, typed FFI), evaluated
with numpy: what `jnp.linalg` and `jax.scipy.linalg` programs call on XLA:CPU.

    potrf   Cholesky                (a) -> (factor, info)           uplo
    getrf   LU, partial pivoting    (a) -> (lu, ipiv, info)
    trsm    triangular solve        (a, b[, alpha]) -> x            side, uplo, trans_x, diag
    geqrf   QR, Householder form    (a) -> (a, tau)
    orgqr   Q from the reflectors   (a, tau) -> q                   (ungqr for complex)
    syevd   symmetric eigen         (a) -> (v, w, info)             mode, uplo (heevd for complex)
    gesdd   SVD                     (a) -> (a, s, u, vt, info)      mode A | S | N
    geev    general eigenvalues     real (a) -> (wr, wi, vl, vr, info), complex (a) -> (w, vl, vr, info)

`<t>` is the element type (s f32, d f64, c c64, z c128); the matrices are the two minor dimensions
and any leading ones a batch. The attributes are LAPACK's character codes as integers in the
backend_config dictionary (`{uplo = 76 : ui8}`: 'L'). `info` follows LAPACK: 0 on success, k > 0
where the k-th pivot (potrf: leading minor; getrf: zero pivot) failed; JAX turns a nonzero info into
NaNs itself. numpy's own LAPACK (the same routines jaxlib calls, through numpy.linalg) computes
Cholesky, QR, SVD and the eigenproblems; LU and the triangular solve, which numpy.linalg does not
expose, are written here (unblocked, so their rounding differs from LAPACK's blocked code within
the usual tolerance), as is applying the Householder reflectors (orgqr). Left eigenvectors of geev
are not computed: the call fails with its name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction

_TARGET = re.compile(r"^lapack_([sdcz])([a-z]+)_ffi$")
_DTYPES = {"s": np.float32, "d": np.float64, "c": np.complex64, "z": np.complex128}


def is_lapack_call(instr: HloInstruction) -> bool:
    """A custom call to one of the LAPACK routines this module evaluates."""
    m = _TARGET.match(instr.attrs.get("custom_call_target", ""))
    return bool(m) and m.group(2) in ROUTINES


def routine_name(instr: HloInstruction) -> str:
    return _TARGET.match(instr.attrs["custom_call_target"]).group(2)


def codes(instr: HloInstruction) -> dict[str, str]:
    """The backend_config's character attributes: `{uplo = 76 : ui8}` -> {"uplo": "L"}."""
    raw = instr.attrs.get("backend_config")
    text = getattr(raw, "text", raw) or ""
    return {name: chr(int(value)) for name, value in re.findall(r"(\w+)\s*=\s*(\d+)\s*:\s*[su]?i\d+", text)}


def evaluate(instr: HloInstruction, operands: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The custom call's results, as the leaves of its (tuple) shape in order (runtime/library.py's
    calling convention; the evaluator makes a tuple of them)."""
    target = instr.attrs["custom_call_target"]
    m = _TARGET.match(target)
    if not m or m.group(2) not in ROUTINES:
        raise UnsupportedError(f"unsupported custom-call target '{target}' (instruction '{instr.name}')")
    dtype = np.dtype(_DTYPES[m.group(1)])
    values = [np.asarray(o) for o in operands]
    if values[0].dtype != dtype:
        raise UnsupportedError(f"custom-call '{instr.name}' to {target} takes {dtype.name}, got {values[0].dtype.name}")
    results = ROUTINES[m.group(2)](values, codes(instr), instr)
    shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else [instr.shape]
    if len(results) != len(shapes):
        raise UnsupportedError(f"custom-call '{instr.name}' to {target}: {len(shapes)} results, "
                               f"this evaluation gives {len(results)}")
    # (np.array, not np.ascontiguousarray: that makes a 0-d info a 1-d array; a symbolic result
    # shape, a LAPACK call over "n, n" in a plan for every size, is the routine's own)
    return [np.array(np.asarray(r) if s.symbols else np.broadcast_to(np.asarray(r), s.dims), dtype=s.dtype, order="C")
            for r, s in zip(results, shapes)]


# -- routines ----------------------------------------------------------------------------------

def _batched(a: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """`a` as a stack of matrices (batch, m, n), and the batch's dims."""
    return a.reshape((-1, *a.shape[-2:])), a.shape[:-2]


def _potrf(values, attrs, instr):
    a = values[0]
    lower = attrs.get("uplo", "L") == "L"
    stack, batch = _batched(a)
    out = stack.copy()  # LAPACK leaves the other triangle as it was
    info = np.zeros(len(stack), np.int32)
    for i, x in enumerate(stack):
        try:
            factor = np.linalg.cholesky(x if lower else x.conj().T)
        except np.linalg.LinAlgError:
            info[i] = _first_failing_minor(x if lower else x.conj().T)
            continue
        tri = np.tril_indices(x.shape[-1]) if lower else np.triu_indices(x.shape[-1])
        out[i][tri] = (factor if lower else factor.conj().T)[tri]
    return [out.reshape(a.shape), info.reshape(batch)]


def _first_failing_minor(x: np.ndarray) -> int:
    """The order k of the first leading minor that is not positive definite (LAPACK's info)."""
    for k in range(1, x.shape[-1] + 1):
        try:
            np.linalg.cholesky(x[:k, :k])
        except np.linalg.LinAlgError:
            return k
    return x.shape[-1]


def _getrf(values, attrs, instr):
    """LU with partial pivoting: the pivot of column k is the first largest |a[i, k]|, i >= k
    (LAPACK's i?amax, which for complex measures |re| + |im|); a zero pivot sets info (the first
    one) and skips its elimination."""
    a = values[0]
    stack, batch = _batched(a)
    lu = stack.copy()
    nb, m, n = lu.shape
    steps = min(m, n)
    ipiv = np.zeros((nb, steps), np.int32)
    info = np.zeros(nb, np.int32)
    rows = np.arange(nb)
    for k in range(steps):
        column = lu[:, k:, k]
        size = np.abs(column.real) + np.abs(column.imag) if np.iscomplexobj(column) else np.abs(column)
        p = k + np.argmax(size, axis=1)
        ipiv[:, k] = p + 1
        swap = lu[rows, p].copy()
        lu[rows, p] = lu[:, k]
        lu[:, k] = swap
        pivot = lu[:, k, k]
        zero = pivot == 0
        info[(info == 0) & zero] = k + 1
        safe = np.where(zero, 1, pivot)
        factors = np.where(zero[:, None], 0, lu[:, k + 1:, k] / safe[:, None])
        lu[:, k + 1:, k] = np.where(zero[:, None], lu[:, k + 1:, k], factors)
        lu[:, k + 1:, k + 1:] -= factors[:, :, None] * lu[:, k, None, k + 1:]
    return [lu.reshape(a.shape), ipiv.reshape((*batch, steps)), info.reshape(batch)]


def _trsm(values, attrs, instr):
    """x with op(A) x = alpha b (side L) or x op(A) = alpha b (side R), A triangular."""
    a, b = values[0], values[1]
    alpha = values[2].reshape(()) if len(values) > 2 else 1
    lower, unit = attrs.get("uplo", "L") == "L", attrs.get("diag", "N") == "U"
    trans, left = attrs.get("trans_x", "N"), attrs.get("side", "L") == "L"
    n = a.shape[-1]
    t = np.tril(a) if lower else np.triu(a)
    if unit:
        t = t.copy()
        idx = np.arange(n)
        t[..., idx, idx] = 1
    if trans != "N":
        t = np.swapaxes(t, -1, -2)
        t = t.conj() if trans == "C" else t
        lower = not lower
    rhs = alpha * b
    if not left:  # x T = b  <=>  T^T x^T = b^T
        t, rhs, lower = np.swapaxes(t, -1, -2), np.swapaxes(rhs, -1, -2), not lower
    x = _substitute(t, rhs, lower)
    return [np.swapaxes(x, -1, -2) if not left else x]


def _substitute(t: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Forward (lower) or back substitution of T x = b, batched over the leading dims."""
    n = t.shape[-1]
    x = np.zeros(np.broadcast_shapes(t.shape[:-2], b.shape[:-2]) + b.shape[-2:], np.result_type(t, b))
    for i in range(n) if lower else reversed(range(n)):
        done = slice(0, i) if lower else slice(i + 1, n)
        acc = b[..., i, :] - np.einsum("...k,...kj->...j", t[..., i, done], x[..., done, :])
        x[..., i, :] = acc / t[..., i, i][..., None]
    return x


def _geqrf(values, attrs, instr):
    a = values[0]
    stack, batch = _batched(a)
    out, taus = np.empty_like(stack), []
    for i, x in enumerate(stack):
        h, tau = np.linalg.qr(x, mode="raw")  # h: LAPACK's column-major result, transposed
        out[i] = h.T
        taus.append(tau)
    k = min(a.shape[-2:])
    return [out.reshape(a.shape), np.array(taus, a.dtype).reshape((*batch, k))]


def _orgqr(values, attrs, instr):
    """Q = H(0) H(1) ... H(k-1), H(i) = I - tau_i v_i v_i^H, v_i = e_i + the part of column i
    below the diagonal: the first n columns (n: the operand's)."""
    a, tau = values[0], values[1]
    stack, batch = _batched(a)
    taus = tau.reshape((len(stack), -1))
    _, m, n = stack.shape
    q = np.zeros_like(stack)
    for i, (x, t) in enumerate(zip(stack, taus)):
        y = np.eye(m, n, dtype=a.dtype)
        for j in reversed(range(len(t))):
            v = np.zeros(m, a.dtype)
            v[j] = 1
            v[j + 1:] = x[j + 1:, j]
            y -= t[j] * np.outer(v, v.conj() @ y)
        q[i] = y
    return [q.reshape(a.shape)]


def _syevd(values, attrs, instr):
    a = values[0]
    uplo = attrs.get("uplo", "L")
    if attrs.get("mode", "V") == "N":
        return [a, np.linalg.eigvalsh(a, UPLO=uplo), np.zeros(a.shape[:-2], np.int32)]
    w, v = np.linalg.eigh(a, UPLO=uplo)
    return [v, w, np.zeros(a.shape[:-2], np.int32)]


def _unused(shape, dims: tuple[int, ...]) -> np.ndarray:
    """Zeros for a result the routine does not compute: at its shape's dims, or at `dims` (what the
    operand's sizes give) where the shape is symbolic (a plan for every size: the binding's sizes
    are the operand's)."""
    return np.zeros(dims if shape.symbols else shape.dims, shape.dtype)


def _gesdd(values, attrs, instr):
    a = values[0]
    mode = attrs.get("mode", "S")
    info = np.zeros(a.shape[:-2], np.int32)
    shapes = instr.shape.tuple_shapes
    if mode == "N":  # u and vt are not computed: their buffers are m×m and n×n (JAX's lowering)
        s = np.linalg.svd(a, compute_uv=False)
        m, n = a.shape[-2:]
        return [a, s, _unused(shapes[2], a.shape[:-2] + (m, m)), _unused(shapes[3], a.shape[:-2] + (n, n)), info]
    u, s, vt = np.linalg.svd(a, full_matrices=mode == "A")
    return [a, s, u, vt, info]


def _geev(values, attrs, instr):
    a = values[0]
    if attrs.get("compute_left", "N") == "V":
        raise UnsupportedError(f"custom-call '{instr.name}' ({instr.attrs['custom_call_target']}): left "
                               "eigenvectors are not computed")
    shapes = instr.shape.tuple_shapes
    right = attrs.get("compute_right", "N") == "V"
    w, v = np.linalg.eig(a) if right else (np.linalg.eigvals(a), None)
    info = np.zeros(a.shape[:-2], np.int32)
    complex_type = shapes[-2].dtype
    vr = v.astype(complex_type) if v is not None else _unused(shapes[-2], a.shape)
    vl = _unused(shapes[-3], a.shape)
    if np.iscomplexobj(a):
        return [w, vl, vr, info]
    w = w.astype(complex_type)
    return [w.real, w.imag, vl, vr, info]


ROUTINES: dict[str, Callable[[list[np.ndarray], dict[str, str], HloInstruction], list]] = {
    "potrf": _potrf, "getrf": _getrf, "trsm": _trsm, "geqrf": _geqrf, "orgqr": _orgqr, "ungqr": _orgqr,
    "syevd": _syevd, "heevd": _syevd, "gesdd": _gesdd, "geev": _geev,
}

__all__ = ["ROUTINES", "codes", "evaluate", "is_lapack_call", "routine_name"]
