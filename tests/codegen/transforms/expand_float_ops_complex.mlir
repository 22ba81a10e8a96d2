// RUN: hlocc-opt %s --passes expand-float-ops,cse,dce | filecheck %s

// `expand-float-ops` expands the complex dialect's arithmetic and functions into the same on the parts
// (approx_complex.py), with the evaluator's numerics: taken apart with complex.re / complex.im (or the
// operands of the complex.create that built them), put together with complex.create. Nothing but
// complex.create / re / im is left of the complex dialect.

// (a + bi)(c + di) = (ac - bd) + (ad + bc)i, every product and sum rounded (expand-float-ops-fma fuses
// them as numpy does on FMA hosts: expand_float_ops_complex_fma.mlir).
// CHECK-LABEL: func.func @mul(%x: complex<f32>, %y: complex<f32>) -> complex<f32> {
// CHECK-NEXT:    %[[A:.*]] = complex.re %x : complex<f32>
// CHECK-NEXT:    %[[B:.*]] = complex.im %x : complex<f32>
// CHECK-NEXT:    %[[C:.*]] = complex.re %y : complex<f32>
// CHECK-NEXT:    %[[D:.*]] = complex.im %y : complex<f32>
// CHECK-NEXT:    %[[AC:.*]] = arith.mulf %[[A]], %[[C]] : f32
// CHECK-NEXT:    %[[BD:.*]] = arith.mulf %[[B]], %[[D]] : f32
// CHECK-NEXT:    %[[RE:.*]] = arith.subf %[[AC]], %[[BD]] : f32
// CHECK-NEXT:    %[[AD:.*]] = arith.mulf %[[A]], %[[D]] : f32
// CHECK-NEXT:    %[[BC:.*]] = arith.mulf %[[B]], %[[C]] : f32
// CHECK-NEXT:    %[[IM:.*]] = arith.addf %[[AD]], %[[BC]] : f32
// CHECK-NEXT:    %p = complex.create %[[RE]], %[[IM]] : complex<f32>
// CHECK-NEXT:    func.return %p : complex<f32>
func.func @mul(%x: complex<f32>, %y: complex<f32>) -> complex<f32> {
  %p = complex.mul %x, %y : complex<f32>
  func.return %p : complex<f32>
}

// Division is numpy's Smith algorithm: by the larger divisor part (ratio, then one reciprocal and
// products); where that quotient is NaN + NaN i (both parts NaN: the imaginary part is computed for
// that test), XLA's cases for a zero divisor (copysign(inf, y.re) times the numerator), an infinite
// numerator and an infinite divisor. The part of a complex.create folds to its operand, so the
// quotient of create(a, b) reads %a and %b directly.
// CHECK-LABEL: func.func @div_real_part(%a: f64, %b: f64, %y: complex<f64>) -> f64 {
// CHECK-NOT:     complex.create
// CHECK:         %[[BR:.*]] = complex.re %y : complex<f64>
// CHECK-NEXT:    %[[BI:.*]] = complex.im %y : complex<f64>
// CHECK-NEXT:    %[[ABR:.*]] = math.absf %[[BR]] : f64
// CHECK-NEXT:    %[[ABI:.*]] = math.absf %[[BI]] : f64
// CHECK-NEXT:    %[[RAT:.*]] = arith.divf %[[BI]], %[[BR]] : f64
// CHECK-NEXT:    %[[T:.*]] = arith.mulf %[[BI]], %[[RAT]] : f64
// CHECK-NEXT:    %[[DEN:.*]] = arith.addf %[[BR]], %[[T]] : f64
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:    %[[SCL:.*]] = arith.divf %[[ONE]], %[[DEN]] : f64
// CHECK-NEXT:    %[[U:.*]] = arith.mulf %b, %[[RAT]] : f64
// CHECK-NEXT:    %[[V:.*]] = arith.addf %a, %[[U]] : f64
// CHECK-NEXT:    %[[BY_RE:.*]] = arith.mulf %[[V]], %[[SCL]] : f64
// CHECK:         %[[LARGER:.*]] = arith.cmpf oge, %[[ABR]], %[[ABI]] : f64
// CHECK-NEXT:    %[[SMITH:.*]] = arith.select %[[LARGER]], %[[BY_RE]], %{{.*}} : f64
// CHECK:         %[[INFC:.*]] = arith.constant 0x7ff0000000000000 : f64
// CHECK:         %[[INF:.*]] = math.copysign %[[INFC]], %[[BR]] : f64
// CHECK-NEXT:    %[[BY_ZERO:.*]] = arith.mulf %[[INF]], %a : f64
// CHECK:         %[[NAN:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
// CHECK-NEXT:    %{{.*}} = arith.select %{{.*}}, %{{.*}}, %[[SMITH]] : f64
// CHECK-NEXT:    %{{.*}} = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f64
// CHECK-NEXT:    %{{.*}} = arith.select %{{.*}}, %[[BY_ZERO]], %{{.*}} : f64
// CHECK-NEXT:    %r = arith.select %[[NAN]], %{{.*}}, %[[SMITH]] : f64
// CHECK-NEXT:    func.return %r : f64
func.func @div_real_part(%a: f64, %b: f64, %y: complex<f64>) -> f64 {
  %x = complex.create %a, %b : complex<f64>
  %q = complex.div %x, %y : complex<f64>
  %r = complex.re %q : complex<f64>
  func.return %r : f64
}

// |z| as numpy computes it: larger * sqrt((smaller / larger)^2 + 1), inf if a part is infinite, and
// NaN if a part is NaN (XLA:CPU's plain formula; C99 and numpy give inf for NaN + inf i).
// CHECK-LABEL: func.func @abs(%z: complex<f64>) -> f64 {
// CHECK:         %[[L:.*]] = arith.maximumf %{{.*}}, %{{.*}} : f64
// CHECK-NEXT:    %[[S:.*]] = arith.minimumf %{{.*}}, %{{.*}} : f64
// CHECK:         %[[R:.*]] = arith.divf %[[S]], %[[L]] : f64
// CHECK:         %[[R2:.*]] = arith.mulf %[[Q:.*]], %[[Q]] : f64
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1.000000e+00 : f64
// CHECK-NEXT:    %[[SUM:.*]] = arith.addf %[[R2]], %[[ONE]] : f64
// CHECK-NEXT:    %[[ROOT:.*]] = math.sqrt %[[SUM]] : f64
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[L]], %[[ROOT]] : f64
// CHECK:         %[[INF:.*]] = arith.select %{{.*}}, %{{.*}}, %[[M]] : f64
// CHECK:         %[[NAN_RE:.*]] = arith.cmpf uno, %{{.*}}, %{{.*}} : f64
// CHECK-NEXT:    %[[NAN_IM:.*]] = arith.cmpf uno, %{{.*}}, %{{.*}} : f64
// CHECK-NEXT:    %[[NAN:.*]] = arith.ori %[[NAN_RE]], %[[NAN_IM]] : i1
// CHECK:         %m = arith.select %[[NAN]], %{{.*}}, %[[INF]] : f64
// CHECK-NEXT:    func.return %m : f64
func.func @abs(%z: complex<f64>) -> f64 {
  %m = complex.abs %z : complex<f64>
  func.return %m : f64
}

// The functions leave no complex or math function op: exp is e^a (cos b + i sin b) from the real
// approximations' code.
// CHECK-LABEL: func.func @functions(%z: complex<f64>) -> complex<f64> {
// CHECK-NOT:     complex.{{exp|log|sqrt|tanh|sin|cos|tan|mul|div|add|sub|neg|abs}}
// CHECK-NOT:     math.{{exp|log|sin|cos|atan2|powf|tanh}}
// CHECK:         %r = complex.create %{{.*}}, %{{.*}} : complex<f64>
// CHECK-NEXT:    func.return %r : complex<f64>
func.func @functions(%z: complex<f64>) -> complex<f64> {
  %e = complex.exp %z : complex<f64>
  %l = complex.log %e : complex<f64>
  %s = complex.sqrt %l : complex<f64>
  %t = complex.tanh %s : complex<f64>
  %u = complex.sin %t : complex<f64>
  %v = complex.cos %u : complex<f64>
  %w = complex.tan %v : complex<f64>
  %x = complex.expm1 %w : complex<f64>
  %y = complex.log1p %x : complex<f64>
  %n = complex.neg %y : complex<f64>
  %a = complex.add %n, %z : complex<f64>
  %r = complex.sub %a, %z : complex<f64>
  func.return %r : complex<f64>
}
