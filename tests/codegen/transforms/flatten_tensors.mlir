// RUN: hlocc-opt %s --split-input-file --passes flatten-tensors | filecheck %s

// `flatten-tensors` makes every tensor 1-D (seed 000 "Flatten tensors"): an N-d access becomes an access at
// the row-major linear index, so that every access is an offset into memory as it is laid out.

// Indices that are exactly the results of one xla.apply_indexing: the linearisation is composed into that
// map and simplified, here back to the thread id itself ((d0 floordiv 12) * 12 + ((d0 floordiv 4) mod 3) * 4
// + d0 mod 4 = d0). The old 3-result apply_indexing is left dead for cse/dce (the pipeline runs them next).
// Function arguments and results become 1-D with 2 * 3 * 4 = 24 elements.
// CHECK-LABEL: func.func @composed(%tid: index, %in: tensor<24xf32>, %out: tensor<24xf32>) -> tensor<24xf32> {
// CHECK-NEXT:    %a, %b, %c = xla.apply_indexing
// CHECK-NEXT:    %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0), domain: d0 in [0, 23]">(%tid)
// CHECK-NEXT:    %x = tensor.extract %in[%[[I]]] : tensor<24xf32>
// CHECK-NEXT:    %[[J:.*]] = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0), domain: d0 in [0, 23]">(%tid)
// CHECK-NEXT:    %r = tensor.insert %x into %out[%[[J]]] : tensor<24xf32>
// CHECK-NEXT:    func.return %r : tensor<24xf32>
func.func @composed(%tid: index, %in: tensor<2x3x4xf32>, %out: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %a, %b, %c = xla.apply_indexing
      #xla.indexing_map<"(d0) -> (d0 floordiv 12, (d0 floordiv 4) mod 3, d0 mod 4), domain: d0 in [0, 23]">(%tid)
  %x = tensor.extract %in[%a, %b, %c] : tensor<2x3x4xf32>
  %r = tensor.insert %x into %out[%a, %b, %c] : tensor<2x3x4xf32>
  func.return %r : tensor<2x3x4xf32>
}

// -----

// The same with a range variable (a thread's 4 consecutive elements, the loop emitter's map): the linear
// index is th_x * 4 + s0.
// CHECK-LABEL: func.func @composed_with_symbol(
// CHECK-SAME:      %in: tensor<512xf32>
// CHECK:         %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%s]
// CHECK-NEXT:    %x = tensor.extract %in[%[[I]]] : tensor<512xf32>
func.func @composed_with_symbol(%tid: index, %s: index, %in: tensor<4x128xf32>) -> f32 {
  %a, %b = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x floordiv 32, (th_x mod 32) * 4 + s0),"
                                                "domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%s]
  %x = tensor.extract %in[%a, %b] : tensor<4x128xf32>
  func.return %x : f32
}

// -----

// Indices from anywhere else: a new apply_indexing of the row-major map, its domain the tensor's shape.
// CHECK-LABEL: func.func @plain_indices(%in: tensor<6xf32>, %i: index, %j: index) -> f32 {
// CHECK-NEXT:    %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 3 + d1), domain: d0 in [0, 1], d1 in [0, 2]">(%i, %j)
// CHECK-NEXT:    %x = tensor.extract %in[%[[I]]] : tensor<6xf32>
func.func @plain_indices(%in: tensor<2x3xf32>, %i: index, %j: index) -> f32 {
  %x = tensor.extract %in[%i, %j] : tensor<2x3xf32>
  func.return %x : f32
}

// -----

// A rank-0 tensor becomes tensor<1xT>, accessed at index 0.
// CHECK-LABEL: func.func @rank0(%in: tensor<1xf32>, %out: tensor<1xf32>) -> tensor<1xf32> {
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %x = tensor.extract %in[%[[Z]]] : tensor<1xf32>
// CHECK-NEXT:    %[[Z2:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %r = tensor.insert %x into %out[%[[Z2]]] : tensor<1xf32>
// CHECK-NEXT:    func.return %r : tensor<1xf32>
func.func @rank0(%in: tensor<f32>, %out: tensor<f32>) -> tensor<f32> {
  %x = tensor.extract %in[] : tensor<f32>
  %r = tensor.insert %x into %out[] : tensor<f32>
  func.return %r : tensor<f32>
}

// -----

// Dense tensor constants keep their elements in row-major order (a splat stays a splat).
// CHECK-LABEL: func.func @constants(%i: index, %j: index) -> (f32, bf16, i32) {
// CHECK-NEXT:    %c = arith.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00]> : tensor<6xf32>
// CHECK-NEXT:    %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 3 + d1), domain: d0 in [0, 1], d1 in [0, 2]">(%i, %j)
// CHECK-NEXT:    %x = tensor.extract %c[%[[I]]] : tensor<6xf32>
// CHECK-NEXT:    %s = arith.constant dense<2.000000e+00> : tensor<6xbf16>
// CHECK-NEXT:    %[[J:.*]] = xla.apply_indexing
// CHECK-NEXT:    %y = tensor.extract %s[%[[J]]] : tensor<6xbf16>
// CHECK-NEXT:    %k = arith.constant dense<7> : tensor<1xi32>
// CHECK-NEXT:    %[[Z:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %z = tensor.extract %k[%[[Z]]] : tensor<1xi32>
func.func @constants(%i: index, %j: index) -> (f32, bf16, i32) {
  %c = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %x = tensor.extract %c[%i, %j] : tensor<2x3xf32>
  %s = arith.constant dense<2.0> : tensor<2x3xbf16>
  %y = tensor.extract %s[%i, %j] : tensor<2x3xbf16>
  %k = arith.constant dense<7> : tensor<i32>
  %z = tensor.extract %k[] : tensor<i32>
  func.return %x, %y, %z : f32, bf16, i32
}

// -----

// Every value of tensor type changes type: function signatures (of callees too), loop-carried values,
// scf.if results, the operands of calls.
// CHECK-LABEL: func.func @signatures(%out: tensor<6xf32>, %cond: i1, %v: f32) -> tensor<6xf32> {
// CHECK:         %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%it = %out) -> (tensor<6xf32>) {
// CHECK-NEXT:      %t = scf.if %cond -> (tensor<6xf32>) {
// CHECK-NEXT:        %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 * 3 + d1), domain: d0 in [0, 1], d1 in [0, 2]">(%i, %c1)
// CHECK-NEXT:        %ins = tensor.insert %v into %it[%[[I]]] : tensor<6xf32>
// CHECK-NEXT:        scf.yield %ins : tensor<6xf32>
// CHECK-NEXT:      } else {
// CHECK-NEXT:        scf.yield %it : tensor<6xf32>
// CHECK:         %s = xla.pure_call @callee(%r) : (tensor<6xf32>) -> f32
// CHECK:       func.func private @callee(%t: tensor<6xf32>) -> f32 {
// CHECK:         tensor.extract %t[%{{.*}}] : tensor<6xf32>
func.func @signatures(%out: tensor<2x3xf32>, %cond: i1, %v: f32) -> tensor<2x3xf32> {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c2 step %c1 iter_args(%it = %out) -> (tensor<2x3xf32>) {
    %t = scf.if %cond -> (tensor<2x3xf32>) {
      %ins = tensor.insert %v into %it[%i, %c1] : tensor<2x3xf32>
      scf.yield %ins : tensor<2x3xf32>
    } else {
      scf.yield %it : tensor<2x3xf32>
    }
    scf.yield %t : tensor<2x3xf32>
  }
  %s = xla.pure_call @callee(%r) : (tensor<2x3xf32>) -> f32
  func.return %r : tensor<2x3xf32>
}
func.func private @callee(%t: tensor<2x3xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %x = tensor.extract %t[%c0, %c0] : tensor<2x3xf32>
  func.return %x : f32
}

// -----

// A chain: the index of a 1-D read is a map of some results of another apply_indexing (the elemental
// emitter's broadcast read of the loop map's last coordinate). The chain is folded into one map of the
// loop variables, so that vectorize-loads-stores sees the read is contiguous in s0; the map's unused
// operand (%a) goes. Without the fold the broadcast operand was read lane by lane, and the whole vector
// loop was unrolled (32 scalar copies of the kernel body for every later pass to process).
// CHECK-LABEL: func.func @chain(
// CHECK:         %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> ((th_x mod 32) * 4 + s0), domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%s]
// CHECK-NEXT:    %x = tensor.extract %in[%[[I]]] : tensor<128xf32>
func.func @chain(%tid: index, %s: index, %in: tensor<128xf32>) -> f32 {
  %a, %b = xla.apply_indexing #xla.indexing_map<"(th_x)[s0] -> (th_x floordiv 32, (th_x mod 32) * 4 + s0),"
                                                "domain: th_x in [0, 127], s0 in [0, 3]">(%tid)[%s]
  %i = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d1), domain: d0 in [0, 3], d1 in [0, 127]">(%a, %b)
  %x = tensor.extract %in[%i] : tensor<128xf32>
  func.return %x : f32
}

// -----

// Operands from two different apply_indexings: no single map to fold into; the access is left as it is.
// CHECK-LABEL: func.func @no_chain(
// CHECK:         %i = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 + d1), domain: d0 in [0, 63], d1 in [0, 63]">(%a, %b)
// CHECK-NEXT:    %x = tensor.extract %in[%i] : tensor<128xf32>
func.func @no_chain(%tid: index, %in: tensor<128xf32>) -> f32 {
  %a = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0 floordiv 2), domain: d0 in [0, 127]">(%tid)
  %b = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0 mod 64), domain: d0 in [0, 127]">(%tid)
  %i = xla.apply_indexing #xla.indexing_map<"(d0, d1) -> (d0 + d1), domain: d0 in [0, 63], d1 in [0, 63]">(%a, %b)
  %x = tensor.extract %in[%i] : tensor<128xf32>
  func.return %x : f32
}

// -----

// A chain of apply_indexings (an embedding row read through the reshapes between it and the loop, as the
// gather emitter writes it): folded to its start, the loop variables, with the row index as a runtime
// variable. The folded read is contiguous in the lane (vectorize-loads-stores then reads a vector); range
// variables the composition no longer uses stay as operands.
// CHECK-LABEL: func.func @gather_row_chain(
// CHECK:         %[[I:.*]] = xla.apply_indexing #xla.indexing_map<"(th_x)[j, lane]{r0} -> (r0 * 64 + j * 16 + lane), domain: th_x in [0, 255], j in [0, 3], lane in [0, 15], r0 in [0, 511]">(%tid)[%j, %lane, %row]
// CHECK-NEXT:    %x = tensor.extract %table[%[[I]]] : tensor<32768xf32>
func.func @gather_row_chain(%tid: index, %j: index, %lane: index, %row: index, %table: tensor<512x64xf32>) -> f32 {
  %a, %b, %c = xla.apply_indexing #xla.indexing_map<"(th_x)[j, lane] -> (th_x floordiv 16, th_x mod 16, j * 16 + lane),"
                                                    "domain: th_x in [0, 255], j in [0, 3], lane in [0, 15]">(%tid)[%j, %lane]
  %d, %e = xla.apply_indexing #xla.indexing_map<"(d0, d1, d2) -> (d0 * 16 + d1, d2),"
                                                "domain: d0 in [0, 15], d1 in [0, 15], d2 in [0, 63]">(%a, %b, %c)
  %r, %k = xla.apply_indexing #xla.indexing_map<"(d0, d1){r0} -> (r0, d1),"
                                                "domain: d0 in [0, 255], d1 in [0, 63], r0 in [0, 511]">(%d, %e)[%row]
  %x = tensor.extract %table[%r, %k] : tensor<512x64xf32>
  func.return %x : f32
}
