// RUN: hlocc-opt %s --split-input-file --emit-llvm | filecheck %s

// `--emit-llvm` translates the lowered kernel IR (after lower-tensors and lower-xla-to-arith) to LLVM IR
// with codegen/llvm/. `index` is i64, bf16 is stored as i16, vectors are LLVM vectors.

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

// The xla stand-ins for arith ops on vectors are LLVM's vector compares, selects and casts (here the
// shape of lower-narrow-floats' bf16 rounding, on 16 lanes at once).
// CHECK-LABEL: define <16 x i16> @"round_to_bf16"(<16 x float> %".1")
// CHECK-NEXT:  {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    %[[B:.*]] = bitcast <16 x float> %".1" to <16 x i32>
// CHECK-NEXT:    %[[NAN:.*]] = fcmp uno <16 x float> %".1", %".1"
// CHECK-NEXT:    %[[R:.*]] = lshr <16 x i32> %[[B]], <i32 16, {{.*}}>
// CHECK-NEXT:    %[[S:.*]] = select <16 x i1> %[[NAN]], <16 x i32> <i32 32704, {{.*}}>, <16 x i32> %[[R]]
// CHECK-NEXT:    %[[T:.*]] = trunc <16 x i32> %[[S]] to <16 x i16>
// CHECK-NEXT:    ret <16 x i16> %[[T]]
// CHECK-LABEL: define <4 x i32> @"casts"(<4 x i8> %".1", <4 x float> %".2")
// CHECK:         %[[Z:.*]] = zext <4 x i8> %".1" to <4 x i32>
// CHECK-NEXT:    %[[X:.*]] = sext <4 x i8> %".1" to <4 x i32>
// CHECK-NEXT:    %[[F:.*]] = uitofp <4 x i32> %[[Z]] to <4 x float>
// CHECK-NEXT:    %[[G:.*]] = sitofp <4 x i32> %[[X]] to <4 x float>
// CHECK-NEXT:    %[[LT:.*]] = fcmp olt <4 x float> %[[F]], %[[G]]
// CHECK-NEXT:    %[[UN:.*]] = fcmp uno <4 x float> %".2", %".2"
// CHECK-NEXT:    %[[LE:.*]] = icmp ule <4 x i32> %[[Z]], %[[X]]
// CHECK-NEXT:    %[[M:.*]] = select <4 x i1> %[[LT]], <4 x float> %[[F]], <4 x float> %".2"
// CHECK-NEXT:    %[[I:.*]] = fptosi <4 x float> %[[M]] to <4 x i32>
// CHECK-NEXT:    %[[U:.*]] = fptoui <4 x float> %[[M]] to <4 x i32>
// CHECK-NEXT:    %[[C:.*]] = select <4 x i1> %[[UN]], <4 x i32> %[[I]], <4 x i32> %[[U]]
// CHECK-NEXT:    %[[D:.*]] = select <4 x i1> %[[LE]], <4 x i32> %[[C]], <4 x i32> %[[Z]]
// CHECK-NEXT:    ret <4 x i32> %[[D]]
func.func @round_to_bf16(%x: vector<16xf32>) -> vector<16xi16> {
  %b = arith.bitcast %x : vector<16xf32> to vector<16xi32>
  %nan = xla.cmpf uno, %x, %x : vector<16xf32>
  %c16 = arith.constant dense<16> : vector<16xi32>
  %r = arith.shrui %b, %c16 : vector<16xi32>
  %qnan = arith.constant dense<32704> : vector<16xi32>
  %s = xla.select %nan, %qnan, %r : vector<16xi1>, vector<16xi32>
  %t = xla.trunci %s : vector<16xi32> to vector<16xi16>
  func.return %t : vector<16xi16>
}
func.func @casts(%h: vector<4xi8>, %y: vector<4xf32>) -> vector<4xi32> {
  %z = xla.extui %h : vector<4xi8> to vector<4xi32>
  %x = xla.extsi %h : vector<4xi8> to vector<4xi32>
  %f = xla.uitofp %z : vector<4xi32> to vector<4xf32>
  %g = xla.sitofp %x : vector<4xi32> to vector<4xf32>
  %lt = xla.cmpf olt, %f, %g : vector<4xf32>
  %un = xla.cmpf uno, %y, %y : vector<4xf32>
  %le = xla.cmpi ule, %z, %x : vector<4xi32>
  %m = xla.select %lt, %f, %y : vector<4xi1>, vector<4xf32>
  %i = xla.fptosi %m : vector<4xf32> to vector<4xi32>
  %u = xla.fptoui %m : vector<4xf32> to vector<4xi32>
  %c = xla.select %un, %i, %u : vector<4xi1>, vector<4xi32>
  %d = xla.select %le, %c, %z : vector<4xi1>, vector<4xi32>
  func.return %d : vector<4xi32>
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

// -----

// complex<fN> is the struct {fN, fN}, loaded and stored whole (aligned as its parts, as numpy aligns
// complex64); complex.create is two insertvalues, complex.re / complex.im are extractvalues (LLVM's SROA
// folds them away). f4E2M1FN is an i4 (stored one per byte: a trunc from the loaded i8, then a bitcast
// that is no instruction).
// CHECK-LABEL: define void @"swap_parts"(ptr noalias %".1", ptr noalias %".2", i64 %".3")
// CHECK:         %[[P:.*]] = getelementptr inbounds {double, double}, ptr %".1", i64 %".3"
// CHECK-NEXT:    %[[Z:.*]] = load {double, double}, ptr %[[P]], align 8
// CHECK-NEXT:    %[[RE:.*]] = extractvalue {double, double} %[[Z]], 0
// CHECK-NEXT:    %[[IM:.*]] = extractvalue {double, double} %[[Z]], 1
// CHECK-NEXT:    %[[W0:.*]] = insertvalue {double, double} undef, double %[[IM]], 0
// CHECK-NEXT:    %[[W:.*]] = insertvalue {double, double} %[[W0]], double %[[RE]], 1
// CHECK-NEXT:    %[[Q:.*]] = getelementptr inbounds {double, double}, ptr %".2", i64 %".3"
// CHECK-NEXT:    store {double, double} %[[W]], ptr %[[Q]], align 8
// CHECK-LABEL: define i4 @"f4_from_byte"(i8 %".1")
// CHECK:         %[[T:.*]] = trunc i8 %".1" to i4
// CHECK-NEXT:    ret i4 %[[T]]
func.func @swap_parts(%in: !llvm.ptr, %out: !llvm.ptr, %i: i64) {
  %p = llvm.getelementptr inbounds %in[%i] : (!llvm.ptr, i64) -> !llvm.ptr, complex<f64>
  %z = llvm.load %p : !llvm.ptr -> complex<f64>
  %re = complex.re %z : complex<f64>
  %im = complex.im %z : complex<f64>
  %w = complex.create %im, %re : complex<f64>
  %q = llvm.getelementptr inbounds %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, complex<f64>
  llvm.store %w, %q : complex<f64>, !llvm.ptr
  func.return
}
func.func @f4_from_byte(%b: i8) -> f4E2M1FN {
  %t = arith.trunci %b : i8 to i4
  %f = arith.bitcast %t : i4 to f4E2M1FN
  func.return %f : f4E2M1FN
}

// -----

// vector.shuffle (the reductions' lane tree, emitters/reduce_partials.py `combine_lanes`, takes a
// vector's halves with it) is one shufflevector with the mask as an i32 vector constant.
// CHECK-LABEL: define <2 x float> @"upper_half"(<4 x float> %".1")
// CHECK:         %[[H:.*]] = shufflevector <4 x float> %".1", <4 x float> %".1", <2 x i32> <i32 2, i32 3>
// CHECK-NEXT:    ret <2 x float> %[[H]]
func.func @upper_half(%v: vector<4xf32>) -> vector<2xf32> {
  %h = vector.shuffle %v, %v [2, 3] : vector<4xf32>, vector<4xf32>
  func.return %h : vector<2xf32>
}

// -----

// vector.create_mask %k (vectorize_masked_lanes' lanes below k): k through an empty inline asm (LLVM must
// not know a constant mask: it would compute garbage in the lanes it knows dead, llvm/vector_ops.py),
// clamped to [0, lanes], then one compare of the lane numbers with it.
// CHECK-LABEL: define <4 x i1> @"lanes_below"(i64 %".1")
// CHECK:         %[[OPAQUE:.*]] = call i64 asm "", "=r,0"(i64 %".1")
// CHECK:         %[[LO:.*]] = select i1 %{{.*}}, i64 0, i64 %[[OPAQUE]]
// CHECK:         %[[K:.*]] = select i1 %{{.*}}, i64 4, i64 %[[LO]]
// CHECK:         %[[K32:.*]] = trunc i64 %[[K]] to i32
// CHECK:         %[[M:.*]] = icmp slt <4 x i32> <i32 0, i32 1, i32 2, i32 3>, %{{.*}}
// CHECK-NEXT:    ret <4 x i1> %[[M]]
func.func @lanes_below(%k: index) -> vector<4xi1> {
  %m = vector.create_mask %k : vector<4xi1>
  func.return %m : vector<4xi1>
}
