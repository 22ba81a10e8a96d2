// Seed 000's GELU kernel, stage 4 of 6: the flat kernel (gelu_3_flatten_tensors.mlir's output) through
// `vectorize-loads-stores`, then cse and dce as the pipeline runs them. The index
// bl_x * 512 + th_x * 4 + vector_index is contiguous in %vector_index and its offset (at vector_index = 0)
// a multiple of 4, so the thread's 4 input elements are one vector.transfer_read of vector<4xbf16> hoisted
// before the loop, each iteration takes its lane with vector.extract and puts its result into a
// loop-carried vector with vector.insert, and one vector.transfer_write after the loop stores the 4 results.
// Next stage: gelu_5_unroll_loops.mlir.
// RUN: hlocc-opt %s --passes vectorize-loads-stores,cse,dce | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %xla_loop = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output) -> (tensor<12582912xbf16>) {
    %cst = arith.constant 5.000000e-01 : bf16
    %cst_0 = arith.constant 1.000000e+00 : bf16
    %cst_1 = arith.constant 7.968750e-01 : bf16
    %cst_2 = arith.constant 4.467770e-02 : bf16
    %dim = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%vector_index]
    %extracted = tensor.extract %input[%dim] : tensor<12582912xbf16>
    %0 = arith.mulf %extracted, %extracted : bf16
    %1 = arith.mulf %0, %extracted : bf16
    %2 = arith.mulf %1, %cst_2 : bf16
    %3 = arith.addf %extracted, %2 : bf16
    %4 = arith.mulf %3, %cst_1 : bf16
    %5 = math.tanh %4 : bf16
    %6 = arith.addf %5, %cst_0 : bf16
    %7 = arith.mulf %6, %cst : bf16
    %8 = arith.mulf %extracted, %7 : bf16
    %inserted = tensor.insert %8 into %iter[%dim] : tensor<12582912xbf16>
    scf.yield %inserted : tensor<12582912xbf16>
  }
  func.return %xla_loop : tensor<12582912xbf16>
}

// CHECK-LABEL: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
// CHECK:         %c1 = arith.constant 1 : index
// CHECK-NEXT:    %[[OFS:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">(%thread_id_x, %block_id_x)[%c0]
// CHECK-NEXT:    %[[PAD:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK-NEXT:    %[[IN:.*]] = vector.transfer_read %input[%[[OFS]]], %[[PAD]] {in_bounds = [true]} : tensor<12582912xbf16>, vector<4xbf16>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : vector<4xbf16>
// CHECK-NEXT:    %[[T:.*]], %[[V:.*]] = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output, %[[ACC:.*]] = %[[ZERO]]) -> (tensor<12582912xbf16>, vector<4xbf16>) {
// CHECK-NOT:       tensor.
// CHECK:           %extracted = vector.extract %[[IN]][%vector_index] : bf16 from vector<4xbf16>
// CHECK-NEXT:      %[[X2:.*]] = arith.mulf %extracted, %extracted : bf16
// CHECK:           math.tanh
// CHECK:           %[[R:.*]] = arith.mulf %extracted, %{{.*}} : bf16
// CHECK-NEXT:      %[[NEXT:.*]] = vector.insert %[[R]], %[[ACC]] [%vector_index] : bf16 into vector<4xbf16>
// CHECK-NEXT:      scf.yield %iter, %[[NEXT]] : tensor<12582912xbf16>, vector<4xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    %xla_loop = vector.transfer_write %[[V]], %[[T]][%[[OFS]]] {in_bounds = [true]} : vector<4xbf16>, tensor<12582912xbf16>
// CHECK-NEXT:    func.return %xla_loop : tensor<12582912xbf16>
