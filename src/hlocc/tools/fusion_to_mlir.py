"""`hlocc fusion-to-mlir`: the kernel IR an emitter generates for a fusion, before any kernel pass
(XLA's fusion_to_mlir tool, which its emitter tests pipe into FileCheck).

The fused computation of a file is the one an emitter test is about: the entry of a headerless
module (an emitter test's body), or the computation of the entry's last fusion instruction.
`--target gpu` uses the GPU launch parameters (warp 32, XLA's block sizes), `--target cpu` the
host's. `--passes a,b` then runs kernel passes, as `emitters_opt` does after fusion_to_mlir.
`--emit llvm|ptx` (GPU target) instead runs the whole GPU pipeline and prints the NVPTX LLVM IR or
the PTX for `--arch` (backends/cuda/ptx.py). `--speculate` (a fusion with symbolic shapes)
prints every version runtime/speculation.py plans for it on the target (the GPU's launch
configuration with `--target gpu`), each after a `// version <name> if <predicate>` line with its
substitution, the generic one last.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from hlocc.codegen.target import cpu_target, gpu_target
from hlocc.hlo.ir import HloComputation, HloModule
from hlocc.hlo.parser import parse_hlo, read_text_file


def fused_computation(module: HloModule) -> HloComputation:
    """The fusion an emitter test compiles: the entry's last fusion's computation, else the entry."""
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusions[-1].fused_computation if fusions else module.entry


def fusion_to_mlir(text: str, target: str = "gpu", passes: Sequence[str] = (), filename: str = "<hlo>",
                   emit: str = "mlir", arch: str = "sm_90", speculate: bool = False) -> str:
    from hlocc.codegen.context import print_module
    from hlocc.codegen.emitters.registry import emitter_for
    from hlocc.codegen.pipeline import run_pipeline

    computation = fused_computation(parse_hlo(text, filename))
    if emit != "mlir":
        from hlocc.backends.cuda.ptx import compile_ptx
        from hlocc.errors import UnsupportedError

        if target != "gpu":
            raise UnsupportedError(f"--emit {emit} needs --target gpu")
        kernel = compile_ptx(computation, arch)
        return kernel.ptx if emit == "ptx" else kernel.llvm_ir
    def emitted(fusion: HloComputation) -> str:
        kernel = emitter_for(fusion, gpu_target() if target == "gpu" else cpu_target()).emit()
        if passes:
            run_pipeline(kernel.module, passes)
        return print_module(kernel.module)

    if not speculate:
        return emitted(computation)
    from hlocc.runtime.plan_speculation import row_fits
    from hlocc.runtime.speculation import SpeculationOptions, loop_vector_elements, plan_versions

    out = []
    fits = row_fits(computation) if target == "cpu" else None  # (the cuda plan stitches every runtime row)
    if fits is not None:  # a stitch over a symbolic row: the plan version it belongs to
        out.append(f"// plan version stitched if {fits} (else the multi-kernel plan)\n")
    options = SpeculationOptions(target=target)
    for version in plan_versions(computation, loop_vector_elements(computation), options):
        where = ", ".join(f"{v} := {e}" for v, e in version.substitution().items())
        out.append(f"// version {version.name} if {version.predicate}" + (f" ({where})" if where else "") + "\n")
        out.append(emitted(version.specialize(computation)))
    return "".join(out)


def arg_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hlocc fusion-to-mlir",
                                     description="print the kernel IR an emitter generates for a fusion")
    parser.add_argument("input", help="HLO text file ('-': standard input)")
    parser.add_argument("--target", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--passes", default="", help="kernel passes to run after emission, comma-separated")
    parser.add_argument("--emit", choices=("mlir", "llvm", "ptx"), default="mlir",
                        help="mlir: the emitted kernel IR (after --passes); llvm, ptx: the GPU pipeline's NVPTX "
                             "LLVM IR or PTX")
    parser.add_argument("--arch", default="sm_90", help="GPU arch for --emit llvm/ptx (default sm_90)")
    parser.add_argument("--speculate", action="store_true",
                        help="print every speculated version of a symbolic fusion with its predicate")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = arg_parser().parse_args(argv)
    text = read_text_file(args.input)
    passes = [p for p in args.passes.split(",") if p]
    sys.stdout.write(fusion_to_mlir(text, args.target, passes, args.input, args.emit, args.arch,
                                    args.speculate))
    return 0


__all__ = ["arg_parser", "fused_computation", "fusion_to_mlir", "main"]
