"""Analyses that several parts of the compiler read: indexing maps (`indexing_map`, with its
expressions in `affine_expr`, the range-aware `simplifier` and the text form in
`indexing_map_text`), launch-grid maps (`launch`) and HLO indexing analysis (`indexing_analysis`)."""
