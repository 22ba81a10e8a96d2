// RUN: hlocc-opt %s --emit-llvm | filecheck %s

// On the CPU, a vector trunci(shrui(x, 16)) from i32 to i16 that is only stored (the last step of
// rounding f32 to bf16 for a kernel's output) is the high halves of x's lanes: a bitcast to twice
// the lanes and a shuffle of the odd (little-endian high) ones, one vpermt2w per two registers on
// x86. A truncation that is widened again stays lshr + trunc, which LLVM folds with the zext + shl
// into one and. (The GPU translation, LlvmTranslator(gpu=True), always emits lshr + trunc.)
// CHECK-LABEL: define void @"store"(<4 x i32> %".1", ptr noalias %".2")
// CHECK:         %[[H:.*]] = bitcast <4 x i32> %".1" to <8 x i16>
// CHECK-NEXT:    %[[T:.*]] = shufflevector <8 x i16> %[[H]], <8 x i16> {{.*}}, <4 x i32> <i32 1, i32 3, i32 5, i32 7>
// CHECK-NEXT:    store <4 x i16> %[[T]], ptr %".2"
func.func @store(%x: vector<4xi32>, %out: !llvm.ptr) {
  %c16 = arith.constant dense<16> : vector<4xi32>
  %s = arith.shrui %x, %c16 : vector<4xi32>
  %t = xla.trunci %s : vector<4xi32> to vector<4xi16>
  %b = arith.bitcast %t : vector<4xi16> to vector<4xbf16>
  llvm.store %b, %out : vector<4xbf16>, !llvm.ptr
  func.return
}

// CHECK-LABEL: define <4 x i32> @"widened_again"(<4 x i32> %".1")
// CHECK-NOT:     shufflevector
// CHECK:         %[[S:.*]] = lshr <4 x i32> %".1", <i32 16, i32 16, i32 16, i32 16>
// CHECK-NEXT:    trunc <4 x i32> %[[S]] to <4 x i16>
func.func @widened_again(%x: vector<4xi32>) -> vector<4xi32> {
  %c16 = arith.constant dense<16> : vector<4xi32>
  %s = arith.shrui %x, %c16 : vector<4xi32>
  %t = xla.trunci %s : vector<4xi32> to vector<4xi16>
  %w = xla.extui %t : vector<4xi16> to vector<4xi32>
  func.return %w : vector<4xi32>
}
