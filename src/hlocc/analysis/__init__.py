"""Analyses that several parts of the compiler read: indexing maps (`indexing_map`, with its
expressions in `affine_expr`, intervals in `interval`, the range-aware `simplifier` and the text
form's parser in `indexing_map_text`), HLO indexing analysis (`indexing_analysis`, per-op maps in
`op_indexing`), launch-grid maps (`launch`), fusion structure (`fusion_adaptor`, hero analysis in
`hero` with `reduction_info` and `transpose_info`) and the fusion cost model (`cost_model`)."""
