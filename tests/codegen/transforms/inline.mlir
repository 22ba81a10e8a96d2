// RUN: hlocc-opt %s --split-input-file --passes inline | filecheck %s

// `inline` replaces an `xla.pure_call` by the callee's body (seed 000 "Inliner"). A function called from
// one place is always inlined; afterwards a private function that nothing refers to is erased.

// CHECK-LABEL: func.func @single_call(%t: tensor<8xf32>, %i: index) -> f32 {
// CHECK-NEXT:    %one = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:    %x = tensor.extract %t[%i] : tensor<8xf32>
// CHECK-NEXT:    %y = arith.addf %x, %one : f32
// CHECK-NEXT:    func.return %y : f32
// CHECK-NEXT:  }
// CHECK-NOT:   @add_one
func.func @single_call(%t: tensor<8xf32>, %i: index) -> f32 {
  %r = xla.pure_call @add_one(%t, %i) : (tensor<8xf32>, index) -> f32
  func.return %r : f32
}
func.func private @add_one(%t: tensor<8xf32>, %i: index) -> f32 {
  %one = arith.constant 1.000000e+00 : f32
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %y = arith.addf %x, %one : f32
  func.return %y : f32
}

// -----

// Called from two places, larger than MAX_OPS_TO_DUPLICATE (8 ops besides the return), and its two
// copies together over MAX_DUPLICATED_SIZE (a math op weighs as its ~48-op expansion): the calls stay.

// CHECK-LABEL: func.func @called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
// CHECK-NEXT:    %a = xla.pure_call @big(%t, %i) : (tensor<8xf32>, index) -> f32
// CHECK-NEXT:    %b = xla.pure_call @big(%t, %j) : (tensor<8xf32>, index) -> f32
// CHECK:       func.func private @big(
func.func @called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
  %a = xla.pure_call @big(%t, %i) : (tensor<8xf32>, index) -> f32
  %b = xla.pure_call @big(%t, %j) : (tensor<8xf32>, index) -> f32
  %r = arith.addf %a, %b : f32
  func.return %r : f32
}
func.func private @big(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %0 = math.exp %x : f32
  %1 = math.exp %0 : f32
  %2 = math.exp %1 : f32
  %3 = math.exp %2 : f32
  %4 = math.exp %3 : f32
  %5 = math.exp %4 : f32
  %6 = math.exp %5 : f32
  %7 = math.exp %6 : f32
  func.return %7 : f32
}

// -----

// Called from two places (two indices: a value read at i and at j, as a stencil or a reverse reads it)
// and over MAX_OPS_TO_DUPLICATE, but both copies within MAX_DUPLICATED_SIZE: inlined at each call, which
// duplicates code, not work (each call evaluates its own index), and lets each copy be vectorized.

// CHECK-LABEL: func.func @medium_called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
// CHECK-NOT:     xla.pure_call
// CHECK:         tensor.extract %t[%i]
// CHECK:         tensor.extract %t[%j]
// CHECK-NOT:   @medium
func.func @medium_called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
  %a = xla.pure_call @medium(%t, %i) : (tensor<8xf32>, index) -> f32
  %b = xla.pure_call @medium(%t, %j) : (tensor<8xf32>, index) -> f32
  %r = arith.addf %a, %b : f32
  func.return %r : f32
}
func.func private @medium(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %0 = arith.mulf %x, %x : f32
  %1 = arith.mulf %0, %x : f32
  %2 = arith.mulf %1, %x : f32
  %3 = arith.mulf %2, %x : f32
  %4 = arith.mulf %3, %x : f32
  %5 = arith.mulf %4, %x : f32
  %6 = arith.mulf %5, %x : f32
  %7 = arith.mulf %6, %x : f32
  func.return %7 : f32
}

// -----

// A tiny function is inlined at every call: duplicating two ops is cheaper than a call.

// CHECK-LABEL: func.func @tiny_called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
// CHECK-NEXT:    %[[XI:.*]] = tensor.extract %t[%i] : tensor<8xf32>
// CHECK-NEXT:    %[[SI:.*]] = arith.mulf %[[XI]], %[[XI]] : f32
// CHECK-NEXT:    %[[XJ:.*]] = tensor.extract %t[%j] : tensor<8xf32>
// CHECK-NEXT:    %[[SJ:.*]] = arith.mulf %[[XJ]], %[[XJ]] : f32
// CHECK-NEXT:    %[[R:.*]] = arith.addf %[[SI]], %[[SJ]] : f32
// CHECK-NEXT:    func.return %[[R]] : f32
// CHECK-NEXT:  }
// CHECK-NOT:   @square
func.func @tiny_called_twice(%t: tensor<8xf32>, %i: index, %j: index) -> f32 {
  %a = xla.pure_call @square(%t, %i) : (tensor<8xf32>, index) -> f32
  %b = xla.pure_call @square(%t, %j) : (tensor<8xf32>, index) -> f32
  %r = arith.addf %a, %b : f32
  func.return %r : f32
}
func.func private @square(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %s = arith.mulf %x, %x : f32
  func.return %s : f32
}

// -----

// Calls inside calls: the innermost callee is inlined first, then its caller. Private functions nothing
// refers to are erased (@unused, and @inner once its only caller is gone); a public function stays, and so
// does a private one that is referred to other than by a call (the combiner of an xla.shuffle_reduce).

// CHECK-LABEL: func.func @nested(%x: f32) -> f32 {
// CHECK-NEXT:    %[[A:.*]] = arith.addf %x, %x : f32
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[A]], %[[A]] : f32
// CHECK-NEXT:    %[[R:.*]] = xla.shuffle_reduce @sum(%[[M]]) to 16 : f32
// CHECK-NEXT:    func.return %[[R]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @sum(%a: f32, %b: f32) -> f32 {
// CHECK:       func.func @public_unused(%x: f32) -> f32 {
// CHECK-NOT:   @inner
// CHECK-NOT:   @outer
// CHECK-NOT:   @unused
func.func @nested(%x: f32) -> f32 {
  %m = xla.pure_call @outer(%x) : (f32) -> f32
  %r = xla.shuffle_reduce @sum(%m) to 16 : f32
  func.return %r : f32
}
func.func private @outer(%x: f32) -> f32 {
  %a = xla.pure_call @inner(%x) : (f32) -> f32
  %m = arith.mulf %a, %a : f32
  func.return %m : f32
}
func.func private @inner(%x: f32) -> f32 {
  %a = arith.addf %x, %x : f32
  func.return %a : f32
}
func.func private @sum(%a: f32, %b: f32) -> f32 {
  %s = arith.addf %a, %b : f32
  func.return %s : f32
}
func.func private @unused(%x: f32) -> f32 {
  func.return %x : f32
}
func.func @public_unused(%x: f32) -> f32 {
  func.return %x : f32
}
