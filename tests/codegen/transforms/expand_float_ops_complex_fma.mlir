// RUN: hlocc-opt %s --passes expand-float-ops-fma,cse,dce | filecheck %s

// On FMA targets (the host CPU's pipeline) complex multiplication and abs take the fused forms numpy's
// SIMD loops compute there (and LLVM contracts XLA:CPU's EmitComplexMultiply to):
// re = fma(a, c, -(b d)), im = fma(a, d, b c); |z| = larger * sqrt(fma(r, r, 1)).

// CHECK-LABEL: func.func @mul(%x: complex<f64>, %y: complex<f64>) -> complex<f64> {
// CHECK-NEXT:    %[[A:.*]] = complex.re %x : complex<f64>
// CHECK-NEXT:    %[[B:.*]] = complex.im %x : complex<f64>
// CHECK-NEXT:    %[[C:.*]] = complex.re %y : complex<f64>
// CHECK-NEXT:    %[[D:.*]] = complex.im %y : complex<f64>
// CHECK-NEXT:    %[[BD:.*]] = arith.mulf %[[B]], %[[D]] : f64
// CHECK-NEXT:    %[[NBD:.*]] = arith.negf %[[BD]] : f64
// CHECK-NEXT:    %[[RE:.*]] = math.fma %[[A]], %[[C]], %[[NBD]] : f64
// CHECK-NEXT:    %[[BC:.*]] = arith.mulf %[[B]], %[[C]] : f64
// CHECK-NEXT:    %[[IM:.*]] = math.fma %[[A]], %[[D]], %[[BC]] : f64
// CHECK-NEXT:    %p = complex.create %[[RE]], %[[IM]] : complex<f64>
// CHECK-NEXT:    func.return %p : complex<f64>
func.func @mul(%x: complex<f64>, %y: complex<f64>) -> complex<f64> {
  %p = complex.mul %x, %y : complex<f64>
  func.return %p : complex<f64>
}

// CHECK-LABEL: func.func @abs(%z: complex<f32>) -> f32 {
// CHECK:         %[[R:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %[[SUM:.*]] = math.fma %[[R]], %[[R]], %[[ONE]] : f32
// CHECK-NEXT:    %[[ROOT:.*]] = math.sqrt %[[SUM]] : f32
func.func @abs(%z: complex<f32>) -> f32 {
  %m = complex.abs %z : complex<f32>
  func.return %m : f32
}
