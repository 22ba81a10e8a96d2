// RUN: hlocc-opt %s --passes check-bounds | filecheck %s

// `check-bounds` (the bounds-checked kernel mode): each access at index i into a tensor of n elements
// becomes an access at (0 <= i && i + 1 <= n) ? i : 0, and a record of three i64 (flag, index, size) is
// written at a slot selected without a branch: slot 0 (scratch) when in bounds, 3 * (argument + 2)
// otherwise. The record is one external i64 array the CPU kernel reads after the launch.
// A masked transfer (vectorize_masked_lanes) touches only the lanes its mask keeps, min(max(k, 0), 16): those
// are checked (end = i + kept), no lane kept is no access, and a checked access outside clears its mask.
// CHECK-LABEL: func.func @masked(%in: tensor<100xf32>, %out: tensor<100xf32>, %k: index) -> tensor<100xf32> {
// CHECK:         %[[MASK:.*]] = vector.create_mask %k : vector<16xi1>
// CHECK:         %[[MAX:.*]] = arith.maxsi %k, %[[Z:.*]] : index
// CHECK:         %[[KEPT:.*]] = arith.minsi %[[MAX]], %{{.*}} : index
// CHECK:         %[[END:.*]] = arith.addi %{{.*}}, %[[KEPT]] : index
// CHECK:         %[[IN:.*]] = arith.andi
// CHECK:         %[[NONE:.*]] = arith.cmpi eq, %[[KEPT]], %[[Z]] : index
// CHECK:         %[[OK:.*]] = arith.ori %[[IN]], %[[NONE]] : i1
// CHECK:         %[[K2:.*]] = arith.select %[[OK]], %[[KEPT]], %[[Z]] : index
// CHECK:         %[[CLEARED:.*]] = vector.create_mask %[[K2]] : vector<16xi1>
// CHECK:         vector.transfer_read %in[%{{.*}}], %{{.*}}, %[[CLEARED]] {in_bounds = [true]} : tensor<100xf32>, vector<16xf32>
// CHECK:         vector.create_mask
// CHECK:         vector.transfer_write %{{.*}}, %out[%{{.*}}], %{{.*}} {in_bounds = [true]} : vector<16xf32>, tensor<100xf32>
func.func @masked(%in: tensor<100xf32>, %out: tensor<100xf32>, %k: index) -> tensor<100xf32> {
  %i = arith.constant 90 : index
  %pad = arith.constant 0.0 : f32
  %mask = vector.create_mask %k : vector<16xi1>
  %v = vector.transfer_read %in[%i], %pad, %mask {in_bounds = [true]} : tensor<100xf32>, vector<16xf32>
  %r = vector.transfer_write %v, %out[%i], %mask {in_bounds = [true]} : vector<16xf32>, tensor<100xf32>
  func.return %r : tensor<100xf32>
}

// CHECK-LABEL: func.func @scalar(%in: tensor<16xf32>, %out: tensor<16xf32>, %i: index) -> tensor<16xf32> {
// CHECK-NEXT:    %[[TABLE:.*]] = llvm.mlir.addressof @hlocc_bounds : !llvm.ptr
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[GE:.*]] = arith.cmpi sge, %i, %[[ZERO]] : index
// CHECK:         %[[END:.*]] = arith.addi %i, %{{.*}} : index
// CHECK-NEXT:    %[[N:.*]] = arith.constant 16 : index
// CHECK-NEXT:    %[[LE:.*]] = arith.cmpi sle, %[[END]], %[[N]] : index
// CHECK-NEXT:    %[[OK:.*]] = arith.andi %[[GE]], %[[LE]] : i1
// CHECK-NEXT:    %[[SAFE:.*]] = arith.select %[[OK]], %i, %[[ZERO]] : index
// CHECK:         %[[BAD:.*]] = arith.constant 6 : i64
// CHECK-NEXT:    %[[SLOT:.*]] = arith.select %[[OK]], %{{.*}}, %[[BAD]] : i64
// CHECK:         %[[P:.*]] = llvm.getelementptr %[[TABLE]][0, %[[SLOT]]] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.array<15 x i64>
// CHECK-NEXT:    llvm.store %{{.*}}, %[[P]] : i64, !llvm.ptr
// CHECK:         %x = tensor.extract %in[%[[SAFE]]] : tensor<16xf32>
// CHECK:         arith.constant 9 : i64
// CHECK:         tensor.insert %x into %out[%{{.*}}] : tensor<16xf32>
// CHECK:       llvm.mlir.global external @hlocc_bounds() {addr_space = 0 : i32} : !llvm.array<15 x i64>
func.func @scalar(%in: tensor<16xf32>, %out: tensor<16xf32>, %i: index) -> tensor<16xf32> {
  %x = tensor.extract %in[%i] : tensor<16xf32>
  %r = tensor.insert %x into %out[%i] : tensor<16xf32>
  func.return %r : tensor<16xf32>
}
