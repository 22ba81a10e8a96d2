// RUN: hlocc-opt %s --split-input-file --passes vectorize-elementwise | filecheck %s

// `vectorize-elementwise` first hoists the loop-invariant work out of every loop that runs at least once,
// innermost loops first. Emitters index every operand from the element's full index, so a broadcast
// operand (a softmax's row maximum) is read in the lane loop through an apply_indexing that also yields
// the lane's column: its row result is split off and hoisted (the lane operand it does not read replaced by
// the lane's lower bound), the row's read with it, and the lane loop becomes whole-vector ops.

// A softmax row chunk (reduce_partials.py's lane loop after vectorize-loads-stores, names tidied).
// CHECK-LABEL: func.func @row_max_read_in_lane_loop(
// CHECK:         %init = arith.constant dense<0.000000e+00> : vector<16xf32>
// CHECK-NEXT:    %[[LANE:.+]] = arith.constant 0 : index
// CHECK-NEXT:    %row = xla.apply_indexing #xla.indexing_map<"(th_x)[lane] -> (th_x), domain: th_x in [0, 15], lane in [0, 15]">(%tid)[%[[LANE]]]
// CHECK-NEXT:    %[[COL:.+]] = arith.constant 0 : index
// CHECK-NEXT:    %m = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0), domain: d0 in [0, 15], d1 in [0, 15]">(%row, %[[COL]])
// CHECK-NEXT:    %max = tensor.extract %maxes[%m] : tensor<16xf32>
// CHECK-NEXT:    %[[MAX:.+]] = vector.broadcast %max : f32 to vector<16xf32>
// CHECK-NEXT:    %d = arith.subf %x, %[[MAX]] : vector<16xf32>
// CHECK-NEXT:    %e = math.exp %d : vector<16xf32>
// CHECK-NEXT:    %s = arith.addf %acc, %e : vector<16xf32>
// CHECK-NEXT:    func.return %s : vector<16xf32>
// CHECK-NOT:     scf.for
func.func @row_max_read_in_lane_loop(%tid: index, %x: vector<16xf32>, %acc: vector<16xf32>,
                                     %maxes: tensor<16xf32>) -> vector<16xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %init = arith.constant dense<0.000000e+00> : vector<16xf32>
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%v = %init) -> (vector<16xf32>) {
    %row, %col = xla.apply_indexing
        #xla.indexing_map<"(th_x)[lane] -> (th_x, lane), domain: th_x in [0, 15], lane in [0, 15]">(%tid)[%i]
    %xi = vector.extract %x[%i] : f32 from vector<16xf32>
    %m = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0), domain: d0 in [0, 15], d1 in [0, 15]">(%row, %col)
    %max = tensor.extract %maxes[%m] : tensor<16xf32>
    %d = arith.subf %xi, %max : f32
    %e = math.exp %d : f32
    %old = vector.extract %acc[%i] : f32 from vector<16xf32>
    %s = arith.addf %old, %e : f32
    %v1 = vector.insert %s, %v [%i] : f32 into vector<16xf32>
    scf.yield %v1 : vector<16xf32>
  }
  func.return %r : vector<16xf32>
}

// -----

// Innermost loops first: a value the same for a whole row leaves the chunk loop too. Writes stay where
// they are, and a loop that may not run (here: unknown bounds) keeps its reads.
// CHECK-LABEL: func.func @nested(
// CHECK:         %k = arith.muli %n, %n : index
// CHECK-NEXT:    %y = tensor.extract %t[%k] : tensor<64xf32>
// CHECK-NEXT:    %r = scf.for %j = %c0 to %c4 step %c1 iter_args(%out = %o) -> (tensor<64xf32>) {
// CHECK-NEXT:      %w = tensor.insert %y into %out[%j] : tensor<64xf32>
// CHECK-NEXT:      %z = scf.for %q = %c0 to %ub step %c1 iter_args(%o2 = %w) -> (tensor<64xf32>) {
// CHECK-NEXT:        %u = tensor.extract %t[%k] : tensor<64xf32>
func.func @nested(%t: tensor<64xf32>, %o: tensor<64xf32>, %n: index, %ub: index) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %j = %c0 to %c4 step %c1 iter_args(%out = %o) -> (tensor<64xf32>) {
    %k = arith.muli %n, %n : index
    %y = tensor.extract %t[%k] : tensor<64xf32>
    %w = tensor.insert %y into %out[%j] : tensor<64xf32>
    %z = scf.for %q = %c0 to %ub step %c1 iter_args(%o2 = %w) -> (tensor<64xf32>) {
      %u = tensor.extract %t[%k] : tensor<64xf32>
      %w2 = tensor.insert %u into %o2[%q] : tensor<64xf32>
      scf.yield %w2 : tensor<64xf32>
    }
    scf.yield %z : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
