"""Hand-written GPU-form kernels with the warp matrix ops (codegen/ir/warp_ops.py), for the SIMT
simulation and PTX tests: C[32x16] = A[32x32] · B[32x16] (f32 accumulation) by one block of four
warps in a 2x2 grid, each warp one m16n8 tile; K in two tiles of 16, each staged in shared memory
(A row-major, B n-major for a plain `ldmatrix`, or k-major for `ldmatrix .trans`) between two
barriers of a K loop, which the block simulation fissions."""

from __future__ import annotations


def warp_mma_kernel(trans_b: bool, element: str = "bf16") -> str:
    """C[32x16] = A[32x32] . B[32x16] by 4 warps (2x2), K in 2 tiles of 16 staged in shared memory."""
    dom = "domain: t in [0, 127], kt in [0, 1]"
    a_copies = []
    for j in range(4):
        a_copies.append(f"""
    %ai{j}:2 = xla.apply_indexing #xla.indexing_map<"(t, kt) -> ((t + {128*j}) floordiv 16, kt * 16 + (t + {128*j}) mod 16), {dom}">(%t, %kt)
    %av{j} = tensor.extract %a[%ai{j}#0, %ai{j}#1] : tensor<32x32x{element}>
    %as{j} = xla.apply_indexing #xla.indexing_map<"(t) -> (t + {128*j}), domain: t in [0, 127]">(%t)
    %sa_{j+1} = tensor.insert %av{j} into %sa_{j}[%as{j}] : tensor<512x{element}>""")
    b_copies = []
    for j in range(2):
        # e = t + 128 j; n-major: n = e/16, k = e%16 -> sb[e] = B[kt*16 + k, n]; k-major: k = e/16, n = e%16
        src = (f"kt * 16 + (t + {128*j}) floordiv 16, (t + {128*j}) mod 16" if trans_b else
               f"kt * 16 + (t + {128*j}) mod 16, (t + {128*j}) floordiv 16")
        b_copies.append(f"""
    %bi{j}:2 = xla.apply_indexing #xla.indexing_map<"(t, kt) -> ({src}), {dom}">(%t, %kt)
    %bv{j} = tensor.extract %b[%bi{j}#0, %bi{j}#1] : tensor<32x16x{element}>
    %bs{j} = xla.apply_indexing #xla.indexing_map<"(t) -> (t + {128*j}), domain: t in [0, 127]">(%t)
    %sb_{j+1} = tensor.insert %bv{j} into %sb_{j}[%bs{j}] : tensor<256x{element}>""")
    b_index = ("(t mod 16) * 16 + 8 * ((t floordiv 32) mod 2)" if trans_b else
               "(8 * ((t floordiv 32) mod 2) + t mod 8) * 16 + 8 * ((t floordiv 8) mod 2)")
    stores = []
    for i in range(4):
        stores.append(f"""
  %ci{i}:2 = xla.apply_indexing #xla.indexing_map<"(t) -> (16 * (t floordiv 64) + (t mod 32) floordiv 4 + {8 * (i // 2)}, 8 * ((t floordiv 32) mod 2) + 2 * (t mod 4) + {i % 2}), domain: t in [0, 127]">(%t)
  %cv{i} = vector.extract %r#0[{i}] : f32 from vector<4xf32>
  %c{i+1} = tensor.insert %cv{i} into %c{i}[%ci{i}#0, %ci{i}#1] : tensor<32x16xf32>""")
    trans = ", trans" if trans_b else ""
    return f"""
func.func @main(%a: tensor<32x32x{element}>, %b: tensor<32x16x{element}>, %c0: tensor<32x16xf32>) -> tensor<32x16xf32> {{
  %t = "gpu.thread_id"() <{{dimension = #gpu<dim x>}}> {{xla.range = [0 : index, 127 : index]}} : () -> index
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i2 = arith.constant 2 : index
  %zero = arith.constant dense<0.0> : vector<4xf32>
  %sa = xla.allocate_shared : tensor<512x{element}>
  %sb = xla.allocate_shared : tensor<256x{element}>
  %r:3 = scf.for %kt = %i0 to %i2 step %i1 iter_args(%acc = %zero, %sa_0 = %sa, %sb_0 = %sb) -> (vector<4xf32>, tensor<512x{element}>, tensor<256x{element}>) {{
    {''.join(a_copies)}
    {''.join(b_copies)}
    %sa_s, %sb_s = xla.sync_threads %sa_4, %sb_2 : tensor<512x{element}>, tensor<256x{element}>
    %ia = xla.apply_indexing #xla.indexing_map<"(t) -> ((16 * (t floordiv 64) + t mod 16) * 16 + 8 * ((t mod 32) floordiv 16)), domain: t in [0, 127]">(%t)
    %ib = xla.apply_indexing #xla.indexing_map<"(t) -> ({b_index}), domain: t in [0, 127]">(%t)
    %fa = xla.ldmatrix %sa_s[%ia] {{count = 4 : i64}} : tensor<512x{element}> -> vector<4xi32>
    %fb = xla.ldmatrix %sb_s[%ib] {{count = 2 : i64{trans}}} : tensor<256x{element}> -> vector<2xi32>
    %acc2 = xla.mma_sync %fa, %fb, %acc {{element = "{element}"}} : vector<4xi32>, vector<2xi32>, vector<4xf32> -> vector<4xf32>
    %sa_e, %sb_e = xla.sync_threads %sa_s, %sb_s : tensor<512x{element}>, tensor<256x{element}>
    scf.yield %acc2, %sa_e, %sb_e : vector<4xf32>, tensor<512x{element}>, tensor<256x{element}>
  }}
  {''.join(stores)}
  func.return %c4 : tensor<32x16xf32>
}}
"""


def _thread(n: int) -> str:
    return f'  %t = "gpu.thread_id"() <{{dimension = #gpu<dim x>}}> {{xla.range = [0 : index, {n - 1} : index]}} : () -> index\n'


def _gather(name: str, source: str, count: int, element: str) -> str:
    """%{name} = vector<count x element> of source[t, 0..count)."""
    lines = [f"  %{name}_0 = arith.constant dense<0> : vector<{count}x{element}>\n" if element == "i32" else
             f"  %{name}_0 = arith.constant dense<0.0> : vector<{count}x{element}>\n"]
    for j in range(count):
        lines.append(f"  %{name}_c{j} = arith.constant {j} : index\n"
                     f"  %{name}_e{j} = tensor.extract %{source}[%t, %{name}_c{j}] : tensor<32x{count}x{element}>\n"
                     f"  %{name}_{j + 1} = vector.insert %{name}_e{j}, %{name}_{j} [{j}] : {element} into "
                     f"vector<{count}x{element}>\n")
    return "".join(lines)


def _scatter(name: str, dest: str, count: int, element: str) -> str:
    """dest[t, 0..count) = the lanes of %{name}; the result is %{dest}_{count}."""
    lines = [f"  %{dest}_0 = tensor.insert %{name}_x0 into %{dest}[%t, %{name}_k0] : tensor<32x{count}x{element}>\n"]
    head = "".join(f"  %{name}_k{j} = arith.constant {j} : index\n"
                   f"  %{name}_x{j} = vector.extract %{name}[{j}] : {element} from vector<{count}x{element}>\n"
                   for j in range(count))
    for j in range(1, count):
        lines.append(f"  %{dest}_{j} = tensor.insert %{name}_x{j} into %{dest}_{j - 1}[%t, %{name}_k{j}] : "
                     f"tensor<32x{count}x{element}>\n")
    return head + "".join(lines)


def mma_fragments_kernel(element: str) -> str:
    """One warp: d[t] = mma_sync(a[t], b[t], c[t]), each lane's fragments read straight from global
    memory (the test builds them from matrices by the PTX layout, independently of ldmatrix)."""
    return ("func.func @main(%a: tensor<32x4xi32>, %b: tensor<32x2xi32>, %c: tensor<32x4xf32>, "
            "%d: tensor<32x4xf32>) -> tensor<32x4xf32> {\n" + _thread(32)
            + _gather("av", "a", 4, "i32") + _gather("bv", "b", 2, "i32") + _gather("cv", "c", 4, "f32")
            + f'  %dv = xla.mma_sync %av_4, %bv_2, %cv_4 {{element = "{element}"}} : vector<4xi32>, vector<2xi32>, '
              "vector<4xf32> -> vector<4xf32>\n"
            + _scatter("dv", "d", 4, "f32") + "  func.return %d_3 : tensor<32x4xf32>\n}\n")


def ldmatrix_kernel(count: int, trans: bool) -> str:
    """One warp: `count` 8x8 matrices of i16 (the 256 elements of `x`, matrix j = rows 8j..8j+7 of a
    32x8 row-major tile) copied to shared memory, then each lane's ldmatrix words written to y[t]."""
    flag = ", trans" if trans else ""
    copies = "".join(
        f'  %i{j} = xla.apply_indexing #xla.indexing_map<"(t) -> (t + {32 * j}), domain: t in [0, 31]">(%t)\n'
        f"  %v{j} = tensor.extract %x[%i{j}] : tensor<256xi16>\n"
        f"  %s{j + 1} = tensor.insert %v{j} into %s{j}[%i{j}] : tensor<256xi16>\n" for j in range(8))
    return ("func.func @main(%x: tensor<256xi16>, %y: tensor<32x" + str(count) + "xi32>) -> tensor<32x"
            + str(count) + "xi32> {\n" + _thread(32) + "  %s0 = xla.allocate_shared : tensor<256xi16>\n" + copies
            + "  %sync = xla.sync_threads %s8 : tensor<256xi16>\n"
            # lane 8j + r gives row r of matrix j: element (8j + r) * 8
            + '  %row = xla.apply_indexing #xla.indexing_map<"(t) -> ((t mod ' + str(8 * count)
            + ') * 8), domain: t in [0, 31]">(%t)\n'
            + f"  %w = xla.ldmatrix %sync[%row] {{count = {count} : i64{flag}}} : tensor<256xi16> -> "
              f"vector<{count}xi32>\n"
            + _scatter("w", "y", count, "i32") + f"  func.return %y_{count - 1} : tensor<32x{count}xi32>\n}}\n")
