// RUN: hlocc-opt %s --split-input-file --passes lower-xla-to-arith | filecheck %s

// `lower-xla-to-arith`: xla.apply_indexing becomes arith on index values (XLA's xla-simplify-affine +
// lower-affine). Common subexpressions of one map are computed once. The domain bounds every variable, so a
// floordiv / mod / ceildiv whose left-hand side is provably >= 0 uses the cheap unsigned op; one that may be
// negative (a pad's `d0 - lo`, outside the guarded region) needs the signed floor semantics.

// The seed's loop map with the range variable fixed to 3: every left-hand side is non-negative, so
// divui / remui. `bl_x floordiv 8` is computed once and shared by the first two results (the constant 8 too).
// CHECK-LABEL: func.func @non_negative(%tid: index, %bid: index) -> (index, index, index) {
// CHECK-NEXT:    %[[C8:.*]] = arith.constant 8 : index
// CHECK-NEXT:    %a = arith.divui %bid, %[[C8]] : index
// CHECK-NEXT:    %[[C512:.*]] = arith.constant 512 : index
// CHECK-NEXT:    %b = arith.remui %a, %[[C512]] : index
// CHECK-NEXT:    %[[LOW:.*]] = arith.remui %bid, %[[C8]] : index
// CHECK-NEXT:    %[[T0:.*]] = arith.muli %[[LOW]], %[[C512]] : index
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[T1:.*]] = arith.muli %tid, %[[C4]] : index
// CHECK-NEXT:    %[[T2:.*]] = arith.addi %[[T0]], %[[T1]] : index
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %c = arith.addi %[[T2]], %[[C3]] : index
// CHECK-NEXT:    func.return %a, %b, %c : index, index, index
// CHECK-NOT:     xla.apply_indexing
func.func @non_negative(%tid: index, %bid: index) -> (index, index, index) {
  %a, %b, %c = xla.apply_indexing #xla.indexing_map<"(th_x, bl_x) -> (bl_x floordiv 8, (bl_x floordiv 8) mod 512,"
      "(bl_x mod 8) * 512 + th_x * 4 + 3), domain: th_x in [0, 127], bl_x in [0, 24575]">(%tid, %bid)
  func.return %a, %b, %c : index, index, index
}

// -----

// d0 - 2 is in [-2, 7]: floordiv becomes arith.floordivsi (rounds towards -inf, unlike divsi), and mod
// becomes remsi plus a correction into [0, 4): rem < 0 ? rem + 4 : rem.
// CHECK-LABEL: func.func @maybe_negative(%d: index) -> (index, index) {
// CHECK-NEXT:    %[[CM2:.*]] = arith.constant -2 : index
// CHECK-NEXT:    %[[X:.*]] = arith.addi %d, %[[CM2]] : index
// CHECK-NEXT:    %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %a = arith.floordivsi %[[X]], %[[C4]] : index
// CHECK-NEXT:    %[[REM:.*]] = arith.remsi %[[X]], %[[C4]] : index
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[NEG:.*]] = arith.cmpi slt, %[[REM]], %[[C0]] : index
// CHECK-NEXT:    %[[UP:.*]] = arith.addi %[[REM]], %[[C4]] : index
// CHECK-NEXT:    %b = arith.select %[[NEG]], %[[UP]], %[[REM]] : index
// CHECK-NEXT:    func.return %a, %b : index, index
func.func @maybe_negative(%d: index) -> (index, index) {
  %a, %b = xla.apply_indexing
      #xla.indexing_map<"(d0) -> ((d0 - 2) floordiv 4, (d0 - 2) mod 4), domain: d0 in [0, 9]">(%d)
  func.return %a, %b : index, index
}

// -----

// ceildiv the same way: ceildivui for d0 in [0, 9], ceildivsi for d0 - s0 in [-3, 9]. A range variable (s0)
// is an operand like a dimension.
// CHECK-LABEL: func.func @ceil(%d: index, %s: index) -> (index, index) {
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %a = arith.ceildivui %d, %[[C3]] : index
// CHECK-NEXT:    %[[CM1:.*]] = arith.constant -1 : index
// CHECK-NEXT:    %[[NS:.*]] = arith.muli %s, %[[CM1]] : index
// CHECK-NEXT:    %[[X:.*]] = arith.addi %d, %[[NS]] : index
// CHECK-NEXT:    %b = arith.ceildivsi %[[X]], %[[C3]] : index
func.func @ceil(%d: index, %s: index) -> (index, index) {
  %a, %b = xla.apply_indexing #xla.indexing_map<"(d0)[s0] -> (d0 ceildiv 3, (d0 - s0) ceildiv 3),"
      "domain: d0 in [0, 9], s0 in [0, 3]">(%d)[%s]
  func.return %a, %b : index, index
}
