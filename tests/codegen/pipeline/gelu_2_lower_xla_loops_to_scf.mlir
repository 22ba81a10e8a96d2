// Seed 000's GELU kernel, stage 2 of 6: the inlined kernel (gelu_1_inline.mlir's output) through
// `lower-xla-loops-to-scf` (seed 000 "xla_gpu to scf conversion"). The xla.loop over the one range variable
// becomes an scf.for %vector_index from 0 to 4 carrying the output tensor; %dim0, %dim1, %dim2 are computed
// by xla.apply_indexing at the top of the body. The map has no constraints, so there is no scf.if: the
// seed's checks of the thread and block ids against their own ranges are true by construction and not
// emitted (XLA's xla-simplify-arith removes them right after).
// Next stage: gelu_3_flatten_tensors.mlir.
// RUN: hlocc-opt %s --passes lower-xla-loops-to-scf | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ("
  "bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>)
    -> tensor<6x512x4096xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2)
      in #map iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
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
    xla.yield %inserted : tensor<6x512x4096xbf16>
  }
  func.return %xla_loop : tensor<6x512x4096xbf16>
}

// CHECK-LABEL: func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>) -> tensor<6x512x4096xbf16> {
// CHECK:         %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %xla_loop = scf.for %vector_index = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
// CHECK-NEXT:      %dim0, %dim1, %dim2 = xla.apply_indexing #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">(%thread_id_x, %block_id_x)[%vector_index]
// CHECK-NOT:       scf.if
// CHECK:           %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
// CHECK:           math.tanh
// CHECK:           %[[R:.*]] = arith.mulf %extracted, %{{.*}} : bf16
// CHECK-NEXT:      %inserted = tensor.insert %[[R]] into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
// CHECK-NEXT:      scf.yield %inserted : tensor<6x512x4096xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %xla_loop : tensor<6x512x4096xbf16>
// CHECK-NOT:   xla.loop
