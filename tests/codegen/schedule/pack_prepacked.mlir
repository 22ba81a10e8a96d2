// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter,lower-matmul | filecheck %s

// The few-rows product by a constant of runtime/small_gemm.py, at a small size: M is the run-time
// value of `m` (at most 6), B arrives in 32-column panels (`pack ... prepacked`: 2 panels of
// 8 x 32, the last zero-padded past N = 40), register block 3 x 32 with row tails, fused identity
// epilogue. Expected: no B panel buffer (only the accumulator block); the m loop and the rows
// bounded by `m`; per tile a choice of height (3, 2 or 1 rows); the micro-kernel reading B's
// vectors from %w itself at ((n0 + jr) * K + k0 * NR); whole tiles stored straight into %c as
// vectors, the partial last panel through the accumulator block and the element loop.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[CACC:.*]] = xla.allocate_shared : tensor<192xf32>
// CHECK-NOT:     xla.allocate_shared
// CHECK:         scf.for %n0 =
// CHECK:           %[[M:.*]] = xla.symbol_value "m" : index
// CHECK:           scf.for %m0 = %{{.*}} to %[[M]] step
// CHECK:             %[[M2:.*]] = xla.symbol_value "m" : index
// CHECK:             %[[ROWS:.*]] = arith.minsi
// CHECK:             scf.for %ir = %{{.*}} to %[[ROWS]] step
// CHECK:               scf.for %jr =
// Three rows left or more: a whole tile stored straight into %c ...
// CHECK:                 %[[LEFT:.*]] = arith.subi %[[ROWS]], %ir
// CHECK:                 arith.cmpi sge, %[[LEFT]], %{{.*}}
// CHECK:                 scf.if
// CHECK:                   scf.if
// CHECK:                     scf.for %k = {{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                       vector.transfer_read %w[%{{.*}}]
// CHECK:                       vector.transfer_read %w[%{{.*}}]
// CHECK-COUNT-6:               math.fma
// CHECK-COUNT-6:           vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}] {in_bounds = [true]} : vector<16xf32>, tensor<240xf32>
// ... the partial last panel through the accumulator block and the element loop.
// CHECK:                   } else {
// CHECK:                     scf.for %k{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:                       vector.transfer_read %w[%{{.*}}]
// CHECK-COUNT-6:           vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}] {in_bounds = [true]} : vector<16xf32>, tensor<192xf32>
// CHECK:                     scf.for %i =
// CHECK:                       scf.for %j =
// CHECK:                         tensor.extract %{{.*}}[%{{.*}}] : tensor<192xf32>
// CHECK:                         tensor.insert %{{.*}} into %{{.*}}[%{{.*}}] : tensor<240xf32>
// Two rows left, then one: the same two forms with 2 x 2 and 1 x 2 accumulators.
// CHECK:                 } else {
// CHECK:                   arith.cmpi sge, %[[LEFT]], %{{.*}}
// CHECK:                     scf.for %k{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-4:               math.fma
// CHECK:                     scf.for %k{{.*}} -> (vector<16xf32>, vector<16xf32>, vector<16xf32>, vector<16xf32>) {
// CHECK:                   } else {
// CHECK:                     scf.for %k{{.*}} -> (vector<16xf32>, vector<16xf32>) {
// CHECK-COUNT-2:               math.fma
// CHECK:                     scf.for %k{{.*}} -> (vector<16xf32>, vector<16xf32>) {
// CHECK-NOT:     xla.matmul
func.func @f(%a: tensor<48xf32>, %w: tensor<512xf32>, %c: tensor<240xf32>) -> tensor<240xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m * 8 + k), domain: b in [0, 0], m in [0, 5], n in [0, 39], k in [0, 7]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> ((n floordiv 32) * 256 + k * 32 + n mod 32), domain: b in [0, 0], m in [0, 5], n in [0, 39], k in [0, 7]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m * 40 + n), domain: b in [0, 0], m in [0, 5], n in [0, 39], k in [0, 7]">]
         sizes [1, 6, 40, 8] schedule {runtime_m = "m"} : (tensor<48xf32>, tensor<512xf32>, tensor<240xf32>) -> tensor<240xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<240xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [6, 32, 8] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.microkernel %tiled register_block [3, 32] k_unroll 1 row_tails : !transform.any_op
    transform.hlocc.pack %tiled operands [1] prepacked : !transform.any_op
    transform.hlocc.fuse_epilogue %tiled : !transform.any_op
    transform.yield
  }
}
