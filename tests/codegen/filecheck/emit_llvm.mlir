// RUN: hlocc-opt %s --split-input-file --emit-llvm | filecheck %s

// `--emit-llvm` translates the lowered kernel IR (after lower-tensors and lower-xla-to-arith) to LLVM IR
// with codegen/to_llvm.py. `index` is i64, bf16 is stored as i16, vectors are LLVM vectors.

// A kernel entry function (one that reads gpu.thread_id / gpu.block_id) becomes an internal always_inline
// function whose two trailing i64 parameters are the thread id and the block id; the caller (the CPU
// backend's block loop, the NVPTX wrapper) supplies them. Buffer parameters are noalias. A vector
// llvm.load / llvm.store is one LLVM vector load / store; math.absf on vector<16xf32> is the vector
// intrinsic llvm.fabs.v16f32, which the CPU backend's LLVM maps to SIMD instructions.
// CHECK:       define internal void @"abs"(ptr noalias %[[IN:".1"]], ptr noalias %[[OUT:".2"]], i64 %[[TID:".3"]], i64 %[[BID:".4"]]) alwaysinline
// CHECK:         %[[T:.*]] = mul i64 %[[TID]], 16
// CHECK-NEXT:    %[[B:.*]] = mul i64 %[[BID]], 2048
// CHECK-NEXT:    %[[OFS:.*]] = add i64 %[[T]], %[[B]]
// CHECK-NEXT:    %[[P:.*]] = getelementptr inbounds float, ptr %[[IN]], i64 %[[OFS]]
// CHECK-NEXT:    %[[V:.*]] = load <16 x float>, ptr %[[P]], align 4
// CHECK-NEXT:    %[[A:.*]] = call <16 x float> @"llvm.fabs.v16f32"(<16 x float> %[[V]])
// CHECK-NEXT:    %[[Q:.*]] = getelementptr inbounds float, ptr %[[OUT]], i64 %[[OFS]]
// CHECK-NEXT:    store <16 x float> %[[A]], ptr %[[Q]], align 4
// CHECK-NEXT:    ret void

// A private function is internal and takes no ids. The primitive math ops are intrinsics (no libm call).
// CHECK-LABEL: define internal float @"helper"(float %".1")
// CHECK-NEXT:  {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    %[[S:.*]] = call float @"llvm.sqrt.f32"(float %".1")
// CHECK-NEXT:    ret float %[[S]]
// CHECK:       declare <16 x float> @"llvm.fabs.v16f32"(<16 x float> %".1")
// CHECK:       declare float @"llvm.sqrt.f32"(float %".1")
func.func @abs(%in: !llvm.ptr, %out: !llvm.ptr) {
  %tid = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %bid = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 15 : index]} : () -> index
  %c16 = arith.constant 16 : index
  %c2048 = arith.constant 2048 : index
  %0 = arith.muli %tid, %c16 : index
  %1 = arith.muli %bid, %c2048 : index
  %2 = arith.addi %0, %1 : index
  %3 = arith.index_cast %2 : index to i64
  %p = llvm.getelementptr inbounds %in[%3] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  %v = llvm.load %p : !llvm.ptr -> vector<16xf32>
  %a = math.absf %v : vector<16xf32>
  %q = llvm.getelementptr inbounds %out[%3] : (!llvm.ptr, i64) -> !llvm.ptr, f32
  llvm.store %a, %q : vector<16xf32>, !llvm.ptr
  func.return
}
func.func private @helper(%x: f32) -> f32 {
  %s = math.sqrt %x : f32
  func.return %s : f32
}

// -----

// A dense constant (a global after lower-tensors) is a private constant array, 64-byte aligned. A loop
// becomes a header with a phi per induction variable and loop-carried value, a body and an exit.
// CHECK:       @"constant_0" = private constant [4 x float] [float 0x3ff0000000000000, float 0x4000000000000000, float 0x4008000000000000, float 0x4010000000000000], align 64
// CHECK:       define float @"sum"()
// CHECK:       for.header:
// CHECK-NEXT:    %[[IV:"iv"]] = phi  i64 [0, %"entry"], [%[[NEXT:.*]], %"for.body"]
// CHECK-NEXT:    %[[ACC:.*]] = phi  float [{{ *}}0x0, %"entry"], [%[[ADD:.*]], %"for.body"]
// CHECK-NEXT:    %[[CMP:.*]] = icmp slt i64 %[[IV]], 4
// CHECK-NEXT:    br i1 %[[CMP]], label %"for.body", label %"for.exit"
// CHECK:       for.body:
// CHECK-NEXT:    %[[P:.*]] = getelementptr inbounds float, {{.*}} @"constant_0", i64 %[[IV]]
// CHECK-NEXT:    %[[X:.*]] = load float, {{.*}} %[[P]], align 4
// CHECK-NEXT:    %[[ADD]] = fadd float %[[ACC]], %[[X]]
// CHECK-NEXT:    %[[NEXT]] = add i64 %[[IV]], 1
// CHECK-NEXT:    br label %"for.header"
// CHECK:       for.exit:
// CHECK-NEXT:    ret float %[[ACC]]
func.func @sum() -> f32 {
  %table = llvm.mlir.addressof @constant_0 : !llvm.ptr
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.000000e+00 : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %zero) -> (f32) {
    %j = arith.index_cast %i : index to i64
    %p = llvm.getelementptr inbounds %table[%j] : (!llvm.ptr, i64) -> !llvm.ptr, f32
    %x = llvm.load %p : !llvm.ptr -> f32
    %s = arith.addf %acc, %x : f32
    scf.yield %s : f32
  }
  func.return %r : f32
}
llvm.mlir.global private constant @constant_0(dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>) {addr_space = 0 : i32} : !llvm.array<4 x f32>
