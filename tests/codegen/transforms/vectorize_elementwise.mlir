// RUN: hlocc-opt %s --split-input-file --passes vectorize-elementwise | filecheck %s

// `vectorize-elementwise` (CPU only, CPU_PIPELINE): after vectorize-loads-stores a thread's loop over the N
// lanes of its vectors reads lane %i (vector.extract), computes on scalars and writes lane %i
// (vector.insert). When everything in between is elementwise arith/math, the loop is replaced by the same
// ops on whole vector<N x T> values: each extract by the vector itself, each insert's accumulator by the
// computed vector. Scalars from outside the loop, and constants in it, are broadcast to every lane.

// The loop emitter's shape after vectorize-loads-stores (the output tensor is carried through unchanged):
// the loop disappears and transfer_write stores the computed vector.
// CHECK-LABEL: func.func @elementwise(%tid: index, %in: tensor<512xf32>, %out: tensor<512xf32>, %scale: f32) -> tensor<512xf32> {
// CHECK:         %v = vector.transfer_read %in[%offset], %pad {in_bounds = [true]} : tensor<512xf32>, vector<4xf32>
// CHECK-NEXT:    %init = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-NEXT:    %half = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    %[[HALF:.*]] = vector.broadcast %half : f32 to vector<4xf32>
// CHECK-NEXT:    %a = math.absf %v : vector<4xf32>
// CHECK-NEXT:    %[[SCALE:.*]] = vector.broadcast %scale : f32 to vector<4xf32>
// CHECK-NEXT:    %m = arith.mulf %a, %[[SCALE]] : vector<4xf32>
// CHECK-NEXT:    %y = arith.addf %m, %[[HALF]] : vector<4xf32>
// CHECK-NEXT:    %r = vector.transfer_write %y, %out[%offset] {in_bounds = [true]} : vector<4xf32>, tensor<512xf32>
// CHECK-NEXT:    func.return %r : tensor<512xf32>
// CHECK-NOT:     scf.for
func.func @elementwise(%tid: index, %in: tensor<512xf32>, %out: tensor<512xf32>, %scale: f32) -> tensor<512xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %offset = xla.apply_indexing
      #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%c0]
  %pad = arith.constant 0.000000e+00 : f32
  %v = vector.transfer_read %in[%offset], %pad {in_bounds = [true]} : tensor<512xf32>, vector<4xf32>
  %init = arith.constant dense<0.000000e+00> : vector<4xf32>
  %t, %vout = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out, %acc = %init)
      -> (tensor<512xf32>, vector<4xf32>) {
    %half = arith.constant 5.000000e-01 : f32
    %x = vector.extract %v[%i] : f32 from vector<4xf32>
    %a = math.absf %x : f32
    %m = arith.mulf %a, %scale : f32
    %y = arith.addf %m, %half : f32
    %next = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
    scf.yield %it, %next : tensor<512xf32>, vector<4xf32>
  }
  %r = vector.transfer_write %vout, %t[%offset] {in_bounds = [true]} : vector<4xf32>, tensor<512xf32>
  func.return %r : tensor<512xf32>
}

// -----

// A branch in the body is not elementwise arith/math: the loop is left for unroll-loops.
// CHECK-LABEL: func.func @branch(
// CHECK:         %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (vector<4xf32>) {
// CHECK-NEXT:      %x = vector.extract %v[%i] : f32 from vector<4xf32>
// CHECK-NEXT:      %y = scf.if %c -> (f32) {
// CHECK:           %next = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
// CHECK-NEXT:      scf.yield %next : vector<4xf32>
func.func @branch(%v: vector<4xf32>, %c: i1) -> vector<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant dense<0.000000e+00> : vector<4xf32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (vector<4xf32>) {
    %x = vector.extract %v[%i] : f32 from vector<4xf32>
    %y = scf.if %c -> (f32) {
      %n = arith.negf %x : f32
      scf.yield %n : f32
    } else {
      scf.yield %x : f32
    }
    %next = vector.insert %y, %acc [%i] : f32 into vector<4xf32>
    scf.yield %next : vector<4xf32>
  }
  func.return %r : vector<4xf32>
}

// -----

// So is an index computation (arith.index_cast): the loop stays.
// CHECK-LABEL: func.func @index_cast(
// CHECK:         scf.for %i = %c0 to %c4 step %c1
// CHECK:           arith.index_cast %i : index to i32
func.func @index_cast(%v: vector<4xi32>) -> vector<4xi32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant dense<0> : vector<4xi32>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (vector<4xi32>) {
    %x = vector.extract %v[%i] : i32 from vector<4xi32>
    %lane = arith.index_cast %i : index to i32
    %y = arith.addi %x, %lane : i32
    %next = vector.insert %y, %acc [%i] : i32 into vector<4xi32>
    scf.yield %next : vector<4xi32>
  }
  func.return %r : vector<4xi32>
}

// -----

// Compares, selects and integer casts vectorize too, as their xla stand-ins (xDSL 0.74's arith verifies
// them only on scalars): a clamp to [0, 255] and a conversion to i8.
// CHECK-LABEL: func.func @clamp_to_u8(%v: vector<4xf32>) -> vector<4xi8> {
// CHECK-NOT:     scf.for
// CHECK:         %[[LO:.*]] = vector.broadcast %lo : f32 to vector<4xf32>
// CHECK:         %[[HI:.*]] = vector.broadcast %hi : f32 to vector<4xf32>
// CHECK-NEXT:    %below = xla.cmpf olt, %v, %[[LO]] : vector<4xf32>
// CHECK-NEXT:    %c = xla.select %below, %[[LO]], %v : vector<4xi1>, vector<4xf32>
// CHECK-NEXT:    %above = xla.cmpf ogt, %c, %[[HI]] : vector<4xf32>
// CHECK-NEXT:    %d = xla.select %above, %[[HI]], %c : vector<4xi1>, vector<4xf32>
// CHECK-NEXT:    %q = xla.fptoui %d : vector<4xf32> to vector<4xi8>
// CHECK-NEXT:    func.return %q : vector<4xi8>
func.func @clamp_to_u8(%v: vector<4xf32>) -> vector<4xi8> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %init = arith.constant dense<0> : vector<4xi8>
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (vector<4xi8>) {
    %lo = arith.constant 0.000000e+00 : f32
    %hi = arith.constant 2.550000e+02 : f32
    %x = vector.extract %v[%i] : f32 from vector<4xf32>
    %below = arith.cmpf olt, %x, %lo : f32
    %c = arith.select %below, %lo, %x : f32
    %above = arith.cmpf ogt, %c, %hi : f32
    %d = arith.select %above, %hi, %c : f32
    %q = arith.fptoui %d : f32 to i8
    %next = vector.insert %q, %acc [%i] : i8 into vector<4xi8>
    scf.yield %next : vector<4xi8>
  }
  func.return %r : vector<4xi8>
}
