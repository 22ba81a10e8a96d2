// RUN: hlocc-opt %s --passes lower-narrow-floats,cse,dce | filecheck %s

// f4E2M1FN (S.EE.M, bias 1, finite only: max 6.0) is an i4 after lower-narrow-floats (kernel buffers hold
// one per byte: elemental/storage.py's from_storage / to_storage). Widening is exact bit manipulation;
// narrowing rounds to nearest even, saturates at 6.0 (|x| beyond it and inf give ±6) and turns NaN of
// either sign into -0 (bits 0x8), as XLA's conversion does (and the evaluator).

// CHECK-LABEL: func.func @widen(%x: f4E2M1FN) -> f32 {
// CHECK-NEXT:    %[[BITS:.*]] = arith.bitcast %x : f4E2M1FN to i4
// CHECK-NEXT:    %[[V:.*]] = arith.extui %[[BITS]] : i4 to i32
// CHECK:         %[[SIGN:.*]] = arith.shli %{{.*}}, %{{.*}} : i32
// CHECK:         %[[REBIAS:.*]] = arith.constant 126 : i32
// CHECK:         %[[SUB:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[TINY:.*]] = arith.mulf %{{.*}}, %[[SUB]] : f32
// CHECK:         %[[MAG:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    %[[F:.*]] = arith.ori %[[SIGN]], %[[MAG]] : i32
// CHECK-NEXT:    %w = arith.bitcast %[[F]] : i32 to f32
// CHECK-NEXT:    func.return %w : f32
func.func @widen(%x: f4E2M1FN) -> f32 {
  %w = arith.extf %x : f4E2M1FN to f32
  func.return %w : f32
}

// CHECK-LABEL: func.func @narrow(%x: f32) -> f4E2M1FN {
// CHECK:         %[[NAN:.*]] = arith.cmpf uno, %x, %x : f32
// CHECK:         %[[MAX:.*]] = arith.constant 7 : i32
// CHECK-NEXT:    %[[OVER:.*]] = arith.cmpi sgt, %[[Q:.*]], %[[MAX]] : i32
// CHECK-NEXT:    %[[SAT:.*]] = arith.select %[[OVER]], %[[MAX]], %[[Q]] : i32
// CHECK:         %[[SIGNED:.*]] = arith.ori %[[SAT]], %{{.*}} : i32
// CHECK-NEXT:    %[[NEG_ZERO:.*]] = arith.constant 8 : i32
// CHECK-NEXT:    %[[OUT:.*]] = arith.select %[[NAN]], %[[NEG_ZERO]], %[[SIGNED]] : i32
// CHECK-NEXT:    %[[T:.*]] = arith.trunci %[[OUT]] : i32 to i4
// CHECK-NEXT:    %n = arith.bitcast %[[T]] : i4 to f4E2M1FN
// CHECK-NEXT:    func.return %n : f4E2M1FN
func.func @narrow(%x: f32) -> f4E2M1FN {
  %n = arith.truncf %x : f32 to f4E2M1FN
  func.return %n : f4E2M1FN
}

// Arithmetic on f4E2M1FN is computed in f32 and rounded once.
// CHECK-LABEL: func.func @add(%x: f4E2M1FN, %y: f4E2M1FN) -> f4E2M1FN {
// CHECK-NOT:     arith.addf {{.*}} : f4E2M1FN
// CHECK:         arith.addf %{{.*}}, %{{.*}} : f32
// CHECK:         arith.trunci %{{.*}} : i32 to i4
// CHECK-NEXT:    %s = arith.bitcast %{{.*}} : i4 to f4E2M1FN
func.func @add(%x: f4E2M1FN, %y: f4E2M1FN) -> f4E2M1FN {
  %s = arith.addf %x, %y : f4E2M1FN
  func.return %s : f4E2M1FN
}
