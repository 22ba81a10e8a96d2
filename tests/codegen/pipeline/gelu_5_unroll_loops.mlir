// Seed 000's GELU kernel, stage 5 of 6: the vectorized kernel (gelu_4_vectorize_loads_stores.mlir's output)
// through `unroll-loops`, then cse and dce as the pipeline runs them. The loop over the 4 lanes is gone:
// four copies of its body, each with vector.extract / vector.insert at a constant position 0, 1, 2, 3, each
// insert into the previous one's vector; the transfer_write stores the last.
// Next stage: gelu_6_llvm.mlir.
// RUN: hlocc-opt %s --passes unroll-loops,cse,dce | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %dim = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%c0]
  %cst = arith.constant 0.000000e+00 : bf16
  %input_vector = vector.transfer_read %input[%dim], %cst {in_bounds = [true]} : tensor<12582912xbf16>, vector<4xbf16>
  %init_vector = arith.constant dense<0.000000e+00> : vector<4xbf16>
  %xla_loop:2 = scf.for %vector_index = %c0 to %c4 step %c1 iter_args(%iter = %output, %iter_vector = %init_vector)
      -> (tensor<12582912xbf16>, vector<4xbf16>) {
    %cst_1 = arith.constant 5.000000e-01 : bf16
    %cst_2 = arith.constant 1.000000e+00 : bf16
    %cst_3 = arith.constant 7.968750e-01 : bf16
    %cst_4 = arith.constant 4.467770e-02 : bf16
    %extracted = vector.extract %input_vector[%vector_index] : bf16 from vector<4xbf16>
    %0 = arith.mulf %extracted, %extracted : bf16
    %1 = arith.mulf %0, %extracted : bf16
    %2 = arith.mulf %1, %cst_4 : bf16
    %3 = arith.addf %extracted, %2 : bf16
    %4 = arith.mulf %3, %cst_3 : bf16
    %5 = math.tanh %4 : bf16
    %6 = arith.addf %5, %cst_2 : bf16
    %7 = arith.mulf %6, %cst_1 : bf16
    %8 = arith.mulf %extracted, %7 : bf16
    %9 = vector.insert %8, %iter_vector [%vector_index] : bf16 into vector<4xbf16>
    scf.yield %iter, %9 : tensor<12582912xbf16>, vector<4xbf16>
  }
  %written = vector.transfer_write %xla_loop#1, %xla_loop#0[%dim] {in_bounds = [true]}
      : vector<4xbf16>, tensor<12582912xbf16>
  func.return %written : tensor<12582912xbf16>
}

// CHECK-LABEL: func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
// CHECK-NOT:     scf.for
// CHECK:         %dim = xla.apply_indexing #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">(%thread_id_x, %block_id_x)[%c0]
// CHECK:         %input_vector = vector.transfer_read %input[%dim], %cst {in_bounds = [true]} : tensor<12582912xbf16>, vector<4xbf16>
// CHECK-NEXT:    %init_vector = arith.constant dense<0.000000e+00> : vector<4xbf16>
// CHECK:         %extracted = vector.extract %input_vector[%c0] : bf16 from vector<4xbf16>
// CHECK:         math.tanh
// CHECK:         %[[V0:.*]] = vector.insert %{{.*}}, %init_vector [%c0] : bf16 into vector<4xbf16>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %extracted_1 = vector.extract %input_vector[%[[C1]]] : bf16 from vector<4xbf16>
// CHECK:         math.tanh
// CHECK:         %[[V1:.*]] = vector.insert %{{.*}}, %[[V0]] [%[[C1]]] : bf16 into vector<4xbf16>
// CHECK-NEXT:    %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %extracted_2 = vector.extract %input_vector[%[[C2]]] : bf16 from vector<4xbf16>
// CHECK:         math.tanh
// CHECK:         %[[V2:.*]] = vector.insert %{{.*}}, %[[V1]] [%[[C2]]] : bf16 into vector<4xbf16>
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %extracted_3 = vector.extract %input_vector[%[[C3]]] : bf16 from vector<4xbf16>
// CHECK:         math.tanh
// CHECK:         %[[V3:.*]] = vector.insert %{{.*}}, %[[V2]] [%[[C3]]] : bf16 into vector<4xbf16>
// CHECK-NEXT:    %written = vector.transfer_write %[[V3]], %output[%dim] {in_bounds = [true]} : vector<4xbf16>, tensor<12582912xbf16>
// CHECK-NEXT:    func.return %written : tensor<12582912xbf16>
// CHECK-NOT:     scf.for
