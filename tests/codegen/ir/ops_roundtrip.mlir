// Every kernel-dialect op in its custom syntax survives parse -> verify -> print.
// RUN: hlocc-opt %s --passes verify,verify | filecheck %s

#map = #xla.indexing_map<"(d0)[s0]{r0} -> (d0 * 4 + s0, r0), domain: d0 in [0, 7], s0 in [0, 3], r0 in [0, 9]">
#loop_map = #xla.indexing_map<"(d0)[s0] -> (d0, s0), domain: d0 in [0, 7], s0 in [0, 3], d0 + s0 in [0, 8]">

func.func private @add(%a: f32, %b: f32) -> f32 {
  %s = arith.addf %a, %b : f32
  func.return %s : f32
}

// CHECK-LABEL: func.func @ops
func.func @ops(%t: tensor<8x4xf32>, %d: index, %s: index, %r: index, %c: i1, %v: f32) -> tensor<8x4xf32> {
  // CHECK: %a, %a_1 = xla.apply_indexing #xla.indexing_map<"(d0)[s0]{r0} -> (d0 * 4 + s0, r0), domain: d0 in [0, 7], s0 in [0, 3], r0 in [0, 9]">(%d)[%s, %r]
  %a:2 = xla.apply_indexing #map(%d)[%s, %r]
  // CHECK: xla.loop (%d)[%i] -> (%ra, %rb) in #xla.indexing_map<"(d0)[s0] -> (d0, s0), domain: d0 in [0, 7], s0 in [0, 3], d0 + s0 in [0, 8]"> iter_args(%acc = %v) -> (f32) {
  %sum = xla.loop (%d)[%i] -> (%ra, %rb) in #loop_map iter_args(%acc = %v) -> (f32) {
    %e = tensor.extract %t[%ra, %rb] : tensor<8x4xf32>
    %n = arith.addf %acc, %e : f32
    // CHECK: xla.yield %{{.*}} : f32
    xla.yield %n : f32
  }
  // CHECK: xla.pure_call @add(%sum, %v) : (f32, f32) -> f32
  %p = xla.pure_call @add(%sum, %v) : (f32, f32) -> f32
  // CHECK: %shmem = xla.allocate_shared : tensor<32x33xf32>
  %shmem = xla.allocate_shared : tensor<32x33xf32>
  // CHECK: %synced, %synced2 = xla.sync_threads %shmem, %t : tensor<32x33xf32>, tensor<8x4xf32>
  %synced, %synced2 = xla.sync_threads %shmem, %t : tensor<32x33xf32>, tensor<8x4xf32>
  // CHECK: xla.shuffle_reduce @add(%p) to 16 : f32
  %red = xla.shuffle_reduce @add(%p) to 16 : f32
  // CHECK: %[[X:[a-z0-9_]+]] = xla.predicated_extract %synced2[%d, %s] if %c else %red : tensor<8x4xf32>
  %x = xla.predicated_extract %synced2[%d, %s] if %c else %red : tensor<8x4xf32>
  // CHECK: %[[INS:[a-z0-9_]+]] = xla.predicated_insert %[[X]] into %t[%d, %s] if %c : tensor<8x4xf32>
  %ins = xla.predicated_insert %x into %t[%d, %s] if %c : tensor<8x4xf32>
  // CHECK: xla.atomic_rmw %[[INS]][%d, %s] : tensor<8x4xf32> {
  // CHECK-NEXT: ^{{.*}}(%current: f32):
  %rmw = xla.atomic_rmw %ins[%d, %s] : tensor<8x4xf32> {
  ^bb0(%current: f32):
    %m = arith.maximumf %current, %x : f32
    // CHECK: xla.yield %{{.*}} : f32
    xla.yield %m : f32
  }
  func.return %rmw : tensor<8x4xf32>
}

// The arith stand-ins for vectors (xDSL 0.74's arith verifies these only on scalars).
// CHECK-LABEL: func.func @vector_forms
func.func @vector_forms(%a: vector<4xf32>, %b: vector<4xf32>, %h: vector<4xi16>) -> vector<4xf32> {
  // CHECK: %lt = xla.cmpf olt, %a, %b : vector<4xf32>
  %lt = xla.cmpf olt, %a, %b : vector<4xf32>
  // CHECK: %w = xla.extui %h : vector<4xi16> to vector<4xi32>
  %w = xla.extui %h : vector<4xi16> to vector<4xi32>
  // CHECK: %s = xla.extsi %h : vector<4xi16> to vector<4xi32>
  %s = xla.extsi %h : vector<4xi16> to vector<4xi32>
  // CHECK: %ne = xla.cmpi ne, %w, %s : vector<4xi32>
  %ne = xla.cmpi ne, %w, %s : vector<4xi32>
  // CHECK: %t = xla.trunci %w : vector<4xi32> to vector<4xi8>
  %t = xla.trunci %w : vector<4xi32> to vector<4xi8>
  // CHECK: %f = xla.sitofp %s : vector<4xi32> to vector<4xf32>
  %f = xla.sitofp %s : vector<4xi32> to vector<4xf32>
  // CHECK: %u = xla.uitofp %t : vector<4xi8> to vector<4xf32>
  %u = xla.uitofp %t : vector<4xi8> to vector<4xf32>
  // CHECK: %i = xla.fptosi %f : vector<4xf32> to vector<4xi64>
  %i = xla.fptosi %f : vector<4xf32> to vector<4xi64>
  // CHECK: %j = xla.fptoui %u : vector<4xf32> to vector<4xi16>
  %j = xla.fptoui %u : vector<4xf32> to vector<4xi16>
  // CHECK: %r = xla.select %lt, %f, %u : vector<4xi1>, vector<4xf32>
  %r = xla.select %lt, %f, %u : vector<4xi1>, vector<4xf32>
  func.return %r : vector<4xf32>
}
