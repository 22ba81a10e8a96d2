// bf16 arithmetic is computed in f32: operands widened (a shift into the high half of an i32), the
// f32 op, the result rounded back to bf16 by integer round-to-nearest-even: add 0x8000 when the
// kept lsb (bit 16) is set, 0x7FFF when not, shift. The rounding of a NaN-clean value (arithmetic
// on widened bf16 values: a NaN has a zero low half and stays a NaN) has no canonical-NaN select;
// any other f32 value gets it (NaN kept quiet, with its sign). Constants fold to f32; compares
// widen both sides; no bf16 float op remains.
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
// CHECK-NEXT:    %[[B16:.*]] = arith.constant 65536 : i32
// CHECK-NEXT:    %[[LSB:.*]] = arith.andi %[[PB]], %[[B16]] : i32
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT:    %[[ODD:.*]] = arith.cmpi ne, %[[LSB]], %[[Z]] : i32
// CHECK-NEXT:    %[[UP:.*]] = arith.constant 32768 : i32
// CHECK-NEXT:    %[[HALF:.*]] = arith.constant 32767 : i32
// CHECK-NEXT:    %[[BIAS:.*]] = arith.select %[[ODD]], %[[UP]], %[[HALF]] : i32
// CHECK-NEXT:    %[[SUM:.*]] = arith.addi %[[PB]], %[[BIAS]] : i32
// CHECK-NEXT:    %[[S:.*]] = arith.constant 16 : i32
// CHECK-NEXT:    %[[RNE:.*]] = arith.shrui %[[SUM]], %[[S]] : i32
// CHECK-NEXT:    %[[T:.*]] = arith.trunci %[[RNE]] : i32 to i16
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

// Vectors are converted on whole vectors, as the scalars are: the same bit manipulation on
// vector<16xi32>, with xla.extui / xla.cmpf / xla.select / xla.trunci where xDSL's arith takes only
// scalars. No lane is extracted or inserted.
// CHECK-LABEL: func.func @extend_vector(%v: vector<16xbf16>) -> vector<16xf32> {
// CHECK-NEXT:    %[[B:.*]] = arith.bitcast %v : vector<16xbf16> to vector<16xi16>
// CHECK-NEXT:    %[[W:.*]] = xla.extui %[[B]] : vector<16xi16> to vector<16xi32>
// CHECK-NEXT:    %[[S16:.*]] = arith.constant dense<16> : vector<16xi32>
// CHECK-NEXT:    %[[HI:.*]] = arith.shli %[[W]], %[[S16]] : vector<16xi32>
// CHECK-NEXT:    %e = arith.bitcast %[[HI]] : vector<16xi32> to vector<16xf32>
// CHECK-NEXT:    func.return %e : vector<16xf32>
func.func @extend_vector(%v: vector<16xbf16>) -> vector<16xf32> {
  %e = arith.extf %v : vector<16xbf16> to vector<16xf32>
  func.return %e : vector<16xf32>
}

// A truncation of an f32 argument (not NaN-clean: any NaN payload) keeps the canonical-NaN select.
// CHECK-LABEL: func.func @truncate_vector(%v: vector<16xf32>) -> vector<16xbf16> {
// CHECK-NOT:     vector.{{extract|insert}}
// CHECK:         %[[BITS:.*]] = arith.bitcast %v : vector<16xf32> to vector<16xi32>
// CHECK:         %[[LSB:.*]] = arith.andi %[[BITS]], %{{.*}} : vector<16xi32>
// CHECK:         %[[ODD:.*]] = xla.cmpi ne, %[[LSB]], %{{.*}} : vector<16xi32>
// CHECK:         %[[BIAS:.*]] = xla.select %[[ODD]], %{{.*}}, %{{.*}} : vector<16xi1>, vector<16xi32>
// CHECK-NEXT:    %[[SUM:.*]] = arith.addi %[[BITS]], %[[BIAS]] : vector<16xi32>
// CHECK:         %[[RNE:.*]] = arith.shrui %[[SUM]], %{{.*}} : vector<16xi32>
// CHECK-NEXT:    %[[NAN:.*]] = xla.cmpf uno, %v, %v : vector<16xf32>
// CHECK:         %[[QNAN:.*]] = arith.ori %{{.*}}, %{{.*}} : vector<16xi32>
// CHECK-NEXT:    %[[OUT:.*]] = xla.select %[[NAN]], %[[QNAN]], %[[RNE]] : vector<16xi1>, vector<16xi32>
// CHECK-NEXT:    %[[T:.*]] = xla.trunci %[[OUT]] : vector<16xi32> to vector<16xi16>
// CHECK-NEXT:    %t = arith.bitcast %[[T]] : vector<16xi16> to vector<16xbf16>
// CHECK-NEXT:    func.return %t : vector<16xbf16>
func.func @truncate_vector(%v: vector<16xf32>) -> vector<16xbf16> {
  %t = arith.truncf %v : vector<16xf32> to vector<16xbf16>
  func.return %t : vector<16xbf16>
}

// A math op on a vector is promoted on the whole vector, its conversions too (f16 here: its
// widening stays an extf, which LLVM makes one vcvtph2ps on an F16C host, every AVX2 one:
// lower_narrow_floats.native_f16_extend; the rounding back is bit manipulation).
// CHECK-LABEL: func.func @vector_math(%v: vector<2xf16>) -> vector<2xf16> {
// CHECK-NOT:     vector.{{extract|insert}}
// CHECK:         %[[W:.*]] = arith.extf %v : vector<2xf16> to vector<2xf32>
// CHECK-NEXT:    %[[Y:.*]] = math.tanh %[[W]] : vector<2xf32>
// CHECK-NEXT:    arith.bitcast %[[Y]] : vector<2xf32> to vector<2xi32>
// CHECK:         %[[T:.*]] = xla.trunci %{{.*}} : vector<2xi32> to vector<2xi16>
// CHECK-NEXT:    %t = arith.bitcast %[[T]] : vector<2xi16> to vector<2xf16>
func.func @vector_math(%v: vector<2xf16>) -> vector<2xf16> {
  %t = math.tanh %v : vector<2xf16>
  func.return %t : vector<2xf16>
}

// A compare of bf16 vectors (vectorize-elementwise's xla.cmpf) compares the widened vectors.
// CHECK-LABEL: func.func @vector_compare(%a: vector<4xbf16>, %b: vector<4xbf16>) -> vector<4xi1> {
// CHECK:         %[[A:.*]] = arith.bitcast %{{.*}} : vector<4xi32> to vector<4xf32>
// CHECK:         %[[B:.*]] = arith.bitcast %{{.*}} : vector<4xi32> to vector<4xf32>
// CHECK-NEXT:    %lt = xla.cmpf olt, %[[A]], %[[B]] : vector<4xf32>
// CHECK-NEXT:    func.return %lt : vector<4xi1>
func.func @vector_compare(%a: vector<4xbf16>, %b: vector<4xbf16>) -> vector<4xi1> {
  %lt = xla.cmpf olt, %a, %b : vector<4xbf16>
  func.return %lt : vector<4xi1>
}

// A bf16 constant broadcast to a vector (vectorize-elementwise's splat) folds to an f32 splat.
// CHECK-LABEL: func.func @broadcast_constant(%v: vector<4xbf16>) -> vector<4xbf16> {
// CHECK:         %[[V:.*]] = arith.bitcast %{{.*}} : vector<4xi32> to vector<4xf32>
// CHECK-NEXT:    %[[C:.*]] = arith.constant dense<1.500000e+00> : vector<4xf32>
// CHECK-NEXT:    %{{.*}} = arith.mulf %[[V]], %[[C]] : vector<4xf32>
func.func @broadcast_constant(%v: vector<4xbf16>) -> vector<4xbf16> {
  %c = arith.constant 1.500000e+00 : bf16
  %s = vector.broadcast %c : bf16 to vector<4xbf16>
  %p = arith.mulf %v, %s : vector<4xbf16>
  func.return %p : vector<4xbf16>
}

// NaN-cleanliness follows the values: tanh of a widened bf16 vector is clean (no NaN select), an
// f32 argument is not, and neither is a sum with it; an f16 operand is not (its NaN payload
// reaches the low half).
// CHECK-LABEL: func.func @nan_clean(%a: vector<16xbf16>, %f: vector<16xf32>, %h: f16) -> (vector<16xbf16>, vector<16xbf16>, bf16) {
// CHECK:         %[[TANH:.*]] = math.tanh %{{.*}} : vector<16xf32>
// CHECK-NOT:     xla.cmpf uno, %[[TANH]]
// CHECK:         %s = arith.addf %{{.*}}, %f : vector<16xf32>
// CHECK:         xla.cmpf uno, %s, %s : vector<16xf32>
// CHECK:         %m = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf uno, %m, %m : f32
func.func @nan_clean(%a: vector<16xbf16>, %f: vector<16xf32>, %h: f16) -> (vector<16xbf16>, vector<16xbf16>, bf16) {
  %t = math.tanh %a : vector<16xbf16>
  %w = arith.extf %a : vector<16xbf16> to vector<16xf32>
  %s = arith.addf %w, %f : vector<16xf32>
  %u = arith.truncf %s : vector<16xf32> to vector<16xbf16>
  %hw = arith.extf %h : f16 to f32
  %m = arith.mulf %hw, %hw : f32
  %r = arith.truncf %m : f32 to bf16
  func.return %t, %u, %r : vector<16xbf16>, vector<16xbf16>, bf16
}
