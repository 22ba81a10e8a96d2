// A failing verifier is reported with the op and the cause; `not` expects the failure.
// RUN: not hlocc-opt %s | filecheck %s

#map = #xla.indexing_map<"(d0)[s0] -> (d0 + s0), domain: d0 in [0, 9], s0 in [0, 3]">
func.func @too_few_operands(%d: index) -> index {
  %r = xla.apply_indexing #map(%d)
  func.return %r : index
}
// CHECK: 'xla.apply_indexing' operand count 1 must match the number of dimensions, range and runtime variables of the indexing map (2)
