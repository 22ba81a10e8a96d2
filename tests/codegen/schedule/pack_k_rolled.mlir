// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter,lower-matmul,unroll-loops | filecheck %s

// The packed lowering's loops over K (the packing's, the micro-kernel's) are kept rolled
// (`xla.keep_rolled`): unroll-loops leaves them, whatever their trip count (K = 7 in blocks of 4
// here); the schedule's k_unroll is their unrolling. Unrolled, a K of 64 made one 256x256x64
// product 1536 FMAs and 1.5 MB of LLVM IR.

// CHECK-LABEL: func.func @f(
// CHECK:         scf.for %k =
// CHECK:         } {xla.keep_rolled}
// CHECK:           scf.for %k_1 =
// CHECK:           } {xla.keep_rolled}
// CHECK:             scf.for %k_2 =
// CHECK-COUNT-3:       math.fma
// CHECK:             } {xla.keep_rolled}
func.func @f(%a: tensor<8x7xf32>, %w: tensor<7x20xf32>, %c: tensor<8x20xf32>) -> tensor<8x20xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 7], n in [0, 19], k in [0, 6]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 7], n in [0, 19], k in [0, 6]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 7], n in [0, 19], k in [0, 6]">]
         sizes [1, 8, 20, 7] : (tensor<8x7xf32>, tensor<7x20xf32>, tensor<8x20xf32>) -> tensor<8x20xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<8x20xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [6, 32, 4] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.microkernel %tiled register_block [3, 16] k_unroll 1 : !transform.any_op
    transform.hlocc.pack %tiled operands [0, 1] : !transform.any_op
    transform.hlocc.insert_prefetch %tiled distance 2 : !transform.any_op
    transform.hlocc.hoist_address %tiled : !transform.any_op
    transform.hlocc.fuse_epilogue %tiled : !transform.any_op
    transform.yield
  }
}
