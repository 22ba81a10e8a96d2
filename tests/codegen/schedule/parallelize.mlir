// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter | filecheck %s

// transform.hlocc.parallelize: the b/n/m block loops that tile made are replaced by the block id
// (its xla.range says 2 x 2 x 3 = 12 blocks: B = 2, N = 11 in blocks of 8, M = 13 in blocks of
// 5), split m fastest into the block matmul's offsets.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[BID:bid]] = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 11 : index]}
// CHECK-NOT:     scf.for
// CHECK:         %[[MB:.*]] = arith.remui %[[BID]], %[[THREE:.*]] : index
// CHECK-NEXT:    %[[REST:.*]] = arith.divui %[[BID]], %[[THREE]] : index
// CHECK:         %[[NB:.*]] = arith.remui %[[REST]], %[[TWO:.*]] : index
// CHECK-NEXT:    %b = arith.divui %[[REST]], %[[TWO]] : index
// CHECK:         %n0 = arith.muli %[[NB]], %{{.*}} : index
// CHECK:         %m0 = arith.muli %[[MB]], %{{.*}} : index
// CHECK-NEXT:    %[[R:.*]] = xla.matmul %a[{{.*}}], %w[{{.*}}] into %c[{{.*}}] offsets(%b, %m0, %n0) sizes [1, 5, 8, 7]
// CHECK:         func.return %[[R]] : tensor<2x13x11xf32>
func.func @f(%a: tensor<2x13x7xf32>, %w: tensor<2x7x11xf32>, %c: tensor<2x13x11xf32>) -> tensor<2x13x11xf32> {
  %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 11 : index]} : () -> index
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (b, m, k), domain: b in [0, 1], m in [0, 12], n in [0, 10], k in [0, 6]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (b, k, n), domain: b in [0, 1], m in [0, 12], n in [0, 10], k in [0, 6]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (b, m, n), domain: b in [0, 1], m in [0, 12], n in [0, 10], k in [0, 6]">]
         sizes [2, 13, 11, 7] : (tensor<2x13x7xf32>, tensor<2x7x11xf32>, tensor<2x13x11xf32>) -> tensor<2x13x11xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<2x13x11xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [5, 8, 7] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.parallelize %tiled : !transform.any_op
    transform.yield
  }
}
