// RUN: hlocc-opt %s --vector-isa avx512 --passes transform-interpreter,lower-matmul | filecheck %s

// transform.hlocc.pack + insert_prefetch + hoist_address + fuse_epilogue, lowered by lower-matmul's
// packed form: the per-block buffers (B panel KC x NCp = 4 x 32, accumulator block 6 x 32, A block
// 6 x 4) at the top of the function; K = 7 in blocks of 4: the first block (accumulators from zero)
// and the last (3 steps, accumulators from the block, then the fused epilogue), each packing B
// and A and running the 3 x 16 register blocks: 3 x 1 vector accumulators, the panel offsets
// carried by the k loop (hoisted), a prefetch 2 steps ahead, one B vector and 3 broadcasts of A
// per step.

// CHECK-LABEL: func.func @f(
// CHECK-DAG:     %[[BP:.*]] = xla.allocate_shared : tensor<128xf32>
// CHECK-DAG:     %[[CACC:.*]] = xla.allocate_shared : tensor<192xf32>
// CHECK-DAG:     %[[AP:.*]] = xla.allocate_shared : tensor<24xf32>
// The first K block: pack B row by row (each row's columns, then the zero padding past them),
// pack A, then the tiles.
// CHECK:         scf.for %k =
// CHECK:           scf.for %jp =
// CHECK:             scf.for %l =
// CHECK:               tensor.extract %w[
// CHECK:             scf.for %l{{.*}} =
// CHECK:               arith.constant 0.000000e+00 : f32
// CHECK:         scf.for %ip =
// CHECK:         scf.for %ir =
// CHECK:           scf.for %jr =
// CHECK:             arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK:             scf.for %k{{.*}} iter_args(%[[BAT:.*]] = %{{.*}}, %[[AAT:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (index, index, vector<16xf32>, vector<16xf32>, vector<16xf32>)
// CHECK:               xla.prefetch %{{.*}}[%{{.*}}] : tensor<128xf32>
// CHECK:               vector.transfer_read %{{.*}}[%[[BAT]]]
// CHECK-COUNT-3:       math.fma %{{.*}}, %{{.*}}, %{{.*}} : vector<16xf32>
// CHECK:               scf.yield
// CHECK-COUNT-3:     vector.transfer_write
// CHECK-NOT:         xla.yield
// The last K block: the accumulators come from the block, and each tile's epilogue follows it.
// CHECK:         scf.for %ir{{.*}} =
// CHECK:           scf.for %jr{{.*}} =
// CHECK-COUNT-3:     vector.transfer_read %{{.*}} : tensor<192xf32>, vector<16xf32>
// CHECK:             scf.for %k
// CHECK-COUNT-3:     vector.transfer_write
// CHECK:             scf.for %i = 
// CHECK:               scf.for %j =
// CHECK:                 tensor.extract %{{.*}}[%{{.*}}] : tensor<192xf32>
// CHECK:                 tensor.insert
// CHECK-NOT:     xla.matmul
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
