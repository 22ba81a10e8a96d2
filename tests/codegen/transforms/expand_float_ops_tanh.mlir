// math.tanh on f32 becomes XLA's clamped rational approximation: arith ops and primitive math ops
// only (no math.tanh, no libm call); f64 gets its own (19/18) rational.
// RUN: hlocc-opt %s --passes expand-float-ops | filecheck %s

// CHECK-LABEL: func.func @tanh_f32(%x: f32) -> f32 {
// CHECK-NOT:     math.tanh
// CHECK:         %[[LO:.*]] = arith.constant -7.90531111 : f32
// CHECK-NEXT:    %[[MAX:.*]] = arith.maximumf %x, %[[LO]] : f32
// CHECK-NEXT:    %[[HI:.*]] = arith.constant 7.90531111 : f32
// CHECK-NEXT:    %[[XC:.*]] = arith.minimumf %[[MAX]], %[[HI]] : f32
// CHECK-NEXT:    %[[X2:.*]] = arith.mulf %[[XC]], %[[XC]] : f32
// CHECK:         %[[NUM:.*]] = arith.mulf %[[XC]], %{{.*}} : f32
// CHECK:         %[[Q:.*]] = arith.divf %[[NUM]], %{{.*}} : f32
// CHECK:         %[[ABS:.*]] = math.absf %x : f32
// CHECK:         arith.cmpf olt, %[[ABS]], %{{.*}} : f32
// CHECK:         %[[SMALL:.*]] = arith.select %{{.*}}, %x, %[[Q]] : f32
// CHECK:         arith.cmpf oge, %[[ABS]], %{{.*}} : f32
// CHECK:         %[[ONE:.*]] = math.copysign %{{.*}}, %x : f32
// CHECK:         %[[R:.*]] = arith.select %{{.*}}, %[[ONE]], %[[SMALL]] : f32
// CHECK-NEXT:    func.return %[[R]] : f32
func.func @tanh_f32(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}

// CHECK-LABEL: func.func @tanh_f64(%x: f64) -> f64 {
// CHECK-NOT:     math.tanh
// CHECK:         arith.constant 17.714196154005176 : f64
// CHECK:         arith.divf
// CHECK:         func.return
func.func @tanh_f64(%x: f64) -> f64 {
  %t = math.tanh %x : f64
  func.return %t : f64
}

// Narrow types are left to lower-narrow-floats (which runs first in the pipeline).
// CHECK-LABEL: func.func @tanh_bf16(%x: bf16) -> bf16 {
// CHECK-NEXT:    %{{.*}} = math.tanh %x : bf16
func.func @tanh_bf16(%x: bf16) -> bf16 {
  %t = math.tanh %x : bf16
  func.return %t : bf16
}
