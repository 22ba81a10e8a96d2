// The warp-collective matrix ops (codegen/ir/warp_ops.py) survive parse -> verify -> print.
// RUN: hlocc-opt %s --passes verify,verify | filecheck %s

// CHECK-LABEL: func.func @fragments
func.func @fragments(%s: tensor<512xbf16>, %i: index, %c: vector<4xf32>) -> vector<4xf32> {
  // CHECK: %a = xla.ldmatrix %s[%i] {count = 4 : i64} : tensor<512xbf16> -> vector<4xi32>
  %a = xla.ldmatrix %s[%i] {count = 4 : i64} : tensor<512xbf16> -> vector<4xi32>
  // CHECK: %b = xla.ldmatrix %s[%i] {count = 2 : i64, trans} : tensor<512xbf16> -> vector<2xi32>
  %b = xla.ldmatrix %s[%i] {count = 2 : i64, trans} : tensor<512xbf16> -> vector<2xi32>
  // CHECK: %d = xla.mma_sync %a, %b, %c {element = "bf16"} : vector<4xi32>, vector<2xi32>, vector<4xf32> -> vector<4xf32>
  %d = xla.mma_sync %a, %b, %c {element = "bf16"} : vector<4xi32>, vector<2xi32>, vector<4xf32> -> vector<4xf32>
  func.return %d : vector<4xf32>
}

// CHECK-LABEL: func.func @async_copies
func.func @async_copies(%s: tensor<512xbf16>, %g: tensor<64x32xbf16>, %i: index, %j: index, %v: i1) -> tensor<512xbf16> {
  // CHECK: %c = xla.cp_async %s[%i], %g[%j] if %v : tensor<512xbf16>, tensor<64x32xbf16> -> tensor<512xbf16>
  %c = xla.cp_async %s[%i], %g[%j] if %v : tensor<512xbf16>, tensor<64x32xbf16> -> tensor<512xbf16>
  // CHECK-NEXT: xla.cp_async_commit
  xla.cp_async_commit
  // CHECK-NEXT: %w = xla.cp_async_wait %c {pending = 1 : i64} : tensor<512xbf16> -> tensor<512xbf16>
  %w = xla.cp_async_wait %c {pending = 1 : i64} : tensor<512xbf16> -> tensor<512xbf16>
  func.return %w : tensor<512xbf16>
}
