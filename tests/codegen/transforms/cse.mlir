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
