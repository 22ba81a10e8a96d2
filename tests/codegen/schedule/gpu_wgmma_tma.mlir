// RUN: hlocc-opt %s --passes transform-interpreter,lower-matmul | filecheck %s

// The sm_90a schedule with TMA (issue 17 item 4): tile 128x128x64, two warpgroups, use_wgmma, then
// use_tma with 3 stages; lower-matmul's TMA form (transforms/matmul/gpu_wgmma_tma.py): rings of 3
// A and B tiles and 6 mbarriers (full 0-2, empty 3-5), a tensor map per operand (A (m, k): boxes of
// 64 k x 128 m, K-major; B (k, n): boxes of 64 n x 64 k, MN-major), thread 0 initialising the
// barriers and producing K blocks 0 and 1 before the loop and block kt + 2 in it; every thread
// waiting on full[kt % 3], four wgmma.m64n128k16 with B transposed, then arriving on empty[kt % 3].

// CHECK-LABEL: func.func @f(
// CHECK:         %[[A:.*]] = xla.allocate_shared : tensor<24576xbf16>
// CHECK-NEXT:    %[[B:.*]] = xla.allocate_shared : tensor<24576xbf16>
// CHECK-NEXT:    %[[BARS:.*]] = xla.allocate_shared : tensor<6xi64>
// CHECK-NEXT:    %[[MA:.*]] = xla.tensor_map %a {element = "bf16", dims = [96 : i64, 200 : i64], strides = [192 : i64], box = [64 : i64, 128 : i64], swizzle = 128 : i64}
// CHECK-NEXT:    %[[MB:.*]] = xla.tensor_map %w {element = "bf16", dims = [304 : i64, 96 : i64], strides = [608 : i64], box = [64 : i64, 64 : i64], swizzle = 128 : i64}
// CHECK:         scf.if
// CHECK-COUNT-6:   xla.mbarrier_init
// CHECK:           xla.fence_proxy_async
// CHECK:         xla.sync_threads %[[A]], %[[B]]
// CHECK:         scf.if
// CHECK:           xla.mbarrier_wait
// CHECK-NEXT:      xla.mbarrier_arrive_expect_tx %{{.*}}[%{{.*}}] bytes 32768
// CHECK-COUNT-2:   xla.tma_load %[[MA]]
// CHECK-COUNT-2:   xla.tma_load %[[MB]]
// CHECK:         scf.for %kt =
// CHECK:           scf.if
// CHECK:             xla.mbarrier_arrive_expect_tx
// CHECK:           xla.mbarrier_wait %{{.*}}[%{{.*}}] parity %{{.*}}(%{{.*}}, %{{.*}})
// CHECK-NEXT:      xla.wgmma_fence
// CHECK-COUNT-4:   xla.wgmma_mma_async %{{.*}}, %{{.*}}, %{{.*}} {n = 128 : i64, element = "bf16", trans_b} : vector<64xf32> -> vector<64xf32>
// CHECK:           xla.wgmma_commit_group
// CHECK-NEXT:      xla.wgmma_wait_group %{{.*}} {pending = 0 : i64}
// CHECK:           xla.mbarrier_arrive %{{.*}}[%{{.*}}] :
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
    transform.hlocc.use_tma %tiled stages 3 : !transform.any_op
    transform.hlocc.parallelize %tiled : !transform.any_op
    transform.yield
  }
}
