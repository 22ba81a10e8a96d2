// RUN: not hlocc-opt %s --emit-llvm 2>&1 | filecheck %s

// The translator knows the primitive math ops only; a transcendental function that expand-float-ops did not
// expand is an error (a libm call would not vectorize, and on NVPTX there is no libm), not a call.
// CHECK: emit_llvm_errors.mlir: --emit-llvm: cannot translate 'math.tanh' to LLVM (a lowering pass should have removed it)
func.func @f(%x: f32) -> f32 {
  %t = math.tanh %x : f32
  func.return %t : f32
}
