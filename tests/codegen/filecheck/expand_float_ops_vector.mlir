// A math function on a vector is expanded lane by lane (xDSL 0.74 verifies no vector cmpf/select):
// vector.extract -> the scalar approximation -> vector.insert; LLVM's SLP vectorizer re-forms the
// vector ops. Two-operand functions (powf) and every function listed leave no math function op.
// RUN: hlocc-opt %s --passes expand-float-ops | filecheck %s

// CHECK-LABEL: func.func @exp_vector(%v: vector<2xf32>) -> vector<2xf32> {
// CHECK:         %[[ACC:.*]] = arith.constant dense<0.000000e+00> : vector<2xf32>
// CHECK:         %[[L0:.*]] = vector.extract %v[0] : f32 from vector<2xf32>
// CHECK:         math.roundeven
// CHECK:         %[[I0:.*]] = vector.insert %{{.*}}, %[[ACC]] [0] : f32 into vector<2xf32>
// CHECK:         %[[L1:.*]] = vector.extract %v[1] : f32 from vector<2xf32>
// CHECK:         %[[I1:.*]] = vector.insert %{{.*}}, %[[I0]] [1] : f32 into vector<2xf32>
// CHECK-NEXT:    func.return %[[I1]] : vector<2xf32>
func.func @exp_vector(%v: vector<2xf32>) -> vector<2xf32> {
  %e = math.exp %v : vector<2xf32>
  func.return %e : vector<2xf32>
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
