// RUN: hlocc-opt %s --passes transform-interpreter,lower-matmul | filecheck %s

// The sm_90a schedule (issue 17 item 4): tile 128x128x64, set_operand_layout (8 warps of 16 rows x
// 128: two warpgroups of 64 rows), use_wgmma, parallelize; then lower-matmul's wgmma form
// (transforms/matmul/gpu_wgmma.py): a 128x64 tile of A and of B in the 128-byte-swizzle layout,
// staged per K block by synchronous copies, made visible to the async proxy, then per k step of 16
// a descriptor of warpgroup g's 64 rows of A (SBO 1024 bytes between 8-row groups) and of B, and
// one wgmma.m64n128k16 on the 64-register accumulator; one commit and a wait for all per K block.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[A:.*]] = xla.allocate_shared : tensor<8192xbf16>
// CHECK-NEXT:    %[[B:.*]] = xla.allocate_shared : tensor<8192xbf16>
// CHECK:         scf.for %kt =
// CHECK:           xla.fence_proxy_async
// CHECK-NEXT:      %[[SA:.*]], %[[SB:.*]] = xla.sync_threads
// CHECK-NEXT:      xla.wgmma_fence
// CHECK:           xla.wgmma_descriptor %[[SA]][%{{.*}}] {swizzle = 128 : i64, lbo = 16 : i64, sbo = 1024 : i64} : tensor<8192xbf16>
// CHECK:           xla.wgmma_descriptor %[[SB]][%{{.*}}] {swizzle = 128 : i64, lbo = 16 : i64, sbo = 1024 : i64} : tensor<8192xbf16>
// CHECK-COUNT-4:   xla.wgmma_mma_async %{{.*}}, %{{.*}}, %{{.*}} {n = 128 : i64, element = "bf16"} : vector<64xf32> -> vector<64xf32>
// CHECK-NOT:       xla.wgmma_mma_async
// CHECK:           xla.wgmma_commit_group
// CHECK-NEXT:      %[[W:.*]] = xla.wgmma_wait_group %{{.*}} {pending = 0 : i64} : vector<64xf32> -> vector<64xf32>
// CHECK-NEXT:      xla.sync_threads %[[SA]], %[[SB]]
// CHECK:         func.return
func.func @f(%a: tensor<200x96xbf16>, %w: tensor<96x304xbf16>, %c: tensor<200x304xf32>) -> tensor<200x304xf32> {
  %t = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 255 : index]} : () -> index
  %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 5 : index]} : () -> index
  %r = xla.matmul %a[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 199], n in [0, 303], k in [0, 95]">],
                  %w[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 199], n in [0, 303], k in [0, 95]">]
         into %c[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 199], n in [0, 303], k in [0, 95]">]
         sizes [1, 200, 304, 96] : (tensor<200x96xbf16>, tensor<96x304xbf16>, tensor<200x304xf32>) -> tensor<200x304xf32> {
  ^bb0(%acc: f32, %i: index, %j: index, %l: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<200x304xf32>
}
builtin.module attributes {transform.with_named_sequence} {
  transform.named_sequence @__transform_main(%root: !transform.any_op) {
    %mm = transform.structured.match ops{["xla.matmul"]} in %root : (!transform.any_op) -> !transform.any_op
    %tiled, %b, %n, %m = transform.hlocc.tile %mm sizes [128, 128, 64] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.set_operand_layout %tiled sg_layout [8, 1] sg_data [16, 128] inst_data [16, 8, 16] : !transform.any_op
    transform.hlocc.set_gpu_launch_threads %tiled threads [256, 1, 1] : !transform.any_op
    transform.hlocc.use_wgmma %tiled : !transform.any_op
    transform.hlocc.parallelize %tiled : !transform.any_op
    transform.yield
  }
}
