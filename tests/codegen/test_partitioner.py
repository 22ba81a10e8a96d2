"""Tests of the computation partitioner (codegen/partitioner.py): the seed's criteria, signatures,
forced roots, the subgraph cap, and graphs with many splits that must stay linear."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hlocc.codegen.partitioner import (
    entry_function_signature,
    partition_computation,
    partition_fusion,
    subgraph_roots_for_heroes,
)
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.parser import parse_hlo

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
XLA_CORPUS = CORPUS / "xla"


def fused(text: str) -> HloComputation:
    """The fused computation of a module: the one a fusion in the entry calls, else the entry
    (headerless emitter-test modules)."""
    module = parse_hlo(text)
    for instr in module.entry.instructions:
        if instr.opcode == "fusion":
            return instr.fused_computation
    return module.entry


def dump(text: str, **kwargs) -> str:
    return str(partition_computation(fused(text), **kwargs))


def expected(text: str) -> str:
    return textwrap.dedent(text).strip()


def check_invariants(pc) -> None:
    """Every instruction in exactly one subgraph, in a valid order; one root per subgraph, the
    computation root's subgraph first; a non-root member has all its users in its own subgraph."""
    comp = pc.computation
    seen = [i for sg in pc.subgraphs for i in sg.instructions]
    assert sorted(map(id, seen)) == sorted(map(id, comp.instructions))
    assert pc.subgraphs[0] is pc.root_subgraph
    for sg in pc.subgraphs:
        assert len(sg.roots) == 1
        position = {id(i): k for k, i in enumerate(sg.instructions)}
        for instr in sg.instructions:
            assert pc.instr_to_subgraph[instr] is sg
            for op in instr.operands:
                if id(op) in position:
                    assert position[id(op)] < position[id(instr)], f"{op.name} after its user {instr.name}"
            if instr is not sg.roots[0]:
                assert instr.users and all(pc.instr_to_subgraph[u] is sg for u in instr.users)


GELU = """
gelu {
  %param = bf16[6,512,4096] parameter(0)
  %constant_0 = bf16[] constant(0.5)
  %bcast_0 = bf16[6,512,4096] broadcast(bf16[] %constant_0), dimensions={}
  %constant_1 = bf16[] constant(1)
  %bcast_1 = bf16[6,512,4096] broadcast(bf16[] %constant_1), dimensions={}
  %constant_2 = bf16[] constant(0.79785)
  %bcast_2 = bf16[6,512,4096] broadcast(bf16[] %constant_2), dimensions={}
  %constant_3 = bf16[] constant(0.044708)
  %bcast_3 = bf16[6,512,4096] broadcast(bf16[] %constant_3), dimensions={}
  %square = bf16[6,512,4096] multiply(%param, %param)
  %cube = bf16[6,512,4096] multiply(%square, %param)
  %multiply_3 = bf16[6,512,4096] multiply(%cube, %bcast_3)
  %add_1 = bf16[6,512,4096] add(%param, %multiply_3)
  %multiply_2 = bf16[6,512,4096] multiply(%add_1, %bcast_2)
  %tanh_0 = bf16[6,512,4096] tanh(%multiply_2)
  %add_0 = bf16[6,512,4096] add(%tanh_0, %bcast_1)
  %multiply_1 = bf16[6,512,4096] multiply(%add_0, %bcast_0)
  ROOT %multiply_0 = bf16[6,512,4096] multiply(%param, %multiply_1)
}
"""


def test_gelu_is_one_subgraph_with_the_seed_signatures():
    pc = partition_computation(fused(GELU))
    check_invariants(pc)
    assert len(pc.subgraphs) == 1
    sg = pc.subgraphs[0]
    assert sg.name == "gelu_multiply_0" and [r.name for r in sg.roots] == ["multiply_0"]
    assert len(sg.instructions) == 18 and not sg.has_no_compute
    assert sg.index_ranges == (6, 512, 4096) and sg.index_rank == 3
    assert str(sg.signature) == (
        "func.func @gelu_multiply_0(%param: tensor<6x512x4096xbf16>, "
        "%i0: index {xla.range = [0 : index, 5 : index]}, %i1: index {xla.range = [0 : index, 511 : index]}, "
        "%i2: index {xla.range = [0 : index, 4095 : index]}) -> bf16")
    assert str(entry_function_signature(pc.computation)) == (
        "func.func @main(%param: tensor<6x512x4096xbf16>, %out0: tensor<6x512x4096xbf16>) "
        "-> tensor<6x512x4096xbf16>")


def test_instruction_read_through_two_indexings_is_its_own_subgraph():
    # The seed's example: log is read by transpose (transposed) and by add (identity).
    text = """
    fusion {
      p = f32[4,4] parameter(0)
      log = f32[4,4] log(p)
      t = f32[4,4] transpose(log), dimensions={1,0}
      ROOT add = f32[4,4] add(log, t)
    }"""
    assert dump(text) == expected("""
        PartitionedComputation fusion:
        SUBGRAPH fusion_add {
          t = f32[4,4] transpose(log), dimensions={1,0}
          ROOT add = f32[4,4] add(log, t)
        }
        SUBGRAPH fusion_log {
          p = f32[4,4] parameter(0)
          ROOT log = f32[4,4] log(p)
        }""")


def test_indexing_is_composed_through_elementwise_ops():
    # x reaches the root through transpose(negate(x)) and directly: negate's identity map must not
    # hide the transpose above it.
    text = """
    fusion {
      p = f32[4,4] parameter(0)
      x = f32[4,4] exponential(p)
      n = f32[4,4] negate(x)
      t = f32[4,4] transpose(n), dimensions={1,0}
      ROOT add = f32[4,4] add(t, x)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [[i.name for i in sg.instructions] for sg in pc.subgraphs] == [["n", "t", "add"], ["p", "x"]]


def test_equal_indexing_through_different_paths_joins():
    # Both paths read x transposed, once through negate: one access, one subgraph.
    text = """
    fusion {
      p = f32[4,4] parameter(0)
      x = f32[4,4] exponential(p)
      n = f32[4,4] negate(x)
      t1 = f32[4,4] transpose(n), dimensions={1,0}
      t2 = f32[4,4] transpose(x), dimensions={1,0}
      ROOT add = f32[4,4] add(t1, t2)
    }"""
    assert [sg.name for sg in partition_computation(fused(text)).subgraphs] == ["fusion_add"]


def test_broadcast_with_several_users_of_the_same_indexing_joins():
    text = """
    fusion {
      p0 = f32[8,16] parameter(0)
      p1 = f32[16] parameter(1)
      b = f32[8,16] broadcast(p1), dimensions={1}
      add = f32[8,16] add(p0, b)
      mul = f32[8,16] multiply(add, b)
      ROOT sub = f32[8,16] subtract(mul, b)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [sg.name for sg in pc.subgraphs] == ["fusion_sub"]
    assert [i.name for i in pc.subgraphs[0].instructions] == ["p0", "p1", "b", "add", "mul", "sub"]


def test_broadcast_read_transposed_and_straight_splits():
    text = """
    fusion {
      p1 = f32[16] parameter(0)
      b = f32[16,16] broadcast(p1), dimensions={1}
      t = f32[16,16] transpose(b), dimensions={1,0}
      ROOT add = f32[16,16] add(t, b)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [sg.name for sg in pc.subgraphs] == ["fusion_add", "fusion_b"]
    # b's operand is read once, inside b's subgraph.
    assert [i.name for i in pc.subgraphs[1].instructions] == ["p1", "b"]


def test_parameter_read_through_two_indexings_gets_a_no_compute_subgraph():
    text = """
    fusion {
      p = f32[4,4] parameter(0)
      t = f32[4,4] transpose(p), dimensions={1,0}
      ROOT add = f32[4,4] add(p, t)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    names = {sg.name: sg for sg in pc.subgraphs}
    assert list(names) == ["fusion_add", "fusion_p"]
    assert names["fusion_p"].has_no_compute and not names["fusion_add"].has_no_compute


def test_concatenate_of_the_same_operand_twice_splits_it():
    # One user, two different accesses (XLA's "evaluated more than once").
    text = """
    fusion {
      p = f32[4] parameter(0)
      e = f32[4] exponential(p)
      ROOT c = f32[8] concatenate(e, e), dimensions={0}
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [sg.name for sg in pc.subgraphs] == ["fusion_c", "fusion_e"]


def test_same_operand_twice_through_the_same_indexing_joins():
    text = """
    fusion {
      p = f32[4] parameter(0)
      e = f32[4] exponential(p)
      ROOT m = f32[4] multiply(e, e)
    }"""
    assert [sg.name for sg in partition_computation(fused(text)).subgraphs] == ["fusion_m"]


def test_dynamic_slices_with_different_offsets_split_their_operand():
    # Both maps are `d0 + rt0`; only the offset operands differ, so they must not be merged.
    text = """
    fusion {
      p = f32[16] parameter(0)
      i = s32[] parameter(1)
      j = s32[] parameter(2)
      e = f32[16] exponential(p)
      a = f32[4] dynamic-slice(e, i), dynamic_slice_sizes={4}
      b = f32[4] dynamic-slice(e, j), dynamic_slice_sizes={4}
      ROOT add = f32[4] add(a, b)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [sg.name for sg in pc.subgraphs] == ["fusion_add", "fusion_e"]


def test_multi_output_fusion_is_one_subgraph_with_one_scalar_per_output():
    text = """
    fusion {
      param0 = f64[8] parameter(0)
      param1 = f64[8] parameter(1)
      minimum = f64[8] minimum(param0, param1)
      maximum = f64[8] maximum(param0, param1)
      bc = f64[2,4] bitcast(maximum)
      ROOT tuple = (f64[8], f64[2,4]) tuple(minimum, bc)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert len(pc.subgraphs) == 1
    sg = pc.subgraphs[0]
    assert sg.index_ranges == (8,)
    assert str(sg.signature) == ("func.func @fusion_tuple(%param0: tensor<8xf64>, %param1: tensor<8xf64>, "
                                 "%i0: index {xla.range = [0 : index, 7 : index]}) -> (f64, f64)")
    assert str(entry_function_signature(pc.computation, "fusion")) == (
        "func.func @fusion(%param0: tensor<8xf64>, %param1: tensor<8xf64>, %out0: tensor<8xf64>, "
        "%out1: tensor<2x4xf64>) -> (tensor<8xf64>, tensor<2x4xf64>)")


def test_multi_output_fusion_with_side_output_at_another_index_splits():
    # The side output `p` is written at the root index; the transpose reads it transposed.
    text = """
    fusion {
      p = f32[8,8] parameter(0)
      e = f32[8,8] exponential(p)
      t = f32[8,8] transpose(e), dimensions={1,0}
      ROOT tuple = (f32[8,8], f32[8,8]) tuple(e, t)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    assert [sg.name for sg in pc.subgraphs] == ["fusion_tuple", "fusion_e"]
    assert [i.name for i in pc.subgraphs[0].instructions] == ["t", "tuple"]


def test_forced_roots_from_the_hero_predicate():
    text = """
    fusion {
      p = f32[16,32] parameter(0)
      e = f32[16,32] exponential(p)
      t = f32[32,16] transpose(e), dimensions={1,0}
      ROOT n = f32[32,16] negate(t)
    }"""
    comp = fused(text)
    assert len(partition_computation(comp).subgraphs) == 1
    hero = next(i for i in comp.instructions if i.name == "t")
    pc = partition_computation(comp, subgraph_roots_for_heroes([hero]))
    check_invariants(pc)
    assert str(pc) == expected("""
        PartitionedComputation fusion:
        SUBGRAPH fusion_n {
          ROOT n = f32[32,16] negate(t)
        }
        SUBGRAPH fusion_t {
          ROOT t = f32[32,16] transpose(e), dimensions={1,0}
        }
        SUBGRAPH fusion_e {
          p = f32[16,32] parameter(0)
          ROOT e = f32[16,32] exponential(p)
        }""")
    assert pc.find_subgraph(hero).index_ranges == (32, 16)
    assert pc.instr_to_subgraph[comp.root].name == "fusion_n"


def test_called_computations_get_scalar_signatures():
    text = """
    add {
      a = f32[] parameter(0)
      b = f32[] parameter(1)
      ROOT s = f32[] add(a, b)
    }
    fusion {
      p = f32[8,16] parameter(0)
      zero = f32[] constant(0)
      ROOT r = f32[8] reduce(p, zero), dimensions={1}, to_apply=add
    }
    ENTRY e {
      x = f32[8,16] parameter(0)
      ROOT f = f32[8] fusion(x), kind=kInput, calls=fusion
    }"""
    comp = fused(text)
    pcs = partition_fusion(comp)
    assert [pc.computation.name for pc in pcs.computations] == ["fusion", "add"]
    assert pcs.fusion.computation is comp and len(pcs.fusion.subgraphs) == 1
    reducer = pcs.computations[1].subgraphs[0]
    assert str(reducer.signature) == "func.func @add_s(%a: f32, %b: f32) -> f32"
    assert pcs.find_subgraph(reducer.roots[0]) is reducer
    assert str(pcs.fusion.subgraphs[0].signature) == (
        "func.func @fusion_r(%p: tensor<8x16xf32>, %i0: index {xla.range = [0 : index, 7 : index]}) -> f32")


def test_signature_types_are_signless_and_names_unique():
    text = """
    fusion {
      i0 = u8[4] parameter(0)
      b = pred[4] parameter(1)
      c = s8[4] convert(i0)
      ROOT s = s8[4] select(b, c, c)
    }"""
    sig = partition_computation(fused(text)).subgraphs[0].signature
    assert str(sig) == ("func.func @fusion_s(%i0: tensor<4xi8>, %b: tensor<4xi1>, "
                        "%i0_1: index {xla.range = [0 : index, 3 : index]}) -> i8")
    assert [a.kind for a in sig.arguments] == ["tensor", "tensor", "index"]


# -- graphs with many splits ---------------------------------------------------------------------

def transpose_chain(n: int) -> str:
    """Every x_i is read by add (identity) and by transpose (transposed): n splits."""
    lines = ["fusion {", "  x0 = f32[8,8] parameter(0)"]
    for i in range(n):
        lines.append(f"  t{i} = f32[8,8] transpose(x{i}), dimensions={{1,0}}")
        lines.append(f"  x{i + 1} = f32[8,8] add(x{i}, t{i})")
    lines[-1] = "  ROOT " + lines[-1].strip()
    return "\n".join(lines + ["}"])


def diamond_chain(n: int) -> str:
    """Every x_i is read by two elementwise ops that meet again: 2^n paths, one subgraph."""
    lines = ["fusion {", "  x0 = f32[8,8] parameter(0)"]
    for i in range(n):
        lines.append(f"  a{i} = f32[8,8] negate(x{i})")
        lines.append(f"  b{i} = f32[8,8] exponential(x{i})")
        lines.append(f"  x{i + 1} = f32[8,8] add(a{i}, b{i})")
    lines[-1] = "  ROOT " + lines[-1].strip()
    return "\n".join(lines + ["}"])


def test_chain_of_2000_splits():
    pc = partition_computation(fused(transpose_chain(2000)))
    check_invariants(pc)
    assert len(pc.subgraphs) == 2001  # one per add, and the parameter
    assert pc.subgraphs[0].name == "fusion_x2000"
    assert all([i.name for i in sg.instructions] == [f"t{k}", f"x{k + 1}"]
               for k, sg in zip(range(1999, -1, -1), pc.subgraphs[:-1]))
    assert pc.subgraphs[-1].name == "fusion_x0" and pc.subgraphs[-1].has_no_compute


def test_diamond_heavy_dag_is_one_subgraph():
    pc = partition_computation(fused(diamond_chain(600)))
    check_invariants(pc)
    assert len(pc.subgraphs) == 1 and len(pc.subgraphs[0].instructions) == 1801


def test_diamonds_with_transposes_split_at_every_layer():
    # x_i -> (negate, transpose) -> add: every x_i is read through two maps.
    lines = ["fusion {", "  x0 = f32[8,8] parameter(0)"]
    for i in range(300):
        lines += [f"  a{i} = f32[8,8] negate(x{i})",
                  f"  t{i} = f32[8,8] transpose(x{i}), dimensions={{1,0}}",
                  f"  b{i} = f32[8,8] exponential(t{i})",
                  f"  x{i + 1} = f32[8,8] add(a{i}, b{i})"]
    lines[-1] = "  ROOT " + lines[-1].strip()
    pc = partition_computation(fused("\n".join(lines + ["}"])))
    check_invariants(pc)
    assert len(pc.subgraphs) == 301
    assert all(len(sg.instructions) == 4 for sg in pc.subgraphs[:-1])


def test_subgraph_size_cap():
    pc = partition_computation(fused(diamond_chain(100)), max_instructions_per_subgraph=50)
    check_invariants(pc)
    assert all(len(sg.instructions) <= 50 for sg in pc.subgraphs)
    assert len(pc.subgraphs) >= 301 // 50 + 1


# -- XLA's emitter-test corpus -------------------------------------------------------------------

def corpus(name: str) -> str:
    path = XLA_CORPUS / name
    if not path.is_file():
        pytest.skip(f"corpus not found at {XLA_CORPUS} (shared/ is not beside this checkout)")
    return path.read_text()


def test_corpus_no_duplication_matches_xla():
    # XLA's PartitionDiamonds expectation, one level deeper.
    assert dump(corpus("loop__no_duplication.hlo")) == expected("""
        PartitionedComputation fusion:
        SUBGRAPH fusion_add3 {
          slice3.1 = f32[2]{0} slice(add2), slice={[0:2]}
          slice3.2 = f32[2]{0} slice(add2), slice={[1:3]}
          ROOT add3 = f32[2]{0} add(slice3.1, slice3.2)
        }
        SUBGRAPH fusion_add2 {
          slice2.1 = f32[3]{0} slice(add1), slice={[0:3]}
          slice2.2 = f32[3]{0} slice(add1), slice={[1:4]}
          ROOT add2 = f32[3]{0} add(slice2.1, slice2.2)
        }
        SUBGRAPH fusion_add1 {
          slice1.1 = f32[4]{0} slice(add0), slice={[0:4]}
          slice1.2 = f32[4]{0} slice(add0), slice={[1:5]}
          ROOT add1 = f32[4]{0} add(slice1.1, slice1.2)
        }
        SUBGRAPH fusion_add0 {
          slice0.1 = f32[5]{0} slice(param), slice={[0:5]}
          slice0.2 = f32[5]{0} slice(param), slice={[1:6]}
          ROOT add0 = f32[5]{0} add(slice0.1, slice0.2)
        }
        SUBGRAPH fusion_param {
          ROOT param = f32[6]{0} parameter(0)
        }""")


def test_corpus_two_users_is_one_subgraph():
    pc = partition_computation(fused(corpus("loop__two_users.hlo")))
    assert [sg.name for sg in pc.subgraphs] == ["fusion_atan2"]
    assert len(pc.subgraphs[0].instructions) == 7


def test_corpus_transpose_side_output():
    assert dump(corpus("transpose__side_output_and_hero_indexing_match.hlo")) == expected("""
        PartitionedComputation fusion:
        SUBGRAPH fusion_tuple {
          transpose = f32[100,64,32] transpose(input), dimensions={0,2,1}
          bitcast = f32[100,2048] bitcast(input)
          ROOT tuple = (f32[100,64,32], f32[100,2048]) tuple(transpose, bitcast)
        }
        SUBGRAPH fusion_input {
          ROOT input = f32[100,32,64] parameter(0)
        }""")


def test_corpus_mixed_indexing_reads_the_transpose_at_one_physical_position():
    # a1 reads t1 through a bitcast, a2 at the tuple's index mapped to its own shape: the same
    # element, so t1 stays in the root subgraph.
    pc = partition_computation(fused(corpus("transpose__mixed_indexing.hlo")))
    assert [sg.name for sg in pc.subgraphs] == ["fusion_t"]
    assert pc.subgraphs[0].index_ranges == (6, 4, 2, 24)


def test_corpus_loop_and_transpose_fusions_partition_validly():
    if not XLA_CORPUS.is_dir():
        pytest.skip(f"corpus not found at {XLA_CORPUS} (shared/ is not beside this checkout)")
    files = sorted(XLA_CORPUS.glob("loop__*.hlo")) + sorted(XLA_CORPUS.glob("transpose__*.hlo"))
    assert len(files) >= 60
    for path in files:
        pcs = partition_fusion(fused(path.read_text()))
        for pc in pcs.computations:
            check_invariants(pc)
            for sg in pc.subgraphs:
                assert sg.signature.name == sg.name
                assert len(sg.signature.results) >= 1


def test_broadcast_scalar_constant_read_from_two_subgraphs_is_constant_valued():
    # b is read by s and by the root's subgraph: a root of its own, whose users emit the constant in
    # place (element_emitter.py) rather than call it.
    text = """
    fusion {
      p = u32[64] parameter(0)
      c = u32[] constant(13)
      b = u32[64] broadcast(c), dimensions={}
      s = u32[64] shift-left(p, b)
      r = u32[64] reverse(s), dimensions={0}
      x = u32[64] add(s, r)
      ROOT y = u32[64] shift-right-logical(x, b)
    }"""
    pc = partition_computation(fused(text))
    check_invariants(pc)
    names = {sg.name: sg for sg in pc.subgraphs}
    assert list(names) == ["fusion_y", "fusion_s", "fusion_b"]
    assert [i.name for i in names["fusion_b"].instructions] == ["c", "b"]
    assert [sg.constant_valued for sg in names.values()] == [False, False, True]
