// RUN: not hlocc-opt %s --vector-isa avx512 --passes transform-interpreter 2>&1 | filecheck %s

// An 8x64 register block needs 8 x 4 zmm accumulators + 4 B vectors + 1 broadcast = 37 vector
// registers: rejected before code generation, with the transform op named.
// CHECK: transform.hlocc.microkernel: register block 8x64 needs 32 accumulators + 4 B vectors + 1 broadcast = 37 vector registers, more than the 32 the target has
func.func @f(%a: tensor<64x5xf32>, %w: tensor<5x64xf32>, %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 63], n in [0, 63], k in [0, 4]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 63], n in [0, 63], k in [0, 4]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 63], n in [0, 63], k in [0, 4]">]
         sizes [1, 64, 64, 5] : (tensor<64x5xf32>, tensor<5x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<64x64xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %lb, %ln, %lm = transform.hlocc.tile %mm sizes [64, 64, 5] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.microkernel %tiled register_block [8, 64] k_unroll 1 : !transform.any_op
    transform.yield
  }
}
