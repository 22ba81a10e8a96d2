// RUN: hlocc-opt %s --split-input-file --passes flatten-tensors,lower-tensors | filecheck %s

// `xla.atomic_rmw` (the scatter emitter's combine of repeated indices): `flatten-tensors` gives it
// one linear index, as a tensor.insert; `lower-tensors` turns it into a GEP and `xla.atomic_update`
// of that pointer with the same body, its result the input pointer. The LLVM translation makes it
// an atomicrmw or a compare-and-swap loop on a GPU, and a plain load, body, store on the CPU (where
// kernels using xla.atomic_rmw are `serial`: blocks one after another, threads in sequence).

// CHECK-LABEL: func.func @add(%out: !llvm.ptr, %i: index, %j: index, %x: f32) {
// CHECK-NEXT:    %[[L:.*]] = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 8 + d1), domain: d0 in [0, 3], d1 in [0, 7]">(%i, %j)
// CHECK-NEXT:    %[[L64:.*]] = arith.index_cast %[[L]] : index to i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %out[%[[L64]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    xla.atomic_update %[[P]] : !llvm.ptr {
// CHECK-NEXT:    ^bb0(%cur: f32):
// CHECK-NEXT:      %[[SUM:.*]] = arith.addf %cur, %x : f32
// CHECK-NEXT:      xla.yield %[[SUM]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return{{$}}
func.func @add(%out: tensor<4x8xf32>, %i: index, %j: index, %x: f32) -> tensor<4x8xf32> {
  %r = xla.atomic_rmw %out[%i, %j] : tensor<4x8xf32> {
  ^bb0(%cur: f32):
    %sum = arith.addf %cur, %x : f32
    xla.yield %sum : f32
  }
  func.return %r : tensor<4x8xf32>
}

// -----

// A loop-carried chain of updates of the same pointer. A sub-byte element is stored in a byte: the
// body converts it.
// CHECK-LABEL: func.func @chain(%out: !llvm.ptr, %x: i4) {
// CHECK:         scf.for %[[IV:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[T:.*]] = %out) -> (!llvm.ptr) {
// CHECK-NEXT:      %[[I:.*]] = arith.index_cast %[[IV]] : index to i64
// CHECK-NEXT:      %[[P:.*]] = llvm.getelementptr inbounds %[[T]][%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// CHECK-NEXT:      xla.atomic_update %[[P]] : !llvm.ptr {
// CHECK-NEXT:      ^bb0(%b: i8):
// CHECK-NEXT:        %[[V:.*]] = arith.trunci %b : i8 to i4
// CHECK-NEXT:        %[[M:.*]] = arith.maxsi %[[V]], %x : i4
// CHECK-NEXT:        %[[S:.*]] = arith.extui %[[M]] : i4 to i8
// CHECK-NEXT:        xla.yield %[[S]] : i8
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %[[T]] : !llvm.ptr
func.func @chain(%out: tensor<6xi8>, %x: i4) -> tensor<6xi8> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %r = scf.for %iv = %c0 to %c6 step %c1 iter_args(%t = %out) -> (tensor<6xi8>) {
    %u = xla.atomic_rmw %t[%iv] : tensor<6xi8> {
    ^bb0(%b: i8):
      %v = arith.trunci %b : i8 to i4
      %m = arith.maxsi %v, %x : i4
      %s = arith.extui %m : i4 to i8
      xla.yield %s : i8
    }
    scf.yield %u : tensor<6xi8>
  }
  func.return %r : tensor<6xi8>
}

// -----

// A rank-0 tensor: index 0 of a one-element buffer.
// CHECK-LABEL: func.func @scalar(%out: !llvm.ptr, %x: f64) {
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %out[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f64
// CHECK-NEXT:    xla.atomic_update %[[P]] : !llvm.ptr {
// CHECK-NEXT:    ^bb0(%cur: f64):
// CHECK-NEXT:      %[[PROD:.*]] = arith.mulf %cur, %x : f64
func.func @scalar(%out: tensor<f64>, %x: f64) -> tensor<f64> {
  %r = xla.atomic_rmw %out[] : tensor<f64> {
  ^bb0(%cur: f64):
    %p = arith.mulf %cur, %x : f64
    xla.yield %p : f64
  }
  func.return %r : tensor<f64>
}
