"""`xla.matmul`: round-trips through its custom and generic text forms (schedule and offsets
included), and its verifier rejects each malformed case with its message."""

from __future__ import annotations

import pytest

from hlocc.codegen.ir import MatmulOp
from hlocc.tools.opt import KernelIRError, parse_module, print_module

MAP = '#xla.indexing_map<"(b, m, n, k) -> ({res}), domain: b in [0, 0], m in [0, 3], n in [0, 4], k in [0, 2]">'


def module(lhs="m, k", rhs="k, n", out="m, n", sizes="1, 4, 5, 3", extra="", yield_="xla.yield %acc : f32",
           offsets="", args="") -> str:
    return f"""func.func @f(%a: tensor<4x3xf32>, %b: tensor<3x5xf32>, %c: tensor<4x5xf32>{args}) -> tensor<4x5xf32> {{
  %r = xla.matmul %a[{MAP.format(res=lhs)}], %b[{MAP.format(res=rhs)}] into %c[{MAP.format(res=out)}]{offsets} sizes [{sizes}]{extra} : (tensor<4x3xf32>, tensor<3x5xf32>, tensor<4x5xf32>) -> tensor<4x5xf32> {{
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    {yield_}
  }}
  func.return %r : tensor<4x5xf32>
}}"""


def test_round_trip_custom_and_generic():
    text = module(extra=" schedule {k_block = 2 : i64, register_block = array<i64: 2, 4>}",
                  offsets=" offsets(%x, %y, %z)", sizes="1, 2, 4, 3", args=", %x: index, %y: index, %z: index")
    printed = print_module(parse_module(text))
    assert "offsets(%x, %y, %z) sizes [1, 2, 4, 3] schedule {k_block = 2 : i64, register_block = array<i64: 2, 4>}" \
        in printed
    assert print_module(parse_module(printed)) == printed
    op = next(o for o in parse_module(printed).walk() if isinstance(o, MatmulOp))
    assert op.problem_sizes == [1, 4, 5, 3] and op.size_list == [1, 2, 4, 3]
    from io import StringIO

    from xdsl.printer import Printer
    out = StringIO()
    Printer(stream=out, print_generic_format=True).print_op(parse_module(printed))
    assert print_module(parse_module(out.getvalue())) == printed


@pytest.mark.parametrize("kwargs,message", [
    (dict(lhs="m"), "lhs map has 1 results for a rank-2 tensor"),
    (dict(sizes="1, 4, 5"), "sizes must be 4 non-negative extents"),
    (dict(sizes="1, 2, 5, 3"), "without offsets must cover the problem"),
    (dict(yield_="xla.yield"), "epilogue must yield one element"),
    (dict(yield_="%i2 = arith.index_cast %i : index to i32\n    xla.yield %i2 : i32"), r"yields \(i32\) but expects \(f32\)"),
    (dict(extra=" schedule {register_block = array<i64: 0, 4>}"), "register_block must be two positive sizes"),
])
def test_verifier_errors(kwargs, message):
    with pytest.raises(KernelIRError, match=message):
        parse_module(module(**kwargs))
