// RUN: hlocc-opt %s --split-input-file --passes lower-tensors | filecheck %s

// `lower-tensors` (seed 000 "Conversion to LLVM", XLA's lower_tensors.cc): kernel IR never bufferizes, every
// tensor value is a version of the buffer a function argument (or a constant) points to. So every tensor
// becomes an !llvm.ptr, an access becomes llvm.getelementptr (inbounds, in elements, the index cast to i64)
// plus llvm.load or llvm.store, and an insert's result is its destination pointer. Tensor results of
// functions are dropped: the caller owns the buffers.

// tensor.extract → GEP + load; tensor.insert → GEP + store; the tensor result is gone from the signature.
// CHECK-LABEL: func.func @scalar(%in: !llvm.ptr, %out: !llvm.ptr, %i: index) {
// CHECK-NEXT:    %[[I:.*]] = arith.index_cast %i : index to i64
// CHECK-NEXT:    %[[P:.*]] = llvm.getelementptr inbounds %in[%[[I]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    %x = llvm.load %[[P]] : !llvm.ptr -> f32
// CHECK-NEXT:    %[[J:.*]] = arith.index_cast %i : index to i64
// CHECK-NEXT:    %[[Q:.*]] = llvm.getelementptr inbounds %out[%[[J]]] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:    llvm.store %x, %[[Q]] : f32, !llvm.ptr
// CHECK-NEXT:    func.return{{$}}
func.func @scalar(%in: tensor<16xf32>, %out: tensor<16xf32>, %i: index) -> tensor<16xf32> {
  %x = tensor.extract %in[%i] : tensor<16xf32>
  %r = tensor.insert %x into %out[%i] : tensor<16xf32>
  func.return %r : tensor<16xf32>
}

// -----

// vector.transfer_read / transfer_write → one load / store of the whole vector at the element's address.
// CHECK-LABEL: func.func @vector(%in: !llvm.ptr, %out: !llvm.ptr, %i: index) {
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %in[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK-NEXT:    %v = llvm.load %[[P]] : !llvm.ptr -> vector<4xbf16>
// CHECK:         %[[Q:.*]] = llvm.getelementptr inbounds %out[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK-NEXT:    llvm.store %v, %[[Q]] : vector<4xbf16>, !llvm.ptr
// CHECK-NEXT:    func.return{{$}}
func.func @vector(%in: tensor<16xbf16>, %out: tensor<16xbf16>, %i: index) -> tensor<16xbf16> {
  %pad = arith.constant 0.000000e+00 : bf16
  %v = vector.transfer_read %in[%i], %pad {in_bounds = [true]} : tensor<16xbf16>, vector<4xbf16>
  %r = vector.transfer_write %v, %out[%i] {in_bounds = [true]} : vector<4xbf16>, tensor<16xbf16>
  func.return %r : tensor<16xbf16>
}

// -----

// A dense tensor constant becomes a private constant global array, read through its address. Results that
// are not tensors stay.
// CHECK-LABEL: func.func @constants(%out: !llvm.ptr, %i: index) -> f32 {
// CHECK-NEXT:    %table = llvm.mlir.addressof @constant_0 : !llvm.ptr
// CHECK-NEXT:    %splat = llvm.mlir.addressof @constant_1 : !llvm.ptr
// CHECK:         llvm.getelementptr inbounds %table[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         llvm.getelementptr inbounds %splat[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK:         func.return %y : f32
// CHECK:       llvm.mlir.global private constant @constant_0(dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>) {addr_space = 0 : i32} : !llvm.array<3 x f32>
// CHECK-NEXT:  llvm.mlir.global private constant @constant_1(dense<2.000000e+00> : tensor<3xf32>) {addr_space = 0 : i32} : !llvm.array<3 x f32>
func.func @constants(%out: tensor<3xf32>, %i: index) -> (tensor<3xf32>, f32) {
  %table = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %splat = arith.constant dense<2.0> : tensor<3xf32>
  %x = tensor.extract %table[%i] : tensor<3xf32>
  %y = tensor.extract %splat[%i] : tensor<3xf32>
  %r = tensor.insert %x into %out[%i] : tensor<3xf32>
  func.return %r, %y : tensor<3xf32>, f32
}

// -----

// Loop-carried tensors become loop-carried pointers (the same pointer every iteration).
// CHECK-LABEL: func.func @carried(%out: !llvm.ptr, %v: f32) {
// CHECK:         %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (!llvm.ptr) {
// CHECK:           %[[P:.*]] = llvm.getelementptr inbounds %it[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, f32
// CHECK-NEXT:      llvm.store %v, %[[P]] : f32, !llvm.ptr
// CHECK-NEXT:      scf.yield %it : !llvm.ptr
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return{{$}}
func.func @carried(%out: tensor<4xf32>, %v: f32) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%it = %out) -> (tensor<4xf32>) {
    %ins = tensor.insert %v into %it[%i] : tensor<4xf32>
    scf.yield %ins : tensor<4xf32>
  }
  func.return %r : tensor<4xf32>
}

// -----

// Complex elements are loaded and stored whole, as complex<fN> (the LLVM translator's {fN, fN}: numpy's
// layout, real part first); the element size is the GEP's element type's.
// CHECK-LABEL: func.func @complex(%in: !llvm.ptr, %out: !llvm.ptr, %i: index) {
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %in[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, complex<f32>
// CHECK-NEXT:    %z = llvm.load %[[P]] : !llvm.ptr -> complex<f32>
// CHECK:         %[[Q:.*]] = llvm.getelementptr inbounds %out[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, complex<f32>
// CHECK-NEXT:    llvm.store %w, %[[Q]] : complex<f32>, !llvm.ptr
// CHECK-NEXT:    func.return{{$}}
func.func @complex(%in: tensor<16xcomplex<f32>>, %out: tensor<16xcomplex<f32>>, %i: index) -> tensor<16xcomplex<f32>> {
  %z = tensor.extract %in[%i] : tensor<16xcomplex<f32>>
  %re = complex.re %z : complex<f32>
  %im = complex.im %z : complex<f32>
  %w = complex.create %im, %re : complex<f32>
  %r = tensor.insert %w into %out[%i] : tensor<16xcomplex<f32>>
  func.return %r : tensor<16xcomplex<f32>>
}

// -----

// A masked transfer (vectorize_masked_lanes) → llvm.masked.load / llvm.masked.store, named by the LLVM
// vector type (bf16 is i16 there), with the elements' alignment; the read's padding is the pass-through.
// CHECK-LABEL: func.func @masked(%in: !llvm.ptr, %out: !llvm.ptr, %i: index, %k: index) {
// CHECK:         %[[MASK:.*]] = vector.create_mask %k : vector<32xi1>
// CHECK:         %[[P:.*]] = llvm.getelementptr inbounds %in[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK:         %[[PAD:.*]] = vector.broadcast %{{.*}} : bf16 to vector<32xbf16>
// CHECK:         %[[A:.*]] = arith.constant 2 : i32
// CHECK:         %v = llvm.call_intrinsic "llvm.masked.load.v32i16.p0"(%[[P]], %[[A]], %[[MASK]], %[[PAD]]) : (!llvm.ptr, i32, vector<32xi1>, vector<32xbf16>) -> vector<32xbf16>
// CHECK:         %[[Q:.*]] = llvm.getelementptr inbounds %out[%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, bf16
// CHECK:         llvm.call_intrinsic "llvm.masked.store.v32i16.p0"(%v, %[[Q]], %{{.*}}, %[[MASK]]) : (vector<32xbf16>, !llvm.ptr, i32, vector<32xi1>) -> ()
func.func @masked(%in: tensor<100xbf16>, %out: tensor<100xbf16>, %i: index, %k: index) -> tensor<100xbf16> {
  %mask = vector.create_mask %k : vector<32xi1>
  %pad = arith.constant 0.0 : bf16
  %v = vector.transfer_read %in[%i], %pad, %mask {in_bounds = [true]} : tensor<100xbf16>, vector<32xbf16>
  %r = vector.transfer_write %v, %out[%i], %mask {in_bounds = [true]} : vector<32xbf16>, tensor<100xbf16>
  func.return %r : tensor<100xbf16>
}
