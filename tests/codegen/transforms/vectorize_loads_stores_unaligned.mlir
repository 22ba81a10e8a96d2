// RUN: hlocc-opt %s --split-input-file --passes vectorize-loads-stores-unaligned | filecheck %s

// `vectorize-loads-stores-unaligned` (the CPU pipeline's form): contiguous accesses become vectors at any
// offset, since a CPU vector access needs only its elements' alignment (llvm/memory_ops.py). The aligned
// pass leaves both accesses below alone (vectorize_loads_stores.mlir, @misaligned).
// CHECK-LABEL: func.func @misaligned(
// CHECK:         %[[RD:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0 + 1), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%{{.*}}]
// CHECK:         %[[V:.*]] = vector.transfer_read %in[%[[RD]]], %{{.*}} {in_bounds = [true]} : tensor<516xf32>, vector<4xf32>
// CHECK:         %[[WR:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 2 + s0)
// CHECK:         scf.for
// CHECK-NOT:       tensor.extract
// CHECK:           vector.extract %[[V]][%i]
// CHECK:         vector.transfer_write %{{.*}}, %{{.*}}[%[[WR]]] {in_bounds = [true]} : vector<4xf32>, tensor<512xf32>
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

// A chunk of 4 in a row of symbolic length $n (the symbolic loop grid's whole-vector loop): the row start
// d0 * $n is a multiple of nothing known, and the read and the write are vectors.
// CHECK-LABEL: func.func @symbolic_row(
// CHECK:         vector.transfer_read %in[%{{.*}}], %{{.*}} {in_bounds = [true]} : tensor<?xf32, ["3*n"]>, vector<4xf32>
// CHECK:         scf.for
// CHECK-NOT:       tensor.extract
// CHECK-NOT:       tensor.insert
// CHECK:         vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<4xf32>, tensor<?xf32, ["3*n"]>
func.func @symbolic_row(%row: index, %chunk: index, %in: tensor<?xf32, ["3*n"]>, %out: tensor<?xf32, ["3*n"]>) -> tensor<?xf32, ["3*n"]> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<?xf32, ["3*n"]>) {
    %idx = xla.apply_indexing
        #xla.indexing_map<"(d0, d1)[s0] -> (d0 * $n + d1 * 4 + s0), domain: d0 in [0, 2], d1 in [0, 1000], s0 in [0, 3]">(%row, %chunk)[%i]
    %x = tensor.extract %in[%idx] : tensor<?xf32, ["3*n"]>
    %y = math.exp %x : f32
    %ins = tensor.insert %y into %it[%idx] : tensor<?xf32, ["3*n"]>
    scf.yield %ins : tensor<?xf32, ["3*n"]>
  }
  func.return %r : tensor<?xf32, ["3*n"]>
}

// -----

// The checked tail (the lowered loop with its constraint: each element under an scf.if, the lanes from
// %n - 4 * %row on outside the row) is a masked loop (vectorize_masked_lanes): the guard's lane end is
// k = %n - 4 * %row, the read and the write keep the lanes below it, and nothing runs when k < 1.
// CHECK-LABEL: func.func @tail(
// CHECK:         %[[K:.*]] = xla.apply_indexing #xla.indexing_map<"(d0)[s0]{r0} -> (r0 - s0 - d0 * 4), domain: d0 in [0, 1000], s0 in [0, 0], r0 in [-4611686018427387904, 4611686018427387904]">(%row)[%{{.*}}, %n]
// CHECK:         %[[MASK:.*]] = vector.create_mask %[[K]] : vector<4xi1>
// CHECK:         %[[SOME:.*]] = arith.cmpi sge, %[[K]], %{{.*}} : index
// CHECK:         scf.if %[[SOME]]
// CHECK:           vector.transfer_read %in[%{{.*}}], %{{.*}}, %[[MASK]] {in_bounds = [true]} : tensor<?xf32, ["3*n"]>, vector<4xf32>
// CHECK:           scf.for
// CHECK-NOT:         tensor.extract
// CHECK-NOT:         scf.if
// CHECK-NOT:         tensor.insert
// CHECK:           vector.transfer_write %{{.*}}, %{{.*}}[%{{.*}}], %[[MASK]] {in_bounds = [true]} : vector<4xf32>, tensor<?xf32, ["3*n"]>
// CHECK:         } else {
// CHECK-NEXT:      scf.yield %out
func.func @tail(%row: index, %n: index, %in: tensor<?xf32, ["3*n"]>, %out: tensor<?xf32, ["3*n"]>) -> tensor<?xf32, ["3*n"]> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<?xf32, ["3*n"]>) {
    %idx = xla.apply_indexing
        #xla.indexing_map<"(d0)[s0] -> (d0 * 4 + s0), domain: d0 in [0, 1000], s0 in [0, 3]">(%row)[%i]
    %inside = arith.cmpi slt, %idx, %n : index
    %next = scf.if %inside -> (tensor<?xf32, ["3*n"]>) {
      %x = tensor.extract %in[%idx] : tensor<?xf32, ["3*n"]>
      %ins = tensor.insert %x into %it[%idx] : tensor<?xf32, ["3*n"]>
      scf.yield %ins : tensor<?xf32, ["3*n"]>
    } else {
      scf.yield %it : tensor<?xf32, ["3*n"]>
    }
    scf.yield %next : tensor<?xf32, ["3*n"]>
  }
  func.return %r : tensor<?xf32, ["3*n"]>
}

// -----

// Elements under a byte (pred, s4) share bytes: a misaligned run of them stays element by element.
// CHECK-LABEL: func.func @sub_byte(
// CHECK-NOT:     vector.
// CHECK:         tensor.extract %in[%src] : tensor<516xi4>
// CHECK-NOT:     vector.
func.func @sub_byte(%tid: index, %in: tensor<516xi4>, %out: tensor<512xi4>) -> tensor<512xi4> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<512xi4>) {
    %src = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0 + 1), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%src] : tensor<516xi4>
    %dst = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 2 + s0 + 1), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%i]
    %ins = tensor.insert %x into %it[%dst] : tensor<512xi4>
    scf.yield %ins : tensor<512xi4>
  }
  func.return %r : tensor<512xi4>
}

// -----

// An embedding row read in a lane loop: the row index is loaded, cast and clamped in the loop, from
// values defined outside it. That work is hoisted first (vectorize_elementwise.hoist_invariants), so the
// read's other operands are defined outside the loop and it becomes one vector read of the row.
// CHECK-LABEL: func.func @gather_row_in_loop(
// CHECK:         %[[ID:.*]] = tensor.extract %ids[%tid] : tensor<256xi64>
// CHECK-NEXT:    %[[ROW:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK:         %[[LO:.*]] = arith.maxsi
// CHECK:         %[[RD:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[lane]{r0} -> (r0 * 64 + lane), domain: th_x in [0, 255], lane in [0, 15], r0 in [0, 511]">(%tid)[%{{.*}}, %[[LO]]]
// CHECK:         %[[V:.*]] = vector.transfer_read %table[%[[RD]]], %{{.*}} {in_bounds = [true]} : tensor<32768xf32>, vector<16xf32>
// CHECK:         scf.for
// CHECK-NOT:       tensor.extract
// CHECK:           vector.extract %[[V]][%i]
// CHECK:         vector.transfer_write %{{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<16384xf32>
func.func @gather_row_in_loop(%tid: index, %ids: tensor<256xi64>, %table: tensor<32768xf32>, %out: tensor<16384xf32>) -> tensor<16384xf32> {
  %c0 = arith.constant 0 : index
  %c16 = arith.constant 16 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c16 step %c1 iter_args(%it = %out) -> (tensor<16384xf32>) {
    %id = tensor.extract %ids[%tid] : tensor<256xi64>
    %row = arith.index_cast %id : i64 to index
    %c511 = arith.constant 511 : index
    %hi = arith.minsi %row, %c511 : index
    %lo = arith.maxsi %hi, %c0 : index
    %src = xla.apply_indexing #xla.indexing_map<"(th_x)[lane]{r0} -> (r0 * 64 + lane), domain: th_x in [0, 255], lane in [0, 15], r0 in [0, 511]">(%tid)[%i, %lo]
    %x = tensor.extract %table[%src] : tensor<32768xf32>
    %dst = xla.apply_indexing #xla.indexing_map<"(th_x)[lane] -> (th_x * 64 + lane), domain: th_x in [0, 255], lane in [0, 15]">(%tid)[%i]
    %ins = tensor.insert %x into %it[%dst] : tensor<16384xf32>
    scf.yield %ins : tensor<16384xf32>
  }
  func.return %r : tensor<16384xf32>
}

// -----

// A masked lane loop carrying a scalar (a reduce-window's min over a window of 2 running into high
// padding): the masked-off lanes read 0, which is no reducer's neutral value, so the accumulator takes
// the body's value only in the lanes the mask keeps and keeps its own in the others (the guard's else).
// CHECK-LABEL: func.func @masked_min_window(
// CHECK:         %[[END:.*]] = xla.apply_indexing #xla.indexing_map<"(d0)[s0] -> (-d0 - s0 + 5)
// CHECK:         %[[MASK:.*]] = vector.create_mask %[[END]] : vector<2xi1>
// CHECK:         %[[V:.*]] = vector.transfer_read %in[%{{.*}}], %{{.*}}, %[[MASK]] {in_bounds = [true]} : tensor<5xi32>, vector<2xi32>
// CHECK:         scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (i32)
// CHECK:           %[[X:.*]] = vector.extract %[[V]][%[[K]]] : i32 from vector<2xi32>
// CHECK:           %[[MIN:.*]] = arith.minsi %[[ACC]], %[[X]] : i32
// CHECK:           %[[ON:.*]] = arith.cmpi slt, %[[K]], %[[END]] : index
// CHECK:           %[[NEXT:.*]] = arith.select %[[ON]], %[[MIN]], %[[ACC]] : i32
// CHECK:           scf.yield %[[NEXT]] : i32
func.func @masked_min_window(%o: index, %in: tensor<5xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %init = arith.constant 2147483647 : i32
  %r = scf.for %k = %c0 to %c2 step %c1 iter_args(%acc = %init) -> (i32) {
    %j = xla.apply_indexing #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 4], s0 in [0, 1]">(%o)[%k]
    %lo = arith.cmpi sge, %j, %c0 : index
    %hi = arith.cmpi sle, %j, %c4 : index
    %ok = arith.andi %lo, %hi : i1
    %v = scf.if %ok -> (i32) {
      %x = tensor.extract %in[%j] : tensor<5xi32>
      %m = arith.minsi %acc, %x : i32
      scf.yield %m : i32
    } else {
      scf.yield %acc : i32
    }
    scf.yield %v : i32
  }
  func.return %r : i32
}

// -----

// A reversed run (jnp.flip, the reverse in a fusion): lane s0 reads element 63 - th_x * 4 - s0. It is read
// as one vector from where the run starts in memory (the index at s0 = 3) and its lanes reversed, so the
// math on it can be vectorized too; it was read element by element, and a loop of scalar sines was
// unrolled into ~100 KB of IR per lane group.
// CHECK-LABEL: func.func @reversed(
// CHECK:         %[[C3:.*]] = arith.constant 3 : index
// CHECK:         %[[LO:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (-s0 - th_x * 4 + 63){{.*}}">(%tid)[%[[C3]]]
// CHECK:         %[[V:.*]] = vector.transfer_read %in[%[[LO]]], %{{.*}} {in_bounds = [true]} : tensor<64xf32>, vector<4xf32>
// CHECK:         %[[R:.*]] = vector.shuffle %[[V]], %[[V]] [3, 2, 1, 0] : vector<4xf32>, vector<4xf32>
// CHECK:         scf.for
// CHECK-NOT:       tensor.extract
// CHECK:           vector.extract %[[R]][%i]
func.func @reversed(%tid: index, %in: tensor<64xf32>, %out: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<64xf32>) {
    %src = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (-(th_x * 4) - s0 + 63), domain: th_x in [0, 15], s0 in [0, 3]">(%tid)[%i]
    %x = tensor.extract %in[%src] : tensor<64xf32>
    %y = math.sin %x : f32
    %dst = xla.apply_indexing
        #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 15], s0 in [0, 3]">(%tid)[%i]
    %ins = tensor.insert %y into %it[%dst] : tensor<64xf32>
    scf.yield %ins : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
