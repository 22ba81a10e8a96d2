"""Reference evaluation of `sort` and `topk`.

sort(op_0..op_{N-1}), dimensions={d}, is_stable, to_apply=cmp sorts all operands along d by the
same permutation; `cmp` takes 2N scalars (lhs_0, rhs_0, lhs_1, rhs_1, ...) and returns whether
lhs comes strictly before rhs. hlocc always sorts stably (a stable order is a valid answer to an
unstable sort).

Two strategies:
  * fast: `cmp` is one `compare` LT or GT of parameters 0 and 1 (the first operand's pair). The
    key is mapped to integers whose order is the comparison's: TOTALORDER puts
    -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN (by bit pattern); FLOAT (the default
    for floats) treats -0.0 == +0.0, and a key holding NaN (for which FLOAT comparison is not an
    ordering) goes to the general path so both paths agree. Then np.argsort(kind="stable").
  * general: a bottom-up merge sort vectorised across all rows and runs; each merge finds every
    element's place in the other run by a binary search whose probes are `ev.call(cmp, ...)` on
    whole arrays (O(log^2 n) calls in all).

A comparator of the form compare(f(lhs_i), f(rhs_i)), LT or GT, whose two sides are the same
expression of one operand's pair (what JAX emits: NaN and -0.0 canonicalised, then a TOTALORDER or
integer compare) is a *key comparator*: `comparator_key` recognises it, `key_permutation`
evaluates f once on the whole operand and argsorts it (the sort library call of the CPU runtime,
runtime/library.py, uses both; the sort kernel, codegen/emitters/sort.py, radix-sorts such keys).

topk(x), k, largest=true returns (values, s32 indices) of the k largest (or smallest) elements
of every row of the last dimension, best first, ties broken by lower index, in total order.
custom-call "TopK" (XLA's TopkRewriter emits it; XLA:CPU calls its runtime's sort-based TopK) is
the same with largest=true on a rank-1 or rank-2 operand and k from the result shape; like
XLA:CPU's runtime, hlocc orders by total order (-NaN < -inf < ... < -0.0 < +0.0 < ... < +NaN)
whatever the attached comparator says (the rewriter only matches greater-than sorts).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from hlocc.errors import HloVerifyError
from hlocc.evaluator import numerics
from hlocc.hlo.ir import HloComputation, HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import from_dtype

_DEFAULT_COMPARE_TYPE = {"float": "FLOAT", "signed": "SIGNED", "unsigned": "UNSIGNED", "pred": "UNSIGNED"}


def total_order_key(x: np.ndarray) -> np.ndarray:
    """Integers ordered like XLA's TOTALORDER comparison of `x` (floats by sign-magnitude bit
    pattern, see numerics.total_order_key; integers and pred by value)."""
    ptype = from_dtype(x.dtype)
    if ptype.is_float:
        return numerics.total_order_key(x, ptype)
    if ptype.is_unsigned and ptype.bits == 64:
        return x.astype(np.uint64)
    return x.astype(np.int64)


def _fast_key(comp: HloComputation, keys: np.ndarray) -> np.ndarray | None:
    """An integer array whose ascending stable argsort is the order `comp` asks for, or None
    when `comp` is not a single LT/GT compare of parameters 0 and 1 that the fast path handles."""
    params = comp.parameters
    root = comp.root
    if root is None or root.opcode != "compare" or len(params) < 2:
        return None
    direction = root.attrs.get("direction")
    lhs, rhs = root.operands
    if direction not in ("LT", "GT") or {lhs.opcode, rhs.opcode} != {"parameter"}:
        return None
    order = (lhs.parameter_number, rhs.parameter_number)
    if order not in ((0, 1), (1, 0)):
        return None
    ptype = from_dtype(keys.dtype)
    if ptype.is_complex:
        return None
    kind = "float" if ptype.is_float else ("pred" if ptype.is_pred else ("signed" if ptype.is_signed else "unsigned"))
    natural = _DEFAULT_COMPARE_TYPE[kind]
    ctype = root.attrs.get("type", natural)
    if ctype != natural and not (kind == "float" and ctype == "TOTALORDER"):
        return None
    if kind == "float" and ctype == "FLOAT":
        if np.isnan(keys.astype(np.float64)).any():
            return None
        keys = keys.astype(np.float64) + 0.0  # -0.0 + 0.0 == +0.0: FLOAT compares them equal
    key = total_order_key(keys)
    descending = (direction == "GT") == (order == (0, 1))
    return ~key if descending else key


def _less(ev, comp: HloComputation, a: list[np.ndarray], a_pad, b: list[np.ndarray], b_pad) -> np.ndarray:
    """comp(a, b) elementwise, with padding elements ordered after every real element."""
    args = [v for pair in zip(a, b) for v in pair]
    with np.errstate(all="ignore"):
        real = np.broadcast_to(np.asarray(ev.call(comp, args), dtype=bool), a_pad.shape)
    return np.where(a_pad, False, np.where(b_pad, True, real))


def _count_before(ev, comp, probe, probe_pad, run, run_pad, strict: bool) -> np.ndarray:
    """For each probe element, how many elements of the sorted `run` (same leading shape, last
    axis the run) come before it: those with less(run_j, probe) when `strict`, else those with
    not less(probe, run_j). Both predicates hold on a prefix of the run: binary search."""
    width = run[0].shape[-1]
    lo = np.zeros(probe_pad.shape, dtype=np.int64)
    hi = np.full(probe_pad.shape, width, dtype=np.int64)
    for _ in range(int(width).bit_length()):
        active = lo < hi
        if not active.any():
            break
        mid = np.minimum((lo + hi) // 2, width - 1)
        at = [np.take_along_axis(r, mid, axis=-1) for r in run]
        at_pad = np.take_along_axis(run_pad, mid, axis=-1)
        if strict:
            before = _less(ev, comp, at, at_pad, probe, probe_pad)
        else:
            before = ~_less(ev, comp, probe, probe_pad, at, at_pad)
        lo = np.where(active & before, mid + 1, lo)
        hi = np.where(active & ~before, mid, hi)
    return lo


def _permute_blocks(blocks: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Blocks (batch, runs, 2, width) merged into (batch, runs * 2 * width) in `order`."""
    batch, runs, _, width = blocks.shape
    merged = np.take_along_axis(blocks.reshape(batch, runs, 2 * width), order, axis=-1)
    return merged.reshape(batch, runs * 2 * width)


def merge_sort_permutation(ev, comp: HloComputation, rows: list[np.ndarray]) -> np.ndarray:
    """The stable permutation (rows × n, int64) sorting each row of the 2-D arrays `rows` by `comp`."""
    batch, n = rows[0].shape
    if n <= 1:
        return np.zeros((batch, n), dtype=np.int64)
    size = 1 << max(0, (n - 1).bit_length())
    pad_width = ((0, 0), (0, size - n))
    data = [np.pad(r, pad_width, mode="edge") for r in rows]
    pad = np.broadcast_to(np.arange(size) >= n, (batch, size))
    perm = np.broadcast_to(np.arange(size, dtype=np.int64), (batch, size))
    width = 1
    while width < size:
        shape = (batch, size // (2 * width), 2, width)
        blocks = [d.reshape(shape) for d in data]
        pad_b, perm_b = pad.reshape(shape), perm.reshape(shape)
        left, right = [b[:, :, 0] for b in blocks], [b[:, :, 1] for b in blocks]
        left_pad, right_pad = pad_b[:, :, 0], pad_b[:, :, 1]
        own = np.arange(width)
        left_pos = own + _count_before(ev, comp, left, left_pad, right, right_pad, strict=True)
        right_pos = own + _count_before(ev, comp, right, right_pad, left, left_pad, strict=False)
        # Ties in position (only from a comparator that is not a strict weak order) go left first.
        key = np.concatenate([2 * left_pos, 2 * right_pos + 1], axis=-1)
        order = np.argsort(key, axis=-1, kind="stable")
        data = [_permute_blocks(b, order) for b in blocks]
        pad, perm = _permute_blocks(pad_b, order), _permute_blocks(perm_b, order)
        width *= 2
    return perm[:, :n]


@dataclass(frozen=True)
class ComparatorKey:
    """A key comparator (module doc): `key`, an expression of parameter `param` (the lhs of
    operand `operand`'s pair), compared LT (ascending) or GT (descending) with `compare_type`."""

    operand: int
    param: HloInstruction
    key: HloInstruction
    descending: bool
    compare_type: str
    order: tuple[HloInstruction, ...] = ()  # the key's instructions, operands first (`_evaluate_key`)


def _parameters_of(instr: HloInstruction) -> set[int]:
    seen: set[int] = set()
    found: set[int] = set()
    stack = [instr]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.opcode == "parameter":
            found.add(node.parameter_number)
        stack.extend(node.operands)
    return found


def _same_expression(a: HloInstruction, b: HloInstruction, pa: int, pb: int, memo: dict) -> bool:
    """`a` (an expression of parameter pa) is `b` (of pb) with pb renamed pa."""
    key = (id(a), id(b))
    if key not in memo:
        if a.opcode == "parameter" or b.opcode == "parameter":
            same = (a.opcode == b.opcode and a.parameter_number == pa and b.parameter_number == pb)
        elif (a.opcode != b.opcode or a.shape != b.shape or a.attrs != b.attrs
              or len(a.operands) != len(b.operands)):
            same = False
        elif a.opcode == "constant":
            same = np.array_equal(np.asarray(a.literal), np.asarray(b.literal), equal_nan=True)
        else:
            same = a is b or all(_same_expression(x, y, pa, pb, memo) for x, y in zip(a.operands, b.operands))
        memo[key] = same
    return memo[key]


_COMPARATOR_KEYS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def comparator_key(comp: HloComputation) -> ComparatorKey | None:
    """The key comparator `comp` is, or None (then only a general merge sort applies); found once
    per computation (a compiled program's sort asks on every call)."""
    try:
        return _COMPARATOR_KEYS[comp]
    except KeyError:
        found = _COMPARATOR_KEYS[comp] = _compare_key(comp.root, comp.parameters)
        return found


def _compare_key(root: HloInstruction | None, parameters: list[HloInstruction]) -> ComparatorKey | None:
    """The ComparatorKey of `root`, a compare LT/GT of the same expression of one operand's pair."""
    if root is None or root.opcode != "compare" or root.attrs.get("direction") not in ("LT", "GT"):
        return None
    lhs, rhs = root.operands
    pl, pr = _parameters_of(lhs), _parameters_of(rhs)
    if len(pl) != 1 or len(pr) != 1:
        return None
    i, j = pl.pop(), pr.pop()
    if {i, j} != {min(i, j), min(i, j) + 1} or min(i, j) % 2:
        return None
    if not _same_expression(lhs, rhs, i, j, {}):
        return None
    param = next(p for p in parameters if p.parameter_number == min(i, j))
    key = lhs if i < j else rhs
    kind = from_dtype(key.shape.dtype)
    natural = "FLOAT" if kind.is_float else ("SIGNED" if kind.is_signed else "UNSIGNED")
    if kind.is_complex:
        return None
    descending = (root.attrs["direction"] == "GT") == (i < j)
    order: list[HloInstruction] = []
    seen: set[int] = {id(param)}

    def visit(node: HloInstruction) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        for o in node.operands:
            visit(o)
        order.append(node)

    visit(key)
    return ComparatorKey(min(i, j) // 2, param, key, descending, root.attrs.get("type", natural), tuple(order))


def comparator_keys(comp: HloComputation) -> tuple[ComparatorKey, ...] | None:
    """The keys, most significant first, of a lexicographic comparator: one key comparator, or
    or(lt_0, and(eq_0, <the same of the next keys>)) where lt_k is a key comparator and eq_k the
    EQ compare of the same two values in the same compare type (what JAX emits for
    `lax.sort(..., num_keys=k)` and `jnp.lexsort`); None otherwise. A float key's compare must be
    TOTALORDER (FLOAT's EQ is no equivalence with NaN)."""
    keys: list[ComparatorKey] = []
    node = comp.root
    while node is not None and node.opcode == "or" and len(node.operands) == 2:
        lt, tie = node.operands
        if tie.opcode != "and" or len(tie.operands) != 2:
            return None
        eq, node = tie.operands
        found = _compare_key(lt, comp.parameters)
        if (found is None or eq.opcode != "compare" or eq.attrs.get("direction") != "EQ"
                or {id(o) for o in eq.operands} != {id(o) for o in lt.operands}
                or eq.attrs.get("type", found.compare_type) != found.compare_type
                or (found.key.shape.element_type.is_float and found.compare_type != "TOTALORDER")):
            return None
        keys.append(found)
    last = _compare_key(node, comp.parameters)
    if last is None or (keys and last.key.shape.element_type.is_float and last.compare_type != "TOTALORDER"):
        return None
    return (*keys, last)


def _evaluate_key(ev, found: ComparatorKey, operand: np.ndarray) -> np.ndarray:
    """The key expression evaluated elementwise on the whole `operand`."""
    values: dict[int, np.ndarray] = {id(found.param): operand}
    with np.errstate(all="ignore"):
        for node in found.order:
            args = [values[id(o)] for o in node.operands]
            if node.opcode == "bitcast":  # of a scalar: reinterpret every element's bits
                values[id(node)] = np.ascontiguousarray(args[0]).view(node.shape.dtype)
            else:
                values[id(node)] = np.asarray(ev.evaluate_instruction(node, args))
    return np.broadcast_to(values[id(found.key)], operand.shape)


def key_permutation(ev, found: ComparatorKey, operand: np.ndarray) -> np.ndarray | None:
    """The stable permutation along the last axis that sorts `operand` by the key comparator, or
    None when the key's order is not a total one (FLOAT compare of a key holding NaN)."""
    key = _evaluate_key(ev, found, operand)
    ptype = from_dtype(key.dtype)
    if ptype.is_float:
        if found.compare_type != "TOTALORDER":
            if np.isnan(key.astype(np.float64)).any():
                return None
            key = key.astype(np.float64) + 0.0  # FLOAT compares -0.0 == +0.0
        key = total_order_key(key)
    elif ptype.is_pred:
        key = key.astype(np.int64)
    else:
        key = total_order_key(key)
    return np.argsort(~key if found.descending else key, axis=-1, kind="stable")


def sort_permutation(ev, comp: HloComputation, moved: list[np.ndarray]) -> np.ndarray:
    """The stable permutation along the last axis of the (sort dimension moved last) operands
    `moved` in `comp`'s order: an argsort of the key for a key comparator, else a merge sort."""
    lead, n = moved[0].shape[:-1], moved[0].shape[-1]
    key = _fast_key(comp, moved[0])
    if key is not None:
        return np.argsort(key, axis=-1, kind="stable")
    found = comparator_key(comp)
    if found is not None:
        perm = key_permutation(ev, found, moved[found.operand])
        if perm is not None:
            return perm
    rows = [m.reshape(int(np.prod(lead, dtype=np.int64)), n) for m in moved]
    return merge_sort_permutation(ev, comp, rows).reshape(lead + (n,))


@register_evaluator("sort")
def evaluate_sort(instr: HloInstruction, operands: list, ev):
    """Sort every operand along `dimensions[0]` by the permutation `to_apply` defines."""
    dim = instr.attrs["dimensions"][0]
    moved = [np.moveaxis(np.asarray(o), dim, -1) for o in operands]
    perm = sort_permutation(ev, instr.to_apply, moved)
    results = [np.moveaxis(np.take_along_axis(m, perm, axis=-1), -1, dim) for m in moved]
    results = [np.ascontiguousarray(r) for r in results]
    return tuple(results) if instr.shape.is_tuple else results[0]


def top_k(x: np.ndarray, k: int, largest: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(values, s32 indices) of the k largest (or smallest) elements along the last axis of `x`,
    best first, equal keys by lower index, floats in total order."""
    key = total_order_key(np.asarray(x))
    if largest:
        key = ~key
    index = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, index, axis=-1), index.astype(np.int32)


def topk_custom_call_k(instr: HloInstruction) -> int:
    """k of a custom-call "TopK", after checking its shapes: operand T[b, n] (or T[n]), result
    (T[b, k], s32[b, k]) with k <= n."""
    (operand,) = instr.operands if len(instr.operands) == 1 else (None,)
    shape = instr.shape
    ok = (operand is not None and operand.shape.is_array and operand.shape.rank in (1, 2) and shape.is_tuple
          and len(shape.tuple_shapes) == 2)
    if ok:
        values, indices = shape.tuple_shapes
        ok = (values.is_array and indices.is_array and values.element_type == operand.shape.element_type
              and indices.element_type.name == "s32" and values.dims == indices.dims
              and values.dims[:-1] == operand.shape.dims[:-1] and values.rank == operand.shape.rank
              and values.dims[-1] <= operand.shape.dims[-1] and operand.shape.element_type.is_float)
    if not ok:
        raise HloVerifyError(f"custom-call '{instr.name}' to TopK needs one float operand T[b,n] or T[n] and "
                             f"result (T[b,k], s32[b,k]) with k <= n, not {shape} from "
                             f"{', '.join(str(o.shape) for o in instr.operands) or 'no operand'}")
    return shape.tuple_shapes[0].dims[-1]


@register_evaluator("topk")
def evaluate_topk(instr: HloInstruction, operands: list, ev):
    """(values, s32 indices) of the k largest (largest=true, the default) or smallest elements
    along the last dimension, best first; equal elements keep lower index first; floats in
    total order (+NaN is the largest value, -NaN the smallest)."""
    return top_k(np.asarray(operands[0]), int(instr.attrs["k"]), instr.attrs.get("largest", True))
