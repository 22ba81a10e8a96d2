// bf16 arithmetic is computed in f32: operands widened (a shift into the high half of an i32), the
// f32 op, the result rounded back to bf16 by integer round-to-nearest-even (NaN kept quiet, with
// its sign). Constants fold to f32; compares widen both sides; no bf16 float op remains.
// RUN: hlocc-opt %s --passes lower-narrow-floats | filecheck %s

// CHECK-LABEL: func.func @mul(%x: bf16, %y: bf16) -> bf16 {
// CHECK-NOT:     arith.mulf {{.*}} : bf16
// CHECK:         %[[XB:.*]] = arith.bitcast %x : bf16 to i16
// CHECK-NEXT:    %[[XI:.*]] = arith.extui %[[XB]] : i16 to i32
// CHECK-NEXT:    %[[S16:.*]] = arith.constant 16 : i32
// CHECK-NEXT:    %[[XS:.*]] = arith.shli %[[XI]], %[[S16]] : i32
// CHECK-NEXT:    %[[XF:.*]] = arith.bitcast %[[XS]] : i32 to f32
// CHECK:         %[[YF:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK-NEXT:    %[[P:.*]] = arith.mulf %[[XF]], %[[YF]] : f32
// CHECK-NEXT:    %[[PB:.*]] = arith.bitcast %[[P]] : f32 to i32
// CHECK:         %[[NAN:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK:         %[[LSB:.*]] = arith.andi %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[HALF:.*]] = arith.constant 32767 : i32
// CHECK-NEXT:    %[[BIAS:.*]] = arith.addi %[[HALF]], %[[LSB]] : i32
// CHECK-NEXT:    %[[SUM:.*]] = arith.addi %[[PB]], %[[BIAS]] : i32
// CHECK-NEXT:    %[[RNE:.*]] = arith.shrui %[[SUM]], %{{.*}} : i32
// CHECK:         %[[QNAN:.*]] = arith.ori %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[OUT:.*]] = arith.select %[[NAN]], %[[QNAN]], %[[RNE]] : i32
// CHECK-NEXT:    %[[T:.*]] = arith.trunci %[[OUT]] : i32 to i16
// CHECK-NEXT:    %[[R:.*]] = arith.bitcast %[[T]] : i16 to bf16
// CHECK-NEXT:    func.return %[[R]] : bf16
func.func @mul(%x: bf16, %y: bf16) -> bf16 {
  %p = arith.mulf %x, %y : bf16
  func.return %p : bf16
}

// CHECK-LABEL: func.func @constant_and_compare(%x: bf16) -> (i1, bf16) {
// CHECK-NEXT:    %[[CI:.*]] = arith.constant 15671 : i16
// CHECK-NEXT:    %[[CB:.*]] = arith.bitcast %[[CI]] : i16 to bf16
// CHECK:         %[[C:.*]] = arith.constant 0.0446777344 : f32
// CHECK-NEXT:    %[[LT:.*]] = arith.cmpf olt, %{{.*}}, %[[C]] : f32
// CHECK-NEXT:    arith.select %[[LT]], %x, %[[CB]] : bf16
func.func @constant_and_compare(%x: bf16) -> (i1, bf16) {
  %c = arith.constant 4.467770e-02 : bf16
  %lt = arith.cmpf olt, %x, %c : bf16
  %s = arith.select %lt, %x, %c : bf16
  func.return %lt, %s : i1, bf16
}

// f64 -> f8 rounds once, straight from the f64 bits; f8 -> f64 widens exactly through f32.
// CHECK-LABEL: func.func @f8(%d: f64, %f: f8E4M3FN) -> (f8E4M3FN, f64) {
// CHECK-NOT:     arith.truncf
// CHECK:         arith.bitcast %d : f64 to i64
// CHECK:         arith.trunci %{{.*}} : i64 to i8
// CHECK:         arith.bitcast %{{.*}} : i8 to f8E4M3FN
// CHECK:         arith.bitcast %f : f8E4M3FN to i8
// CHECK:         arith.extf %{{.*}} : f32 to f64
func.func @f8(%d: f64, %f: f8E4M3FN) -> (f8E4M3FN, f64) {
  %t = arith.truncf %d : f64 to f8E4M3FN
  %e = arith.extf %f : f8E4M3FN to f64
  func.return %t, %e : f8E4M3FN, f64
}

// A vector: the op is promoted on the whole vector; the conversions go lane by lane.
// CHECK-LABEL: func.func @vector_math(%v: vector<2xf16>) -> vector<2xf16> {
// CHECK:         vector.extract %v[0] : f16 from vector<2xf16>
// CHECK:         %{{.*}} = math.tanh %{{.*}} : vector<2xf32>
// CHECK:         vector.insert %{{.*}} [1] : f16 into vector<2xf16>
func.func @vector_math(%v: vector<2xf16>) -> vector<2xf16> {
  %t = math.tanh %v : vector<2xf16>
  func.return %t : vector<2xf16>
}
