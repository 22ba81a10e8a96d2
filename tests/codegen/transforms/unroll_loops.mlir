// RUN: hlocc-opt %s --split-input-file --passes unroll-loops | filecheck %s

// `unroll-loops` (seed 000 "Loop unrolling"): an scf.for from 0 with step 1 and a constant trip count of at
// most MAX_TRIP_COUNT (64), whose unrolled body stays under MAX_UNROLLED_OPS (4096), is replaced by that many
// copies of its body, the induction variable a constant in each, the iter_args threaded from copy to copy.

// A thread's loop over the 4 lanes of a vector: four vector.extract / vector.insert at the constant
// positions 0, 1, 2, 3, each insert into the previous one's result; no loop is left.
// CHECK-LABEL: func.func @lanes(%v: vector<4xf32>) -> vector<4xf32> {
// CHECK-NOT:     scf.for
// CHECK:         %init = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-NEXT:    %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %x = vector.extract %v[%[[C0]]] : f32 from vector<4xf32>
// CHECK-NEXT:    %y = math.absf %x : f32
// CHECK-NEXT:    %next = vector.insert %y, %init [%[[C0]]] : f32 into vector<4xf32>
// CHECK-NEXT:    %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %x_1 = vector.extract %v[%[[C1]]] : f32 from vector<4xf32>
// CHECK-NEXT:    %y_1 = math.absf %x_1 : f32
// CHECK-NEXT:    %next_1 = vector.insert %y_1, %next [%[[C1]]] : f32 into vector<4xf32>
// CHECK-NEXT:    %[[C2:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %x_2 = vector.extract %v[%[[C2]]] : f32 from vector<4xf32>
// CHECK-NEXT:    %y_2 = math.absf %x_2 : f32
// CHECK-NEXT:    %next_2 = vector.insert %y_2, %next_1 [%[[C2]]] : f32 into vector<4xf32>
// CHECK-NEXT:    %[[C3:.*]] = arith.constant 3 : index
// CHECK-NEXT:    %x_3 = vector.extract %v[%[[C3]]] : f32 from vector<4xf32>
// CHECK-NEXT:    %y_3 = math.absf %x_3 : f32
// CHECK-NEXT:    %next_3 = vector.insert %y_3, %next_2 [%[[C3]]] : f32 into vector<4xf32>
// CHECK-NEXT:    func.return %next_3 : vector<4xf32>
// CHECK-NOT:     scf.for
func.func @lanes(%v: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant dense<0.000000e+00> : vector<4xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (vector<4xf32>) {
    %x = vector.extract %v[%i] : f32 from vector<4xf32>
    %y = math.absf %x : f32
    %next = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
    scf.yield %next : vector<4xf32>
  }
  func.return %r : vector<4xf32>
}

// -----

// Inner loops first: the inner loop (2 iterations) is unrolled inside the outer one, which has 128 iterations,
// more than MAX_TRIP_COUNT, and stays a loop.
// CHECK-LABEL: func.func @nested(%t: tensor<256xf32>) -> f32 {
// CHECK:         %r = scf.for %i = %c0 to %c128 step %c1 iter_args(%s = %zero) -> (f32) {
// CHECK-NEXT:      %[[J0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %idx = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 2 + d1), domain: d0 in [0, 127], d1 in [0, 1]">(%i, %[[J0]])
// CHECK-NEXT:      %x = tensor.extract %t[%idx] : tensor<256xf32>
// CHECK-NEXT:      %a = arith.addf %s, %x : f32
// CHECK-NEXT:      %[[J1:.*]] = arith.constant 1 : index
// CHECK-NEXT:      %idx_1 = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 2 + d1), domain: d0 in [0, 127], d1 in [0, 1]">(%i, %[[J1]])
// CHECK-NEXT:      %x_1 = tensor.extract %t[%idx_1] : tensor<256xf32>
// CHECK-NEXT:      %a_1 = arith.addf %a, %x_1 : f32
// CHECK-NEXT:      scf.yield %a_1 : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : f32
func.func @nested(%t: tensor<256xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c128 = arith.constant 128 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.000000e+00 : f32
  %r = scf.for %i = %c0 to %c128 step %c1 iter_args(%s = %zero) -> (f32) {
    %r2 = scf.for %j = %c0 to %c2 step %c1 iter_args(%s2 = %s) -> (f32) {
      %idx = xla.apply_indexing
          #xla.indexing_map<"(d0, d1) -> (d0 * 2 + d1), domain: d0 in [0, 127], d1 in [0, 1]">(%i, %j)
      %x = tensor.extract %t[%idx] : tensor<256xf32>
      %a = arith.addf %s2, %x : f32
      scf.yield %a : f32
    }
    scf.yield %r2 : f32
  }
  func.return %r : f32
}

// -----

// A loop that does not start at 0 with step 1 is left alone.
// CHECK-LABEL: func.func @strided_loop(
// CHECK:         scf.for %i = %c0 to %c4 step %c2
func.func @strided_loop(%v: vector<4xf32>) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %i = %c0 to %c4 step %c2 iter_args(%acc = %v) -> (vector<4xf32>) {
    %x = vector.extract %acc[%i] : f32 from vector<4xf32>
    %y = math.absf %x : f32
    %next = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
    scf.yield %next : vector<4xf32>
  }
  func.return %r : vector<4xf32>
}

// -----

// A loop marked xla.keep_rolled (the naive matmul's loops over elements: lower_matmul.py) is left
// alone, though it is small.
// CHECK-LABEL: func.func @keep_rolled(
// CHECK:         scf.for %i = %c0 to %c4 step %c1
// CHECK:         } {xla.keep_rolled}
func.func @keep_rolled(%x: f32) -> f32 {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %x) -> (f32) {
    %y = arith.addf %a, %a : f32
    scf.yield %y : f32
  } {xla.keep_rolled}
  func.return %r : f32
}

// -----

// The body is counted as it will be after expand-float-ops: a math op that becomes an approximation
// counts 48 (unroll_loops.EXPANDED_MATH_OPS). 37 iterations of an add unroll; 37 iterations of
// three exps (37 * 147 > 4096) stay a loop (counted as 4 ops a loop like it was unrolled, and a
// logsumexp kernel took 12.7 s to compile); 16 lanes of an exp (16 * 49 < 4096) unroll.

// CHECK-LABEL: func.func @arith
// CHECK-NOT:     scf.for
// CHECK-COUNT-37: arith.addf
// CHECK:         func.return
func.func @arith(%x: f32) -> f32 {
  %lo = arith.constant 0 : index
  %hi = arith.constant 37 : index
  %st = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %st iter_args(%acc = %x) -> (f32) {
    %s = arith.addf %acc, %x : f32
    scf.yield %s : f32
  }
  func.return %r : f32
}

// -----

// CHECK-LABEL: func.func @exp_rows
// CHECK:         scf.for
// CHECK-COUNT-3:   math.exp
// CHECK:           scf.yield
func.func @exp_rows(%x: f32) -> f32 {
  %lo = arith.constant 0 : index
  %hi = arith.constant 37 : index
  %st = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %st iter_args(%acc = %x) -> (f32) {
    %e = math.exp %acc : f32
    %f = math.exp %e : f32
    %g = math.exp %f : f32
    scf.yield %g : f32
  }
  func.return %r : f32
}

// -----

// CHECK-LABEL: func.func @exp_lanes
// CHECK-NOT:     scf.for
// CHECK-COUNT-16: math.exp
// CHECK:         func.return
func.func @exp_lanes(%x: f32) -> f32 {
  %lo = arith.constant 0 : index
  %hi = arith.constant 16 : index
  %st = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %st iter_args(%acc = %x) -> (f32) {
    %e = math.exp %acc : f32
    scf.yield %e : f32
  }
  func.return %r : f32
}

// -----

// A conversion to or from an f8 format counts as one too (lower-narrow-floats makes it 20-40 ops):
// 64 iterations of f16 -> f8 -> f16 (64 * 98 > 4096) stay a loop, where an XLA:CPU dump of an f8 sum
// unrolled its 32-wide window to ~9000 ops and took 40 s of LLVM; 32 f16 adds unroll.

// CHECK-LABEL: func.func @f8_round_trips
// CHECK:         scf.for
// CHECK:           arith.truncf
// CHECK:           arith.extf
// CHECK:           scf.yield
// CHECK-LABEL: func.func @f16_adds
// CHECK-NOT:     scf.for
// CHECK-COUNT-32: arith.addf
func.func @f8_round_trips(%x: f16) -> f16 {
  %lo = arith.constant 0 : index
  %hi = arith.constant 64 : index
  %st = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %st iter_args(%acc = %x) -> (f16) {
    %s = arith.addf %acc, %x : f16
    %n = arith.truncf %s : f16 to f8E5M2
    %w = arith.extf %n : f8E5M2 to f16
    scf.yield %w : f16
  }
  func.return %r : f16
}
func.func @f16_adds(%x: f16) -> f16 {
  %lo = arith.constant 0 : index
  %hi = arith.constant 32 : index
  %st = arith.constant 1 : index
  %r = scf.for %i = %lo to %hi step %st iter_args(%acc = %x) -> (f16) {
    %s = arith.addf %acc, %x : f16
    scf.yield %s : f16
  }
  func.return %r : f16
}
