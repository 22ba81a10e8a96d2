// RUN: hlocc-opt %s --split-input-file --passes cse | filecheck %s

// `cse` (codegen/transforms/cse.py): xDSL's common subexpression elimination, each op's key hashed once.
// Equal pure ops merge, in a nested region too (the region sees the values known above it); a dead op is
// erased (the kernel pipeline's IR is checked against xDSL's own cse in test_cse.py).

// CHECK-LABEL: func.func @pure
// CHECK-NEXT:    %[[A:.*]] = arith.addf %x, %y : f32
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK-NEXT:    %[[R:.*]] = scf.if %c -> (f32) {
// CHECK-NEXT:      scf.yield %[[M]] : f32
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %[[A]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %[[R]], %[[M]] : f32, f32
func.func @pure(%x: f32, %y: f32, %c: i1) -> (f32, f32) {
  %a = arith.addf %x, %y : f32
  %b = arith.addf %x, %y : f32
  %m = arith.mulf %a, %b : f32
  %r = scf.if %c -> (f32) {
    %n = arith.mulf %a, %a : f32
    scf.yield %n : f32
  } else {
    %d = arith.addf %x, %y : f32
    scf.yield %d : f32
  }
  func.return %r, %m : f32, f32
}

// -----

// A select whose condition compares two integer constants picks its operand (a shift's range check
// on a constant amount, once the amount's subgraph is inlined): unsigned 13 < 32 keeps the shift,
// signed -1 < 0 picks the first operand, unsigned 0xFFFFFFFF < 32 the second; the compares are left
// to dce.
// CHECK-LABEL: func.func @constant_choice
// CHECK-NOT:     arith.select
// CHECK:         %[[S:.*]] = arith.shli %x, %{{.*}} : i32
// CHECK-NOT:     arith.select
// CHECK:         func.return %[[S]], %x, %y : i32, i32, i32
func.func @constant_choice(%x: i32, %y: i32) -> (i32, i32, i32) {
  %amount = arith.constant 13 : i32
  %width = arith.constant 32 : i32
  %zero = arith.constant 0 : i32
  %in_range = arith.cmpi ult, %amount, %width : i32
  %safe = arith.select %in_range, %amount, %zero : i32
  %shifted = arith.shli %x, %safe : i32
  %r = arith.select %in_range, %shifted, %zero : i32
  %minus_one = arith.constant -1 : i32
  %negative = arith.cmpi slt, %minus_one, %zero : i32
  %a = arith.select %negative, %x, %y : i32
  %big = arith.cmpi ult, %minus_one, %width : i32
  %b = arith.select %big, %x, %y : i32
  func.return %r, %a, %b : i32, i32, i32
}
