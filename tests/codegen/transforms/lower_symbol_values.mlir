// `lower-symbol-values`: each function that reads a dimension variable (or calls one that does) gets
// the kernel's table `%dims` as its last argument and loads each value once at its top, at the
// position the module's `xla.symbols` gives; calls pass the table on. `lower-xla-to-arith` turns the
// map's `$b`/`$n` atoms into `xla.symbol_value`s first.
// RUN: hlocc-opt %s --passes lower-xla-to-arith,lower-symbol-values | filecheck %s

builtin.module attributes {xla.symbols = ["b", "n"]} {
  func.func @main(%p: !llvm.ptr, %i: index) -> index {
    %r = xla.apply_indexing #xla.indexing_map<"(d0) -> (d0 floordiv $n + d0 * $b), domain: d0 in [0, 99]">(%i)
    %s = xla.pure_call @helper(%i) : (index) -> index
    %t = arith.addi %r, %s : index
    func.return %t : index
  }
  func.func private @helper(%i: index) -> index {
    %n = xla.symbol_value "n" : index
    %r = arith.muli %i, %n : index
    func.return %r : index
  }
}

// CHECK-LABEL: func.func @main(%p: !llvm.ptr, %i: index, %dims: !llvm.ptr) -> index {
// CHECK-NEXT:    %[[P0:.*]] = llvm.getelementptr inbounds %dims[0] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[V0:.*]] = llvm.load %[[P0]] : !llvm.ptr -> i64
// CHECK-NEXT:    %b = arith.index_cast %[[V0]] : i64 to index
// CHECK-NEXT:    %[[P1:.*]] = llvm.getelementptr inbounds %dims[1] : (!llvm.ptr) -> !llvm.ptr, i64
// CHECK-NEXT:    %[[V1:.*]] = llvm.load %[[P1]] : !llvm.ptr -> i64
// CHECK-NEXT:    %n = arith.index_cast %[[V1]] : i64 to index
// CHECK-DAG:     arith.muli %i, %b : index
// CHECK-DAG:     arith.divui %i, %n : index
// CHECK:         xla.pure_call @helper(%i, %dims) : (index, !llvm.ptr) -> index
// CHECK-LABEL: func.func private @helper(%i: index, %dims: !llvm.ptr) -> index {
// CHECK-NEXT:    llvm.getelementptr inbounds %dims[1]
// CHECK-NOT:     xla.symbol_value
