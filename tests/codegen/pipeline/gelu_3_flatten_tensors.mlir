// Seed 000's GELU kernel, stage 3 of 6: the scf form (gelu_2_lower_xla_loops_to_scf.mlir's output) through
// `flatten-tensors`, then cse and dce as the pipeline runs them (they drop the 3-D index left dead). The
// tensors are 1-D, 6 * 512 * 4096 = 12582912 elements, and the linear index is the loop map composed with
// the row-major linearisation: ((bl_x floordiv 4096) * 512 + (bl_x floordiv 8) mod 512) * 4096
// + (bl_x mod 8) * 512 + th_x * 4 + vector_index simplifies to bl_x * 512 + th_x * 4 + vector_index
// (the seed prints the same sum in another order).
// Next stage: gelu_4_vectorize_loads_stores.mlir.
// RUN: hlocc-opt %s --passes flatten-tensors,cse,dce | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ("
  "bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>)
    -> tensor<6x512x4096xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
    %dim0, %dim1, %dim2 = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%vector_index]
    %cst = arith.constant 5.000000e-01 : bf16
    %cst_0 = arith.constant 1.000000e+00 : bf16
    %cst_1 = arith.constant 7.968750e-01 : bf16
    %cst_2 = arith.constant 4.467770e-02 : bf16
    %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
    %0 = arith.mulf %extracted, %extracted : bf16
    %1 = arith.mulf %0, %extracted : bf16
    %2 = arith.mulf %1, %cst_2 : bf16
    %3 = arith.addf %extracted, %2 : bf16
    %4 = arith.mulf %3, %cst_1 : bf16
    %5 = math.tanh %4 : bf16
    %6 = arith.addf %5, %cst_0 : bf16
    %7 = arith.mulf %6, %cst : bf16
    %8 = arith.mulf %extracted, %7 : bf16
    %inserted = tensor.insert %8 into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
    scf.yield %inserted : tensor<6x512x4096xbf16>
  }
  func.return %xla_loop : tensor<6x512x4096xbf16>
}

// CHECK-LABEL: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
// CHECK:         %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<12582912xbf16>) {
// CHECK-NEXT:      %cst = arith.constant 5.000000e-01 : bf16
// CHECK-NEXT:      %cst_1 = arith.constant 1.000000e+00 : bf16
// CHECK-NEXT:      %cst_2 = arith.constant 7.968750e-01 : bf16
// CHECK-NEXT:      %cst_3 = arith.constant 4.467770e-02 : bf16
// CHECK-NEXT:      %[[DIM:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">(%thread_id_x, %block_id_x)[%vector_index]
// CHECK-NEXT:      %extracted = tensor.extract %input[%[[DIM]]] : tensor<12582912xbf16>
// CHECK:           math.tanh
// CHECK:           %[[R:.*]] = arith.mulf %extracted, %{{.*}} : bf16
// CHECK-NEXT:      %inserted = tensor.insert %[[R]] into %iter[%[[DIM]]] : tensor<12582912xbf16>
// CHECK-NEXT:      scf.yield %inserted : tensor<12582912xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %xla_loop : tensor<12582912xbf16>
// CHECK-NOT:   6x512x4096
