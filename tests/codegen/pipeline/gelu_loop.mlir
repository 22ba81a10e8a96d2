// Seed 000's GELU kernel after MLIR conversion: the entry function's xla.loop over the launch grid
// (coalesced writes) calls the one subgraph function @gelu through xla.pure_call.
// RUN: hlocc-opt %s --passes verify | filecheck %s

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
// CHECK:       %[[TID:[a-z0-9_]+]] = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]}
// CHECK:       %[[BID:[a-z0-9_]+]] = "gpu.block_id"()
// CHECK:       %[[LOOP:[a-z0-9_]+]] = xla.loop (%[[TID]], %[[BID]])[%[[V:[a-z0-9_]+]]] -> (%[[D0:[a-z0-9_]+]], %[[D1:[a-z0-9_]+]], %[[D2:[a-z0-9_]+]])
// CHECK-SAME:    in #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x floordiv 4096, (bl_x floordiv 8) mod 512, (bl_x mod 8) * 512 + th_x * 4 + vector_index),
// CHECK-SAME:    domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
// CHECK-SAME:    iter_args(%[[ITER:[a-z0-9_]+]] = %output) -> (tensor<6x512x4096xbf16>) {
// CHECK-NEXT:    %[[CALL:[a-z0-9_]+]] = xla.pure_call @gelu(%input, %[[D0]], %[[D1]], %[[D2]]) : (tensor<6x512x4096xbf16>, index, index, index) -> bf16
// CHECK-NEXT:    %[[INS:[a-z0-9_]+]] = tensor.insert %[[CALL]] into %[[ITER]][%[[D0]], %[[D1]], %[[D2]]] : tensor<6x512x4096xbf16>
// CHECK-NEXT:    xla.yield %[[INS]] : tensor<6x512x4096xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %[[LOOP]] : tensor<6x512x4096xbf16>

// CHECK-LABEL: func.func private @gelu(%arg0: tensor<6x512x4096xbf16>, %i: index, %j: index, %k: index) -> bf16 {
// CHECK:       %[[X:[a-z0-9_]+]] = tensor.extract %arg0[%i, %j, %k] : tensor<6x512x4096xbf16>
// CHECK:       math.tanh %{{.*}} : bf16
// CHECK:       %[[R:[a-z0-9_]+]] = arith.mulf %[[X]], %{{.*}} : bf16
// CHECK-NEXT:  func.return %[[R]] : bf16
