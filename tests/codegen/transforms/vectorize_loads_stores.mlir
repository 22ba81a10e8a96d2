// RUN: hlocc-opt %s --split-input-file --passes vectorize-loads-stores | filecheck %s

// `vectorize-loads-stores` (seed 000 "Vectorization"): in a loop `scf.for %i = 0 to N step 1` (N a vector
// size: 2, 4, ..., 64), an access at `offset + %i` with `offset` a multiple of N (every operand of its
// apply_indexing but %i defined outside the loop) touches N consecutive, aligned elements. Such a
// tensor.extract becomes one vector.transfer_read hoisted before the loop plus a vector.extract inside; such
// a tensor.insert into the loop-carried tensor becomes a vector.insert into a new loop-carried vector,
// written once after the loop with vector.transfer_write. The offset is the index map at %i = 0.

// The seed's case: a thread's 4 consecutive elements (th_x * 4 + s0), read and written.
// CHECK-LABEL: func.func @contiguous(%tid: index, %in: tensor<512xf32>, %out: tensor<512xf32>) -> tensor<512xf32> {
// CHECK:         %c1 = arith.constant 1 : index
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[RD:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%[[ZERO]]]
// CHECK-NEXT:    %[[PAD:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[V:.*]] = vector.transfer_read %in[%[[RD]]], %[[PAD]] {in_bounds = [true]} : tensor<512xf32>, vector<4xf32>
// CHECK-NEXT:    %[[ZERO2:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[WR:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%[[ZERO2]]]
// CHECK-NEXT:    %[[INIT:.*]] = arith.constant dense<0.000000e+00> : vector<4xf32>
// CHECK-NEXT:    %[[T:.*]], %[[VOUT:.*]] = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out, %[[ACC:.*]] = %[[INIT]]) -> (tensor<512xf32>, vector<4xf32>) {
// CHECK-NOT:       tensor.extract
// CHECK:           %x = vector.extract %[[V]][%i] : f32 from vector<4xf32>
// CHECK-NEXT:      %y = math.absf %x : f32
// CHECK-NEXT:      %[[NEXT:.*]] = vector.insert %y, %[[ACC]] [%i] : f32 into vector<4xf32>
// CHECK-NEXT:      scf.yield %it, %[[NEXT]] : tensor<512xf32>, vector<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = vector.transfer_write %[[VOUT]], %[[T]][%[[WR]]] {in_bounds = [true]} : vector<4xf32>, tensor<512xf32>
// CHECK-NEXT:    func.return %r : tensor<512xf32>
func.func @contiguous(%tid: index, %in: tensor<512xf32>, %out: tensor<512xf32>) -> tensor<512xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xf32>) {
    %idx = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%idx] : tensor<512xf32>
    %y = math.absf %x : f32
    %ins = tensor.insert %y into %it[%idx] : tensor<512xf32>
    scf.yield %ins : tensor<512xf32>
  }
  func.return %r : tensor<512xf32>
}

// -----

// A strided read (th_x * 8 + s0 * 2, every other element) is not contiguous: it stays a tensor.extract in
// the loop. The write in the same loop is contiguous and is vectorized on its own.
// CHECK-LABEL: func.func @strided(
// CHECK-NOT:     vector.transfer_read
// CHECK:         scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out, %{{.*}} = %{{.*}}) -> (tensor<512xf32>, vector<4xf32>) {
// CHECK:           %src = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 8 + s0 * 2)
// CHECK-NEXT:      %x = tensor.extract %in[%src] : tensor<1024xf32>
// CHECK:           vector.insert %x,
// CHECK:         vector.transfer_write
func.func @strided(%tid: index, %in: tensor<1024xf32>, %out: tensor<512xf32>) -> tensor<512xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xf32>) {
    %src = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 8 + s0 * 2), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%src] : tensor<1024xf32>
    %dst = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %ins = tensor.insert %x into %it[%dst] : tensor<512xf32>
    scf.yield %ins : tensor<512xf32>
  }
  func.return %r : tensor<512xf32>
}

// -----

// Contiguous but misaligned: a read at th_x * 4 + 1 + s0 and a write at th_x * 2 + s0 start at offsets that
// are not multiples of 4, so a 4-element vector access would straddle an alignment boundary. Both stay.
// CHECK-LABEL: func.func @misaligned(
// CHECK-NOT:     vector.
// CHECK:         %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xf32>) {
// CHECK:           %x = tensor.extract %in[%src] : tensor<516xf32>
// CHECK:           %ins = tensor.insert %x into %it[%dst] : tensor<512xf32>
// CHECK-NEXT:      scf.yield %ins : tensor<512xf32>
// CHECK-NOT:     vector.
func.func @misaligned(%tid: index, %in: tensor<516xf32>, %out: tensor<512xf32>) -> tensor<512xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xf32>) {
    %src = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0 + 1), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%src] : tensor<516xf32>
    %dst = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 2 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %ins = tensor.insert %x into %it[%dst] : tensor<512xf32>
    scf.yield %ins : tensor<512xf32>
  }
  func.return %r : tensor<512xf32>
}

// -----

// A trip count that is no vector size (3): nothing changes.
// CHECK-LABEL: func.func @three_elements(
// CHECK-NOT:     vector.
// CHECK:         tensor.extract %in[%idx] : tensor<384xf32>
// CHECK:         tensor.insert %x into %it[%idx] : tensor<384xf32>
// CHECK-NOT:     vector.
func.func @three_elements(%tid: index, %in: tensor<384xf32>, %out: tensor<384xf32>) -> tensor<384xf32> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%it = %out) -> (tensor<384xf32>) {
    %idx = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 3 + s0), domain: th_x in [0, 127], s0 in [0, 2]">(%tid)[%i]
    %x = tensor.extract %in[%idx] : tensor<384xf32>
    %ins = tensor.insert %x into %it[%idx] : tensor<384xf32>
    scf.yield %ins : tensor<384xf32>
  }
  func.return %r : tensor<384xf32>
}

// -----

// Complex elements are not vectorized (a vector of complex numbers has no LLVM type): the loop stays for
// unroll-loops (LLVM's SLP vectorizer then makes vectors of the parts).
// CHECK-LABEL: func.func @complex_elements(
// CHECK-NOT:     vector.
// CHECK:         tensor.extract %in[%idx] : tensor<512xcomplex<f32>>
// CHECK:         tensor.insert %x into %it[%idx] : tensor<512xcomplex<f32>>
// CHECK-NOT:     vector.
func.func @complex_elements(%tid: index, %in: tensor<512xcomplex<f32>>, %out: tensor<512xcomplex<f32>>) -> tensor<512xcomplex<f32>> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xcomplex<f32>>) {
    %idx = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%idx] : tensor<512xcomplex<f32>>
    %ins = tensor.insert %x into %it[%idx] : tensor<512xcomplex<f32>>
    scf.yield %ins : tensor<512xcomplex<f32>>
  }
  func.return %r : tensor<512xcomplex<f32>>
}
