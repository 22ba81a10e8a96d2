// expand-float-ops-fma's exp on a vector branches once per vector: n = round(x log2 e) comes from a
// magic-number fma, and when every lane's n is in [-125, 127] (u = n + 125 and 252 - u both >= 0)
// the fast form scales p = e^r by adding n << 23 to its bits; otherwise the whole vector takes the
// clamped form, which scales in two halves (floor(n/2)) into the subnormals, 0 and inf. A scalar
// exp computes the clamped form alone (no branch), and so does exp on f64.
// RUN: hlocc-opt %s --passes expand-float-ops-fma,cse,dce | filecheck %s

// CHECK-LABEL: func.func @exp_vector(%v: vector<8xf32>) -> vector<8xf32> {
// CHECK:         %[[MAGIC:.*]] = arith.constant dense<0x4B400000> : vector<8xf32>
// CHECK-NEXT:    %[[T:.*]] = math.fma %v, %{{.*}}, %[[MAGIC]] : vector<8xf32>
// CHECK-NEXT:    %[[TB:.*]] = arith.bitcast %[[T]] : vector<8xf32> to vector<8xi32>
// CHECK-NEXT:    %[[BIAS:.*]] = arith.constant dense<1262485379> : vector<8xi32>
// CHECK-NEXT:    %[[U:.*]] = arith.subi %[[TB]], %[[BIAS]] : vector<8xi32>
// CHECK:         %[[W:.*]] = arith.subi %{{.*}}, %[[U]] : vector<8xi32>
// CHECK-NEXT:    %[[OR:.*]] = arith.ori %[[U]], %[[W]] : vector<8xi32>
// CHECK:         %[[OUT:.*]] = xla.cmpi slt, %[[OR]], %{{.*}} : vector<8xi32>
// CHECK-NEXT:    %[[ANY:.*]] = vector.reduction <or>, %[[OUT]] : vector<8xi1> into i1
// CHECK-NEXT:    %e = scf.if %[[ANY]] -> (vector<8xf32>) {
// CHECK:           arith.maximumf %v, %{{.*}} : vector<8xf32>
// CHECK:           math.floor
// CHECK:           arith.mulf
// CHECK:           %[[SLOW:.*]] = arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-NEXT:      scf.yield %[[SLOW]] : vector<8xf32>
// CHECK-NEXT:    } else {
// CHECK-NOT:       arith.maximumf
// CHECK-NOT:       math.floor
// CHECK:           %[[N:.*]] = arith.subf %[[T]], %[[MAGIC]] : vector<8xf32>
// CHECK:           %[[P:.*]] = arith.addf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-NEXT:      %[[PB:.*]] = arith.bitcast %[[P]] : vector<8xf32> to vector<8xi32>
// CHECK-NEXT:      %{{.*}} = arith.constant dense<23> : vector<8xi32>
// CHECK-NEXT:      %[[SH:.*]] = arith.shli %[[TB]], %{{.*}} : vector<8xi32>
// CHECK-NEXT:      %[[SUM:.*]] = arith.addi %[[PB]], %[[SH]] : vector<8xi32>
// CHECK-NEXT:      %[[FAST:.*]] = arith.bitcast %[[SUM]] : vector<8xi32> to vector<8xf32>
// CHECK-NEXT:      scf.yield %[[FAST]] : vector<8xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %e : vector<8xf32>
func.func @exp_vector(%v: vector<8xf32>) -> vector<8xf32> {
  %e = math.exp %v : vector<8xf32>
  func.return %e : vector<8xf32>
}

// CHECK-LABEL: func.func @exp_scalar(%x: f32) -> f32 {
// CHECK-NOT:     scf.if
// CHECK-NOT:     vector.reduction
// CHECK:         arith.maximumf %x, %{{.*}} : f32
// CHECK:         math.floor
// CHECK:         %e = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:    func.return %e : f32
func.func @exp_scalar(%x: f32) -> f32 {
  %e = math.exp %x : f32
  func.return %e : f32
}

// CHECK-LABEL: func.func @exp_f64_vector(%v: vector<4xf64>) -> vector<4xf64> {
// CHECK-NOT:     scf.if
// CHECK:         func.return
func.func @exp_f64_vector(%v: vector<4xf64>) -> vector<4xf64> {
  %e = math.exp %v : vector<4xf64>
  func.return %e : vector<4xf64>
}
