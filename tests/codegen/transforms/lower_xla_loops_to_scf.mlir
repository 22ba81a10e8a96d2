// RUN: hlocc-opt %s --split-input-file --passes lower-xla-loops-to-scf | filecheck %s

// `lower-xla-loops-to-scf`: an `xla.loop` becomes one `scf.for` per range variable of its indexing map
// (bounds from the map's domain, step 1), carrying the loop's iter_args. The map's results, which the
// body received as block arguments, are computed in the body with `xla.apply_indexing`.

// A map without constraints: the body runs at every point, no check.
// CHECK-LABEL: func.func @no_constraints(%tid: index, %out: tensor<64xf32>) -> tensor<64xf32> {
// CHECK:         %[[LB:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[UB:.*]] = arith.constant 4 : index
// CHECK-NEXT:    %[[STEP:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %r = scf.for %i = %[[LB]] to %[[UB]] step %[[STEP]] iter_args(%it = %out) -> (tensor<64xf32>) {
// CHECK-NEXT:      %idx = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 15], s0 in [0, 3]">(%tid)[%i]
// CHECK-NEXT:      %ins = tensor.insert %c into %it[%idx] : tensor<64xf32>
// CHECK-NEXT:      scf.yield %ins : tensor<64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : tensor<64xf32>
// CHECK-NOT:     xla.loop
func.func @no_constraints(%tid: index, %out: tensor<64xf32>) -> tensor<64xf32> {
  %c = arith.constant 1.000000e+00 : f32
  %r = xla.loop (%tid)[%i] -> (%idx)
      in #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 15], s0 in [0, 3]">
      iter_args(%it = %out) -> (tensor<64xf32>) {
    %ins = tensor.insert %c into %it[%idx] : tensor<64xf32>
    xla.yield %ins : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}

// -----

// Constraints guard the body with an `scf.if` (10 elements, 3 threads × 4: the last two points of thread 2
// are skipped; and only even s0): the constraint expressions are evaluated by one apply_indexing, an
// interval becomes `sge lo` and `sle hi`, a single value `eq`. A skipped iteration yields the iter_args
// unchanged. The map in the guarded body has no constraints left.
// CHECK-LABEL: func.func @constraints(%tid: index, %out: tensor<10xf32>) -> tensor<10xf32> {
// CHECK:         %r = scf.for %i = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%it = %out) -> (tensor<10xf32>) {
// CHECK-NEXT:      %[[C1:.*]], %[[C2:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0, s0 mod 2), domain: th_x in [0, 2], s0 in [0, 3]">(%tid)[%i]
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[GE:.*]] = arith.cmpi sge, %[[C1]], %[[ZERO]] : index
// CHECK-NEXT:      %[[NINE:.*]] = arith.constant 9 : index
// CHECK-NEXT:      %[[LE:.*]] = arith.cmpi sle, %[[C1]], %[[NINE]] : index
// CHECK-NEXT:      %[[EVEN:.*]] = arith.cmpi eq, %[[C2]], %[[ZERO]] : index
// CHECK-NEXT:      %[[AND:.*]] = arith.andi %[[GE]], %[[LE]] : i1
// CHECK-NEXT:      %[[IN:.*]] = arith.andi %[[AND]], %[[EVEN]] : i1
// CHECK-NEXT:      %[[IF:.*]] = scf.if %[[IN]] -> (tensor<10xf32>) {
// CHECK-NEXT:        %idx = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 2], s0 in [0, 3]">(%tid)[%i]
// CHECK-NEXT:        %ins = tensor.insert %c into %it[%idx] : tensor<10xf32>
// CHECK-NEXT:        scf.yield %ins : tensor<10xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %it : tensor<10xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %[[IF]] : tensor<10xf32>
// CHECK-NEXT:    }
func.func @constraints(%tid: index, %out: tensor<10xf32>) -> tensor<10xf32> {
  %c = arith.constant 1.000000e+00 : f32
  %r = xla.loop (%tid)[%i] -> (%idx)
      in #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0),"
                           "domain: th_x in [0, 2], s0 in [0, 3], th_x * 4 + s0 in [0, 9], s0 mod 2 in [0, 0]">
      iter_args(%it = %out) -> (tensor<10xf32>) {
    %ins = tensor.insert %c into %it[%idx] : tensor<10xf32>
    xla.yield %ins : tensor<10xf32>
  }
  func.return %r : tensor<10xf32>
}

// -----

// Two range variables: two nested scf.for, the first variable outermost. Every iter_arg (a tensor and a
// scalar sum here) is threaded through both loops; the outer loop yields the inner loop's results.
// CHECK-LABEL: func.func @nested
// CHECK:         %r, %r_1 = scf.for %i = %{{.*}} to %[[FOUR:.*]] step %{{.*}} iter_args(%it = %out, %sum = %acc) -> (tensor<4x8xf32>, f32) {
// CHECK-NEXT:      %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:      %[[EIGHT:.*]] = arith.constant 8 : index
// CHECK-NEXT:      %{{.*}} = arith.constant 1 : index
// CHECK-NEXT:      %[[T:.*]], %[[S:.*]] = scf.for %j = %{{.*}} to %[[EIGHT]] step %{{.*}} iter_args(%it_1 = %it, %sum_1 = %sum) -> (tensor<4x8xf32>, f32) {
// CHECK-NEXT:        %a, %b = xla.apply_indexing #xla.indexing_map<"(th_x)[s0, s1] -> (s1, s0), domain: th_x in [0, 0], s0 in [0, 3], s1 in [0, 7]">(%tid)[%i, %j]
// CHECK-NEXT:        %x = tensor.extract %in[%a, %b] : tensor<8x4xf32>
// CHECK-NEXT:        %ins = tensor.insert %x into %it_1[%a, %b] : tensor<4x8xf32>
// CHECK-NEXT:        %s = arith.addf %sum_1, %x : f32
// CHECK-NEXT:        scf.yield %ins, %s : tensor<4x8xf32>, f32
// CHECK-NEXT:      }
// CHECK-NEXT:      scf.yield %[[T]], %[[S]] : tensor<4x8xf32>, f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r, %r_1 : tensor<4x8xf32>, f32
func.func @nested(%tid: index, %in: tensor<8x4xf32>, %out: tensor<4x8xf32>, %acc: f32) -> (tensor<4x8xf32>, f32) {
  %r:2 = xla.loop (%tid)[%i, %j] -> (%a, %b)
      in #xla.indexing_map<"(th_x)[s0, s1] -> (s1, s0), domain: th_x in [0, 0], s0 in [0, 3], s1 in [0, 7]">
      iter_args(%it = %out, %sum = %acc) -> (tensor<4x8xf32>, f32) {
    %x = tensor.extract %in[%a, %b] : tensor<8x4xf32>
    %ins = tensor.insert %x into %it[%a, %b] : tensor<4x8xf32>
    %s = arith.addf %sum, %x : f32
    xla.yield %ins, %s : tensor<4x8xf32>, f32
  }
  func.return %r#0, %r#1 : tensor<4x8xf32>, f32
}

// -----

// No range variables: no loop at all, the body runs once in place.
// CHECK-LABEL: func.func @no_range_vars(%tid: index, %out: tensor<10xf32>) -> tensor<10xf32> {
// CHECK-NEXT:    %c = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %idx = xla.apply_indexing #xla.indexing_map<"(th_x) -> (th_x), domain: th_x in [0, 9]">(%tid)
// CHECK-NEXT:    %ins = tensor.insert %c into %out[%idx] : tensor<10xf32>
// CHECK-NEXT:    func.return %ins : tensor<10xf32>
func.func @no_range_vars(%tid: index, %out: tensor<10xf32>) -> tensor<10xf32> {
  %c = arith.constant 1.000000e+00 : f32
  %r = xla.loop (%tid)[] -> (%idx) in #xla.indexing_map<"(th_x) -> (th_x), domain: th_x in [0, 9]">
      iter_args(%it = %out) -> (tensor<10xf32>) {
    %ins = tensor.insert %c into %it[%idx] : tensor<10xf32>
    xla.yield %ins : tensor<10xf32>
  }
  func.return %r : tensor<10xf32>
}
