// RUN: hlocc-opt %s --vector-isa avx512 --split-input-file --passes lower-matmul | filecheck %s

// `lower-matmul`: an `xla.matmul` becomes scf.for loops over b, m and n carrying the output tensor,
// an inner scf.for over k carrying the accumulator (operands read through their maps and widened to
// the accumulator type), the epilogue region inlined, and one tensor.insert per element.

// A bf16 matmul with a transposed rhs (its map reads rhs[n, k]) and a bias epilogue.
// CHECK-LABEL: func.func @bias(
// CHECK:         %{{.*}} = scf.for %b = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[OB:.*]] = %out) -> (tensor<4x5xbf16>) {
// CHECK:           scf.for %m = {{.*}} iter_args(%[[OM:.*]] = %[[OB]])
// CHECK:             scf.for %n = {{.*}} iter_args(%[[ON:.*]] = %[[OM]])
// CHECK:               %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:               %[[ACC:.*]] = scf.for %k = {{.*}} iter_args(%[[A:.*]] = %[[ZERO]]) -> (f32) {
// CHECK-NEXT:            %[[L0:.*]], %[[L1:.*]] = xla.apply_indexing #xla.indexing_map<"(b, m, n, k) -> (m, k), {{.*}}">(%b, %m, %n, %k)
// CHECK-NEXT:            %[[X:.*]] = tensor.extract %lhs[%[[L0]], %[[L1]]] : tensor<4x3xbf16>
// CHECK-NEXT:            %[[XF:.*]] = arith.extf %[[X]] : bf16 to f32
// CHECK-NEXT:            %[[R0:.*]], %[[R1:.*]] = xla.apply_indexing #xla.indexing_map<"(b, m, n, k) -> (n, k), {{.*}}">(%b, %m, %n, %k)
// CHECK-NEXT:            %[[Y:.*]] = tensor.extract %rhs[%[[R0]], %[[R1]]] : tensor<5x3xbf16>
// CHECK-NEXT:            %[[YF:.*]] = arith.extf %[[Y]] : bf16 to f32
// CHECK-NEXT:            %[[P:.*]] = arith.mulf %[[XF]], %[[YF]] : f32
// CHECK-NEXT:            %[[S:.*]] = arith.addf %[[A]], %[[P]] : f32
// CHECK-NEXT:            scf.yield %[[S]] : f32
// CHECK-NEXT:          }
// CHECK-NEXT:          %t = arith.truncf %[[ACC]] : f32 to bf16
// CHECK-NEXT:          %bv = tensor.extract %bias[%n] : tensor<5xbf16>
// CHECK-NEXT:          %v = arith.addf %t, %bv : bf16
// CHECK-NEXT:          %[[O0:.*]], %[[O1:.*]] = xla.apply_indexing #xla.indexing_map<"(b, m, n, k) -> (m, n), {{.*}}">(%b, %m, %n, %{{.*}})
// CHECK-NEXT:          %[[INS:.*]] = tensor.insert %v into %[[ON]][%[[O0]], %[[O1]]] : tensor<4x5xbf16>
// CHECK-NEXT:          scf.yield %[[INS]] : tensor<4x5xbf16>
// The loops over elements stay rolled (unroll-loops leaves them); the k loop may unroll.
// CHECK-NEXT:        } {xla.keep_rolled}
// CHECK-NEXT:        scf.yield
// CHECK-NEXT:      } {xla.keep_rolled}
// CHECK-NEXT:      scf.yield
// CHECK-NEXT:    } {xla.keep_rolled}
// CHECK-NOT:     xla.matmul
func.func @bias(%lhs: tensor<4x3xbf16>, %rhs: tensor<5x3xbf16>, %bias: tensor<5xbf16>, %out: tensor<4x5xbf16>) -> tensor<4x5xbf16> {
  %r = xla.matmul %lhs[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 3], n in [0, 4], k in [0, 2]">],
                  %rhs[#xla.indexing_map<"(b, m, n, k) -> (n, k), domain: b in [0, 0], m in [0, 3], n in [0, 4], k in [0, 2]">]
         into %out[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 3], n in [0, 4], k in [0, 2]">]
         sizes [1, 4, 5, 3] : (tensor<4x3xbf16>, tensor<5x3xbf16>, tensor<4x5xbf16>) -> tensor<4x5xbf16> {
  ^bb0(%acc: f32, %b: index, %m: index, %n: index):
    %t = arith.truncf %acc : f32 to bf16
    %bv = tensor.extract %bias[%n] : tensor<5xbf16>
    %v = arith.addf %t, %bv : bf16
    xla.yield %v : bf16
  }
  func.return %r : tensor<4x5xbf16>
}

// -----

// K = 0: no k loop, the epilogue sees a zero accumulator.
// CHECK-LABEL: func.func @empty_contraction(
// CHECK:         %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NOT:     scf.for %k
// CHECK:         tensor.insert %[[ZERO]] into
func.func @empty_contraction(%lhs: tensor<2x0xf32>, %rhs: tensor<0x3xf32>, %out: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = xla.matmul %lhs[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 0]">],
                  %rhs[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 0]">]
         into %out[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 0]">]
         sizes [1, 2, 3, 0] : (tensor<2x0xf32>, tensor<0x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%acc: f32, %b: index, %m: index, %n: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<2x3xf32>
}

// -----

// A K block (`k_block`, set by transform.hlocc.tile): the k loop is split into KC-sized blocks, the
// last one clipped (7 = 3 + 3 + 1).
// CHECK-LABEL: func.func @k_blocks(
// CHECK:         %[[K:.*]] = arith.constant 7 : index
// CHECK-NEXT:    %[[KC:.*]] = arith.constant 3 : index
// CHECK-NEXT:    scf.for %kc = %{{.*}} to %[[K]] step %[[KC]] iter_args(
// CHECK:           %[[END:.*]] = arith.addi %kc, %{{.*}} : index
// CHECK:           %[[CLIP:.*]] = arith.minui %[[END]], %{{.*}} : index
// CHECK:           scf.for %k = %kc to %[[CLIP]] step
func.func @k_blocks(%lhs: tensor<2x7xf32>, %rhs: tensor<7x3xf32>, %out: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = xla.matmul %lhs[#xla.indexing_map<"(b, m, n, k) -> (m, k), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 6]">],
                  %rhs[#xla.indexing_map<"(b, m, n, k) -> (k, n), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 6]">]
         into %out[#xla.indexing_map<"(b, m, n, k) -> (m, n), domain: b in [0, 0], m in [0, 1], n in [0, 2], k in [0, 6]">]
         sizes [1, 2, 3, 7] schedule {k_block = 3 : i64} : (tensor<2x7xf32>, tensor<7x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%acc: f32, %b: index, %m: index, %n: index):
    xla.yield %acc : f32
  }
  func.return %r : tensor<2x3xf32>
}
