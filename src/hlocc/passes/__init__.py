"""HLO → HLO passes, one per module, each registered by name (`base.py`): simplification
(`algsimp` with its rule tables, `call_inliner`, `constant_folding`, `cse`, `dce`,
`dot_canonicalize`, `gather_simplifier`, `tuple_simplifier`, `while_loop_simplifier`), fusion
(`priority_fusion`, `multi_output_fusion`, `rename_fusions`, `fusion_wrapper`, on `fusible` and
`fusion_utils`), and the runtime's rewrites (`flatten_call_graph`, `inline_library_fusions`,
`convolution_to_gemm`). `pipeline.py` writes down their order: the named pipelines and each
backend's pipeline. `hlo_opt.py` is the `hlo-opt` command."""
