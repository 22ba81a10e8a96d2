// A tanh that lower-narrow-floats promoted from bf16 (`xla.bf16_rounded`: a widened bf16 argument,
// a result rounded straight to bf16) takes its bf16 form: the same FMA rational on x itself, no
// clamp and no |x| < 0.0004 select, +-1 at or above the clamp value (equal after the rounding for
// every bf16 input: tests/codegen/transforms/test_narrow_floats.py). An untagged f32 tanh keeps the clamp.
// RUN: hlocc-opt %s --passes expand-float-ops-fma | filecheck %s

// CHECK-LABEL: func.func @tanh_bf16(%x: vector<16xf32>) -> vector<16xf32> {
// CHECK-NOT:     arith.{{minimumf|maximumf}}
// CHECK:         %[[X2:.*]] = arith.mulf %x, %x : vector<16xf32>
// CHECK:         math.fma %{{.*}}, %[[X2]], %{{.*}} : vector<16xf32>
// CHECK:         %[[NUM:.*]] = arith.mulf %x, %{{.*}} : vector<16xf32>
// CHECK:         %[[Q:.*]] = arith.divf %[[NUM]], %{{.*}} : vector<16xf32>
// CHECK-NEXT:    %[[ABS:.*]] = math.absf %x : vector<16xf32>
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<7.99881172> : vector<16xf32>
// CHECK-NEXT:    %[[BIG:.*]] = xla.cmpf oge, %[[ABS]], %[[C]] : vector<16xf32>
// CHECK:         %[[ONE:.*]] = math.copysign %{{.*}}, %x : vector<16xf32>
// CHECK-NEXT:    %[[R:.*]] = xla.select %[[BIG]], %[[ONE]], %[[Q]] : vector<16xi1>, vector<16xf32>
// CHECK-NEXT:    func.return %[[R]] : vector<16xf32>
func.func @tanh_bf16(%x: vector<16xf32>) -> vector<16xf32> {
  %t = math.tanh %x {xla.bf16_rounded} : vector<16xf32>
  func.return %t : vector<16xf32>
}

// CHECK-LABEL: func.func @tanh_f32(%x: f32) -> f32 {
// CHECK:         arith.maximumf %x, %{{.*}} : f32
// CHECK:         arith.minimumf
// CHECK:         arith.cmpf olt
func.func @tanh_f32(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}
