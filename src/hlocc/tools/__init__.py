"""The command-line tools: `hlocc opt` (opt.py, kernel passes on MLIR text), `hlocc fusion-to-mlir`
(fusion_to_mlir.py, the kernel IR an emitter writes for a fusion) and `hlocc hlo-opt` (hlo_opt.py, HLO
passes on HLO text). They sit above the compiler layers and are the only modules that import drivers."""
