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
