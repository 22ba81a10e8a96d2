"""The `xla` kernel dialect: every op builds from Python, verifies, and round-trips through its
custom and its generic text form; every verifier rejects a bad case with its message."""

from __future__ import annotations

from io import StringIO

import pytest
from xdsl.dialects import arith, func, tensor
from xdsl.dialects.builtin import IndexType, IntegerType, ModuleOp, TensorType, VectorType, f32, i1
from xdsl.ir import Block, Region
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from hlocc.analysis.affine_expr import dim, sym
from hlocc.analysis.indexing_map import IndexingMap
from hlocc.analysis.indexing_map_text import parse_indexing_map
from hlocc.codegen import ir as xla
from hlocc.tools.opt import KernelIRError, make_context, parse_module, print_module, run_opt

INDEX = IndexType()
T84 = TensorType(f32, [8, 4])
MAP_2D = IndexingMap.from_sizes([8], [dim(0), sym(0)], [4])  # (d0)[s0] -> (d0, s0)


def kernel(arg_types, body) -> ModuleOp:
    """A module with @add(f32, f32) -> f32 and @k(arg_types...) whose body `body(args)` builds; its
    last op's first result (if any) is returned."""
    add_block = Block(arg_types=[f32, f32])
    s = arith.AddfOp(*add_block.args)
    add_block.add_ops([s, func.ReturnOp(s)])
    add = func.FuncOp("add", ([f32, f32], [f32]), Region(add_block), "private")
    block = Block(arg_types=arg_types)
    ops = body(block.args)
    block.add_ops(ops)
    ret = [ops[-1].results[0]] if ops and ops[-1].results else []
    block.add_op(func.ReturnOp(*ret))
    k = func.FuncOp("k", (arg_types, [r.type for r in ret]), Region(block))
    return ModuleOp([add, k])


def roundtrip(module: ModuleOp) -> str:
    """Verify, print, parse, print again (custom and generic form) and check all agree."""
    module.verify()
    text = print_module(module)
    assert print_module(parse_module(text)) == text
    generic = StringIO()
    Printer(stream=generic, print_generic_format=True).print_op(module)
    reparsed = Parser(make_context(), generic.getvalue()).parse_module()
    reparsed.verify()
    assert print_module(reparsed) == text
    assert reparsed.is_structurally_equivalent(module)
    return text


def expect_rejected(module: ModuleOp, message: str) -> None:
    with pytest.raises(VerifyException, match=message):
        module.verify()


# -- the attribute --------------------------------------------------------------------------------

def test_indexing_map_attr_prints_xla_syntax_and_parses_back():
    m = parse_indexing_map("(th_x, bl_x)[v] -> (bl_x * 512 + th_x * 4 + v), "
                           "domain: th_x in [0, 127], bl_x in [0, 95], v in [0, 3], th_x + v in [0, 100]")
    attr = xla.IndexingMapAttr(m)
    out = StringIO()
    Printer(stream=out).print_attribute(attr)
    text = out.getvalue()
    assert text == ('#xla.indexing_map<"(th_x, bl_x)[v] -> (bl_x * 512 + th_x * 4 + v), domain: '
                    'th_x in [0, 127], bl_x in [0, 95], v in [0, 3], th_x + v in [0, 100]">')
    back = Parser(make_context(), text).parse_attribute()
    assert back == attr and back.indexing_map == m


def test_indexing_map_attr_accepts_xla_split_strings():
    text = '#xla.indexing_map<"(d0) -> (d0 floordiv 2)," "domain: d0 in [0, 9]">'
    attr = Parser(make_context(), text).parse_attribute()
    assert str(attr.indexing_map) == "(d0) -> (d0 floordiv 2), domain: d0 in [0, 9]"


def test_indexing_map_attr_reports_bad_map_text():
    with pytest.raises(Exception, match="invalid indexing map.*unknown variable or token 'd1'"):
        Parser(make_context(), '#xla.indexing_map<"(d0) -> (d1), domain: d0 in [0, 9]">').parse_attribute()


# -- apply_indexing -------------------------------------------------------------------------------

def test_apply_indexing_builds_and_roundtrips():
    m = parse_indexing_map("(d0)[s0]{r0} -> (d0 * 4 + s0, r0), domain: d0 in [0, 7], s0 in [0, 3], r0 in [0, 9]")
    op = None

    def body(args):
        nonlocal op
        op = xla.ApplyIndexingOp(m, args)
        return [op]

    module = kernel([INDEX] * 3, body)
    assert [r.type for r in op.results] == [INDEX, INDEX]
    text = roundtrip(module)
    assert 'xla.apply_indexing #xla.indexing_map<"(d0)[s0]{r0} -> (d0 * 4 + s0, r0)' in text
    assert "(%0)[%1, %2]" in text


def test_apply_indexing_without_symbols_prints_no_brackets():
    text = roundtrip(kernel([INDEX], lambda a: [xla.ApplyIndexingOp(IndexingMap.identity([5]), a)]))
    assert 'domain: d0 in [0, 4]">(%0)\n' in text


def test_apply_indexing_rejects_wrong_operand_count():
    expect_rejected(kernel([INDEX], lambda a: [xla.ApplyIndexingOp(MAP_2D, a)]),
                    r"operand count 1 must match the number of dimensions, range and runtime variables .*\(2\)")


def test_apply_indexing_rejects_wrong_result_count():
    def body(args):
        op = xla.ApplyIndexingOp(MAP_2D, args)
        return [xla.ApplyIndexingOp.create(operands=op.operands, result_types=[INDEX],
                                           properties=dict(op.properties))]

    expect_rejected(kernel([INDEX, INDEX], body), r"result count 1 must match the number of indexing map results \(2\)")


def test_apply_indexing_rejects_constraints():
    m = parse_indexing_map("(d0) -> (d0), domain: d0 in [0, 9], d0 mod 2 in [0, 0]")
    expect_rejected(kernel([INDEX], lambda a: [xla.ApplyIndexingOp(m, a)]), "cannot have any constraints")


# -- loop -----------------------------------------------------------------------------------------

def sum_loop(args, yield_type_ok=True, inits=None):
    """xla.loop over MAP_2D summing t[ra, rb] into an f32 iter_arg."""
    t, d, init = args
    loop = xla.LoopOp(MAP_2D, [d], [init] if inits is None else inits)
    _iv, ra, rb, acc = loop.body.block.args
    e = tensor.ExtractOp(t, [ra, rb], f32)
    s = arith.AddfOp(acc, e)
    loop.body.block.add_ops([e, s, xla.YieldOp(s if yield_type_ok else ra)])
    return [loop]


def test_loop_builds_and_roundtrips():
    module = kernel([T84, INDEX, f32], sum_loop)
    loop = next(op for op in module.walk() if isinstance(op, xla.LoopOp))
    assert len(loop.induction_vars) == 1 and len(loop.map_results) == 2 and len(loop.region_iter_args) == 1
    assert loop.results[0].type == f32
    text = roundtrip(module)
    assert "= xla.loop (%1)[%" in text and "iter_args(" in text and "-> (f32) {" in text


def test_loop_without_iter_args_roundtrips():
    def body(args):
        loop = xla.LoopOp(MAP_2D, [args[0]], [])
        loop.body.block.add_op(xla.YieldOp())
        return [loop]

    text = roundtrip(kernel([INDEX], body))
    assert "iter_args" not in text and "xla.yield\n" in text


def test_loop_rejects_wrong_dim_count():
    def body(args):
        t, d, init = args
        loop = sum_loop(args)[0]
        return [xla.LoopOp(loop.indexing_map, [d, d], [init], loop.detach_region(loop.body))]

    expect_rejected(kernel([T84, INDEX, f32], body), "mismatch in number of dims operands 2")


def test_loop_rejects_yield_of_wrong_type():
    expect_rejected(kernel([T84, INDEX, f32], lambda a: sum_loop(a, yield_type_ok=False)),
                    r"yields \(index\) but expects \(f32\)")


def test_loop_rejects_block_arguments_not_matching_the_map():
    def body(args):
        loop = xla.LoopOp(MAP_2D, [args[0]], [], Region(Block(arg_types=[INDEX])))
        loop.body.block.add_op(xla.YieldOp())
        return [loop]

    expect_rejected(kernel([INDEX], body), "body has 1 arguments, expected 1 induction variables \\+ 2 indexing map")


# -- pure_call ------------------------------------------------------------------------------------

def test_pure_call_builds_and_roundtrips():
    text = roundtrip(kernel([f32, f32], lambda a: [xla.PureCallOp("add", a, [f32])]))
    assert "xla.pure_call @add(%0, %1) : (f32, f32) -> f32" in text


def test_pure_call_rejects_unknown_function():
    expect_rejected(kernel([f32, f32], lambda a: [xla.PureCallOp("nope", a, [f32])]),
                    "refers to an undefined function: @nope")


def test_pure_call_rejects_argument_count_mismatch():
    expect_rejected(kernel([f32], lambda a: [xla.PureCallOp("add", a, [f32])]),
                    "argument count mismatch: 'operands' has 1 arguments, but '@add' expects 2")


def test_pure_call_rejects_type_mismatch():
    expect_rejected(kernel([f32, f32], lambda a: [xla.PureCallOp("add", a, [INDEX])]), "does not match '@add'")


# -- allocate_shared, sync_threads ----------------------------------------------------------------

def test_allocate_shared_and_sync_threads_roundtrip():
    def body(args):
        shmem = xla.AllocateSharedOp(TensorType(f32, [32, 33]))
        return [shmem, xla.SyncThreadsOp([shmem, args[0]])]

    module = kernel([T84], body)
    text = roundtrip(module)
    assert "xla.allocate_shared : tensor<32x33xf32>" in text
    assert "xla.sync_threads %1, %0 : tensor<32x33xf32>, tensor<8x4xf32>" in text


def test_allocate_shared_rejects_dynamic_shape():
    expect_rejected(kernel([], lambda a: [xla.AllocateSharedOp(TensorType(f32, [-1, 4]))]),
                    "needs a statically shaped tensor")


def test_sync_threads_rejects_result_types_differing_from_operands():
    bad = lambda a: [xla.SyncThreadsOp.create(operands=[a[0]], result_types=[TensorType(f32, [4, 8])])]  # noqa: E731
    expect_rejected(kernel([T84], bad), "results must have the types of its operands")


# -- shuffle_reduce -------------------------------------------------------------------------------

def test_shuffle_reduce_roundtrips():
    text = roundtrip(kernel([f32], lambda a: [xla.ShuffleReduceOp("add", a, 16)]))
    assert "xla.shuffle_reduce @add(%0) to 16 : f32" in text


@pytest.mark.parametrize("distance", [0, 12])
def test_shuffle_reduce_rejects_bad_distance(distance):
    expect_rejected(kernel([f32], lambda a: [xla.ShuffleReduceOp("add", a, distance)]),
                    f"max_distance must be a positive power of two, found {distance}")


def test_shuffle_reduce_rejects_combiner_of_wrong_type():
    expect_rejected(kernel([f32, f32], lambda a: [xla.ShuffleReduceOp("add", a, 8)]),
                    r"combiner '@add' has type \(f32, f32\) -> f32, expected \(f32, f32, f32, f32\) -> \(f32, f32\)")


# -- predicated insert / extract ------------------------------------------------------------------

def test_predicated_insert_and_extract_roundtrip():
    def body(args):
        t, i, j, c, v = args
        x = xla.PredicatedExtractOp(c, v, t, [i, j])
        return [x, xla.PredicatedInsertOp(c, x, t, [i, j])]

    module = kernel([T84, INDEX, INDEX, i1, f32], body)
    text = roundtrip(module)
    assert "xla.predicated_extract %0[%1, %2] if %3 else %4 : tensor<8x4xf32>" in text
    assert "xla.predicated_insert %5 into %0[%1, %2] if %3 : tensor<8x4xf32>" in text


def test_predicated_insert_rejects_value_of_wrong_type():
    expect_rejected(kernel([T84, INDEX, INDEX, i1], lambda a: [xla.PredicatedInsertOp(a[3], a[1], a[0], a[1:3])]),
                    "value type index must be the element type of tensor<8x4xf32>")


def test_predicated_insert_rejects_wrong_index_count():
    expect_rejected(kernel([T84, INDEX, i1, f32], lambda a: [xla.PredicatedInsertOp(a[2], a[3], a[0], [a[1]])]),
                    "expects 2 indices for tensor<8x4xf32>, found 1")


def test_predicated_extract_rejects_fallback_of_wrong_type():
    expect_rejected(kernel([T84, INDEX, INDEX, i1], lambda a: [xla.PredicatedExtractOp(a[3], a[1], a[0], a[1:3])]),
                    "fallback type index and result type f32 must be the element type")


# -- atomic_rmw -----------------------------------------------------------------------------------

def rmw(args, arg_type=f32, yield_arg=True):
    t, i, j = args
    op = xla.AtomicRMWOp(t, [i, j], Region(Block(arg_types=[arg_type])))
    cur = op.body.block.args[0]
    op.body.block.add_op(xla.YieldOp(cur if yield_arg else i))
    return [op]


def test_atomic_rmw_roundtrips():
    def body(args):
        t, i, j, v = args
        op = xla.AtomicRMWOp(t, [i, j])
        s = arith.AddfOp(op.body.block.args[0], v)
        op.body.block.add_ops([s, xla.YieldOp(s)])
        return [op]

    text = roundtrip(kernel([T84, INDEX, INDEX, f32], body))
    assert "xla.atomic_rmw %0[%1, %2] : tensor<8x4xf32> {\n    ^bb0(%5: f32):" in text


def test_atomic_rmw_accepts_a_vector_of_elements():
    roundtrip(kernel([T84, INDEX, INDEX], lambda a: rmw(a, VectorType(f32, [2]))))


def test_atomic_rmw_rejects_block_argument_of_wrong_type():
    expect_rejected(kernel([T84, INDEX, INDEX], lambda a: rmw(a, INDEX)),
                    "mismatch in the result element type f32 and the block argument type index")


def test_atomic_rmw_rejects_yield_of_wrong_type():
    expect_rejected(kernel([T84, INDEX, INDEX], lambda a: rmw(a, yield_arg=False)),
                    "mismatch in the block argument type and the yielded type")


# -- compares, select and casts on vectors --------------------------------------------------------

V4F = VectorType(f32, [4])
V4I16 = VectorType(IntegerType(16), [4])
V4I32 = VectorType(IntegerType(32), [4])
V4I1 = VectorType(i1, [4])


def test_vector_compares_select_and_casts_roundtrip():
    def body(args):
        a, b, h = args
        lt = xla.CmpfOp(a, b, "olt")
        wide = xla.ExtUIOp(h, V4I32)
        eq = xla.CmpiOp(wide, wide, "eq")
        both = arith.AndIOp(lt, eq)
        as_float = xla.SIToFPOp(wide, V4F)
        back = xla.FPToUIOp(as_float, V4I16)
        narrow = xla.TruncIOp(wide, V4I16)
        return [lt, wide, eq, both, as_float, back, narrow, xla.SelectOp(both, a, as_float)]

    text = roundtrip(kernel([V4F, V4F, V4I16], body))
    assert "xla.cmpf olt, %0, %1 : vector<4xf32>" in text
    assert "xla.cmpi eq, %4, %4 : vector<4xi32>" in text
    assert "xla.extui %2 : vector<4xi16> to vector<4xi32>" in text
    assert "xla.select %6, %0, %7 : vector<4xi1>, vector<4xf32>" in text


def test_vector_forms_take_scalars_and_a_scalar_condition():
    def body(args):
        x, a = args
        nan = xla.CmpfOp(x, x, "uno")
        return [nan, xla.SelectOp(nan, a, a)]

    text = roundtrip(kernel([f32, V4F], body))
    assert "xla.cmpf uno, %0, %0 : f32" in text
    assert "xla.select %2, %1, %1 : i1, vector<4xf32>" in text


def test_vector_forms_cover_the_arith_ops_xdsl_verifies_only_on_scalars():
    assert {cls.name for cls in xla.VECTOR_FORMS} == {
        "arith.cmpf", "arith.cmpi", "arith.select", "arith.extui", "arith.extsi", "arith.trunci",
        "arith.sitofp", "arith.uitofp", "arith.fptosi", "arith.fptoui"}
    assert all(cls.name == "xla." + arith_op.name.removeprefix("arith.") for arith_op, cls in xla.VECTOR_FORMS.items())


@pytest.mark.parametrize("build,message", [
    (lambda a, b, h: xla.CmpiOp(a, b, "slt"), "'xla.cmpi' operands must be integers or vectors of them, found vector<4xf32>"),
    (lambda a, b, h: xla.CmpfOp.create(operands=[a, b], result_types=[i1], properties=xla.CmpfOp(a, b, "olt").properties),
     "'xla.cmpf' result must be vector<4xi1> for operands of type vector<4xf32>, found i1"),
    (lambda a, b, h: xla.SelectOp(h, a, b), "condition must be i1 or a vector of i1 of the result's shape, found vector<4xi16>"),
    (lambda a, b, h: xla.ExtUIOp(h, VectorType(IntegerType(8), [4])), "'xla.extui' result element must be wider"),
    (lambda a, b, h: xla.TruncIOp(h, V4I32), "'xla.trunci' result element must be narrower"),
    (lambda a, b, h: xla.ExtSIOp(h, VectorType(IntegerType(32), [8])), "must have the same shape"),
    (lambda a, b, h: xla.FPToSIOp(h, V4I32), "'xla.fptosi' converts floats to integers"),
], ids=["cmpi-of-floats", "cmpf-scalar-result", "select-i16-condition", "extui-narrower", "trunci-wider",
        "extsi-other-shape", "fptosi-of-ints"])
def test_vector_forms_reject(build, message):
    expect_rejected(kernel([V4F, V4F, V4I16], lambda args: [build(*args)]), message)


def test_compare_rejects_an_unknown_predicate():
    with pytest.raises(KernelIRError, match="unknown predicate 'lt' of xla.cmpf"):
        run_opt("func.func @f(%a: vector<4xf32>) -> vector<4xi1> {\n  %r = xla.cmpf lt, %a, %a : vector<4xf32>\n"
                "  func.return %r : vector<4xi1>\n}\n")


# -- yield ----------------------------------------------------------------------------------------

def test_yield_outside_loop_or_atomic_rmw_is_rejected():
    with pytest.raises(KernelIRError, match="xla.yield.*expects parent op to be one of"):
        run_opt("func.func @f() {\n  xla.yield\n}\n")
