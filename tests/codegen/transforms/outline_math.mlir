// A costly math function used twice or more on one type becomes one private function, tagged
// llvm.noinline, that each use calls; a single use, another type and the cheap functions (exp,
// rsqrt) stay where they are. expand-float-ops then expands the one copy inside the function.
// RUN: hlocc-opt %s --passes outline-math | filecheck %s

// CHECK-LABEL: func.func @kernel(%v: vector<8xf32>, %s: f32, %d: f64) -> vector<8xf32> {
// CHECK-NEXT:    %a = func.call @__hlocc_math.sin.vector8_f32(%v) : (vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:    %b = func.call @__hlocc_math.sin.vector8_f32(%a) : (vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:    %c = math.sin %s : f32
// CHECK-NEXT:    %e = math.exp %v : vector<8xf32>
// CHECK-NEXT:    %f = math.exp %e : vector<8xf32>
// CHECK-NEXT:    %t = func.call @__hlocc_math.tanh.f64(%d) : (f64) -> f64
// CHECK-NEXT:    %u = func.call @__hlocc_math.tanh.f64(%t) : (f64) -> f64
// CHECK-NEXT:    %p = func.call @__hlocc_math.powf.vector8_f32(%b, %f) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK-NEXT:    %q = func.call @__hlocc_math.powf.vector8_f32(%p, %b) : (vector<8xf32>, vector<8xf32>) -> vector<8xf32>
// CHECK:       func.func private @__hlocc_math.sin.vector8_f32(%{{.*}}: vector<8xf32>) -> vector<8xf32>
// CHECK-SAME:    attributes {llvm.noinline}
// CHECK-NEXT:    %{{.*}} = math.sin %{{.*}} : vector<8xf32>
// CHECK-NEXT:    func.return
// CHECK:       func.func private @__hlocc_math.tanh.f64(
// CHECK:       func.func private @__hlocc_math.powf.vector8_f32(
// CHECK-NOT:   func.func private @__hlocc_math.exp
func.func @kernel(%v: vector<8xf32>, %s: f32, %d: f64) -> vector<8xf32> {
  %a = math.sin %v : vector<8xf32>
  %b = math.sin %a : vector<8xf32>
  %c = math.sin %s : f32
  %e = math.exp %v : vector<8xf32>
  %f = math.exp %e : vector<8xf32>
  %t = math.tanh %d : f64
  %u = math.tanh %t : f64
  %p = math.powf %b, %f : vector<8xf32>
  %q = math.powf %p, %b : vector<8xf32>
  func.return %q : vector<8xf32>
}
