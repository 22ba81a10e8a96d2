"""Reference evaluation of the random ops: rng, rng-get-and-update-state, rng-bit-generator.

* `rng` (rng_uniform(a, b): uniform in [a, b); rng_normal(mu, sigma)) draws from the evaluator's
  seeded numpy generator `ev.rng`. XLA leaves the stream implementation-defined; hlocc's is
  reproducible for a seed but not bit-identical to any XLA backend.
* `rng-get-and-update-state`, delta=d returns the evaluator's 128-bit `ev.rng_state` as u64
  words (low word first) and advances it by d.
* `rng-bit-generator(state)` follows XLA's RngBitGeneratorExpander exactly (and so JAX on CPU):
  - rng_three_fry: key = state[0], counter = state[1]; Threefry-2x32 (20 rounds) of the
    counter + linear index. 32-bit and narrower results split the shape into two halves along
    its first even dimension (else its largest) and interleave the two output words along it;
    64-bit results join the two words (first word low). New state = (key, counter + count).
  - rng_philox (and rng_default, which XLA's CPU and GPU backends map to Philox): key =
    state[0]; the 128-bit counter is (low=state[1], high=state[0]) for a 2-word state and
    (state[1], state[2]) for longer ones; Philox-4x32-10 of counter + i gives 4 words per
    counter, used round-robin (64-bit results: words (0,1) and (2,3) joined, low first). New
    state = (key, counter + number of counters used) with the high word only kept for a
    state of 3 or more words.
  Results narrower than 32 bits keep the low bits of 32-bit words; float results are the bits
  reinterpreted.
"""

from __future__ import annotations

import numpy as np

from hlocc.errors import UnsupportedError
from hlocc.hlo.ir import HloInstruction
from hlocc.hlo.opcodes import register_evaluator
from hlocc.hlo.types import from_dtype

_U32 = np.uint32
_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PHILOX_MUL = (_U64(0xD2511F53), _U64(0xCD9E8D57))
_PHILOX_WEYL = (_U32(0x9E3779B9), _U32(0xBB67AE85))


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Low and high 32-bit words of u64 values."""
    x = np.asarray(x, dtype=_U64)
    return (x & _MASK32).astype(_U32), (x >> _U64(32)).astype(_U32)


def _join(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.astype(_U64) | (hi.astype(_U64) << _U64(32))


def _rotl(v: np.ndarray, distance: int) -> np.ndarray:
    return (v << _U32(distance)) | (v >> _U32(32 - distance))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, k0, k1) -> tuple[np.ndarray, np.ndarray]:
    """Threefry-2x32 with 20 rounds (Salmon et al. 2011) on u32 arrays, key (k0, k1)."""
    k0, k1 = np.asarray(k0, _U32), np.asarray(k1, _U32)
    k2 = _U32(0x1BD11BDA) ^ k0 ^ k1
    schedule = ((k1, k2), (k2, k0), (k0, k1), (k1, k2), (k2, k0))
    x0, x1 = x0 + k0, x1 + k1
    for step, (a, b) in enumerate(schedule):
        for r in _THREEFRY_ROTATIONS[step % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + a
        x1 = x1 + b + _U32(step + 1)
    return x0, x1


def philox4x32(words: list[np.ndarray], k0, k1) -> list[np.ndarray]:
    """Philox-4x32 with 10 rounds on four u32 arrays, key (k0, k1)."""
    k0, k1 = np.asarray(k0, _U32), np.asarray(k1, _U32)
    x = list(words)
    for _ in range(10):  # u32 arithmetic wraps by design
        p0 = x[0].astype(_U64) * _PHILOX_MUL[0]
        p1 = x[2].astype(_U64) * _PHILOX_MUL[1]
        lo0, hi0 = _split(p0)
        lo1, hi1 = _split(p1)
        x = [hi1 ^ x[1] ^ k0, lo1, hi0 ^ x[3] ^ k1, lo0]
        with np.errstate(over="ignore"):
            k0, k1 = k0 + _PHILOX_WEYL[0], k1 + _PHILOX_WEYL[1]
    return x


def _halves(dims: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """XLA's split of a shape into two halves: (split dim, half dims with a 1 after it)."""
    if not dims:
        return 0, (1,)
    even = [i for i, d in enumerate(dims) if d % 2 == 0]
    split = even[0] if even else max(range(len(dims)), key=lambda i: (dims[i], -i))
    half = dims[:split] + ((dims[split] + 1) // 2, 1) + dims[split + 1:]
    return split, half


def _threefry_bits(state: np.ndarray, dims: tuple[int, ...], bits: int) -> tuple[np.ndarray, np.ndarray]:
    key_lo, key_hi = _split(state[0])
    if bits == 64:
        count = int(np.prod(dims, dtype=np.int64))
        lo, hi = _split(state[1] + np.arange(count, dtype=_U64))
        out0, out1 = threefry2x32(lo, hi, key_lo, key_hi)
        values = _join(out0, out1).reshape(dims)
    else:
        split, half = _halves(dims)
        count = int(np.prod(half, dtype=np.int64))
        lo, hi = _split(state[1] + np.arange(count, dtype=_U64))
        out0, out1 = threefry2x32(lo, hi, key_lo, key_hi)
        if not dims:
            values = out0[0]
        else:
            both = np.concatenate([out0.reshape(half), out1.reshape(half)], axis=split + 1)
            full = dims[:split] + (2 * half[split],) + dims[split + 1:]
            values = both.reshape(full)[tuple(slice(0, d) for d in dims)]
    new_state = state.copy()
    new_state[1] = state[1] + _U64(count)
    return np.asarray(values), new_state


def _u128_add(lo: np.ndarray, hi: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    new_lo = lo + delta
    return new_lo, hi + (new_lo < lo).astype(_U64)


def _philox_bits(state: np.ndarray, dims: tuple[int, ...], bits: int) -> tuple[np.ndarray, np.ndarray]:
    key_lo, key_hi = _split(state[0])
    counter_lo, counter_hi = (state[1], state[2]) if state.shape[0] >= 3 else (state[1], state[0])
    count = int(np.prod(dims, dtype=np.int64))
    words_needed = count * (2 if bits == 64 else 1)
    counters = (words_needed + 3) // 4
    lo, hi = _u128_add(counter_lo, counter_hi, np.arange(counters, dtype=_U64))
    out = philox4x32([*_split(lo), *_split(hi)], key_lo, key_hi)
    if bits == 64:
        stream = np.stack([_join(out[0], out[1]), _join(out[2], out[3])], axis=1)
    else:
        stream = np.stack(out, axis=1)
    values = stream.reshape(-1)[:count].reshape(dims)
    new_lo, new_hi = _u128_add(counter_lo, counter_hi, _U64(counters))
    new_state = state.copy()
    new_state[1] = new_lo
    if state.shape[0] >= 3:
        new_state[2] = new_hi
    return values, new_state


_UNSIGNED = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@register_evaluator("rng-bit-generator")
def evaluate_rng_bit_generator(instr: HloInstruction, operands: list, ev):
    state = np.asarray(operands[0]).astype(_U64)
    out_shape = instr.shape.tuple_shapes[1]
    ptype = out_shape.element_type
    if ptype.is_complex or ptype.is_pred or ptype.bits not in _UNSIGNED:
        raise UnsupportedError(f"rng-bit-generator cannot produce {ptype} values")
    algorithm = instr.attrs["algorithm"]
    generate = {"rng_three_fry": _threefry_bits, "rng_philox": _philox_bits, "rng_default": _philox_bits}.get(algorithm)
    if generate is None:
        raise UnsupportedError(f"unknown rng-bit-generator algorithm '{algorithm}'")
    bits = 64 if ptype.bits == 64 else 32
    with np.errstate(all="ignore"):
        values, new_state = generate(state, tuple(out_shape.dims), bits)
        values = np.asarray(values).astype(_UNSIGNED[ptype.bits]).view(out_shape.dtype)
    return new_state.astype(instr.shape.tuple_shapes[0].dtype), values.reshape(out_shape.dims)


@register_evaluator("rng")
def evaluate_rng(instr: HloInstruction, operands: list, ev):
    """rng(a, b), distribution=rng_uniform: uniform in [a, b) (integers: in [a, b - 1]);
    rng(mu, sigma), distribution=rng_normal: normal. Drawn from `ev.rng`."""
    a, b = (np.asarray(o) for o in operands)
    dims = tuple(instr.shape.dims)
    dtype = instr.shape.dtype
    kind = instr.attrs["distribution"]
    ptype = from_dtype(dtype)
    if kind == "rng_uniform":
        if ptype.is_integer:
            low, high = int(a), int(b)
            return ev.rng.integers(low, max(high, low + 1), size=dims).astype(dtype)
        if ptype.is_pred:
            return ev.rng.integers(int(a), max(int(b), int(a) + 1), size=dims).astype(bool)
        lo, hi = a.astype(dtype), b.astype(dtype)
        values = (float(lo) + (float(hi) - float(lo)) * ev.rng.random(size=dims)).astype(dtype)
        return np.where(values >= hi, lo, values)  # rounding may reach hi: keep [a, b) half-open
    if kind == "rng_normal":
        return ev.rng.normal(float(a), float(b), size=dims).astype(dtype)
    raise UnsupportedError(f"unknown rng distribution '{kind}'")


@register_evaluator("rng-get-and-update-state")
def evaluate_rng_get_and_update_state(instr: HloInstruction, operands: list, ev):
    """The current 128-bit `ev.rng_state` as u64 words, low first; the state advances by delta."""
    state = int(ev.rng_state) % (1 << 128)
    words = np.zeros(instr.shape.num_elements, dtype=np.uint64)
    for i, word in enumerate((state & (2**64 - 1), state >> 64)[:words.size]):
        words[i] = word
    ev.rng_state = (state + int(instr.attrs["delta"])) % (1 << 128)
    return words.reshape(instr.shape.dims).astype(instr.shape.dtype)
