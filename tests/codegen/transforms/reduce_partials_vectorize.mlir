// RUN: hlocc-opt %s --passes flatten-tensors,cse,dce,vectorize-loads-stores,cse,dce,vectorize-elementwise | filecheck %s

// The row sum the elemental reduce emitter writes for f32[8, 2048] (emitters/reduce_partials.py, named
// and tidied): a vector<16xf32> of partial accumulators seeded by the first chunk, a loop over the other
// chunks whose inner loop reduces each lane, then the lanes folded in order. The chunks start at
// multiples of 16, so the CPU pipeline's vectorize-loads-stores turns each chunk's reads into one
// transfer_read and vectorize-elementwise the lane loops into whole-vector ops: the chunk loop becomes
// one vector load and one vector add. The fold over the lanes stays a loop (LLVM unrolls it).

// CHECK-LABEL: func.func @row_sum(%p: tensor<16384xf32>, %row: index) -> f32 {
// CHECK:         %first = vector.transfer_read %p[%{{.+}}], %zero {in_bounds = [true]} : tensor<16384xf32>, vector<16xf32>
// CHECK-NEXT:    %accs = scf.for %chunk = %c1 to %c128 step %c1 iter_args(%acc = %first) -> (vector<16xf32>) {
// CHECK-NEXT:      %[[AT:.+]] = xla.apply_indexing #{{.+}}<"(d0)[s0, lane] -> (d0 * 2048 + s0 * 16 + lane), {{.+}}">(%row)[%chunk, %c0]
// CHECK-NEXT:      %[[X:.+]] = vector.transfer_read %p[%[[AT]]], %zero {in_bounds = [true]} : tensor<16384xf32>, vector<16xf32>
// CHECK-NEXT:      %sum = arith.addf %acc, %[[X]] : vector<16xf32>
// CHECK-NEXT:      scf.yield %sum : vector<16xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %lane0 = vector.extract %accs[0] : f32 from vector<16xf32>
// CHECK-NEXT:    %folded = scf.for %lane = %c1 to %c16 step %c1 iter_args(%r = %lane0) -> (f32) {
// CHECK-NEXT:      %x = vector.extract %accs[%lane] : f32 from vector<16xf32>
// CHECK-NEXT:      %r1 = arith.addf %r, %x : f32
#row_chunk_lane = #xla.indexing_map<"(d0)[s0, lane] -> (d0, s0 * 16 + lane), domain: d0 in [0, 7], s0 in [0, 127], lane in [0, 15]">
func.func @row_sum(%p: tensor<8x2048xf32>, %row: index) -> f32 {
  %zero = arith.constant 0.000000e+00 : f32
  %seed = vector.broadcast %zero : f32 to vector<16xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c128 = arith.constant 128 : index
  %first = scf.for %lane = %c0 to %c16 step %c1 iter_args(%v = %seed) -> (vector<16xf32>) {
    %i, %j = xla.apply_indexing #row_chunk_lane(%row)[%c0, %lane]
    %x = tensor.extract %p[%i, %j] : tensor<8x2048xf32>
    %v1 = vector.insert %x, %v [%lane] : f32 into vector<16xf32>
    scf.yield %v1 : vector<16xf32>
  }
  %accs = scf.for %chunk = %c1 to %c128 step %c1 iter_args(%acc = %first) -> (vector<16xf32>) {
    %next = scf.for %lane = %c0 to %c16 step %c1 iter_args(%v = %acc) -> (vector<16xf32>) {
      %i, %j = xla.apply_indexing #row_chunk_lane(%row)[%chunk, %lane]
      %x = tensor.extract %p[%i, %j] : tensor<8x2048xf32>
      %old = vector.extract %acc[%lane] : f32 from vector<16xf32>
      %sum = arith.addf %old, %x : f32
      %v1 = vector.insert %sum, %v [%lane] : f32 into vector<16xf32>
      scf.yield %v1 : vector<16xf32>
    }
    scf.yield %next : vector<16xf32>
  }
  %lane0 = vector.extract %accs[0] : f32 from vector<16xf32>
  %folded = scf.for %lane = %c1 to %c16 step %c1 iter_args(%r = %lane0) -> (f32) {
    %x = vector.extract %accs[%lane] : f32 from vector<16xf32>
    %r1 = arith.addf %r, %x : f32
    scf.yield %r1 : f32
  }
  %result = arith.addf %zero, %folded : f32
  func.return %result : f32
}
