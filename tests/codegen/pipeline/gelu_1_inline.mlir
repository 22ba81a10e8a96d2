// Seed 000's GELU kernel, stage 1 of 6: the emitter's output (gelu_loop.mlir) through `inline`.
// After @gelu is inlined there is a single @main: the element's arithmetic is inside the xla.loop, at the
// map's results %dim0, %dim1, %dim2, and the loop inserts it into the output tensor there.
// Next stage: gelu_2_lower_xla_loops_to_scf.mlir.
// RUN: hlocc-opt %s --passes inline | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> ("
  "bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>)
    -> tensor<6x512x4096xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2)
      in #map iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
    %pure_call = xla.pure_call @gelu(%input, %dim0, %dim1, %dim2)
      : (tensor<6x512x4096xbf16>, index, index, index) -> bf16
    %inserted = tensor.insert %pure_call into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
    xla.yield %inserted : tensor<6x512x4096xbf16>
  }
  func.return %xla_loop : tensor<6x512x4096xbf16>
}
func.func private @gelu(%arg0: tensor<6x512x4096xbf16>, %i: index, %j: index, %k: index) -> bf16 {
  %cst = arith.constant 5.000000e-01 : bf16
  %cst_0 = arith.constant 1.000000e+00 : bf16
  %cst_1 = arith.constant 7.968750e-01 : bf16
  %cst_2 = arith.constant 4.467770e-02 : bf16
  %extracted = tensor.extract %arg0[%i, %j, %k] : tensor<6x512x4096xbf16>
  %0 = arith.mulf %extracted, %extracted : bf16
  %1 = arith.mulf %0, %extracted : bf16
  %2 = arith.mulf %1, %cst_2 : bf16
  %3 = arith.addf %extracted, %2 : bf16
  %4 = arith.mulf %3, %cst_1 : bf16
  %5 = math.tanh %4 : bf16
  %6 = arith.addf %5, %cst_0 : bf16
  %7 = arith.mulf %6, %cst : bf16
  %8 = arith.mulf %extracted, %7 : bf16
  func.return %8 : bf16
}

// CHECK-LABEL: func.func @main(%input: tensor<6x512x4096xbf16>, %output: tensor<6x512x4096xbf16>) -> tensor<6x512x4096xbf16> {
// CHECK:         %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0, %dim1, %dim2) in #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index), domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]"> iter_args(%iter = %output) -> (tensor<6x512x4096xbf16>) {
// CHECK-NEXT:      %cst = arith.constant 5.000000e-01 : bf16
// CHECK-NEXT:      %cst_1 = arith.constant 1.000000e+00 : bf16
// CHECK-NEXT:      %cst_2 = arith.constant 7.968750e-01 : bf16
// CHECK-NEXT:      %cst_3 = arith.constant 4.467770e-02 : bf16
// CHECK-NEXT:      %extracted = tensor.extract %input[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
// CHECK-NEXT:      %[[X2:.*]] = arith.mulf %extracted, %extracted : bf16
// CHECK-NEXT:      %[[X3:.*]] = arith.mulf %[[X2]], %extracted : bf16
// CHECK-NEXT:      %[[A:.*]] = arith.mulf %[[X3]], %cst_3 : bf16
// CHECK-NEXT:      %[[B:.*]] = arith.addf %extracted, %[[A]] : bf16
// CHECK-NEXT:      %[[C:.*]] = arith.mulf %[[B]], %cst_2 : bf16
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[C]] : bf16
// CHECK-NEXT:      %[[D:.*]] = arith.addf %[[T]], %cst_1 : bf16
// CHECK-NEXT:      %[[E:.*]] = arith.mulf %[[D]], %cst : bf16
// CHECK-NEXT:      %[[R:.*]] = arith.mulf %extracted, %[[E]] : bf16
// CHECK-NEXT:      %inserted = tensor.insert %[[R]] into %iter[%dim0, %dim1, %dim2] : tensor<6x512x4096xbf16>
// CHECK-NEXT:      xla.yield %inserted : tensor<6x512x4096xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %xla_loop : tensor<6x512x4096xbf16>
// CHECK-NEXT:  }
// CHECK-NOT:   @gelu
// CHECK-NOT:   xla.pure_call
