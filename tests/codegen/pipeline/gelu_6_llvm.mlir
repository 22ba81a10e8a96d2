// Seed 000's GELU kernel, stage 6 of 6: the unrolled kernel (gelu_5_unroll_loops.mlir's output) through
// the rest of KERNEL_PIPELINE (lower-narrow-floats, expand-float-ops, lower-tensors, lower-xla-to-arith,
// cse, dce) and translated to LLVM IR (--emit-llvm; seed 000 "Conversion to LLVM").
// - @main takes the two buffers as noalias pointers, then the thread id and the block id as i64.
// - The thread's 4 elements are one <4 x i16> load at bl_x * 512 + th_x * 4 (bf16 is stored as i16).
// - Each lane is widened to f32 (zext, shl 16, bitcast), computed in f32, rounded back to bf16 after every
//   op (bf16 arithmetic), and put into the result vector, which one <4 x i16> store writes at the same offset.
// - tanh is XLA's rational approximation in its bf16 form (a widened bf16 argument, a result rounded to
//   bf16: no clamp, +-1 at or above it): fmul / fadd / fdiv and the llvm.fabs and llvm.copysign
//   intrinsics. The seed calls __nv_tanhf; hlocc calls no libm or libdevice function at all, so the same
//   code runs on the CPU and vectorizes.
// RUN: hlocc-opt %s --passes lower-narrow-floats,expand-float-ops,lower-tensors,lower-xla-to-arith,cse,dce --emit-llvm | filecheck %s

#map = #xla.indexing_map<"(th_x, bl_x)[vector_index] -> (bl_x * 512 + th_x * 4 + vector_index),"
  "domain: th_x in [0, 127], bl_x in [0, 24575], vector_index in [0, 3]">
func.func @main(%input: tensor<12582912xbf16>, %output: tensor<12582912xbf16>) -> tensor<12582912xbf16> {
  %thread_id_x = "gpu.thread_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 127 : index]} : () -> index
  %block_id_x = "gpu.block_id"() <{dimension = #gpu<dim x>}> {xla.range = [0 : index, 24575 : index]} : () -> index
  %c0 = arith.constant 0 : index
  %dim = xla.apply_indexing #map(%thread_id_x, %block_id_x)[%c0]
  %cst = arith.constant 0.000000e+00 : bf16
  %input_vector = vector.transfer_read %input[%dim], %cst {in_bounds = [true]}
      : tensor<12582912xbf16>, vector<4xbf16>
  %init_vector = arith.constant dense<0.000000e+00> : vector<4xbf16>
  %cst_1 = arith.constant 5.000000e-01 : bf16
  %cst_2 = arith.constant 1.000000e+00 : bf16
  %cst_3 = arith.constant 7.968750e-01 : bf16
  %cst_4 = arith.constant 4.467770e-02 : bf16
  %extracted = vector.extract %input_vector[%c0] : bf16 from vector<4xbf16>
  %0 = arith.mulf %extracted, %extracted : bf16
  %1 = arith.mulf %0, %extracted : bf16
  %2 = arith.mulf %1, %cst_4 : bf16
  %3 = arith.addf %extracted, %2 : bf16
  %4 = arith.mulf %3, %cst_3 : bf16
  %5 = math.tanh %4 : bf16
  %6 = arith.addf %5, %cst_2 : bf16
  %7 = arith.mulf %6, %cst_1 : bf16
  %8 = arith.mulf %extracted, %7 : bf16
  %9 = vector.insert %8, %init_vector [%c0] : bf16 into vector<4xbf16>
  %10 = arith.constant 1 : index
  %extracted_1 = vector.extract %input_vector[%10] : bf16 from vector<4xbf16>
  %11 = arith.mulf %extracted_1, %extracted_1 : bf16
  %12 = arith.mulf %11, %extracted_1 : bf16
  %13 = arith.mulf %12, %cst_4 : bf16
  %14 = arith.addf %extracted_1, %13 : bf16
  %15 = arith.mulf %14, %cst_3 : bf16
  %16 = math.tanh %15 : bf16
  %17 = arith.addf %16, %cst_2 : bf16
  %18 = arith.mulf %17, %cst_1 : bf16
  %19 = arith.mulf %extracted_1, %18 : bf16
  %20 = vector.insert %19, %9 [%10] : bf16 into vector<4xbf16>
  %21 = arith.constant 2 : index
  %extracted_2 = vector.extract %input_vector[%21] : bf16 from vector<4xbf16>
  %22 = arith.mulf %extracted_2, %extracted_2 : bf16
  %23 = arith.mulf %22, %extracted_2 : bf16
  %24 = arith.mulf %23, %cst_4 : bf16
  %25 = arith.addf %extracted_2, %24 : bf16
  %26 = arith.mulf %25, %cst_3 : bf16
  %27 = math.tanh %26 : bf16
  %28 = arith.addf %27, %cst_2 : bf16
  %29 = arith.mulf %28, %cst_1 : bf16
  %30 = arith.mulf %extracted_2, %29 : bf16
  %31 = vector.insert %30, %20 [%21] : bf16 into vector<4xbf16>
  %32 = arith.constant 3 : index
  %extracted_3 = vector.extract %input_vector[%32] : bf16 from vector<4xbf16>
  %33 = arith.mulf %extracted_3, %extracted_3 : bf16
  %34 = arith.mulf %33, %extracted_3 : bf16
  %35 = arith.mulf %34, %cst_4 : bf16
  %36 = arith.addf %extracted_3, %35 : bf16
  %37 = arith.mulf %36, %cst_3 : bf16
  %38 = math.tanh %37 : bf16
  %39 = arith.addf %38, %cst_2 : bf16
  %40 = arith.mulf %39, %cst_1 : bf16
  %41 = arith.mulf %extracted_3, %40 : bf16
  %result_vector = vector.insert %41, %31 [%32] : bf16 into vector<4xbf16>
  %written = vector.transfer_write %result_vector, %output[%dim] {in_bounds = [true]}
      : vector<4xbf16>, tensor<12582912xbf16>
  func.return %written : tensor<12582912xbf16>
}

// CHECK:       define internal void @"main"(ptr noalias %[[IN:".1"]], ptr noalias %[[OUT:".2"]], i64 %[[TID:".3"]], i64 %[[BID:".4"]]) alwaysinline
// CHECK-NEXT:  {
// CHECK-NEXT:  entry:
// CHECK-NEXT:    %[[B:.*]] = mul i64 %[[BID]], 512
// CHECK-NEXT:    %[[T:.*]] = mul i64 %[[TID]], 4
// CHECK-NEXT:    %[[BT:.*]] = add i64 %[[B]], %[[T]]
// CHECK-NEXT:    %[[OFS:.*]] = add i64 %[[BT]], 0
// CHECK-NEXT:    %[[P:.*]] = getelementptr inbounds i16, ptr %[[IN]], i64 %[[OFS]]
// CHECK-NEXT:    %[[V:.*]] = load <4 x i16>, ptr %[[P]], align 2
// CHECK-NEXT:    %[[L0:.*]] = extractelement <4 x i16> %[[V]], i64 0
// CHECK-NEXT:    %[[W0:.*]] = zext i16 %[[L0]] to i32
// CHECK-NEXT:    %[[S0:.*]] = shl i32 %[[W0]], 16
// CHECK-NEXT:    %[[X0:.*]] = bitcast i32 %[[S0]] to float
// CHECK-NEXT:    fmul float %[[X0]], %[[X0]]
// CHECK-NOT:     call {{.*}}tanh
// CHECK-NOT:     call float @"llvm.{{maximum|minimum}}.f32"
// CHECK:         fdiv float
// CHECK:         call float @"llvm.fabs.f32"
// CHECK:         call float @"llvm.copysign.f32"
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         %[[R0:.*]] = insertelement <4 x i16> <i16 0, i16 0, i16 0, i16 0>, i16 %{{.*}}, i64 0
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         extractelement <4 x i16> %[[V]], i64 1
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         %[[R1:.*]] = insertelement <4 x i16> %[[R0]], i16 %{{.*}}, i64 1
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         extractelement <4 x i16> %[[V]], i64 2
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         %[[R2:.*]] = insertelement <4 x i16> %[[R1]], i16 %{{.*}}, i64 2
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         extractelement <4 x i16> %[[V]], i64 3
// CHECK-NOT:     call {{.*}}tanh
// CHECK:         %[[R3:.*]] = insertelement <4 x i16> %[[R2]], i16 %{{.*}}, i64 3
// CHECK-NEXT:    %[[Q:.*]] = getelementptr inbounds i16, ptr %[[OUT]], i64 %[[OFS]]
// CHECK-NEXT:    store <4 x i16> %[[R3]], ptr %[[Q]], align 2
// CHECK-NEXT:    ret void
// CHECK-NEXT:  }
// Only LLVM intrinsics are declared: no tanhf, no __nv_tanhf.
// CHECK-NOT:   declare {{.*}}@"{{[^l]}}
// CHECK-NOT:   tanh
