// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter | filecheck %s

// transform.hlocc.tile: the matmul becomes scf.for loops over b (step 1), n (step NC) and m (step
// MC), carrying the output, around one block matmul with offsets(b, m0, n0), sizes [1, MC, NC, K]
// and k_block = KC. The script is erased after it ran.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[B:.*]] = scf.for %b = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[OB:.*]] = %c) -> (tensor<13x11xf32>) {
// CHECK:           %[[NC:.*]] = arith.constant 4 : index
// CHECK-NEXT:      scf.for %n0 = %{{.*}} to %{{.*}} step %[[NC]] iter_args(%[[ON:.*]] = %[[OB]]) -> (tensor<13x11xf32>) {
// CHECK:             %[[MC:.*]] = arith.constant 8 : index
// CHECK-NEXT:        scf.for %m0 = %{{.*}} to %{{.*}} step %[[MC]] iter_args(%[[OM:.*]] = %[[ON]]) -> (tensor<13x11xf32>) {
// CHECK-NEXT:          %[[T:.*]] = xla.matmul %a[{{.*}}], %w[{{.*}}] into %[[OM]][{{.*}}] offsets(%b, %m0, %n0) sizes [1, 8, 4, 7] schedule {k_block = 3 : i64} :
// CHECK:               scf.yield %[[T]] : tensor<13x11xf32>
// CHECK:         func.return %[[B]] : tensor<13x11xf32>
// CHECK-NOT:     transform.
func.func @f(%a: tensor<13x7xf32>, %w: tensor<7x11xf32>, %c: tensor<13x11xf32>) -> tensor<13x11xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 12], n in [0, 10], k in [0, 6]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 12], n in [0, 10], k in [0, 6]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 12], n in [0, 10], k in [0, 6]">]
         sizes [1, 13, 11, 7] : (tensor<13x7xf32>, tensor<7x11xf32>, tensor<13x11xf32>) -> tensor<13x11xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<13x11xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [8, 4, 3] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.yield
  }
}
