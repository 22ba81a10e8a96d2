// RUN: hlocc-opt %s --passes transform-interpreter,lower-matmul | filecheck %s

// The GPU schedule (issue 17 item 4): tile 128x128x32, set_operand_layout (2x2 warps of 64x64 in
// mma.sync m16n8k16 tiles), set_gpu_launch_threads, pipeline_shared_copies (3 stages), parallelize;
// then lower-matmul's cp.async ring (transforms/matmul/gpu_mma_pipeline.py): three 128x32 buffers per
// operand, a prologue of two K blocks that waits for the first and loads its first k step's 4 A
// (x4) and 8 B (x2 .trans: B is row-major, contiguous in n) fragments; per K block the next block's
// copies, then 2 k steps that each load the next step's fragments (the second, after a wait for one
// group in flight and a barrier, the next block's first) before their 32 mma.sync.

// CHECK-LABEL: func.func @f(
// CHECK:         %[[A:.*]] = xla.allocate_shared : tensor<12288xbf16>
// CHECK-NEXT:    %[[B:.*]] = xla.allocate_shared : tensor<12288xbf16>
// CHECK:         xla.cp_async %{{.*}}, %a[%{{.*}}] if %{{.*}} : tensor<12288xbf16>, tensor<200x96xbf16> -> tensor<12288xbf16>
// CHECK:         xla.cp_async %{{.*}}, %w[%{{.*}}] if %{{.*}} : tensor<12288xbf16>, tensor<96x304xbf16> -> tensor<12288xbf16>
// CHECK:         xla.cp_async_commit
// CHECK:         xla.cp_async_commit
// CHECK:         %[[PA:.*]], %[[PB:.*]] = xla.cp_async_wait %{{.*}}, %{{.*}} {pending = 1 : i64}
// CHECK-NEXT:    xla.sync_threads %[[PA]], %[[PB]]
// CHECK-COUNT-4: xla.ldmatrix %{{.*}} {count = 4 : i64} : tensor<12288xbf16> -> vector<4xi32>
// CHECK-COUNT-8: xla.ldmatrix %{{.*}} {count = 2 : i64, trans} : tensor<12288xbf16> -> vector<2xi32>
// CHECK:         scf.for %kt =
// CHECK:           xla.cp_async %{{.*}}, %a
// CHECK:           xla.cp_async_commit
// CHECK-COUNT-4:   xla.ldmatrix %{{.*}} {count = 4 : i64}
// CHECK-COUNT-8:   xla.ldmatrix %{{.*}} {count = 2 : i64, trans}
// CHECK-COUNT-32:  xla.mma_sync %{{.*}}, %{{.*}}, %{{.*}} {element = "bf16"}
// CHECK:           %[[WA:.*]], %[[WB:.*]] = xla.cp_async_wait %{{.*}}, %{{.*}} {pending = 1 : i64}
// CHECK-NEXT:      xla.sync_threads %[[WA]], %[[WB]]
// CHECK-COUNT-4:   xla.ldmatrix %{{.*}} {count = 4 : i64}
// CHECK-COUNT-8:   xla.ldmatrix %{{.*}} {count = 2 : i64, trans}
// CHECK-COUNT-32:  xla.mma_sync
// CHECK-NOT:       xla.mma_sync
// CHECK:         xla.cp_async_wait %{{.*}}, %{{.*}} {pending = 0 : i64}
// CHECK:         func.return
func.func @f(%a: tensor<200x96xbf16>, %w: tensor<96x304xbf16>, %c: tensor<200x304xf32>) -> tensor<200x304xf32> {
  %t = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
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
    %tiled, %b, %n, %m = transform.hlocc.tile %mm sizes [128, 128, 32] : (!transform.any_op) -> (!transform.any_op, !transform.any_op, !transform.any_op, !transform.any_op)
    transform.hlocc.set_operand_layout %tiled sg_layout [2, 2] sg_data [64, 64] inst_data [16, 8, 16] : !transform.any_op
    transform.hlocc.set_gpu_launch_threads %tiled threads [128, 1, 1] : !transform.any_op
    transform.hlocc.pipeline_shared_copies %tiled stages 3 : !transform.any_op
    transform.hlocc.parallelize %tiled : !transform.any_op
    transform.yield
  }
}
