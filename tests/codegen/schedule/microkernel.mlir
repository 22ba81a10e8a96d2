// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter,lower-matmul | filecheck %s

// transform.hlocc.microkernel sets register_block = [MR, NR] and k_unroll on the tiled matmul;
// lower-matmul then walks the 4x8 block in 2x4 sub-blocks (loops ir, jr), each summing 2x4 = 8
// accumulators over k (2 unrolled steps per iteration: 5 = 2 + 2 + 1, so one remainder step),
// then the epilogue and the store of each of the 8 elements. M = 4 and N = 8 divide the blocks:
// no edge checks.

// CHECK-LABEL: func.func @f(
// CHECK:       scf.for %m0 =
// CHECK:         %[[MR:.*]] = arith.constant 2 : index
// CHECK-NEXT:    scf.for %ir = %{{.*}} to %{{.*}} step %[[MR]] iter_args(
// CHECK:           %[[NR:.*]] = arith.constant 4 : index
// CHECK-NEXT:      scf.for %jr = %{{.*}} to %{{.*}} step %[[NR]] iter_args(
// The unrolled main loop: 8 accumulators, 2 k steps of 2 + 4 loads and 8 fused multiply-adds each.
// CHECK:             %[[MAIN:.*]] = arith.constant 4 : index
// CHECK-NEXT:        {{(%[0-9]+, ){7}%[0-9]+}} = scf.for %k = %{{.*}} to %[[MAIN]] step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-COUNT-16:      math.fma
// CHECK:               scf.yield
// The remainder: k from 4 to 5, one step.
// CHECK:             scf.for %k_1 = %{{.*}} to %{{.*}} step %{{.*}} iter_args(
// CHECK-COUNT-8:       math.fma
// CHECK:               scf.yield
// CHECK-NOT:         scf.if
// CHECK-COUNT-8:     tensor.insert
// CHECK-NOT:     xla.matmul
func.func @f(%a: tensor<4x5xf32>, %w: tensor<5x8xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 3], n in [0, 7], k in [0, 4]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 3], n in [0, 7], k in [0, 4]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 3], n in [0, 7], k in [0, 4]">]
         sizes [1, 4, 8, 5] : (tensor<4x5xf32>, tensor<5x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<4x8xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [4, 8, 5] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.microkernel %tiled register_block [2, 4] k_unroll 2 : !transform.any_op
    transform.yield
  }
}
