// A math function on a vector is expanded on whole vectors: the scalar approximation with splat
// constants, its compares and selects as xla.cmpf / xla.select on vectors of i1 (xDSL 0.74's arith
// verifies only scalar compares and selects). No lane is extracted. Two-operand functions (powf)
// and every function listed leave no math function op.
// RUN: hlocc-opt %s --passes expand-float-ops | filecheck %s

// CHECK-LABEL: func.func @exp_vector(%v: vector<2xf32>) -> vector<2xf32> {
// CHECK-NOT:     vector.extract
// CHECK:         %[[LO:.*]] = arith.constant dense<-1.040000e+02> : vector<2xf32>
// CHECK-NEXT:    %{{.*}} = arith.maximumf %v, %[[LO]] : vector<2xf32>
// CHECK:         %[[N:.*]] = math.roundeven %{{.*}} : vector<2xf32>
// CHECK:         arith.shli %{{.*}}, %{{.*}} : vector<2xi32>
// CHECK:         %e = arith.mulf %{{.*}}, %{{.*}} : vector<2xf32>
// CHECK-NEXT:    func.return %e : vector<2xf32>
func.func @exp_vector(%v: vector<2xf32>) -> vector<2xf32> {
  %e = math.exp %v : vector<2xf32>
  func.return %e : vector<2xf32>
}

// tanh's two range checks: |x| < 0.0004 gives x, |x| >= 20 gives copysign(1, x), lane by lane.
// CHECK-LABEL: func.func @tanh_vector(%v: vector<4xf32>) -> vector<4xf32> {
// CHECK-NOT:     vector.{{extract|insert}}
// CHECK-NOT:     arith.{{cmpf|select}}
// CHECK:         %[[R:.*]] = arith.divf %{{.*}}, %{{.*}} : vector<4xf32>
// CHECK-NEXT:    %[[A:.*]] = math.absf %v : vector<4xf32>
// CHECK-NEXT:    %[[TINY:.*]] = arith.constant dense<4.000000e-04> : vector<4xf32>
// CHECK-NEXT:    %[[SMALL:.*]] = xla.cmpf olt, %[[A]], %[[TINY]] : vector<4xf32>
// CHECK-NEXT:    %[[S:.*]] = xla.select %[[SMALL]], %v, %[[R]] : vector<4xi1>, vector<4xf32>
// CHECK-NEXT:    %[[HUGE:.*]] = arith.constant dense<2.000000e+01> : vector<4xf32>
// CHECK-NEXT:    %[[BIG:.*]] = xla.cmpf oge, %[[A]], %[[HUGE]] : vector<4xf32>
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant dense<1.000000e+00> : vector<4xf32>
// CHECK-NEXT:    %[[SIGN:.*]] = math.copysign %[[ONE]], %v : vector<4xf32>
// CHECK-NEXT:    %t = xla.select %[[BIG]], %[[SIGN]], %[[S]] : vector<4xi1>, vector<4xf32>
// CHECK-NEXT:    func.return %t : vector<4xf32>
func.func @tanh_vector(%v: vector<4xf32>) -> vector<4xf32> {
  %t = math.tanh %v : vector<4xf32>
  func.return %t : vector<4xf32>
}

// powf's special cases compare integers too (the parity of the exponent): xla.cmpi on vector<2xi64>.
// CHECK-LABEL: func.func @powf_vector(%x: vector<2xf64>, %y: vector<2xf64>) -> vector<2xf64> {
// CHECK-NOT:     vector.extract
// CHECK:         xla.cmpf uno, %y, %y : vector<2xf64>
// CHECK:         xla.cmpi slt, %{{.*}}, %{{.*}} : vector<2xi64>
// CHECK:         %p = xla.select %{{.*}}, %{{.*}}, %{{.*}} : vector<2xi1>, vector<2xf64>
// CHECK-NEXT:    func.return %p : vector<2xf64>
func.func @powf_vector(%x: vector<2xf64>, %y: vector<2xf64>) -> vector<2xf64> {
  %p = math.powf %x, %y : vector<2xf64>
  func.return %p : vector<2xf64>
}

// CHECK-LABEL: func.func @all(%x: f32, %y: f64) -> (f32, f64) {
// CHECK-NOT:     math.{{(exp|exp2|expm1|log|log2|log10|log1p|sin|cos|tan|atan|atan2|tanh|erf|cbrt|rsqrt|powf)}} 
// CHECK:         func.return
func.func @all(%x: f32, %y: f64) -> (f32, f64) {
  %0 = math.exp2 %x : f32
  %1 = math.expm1 %0 : f32
  %2 = math.log %1 : f32
  %3 = math.log2 %2 : f32
  %4 = math.log10 %3 : f32
  %5 = math.log1p %4 : f32
  %6 = math.sin %5 : f32
  %7 = math.cos %6 : f32
  %8 = math.tan %7 : f32
  %9 = math.atan %8 : f32
  %10 = math.atan2 %9, %x : f32
  %11 = math.erf %10 : f32
  %12 = math.cbrt %11 : f32
  %13 = math.rsqrt %12 : f32
  %14 = math.powf %13, %x : f32
  %20 = math.sin %y : f64
  %21 = math.powf %20, %y : f64
  %22 = math.erf %21 : f64
  %23 = math.cbrt %22 : f64
  func.return %14, %23 : f32, f64
}
