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
