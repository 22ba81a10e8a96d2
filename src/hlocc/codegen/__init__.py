"""Kernel code generation, laid out as XLA's emitter tree (xla/codegen/emitters/ and
xla/backends/gpu/codegen/emitters/):

    ir/           the `xla` kernel dialect (attributes, core ops, parallel-model ops, arith
                  stand-ins), the IR builder and the HLO -> MLIR type mapping
    context.py    the context kernel IR parses in, `KernelIRError`, parse/print
    partitioner.py  a fused computation cut into subgraph functions (computation_partitioner)
    elemental/    elemental emission: the registries of elementwise and index ops, the element
                  emitter, storage types (elemental_hlo_to_mlir)
    emitters/     the fusion emitters, one per file, on emitters/base.py, and the emitter registry
    transforms/   the kernel passes, one per file, and their table (`PASSES`)
    math/         the approximation library the float passes expand into
    pipeline.py   the pass order (KERNEL_PIPELINE, CPU_PIPELINE) and running it
    llvm/         the translation of lowered kernel IR to LLVM IR, by op family
    target.py     launch parameters of the CPU and GPU targets

Command-line drivers (`hlocc opt`, `hlocc fusion-to-mlir`) are in hlocc/tools/; nothing here
imports them, the runtime or the backends.
"""
