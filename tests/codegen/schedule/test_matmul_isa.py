"""The packed matmul for each CPU's vector registers (codegen/target.py `VectorIsa`): the analytic
register block of AVX-512 (6 x 64), AVX2 (4 x 24), NEON (6 x 16) and SSE (4 x 12), emitted with
`use_vector_isa` and run on this host (x86-64 LLVM runs wider vectors split and narrower ones as
they are; NEON's 4-lane blocks are plain 128-bit vectors here), exact on integer-valued f32 inputs
against the evaluator at sizes that leave edge blocks in M, N and K, with a transposed operand and a
fused bias."""

import numpy as np
import pytest

from hlocc.backends.cpu.kernel import compile_fusion
from hlocc.codegen import target
from hlocc.codegen.schedule import use_schedule
from hlocc.codegen.schedule.choice import CacheSizes, analytic_schedule, register_block
from hlocc.evaluator import Evaluator
from hlocc.hlo.parser import parse_hlo

DOT = """HloModule m
ENTRY e {
  a = f32[37,53]{0,1} parameter(0)
  b = f32[37,83] parameter(1)
  c = f32[83] parameter(2)
  d = f32[53,83] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}, backend_config={"__hlocc_gemm":{}}
  cb = f32[53,83] broadcast(c), dimensions={1}
  ROOT r = f32[53,83] add(d, cb)
}"""


@pytest.mark.parametrize("isa, block", [("AVX512", (6, 64)), ("AVX2", (4, 24)), ("NEON", (6, 16)), ("SSE", (4, 12))])
def test_each_vector_isa_block_is_exact(isa, block):
    isa = getattr(target, isa)
    assert register_block(isa) == block
    module = parse_hlo(DOT)
    rng = np.random.default_rng(5)
    args = [rng.integers(-3, 4, p.shape.dims).astype(np.float32) for p in module.entry.parameters]
    with target.use_vector_isa(isa):
        # a small K block and a small cache: K, M and N each end in a partial block
        schedule = analytic_schedule([1, 53, 83, 37], caches=CacheSizes(l1=48 << 10, l2=64 << 10), threads=2)
        schedule = type(schedule)(**{**schedule.__dict__, "kc": 16})
        assert (schedule.mr, schedule.nr) == block and schedule.pack == (0, 1)
        with use_schedule(schedule):
            kernel = compile_fusion(module.entry, use_cache=False)
    np.testing.assert_array_equal(kernel(*args)[0], Evaluator().run(module, args))
