// RUN: not hlocc-opt %s --vector-isa avx2 --passes transform-interpreter 2>&1 | filecheck %s

// On AVX2 (16 ymm registers of 8 f32 lanes) a 6x32 block needs 6 x 4 accumulators + 4 B vectors + 1
// broadcast = 29 registers: rejected, where AVX-512's 32 zmm would hold it (as 6 x 2 + 2 + 1 = 15).
// CHECK: transform.hlocc.microkernel: register block 6x32 needs 24 accumulators + 4 B vectors + 1 broadcast = 29 vector registers, more than the 16 the target has (avx2: 8 f32 lanes a register)
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
    transform.hlocc.microkernel %tiled register_block [6, 32] k_unroll 1 : !transform.any_op
    transform.yield
  }
}
