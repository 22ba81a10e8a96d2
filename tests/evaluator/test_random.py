"""rng-bit-generator (bit-exact against JAX on CPU), rng and rng-get-and-update-state."""

from __future__ import annotations

import numpy as np
import pytest
from _compute_helpers import assert_same_bits, run

from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo

KEY = np.array([0x123456789ABCDEF0, 0xFFFFFFFFFFFFFFF0], np.uint64)  # counter about to carry


def rbg_module(algorithm: str, state: str, out: str) -> str:
    return f"""
ENTRY e {{
  s = {state} parameter(0)
  ROOT r = ({state}, {out}) rng-bit-generator(s), algorithm={algorithm}
}}"""


def test_threefry_known_answer():
    # Threefry-2x32 (20 rounds) of counter 0 with key 0: the Random123 known-answer vector.
    from hlocc.evaluator.random import threefry2x32

    x0, x1 = threefry2x32(np.zeros(1, np.uint32), np.zeros(1, np.uint32), 0, 0)
    assert (int(x0[0]), int(x1[0])) == (0x6B200159, 0x99BA4EFE)


def test_philox_known_answer():
    # Philox-4x32-10 of counter 0 with key 0: the Random123 known-answer vector.
    from hlocc.evaluator.random import philox4x32

    out = philox4x32([np.zeros(1, np.uint32)] * 4, 0, 0)
    assert [int(w[0]) for w in out] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


ALGORITHMS = [("rng_three_fry", "RNG_THREE_FRY"), ("rng_philox", "RNG_PHILOX"), ("rng_default", "RNG_DEFAULT")]
SHAPES = [((3, 5), "u32"), ((), "u32"), ((3, 5), "u64"), ((7,), "u8"), ((2, 3, 3), "u16"), ((5,), "u64"),
          ((3, 1, 5), "u32"), ((4,), "f32")]


@pytest.mark.parametrize("algorithm,jax_name", ALGORITHMS)
@pytest.mark.parametrize("shape,type_name", SHAPES)
def test_rng_bit_generator_is_bit_exact_with_jax(algorithm, jax_name, shape, type_name):
    jax = pytest.importorskip("jax")
    from jax import lax

    dtypes = {"u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "f32": np.uint32}
    out_type = f"{type_name}[{','.join(map(str, shape))}]"
    new_state, bits = run(rbg_module(algorithm, "u64[2]", out_type), KEY)
    with jax.enable_x64(True):
        jax_state, jax_bits = lax.rng_bit_generator(jax.numpy.asarray(KEY), shape, dtype=dtypes[type_name],
                                                    algorithm=getattr(lax.RandomAlgorithm, jax_name))
        jax_state, jax_bits = np.asarray(jax_state), np.asarray(jax_bits)
    assert_same_bits(new_state, jax_state)
    expected = jax_bits.view(np.float32) if type_name == "f32" else jax_bits
    assert_same_bits(bits, expected)


def test_philox_three_word_state_keeps_high_counter():
    state = np.array([7, 2**64 - 1, 5], np.uint64)
    new_state, _ = run(rbg_module("rng_philox", "u64[3]", "u32[8]"), state)
    # 8 words = 2 counters: the low counter word wraps and carries into the high one.
    assert_same_bits(new_state, np.array([7, 1, 6], np.uint64))


def test_rng_uniform_within_bounds_and_seeded():
    text = """
ENTRY e {
  a = f32[] constant(2)
  b = f32[] constant(3)
  ROOT r = f32[1000] rng(a, b), distribution=rng_uniform
}"""
    first, again, other = run(text, seed=1), run(text, seed=1), run(text, seed=2)
    assert first.dtype == np.float32 and first.min() >= 2 and first.max() < 3
    assert_same_bits(first, again)
    assert not np.array_equal(first, other)
    ints = run(text.replace("f32", "s32"), seed=1)
    assert ints.dtype == np.int32 and set(np.unique(ints)) == {2}


def test_rng_normal_statistics():
    text = """
ENTRY e {
  m = f32[] constant(5)
  s = f32[] constant(2)
  ROOT r = f32[20000] rng(m, s), distribution=rng_normal
}"""
    x = run(text)
    assert abs(x.mean() - 5) < 0.1 and abs(x.std() - 2) < 0.1


def test_rng_get_and_update_state_advances_by_delta():
    text = """
ENTRY e {
  ROOT r = u64[2] rng-get-and-update-state(), delta=10
}"""
    module = parse_hlo(text)
    ev = Evaluator()
    ev.rng_state = 2**64 - 4
    first = ev.run(module, [])
    second = ev.run(module, [])
    assert_same_bits(first, np.array([2**64 - 4, 0], np.uint64))
    assert_same_bits(second, np.array([6, 1], np.uint64))
