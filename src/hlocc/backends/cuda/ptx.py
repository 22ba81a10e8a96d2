"""Fusion → PTX for an NVIDIA GPU (issue 7; seed 000 "Conversion to LLVM", XLA's NVPTX compiler):

    emitter (GPU form, the same kernel the CPU runs in SIMT simulation)
      → the GPU pass pipeline (codegen/pipeline.py KERNEL_PIPELINE)
      → LLVM IR through codegen/llvm/ in GPU mode: shared memory as addrspace(3) globals, barriers as
        `llvm.nvvm.barrier0`, shuffles as `shfl.sync.bfly`, atomics as `atomicrmw`/CAS loops
      → a `ptx_kernel` wrapper: one `ptr addrspace(1)` per buffer (noalias; the fusion's
        parameters also readonly, which lets NVPTX use the non-coherent `ld.global.nc`), then one
        i64 per dimension variable of a kernel with runtime dims, launch bounds (`nvvm.maxntid`),
        thread and block ids from `%tid.x`/`%ctaid.x`
      → llvmlite's NVPTX backend at O3 → PTX text for `arch` (sm_80, sm_90, ...)

Runtime dims (dynamic shapes, issue 15): a fusion with symbolic shapes compiles once, as on the
CPU (backends/cpu/kernel.py), into a kernel whose `symbols` are its dimension variables (sorted).
The kernel body reads them from a table of i64 (`lower-symbol-values`, the CPU's ABI); the PTX
entry takes them *by value*, one `.param .u64` each after the buffers, and the wrapper stores them
into a local table that it hands to the inlined body, which LLVM's SROA folds away, so each value
is a plain `ld.param` (a pointer to a device table would cost a device allocation and an upload
per binding, a dependent global load at every kernel's start, and the table's lifetime to manage
against the stream; kernel parameters are copied by cuLaunchKernel, up to 4 KiB of them). The
launch grid (`launch_dims.blocks`, a size expression) is evaluated per binding on the host,
as the CPU binder does (`PtxKernel.launch_at`).

The driver JIT-compiles the PTX when the module is loaded (backends/cuda/driver.py); `validate_ptx`
runs ptxas on it, which is how machines without a GPU check it (tests/backends/cuda/test_ptx.py).

Math: `expand-float-ops` leaves only operations NVPTX selects natively (fabs, sqrt, fma, floor,
ceil, round, trunc, copysign, min/max, bit counts), never a libm call or an intrinsic that NVPTX's
instruction selection cannot handle (which aborts the process): `TranslateOptions.allow_libm` is
always off here, and tests/backends/cuda/test_ptx.py compiles every math op for every arch.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import llvmlite.binding as llvm
from llvmlite import ir
from xdsl.dialects import func
from xdsl.ir import BlockArgument

from hlocc.analysis.hero import computation_emitter_kind
from hlocc.analysis.launch import LaunchDims
from hlocc.codegen.elemental.storage import array_leaves
from hlocc.codegen.emitters.base import KernelModule, fusion_symbols
from hlocc.codegen.emitters.registry import emit_fusion
from hlocc.codegen.ir import SharedMemoryOp, TensorMapOp
from hlocc.codegen.ir.tma_ops import TensorMapSpec
from hlocc.codegen.ir.warpgroup_ops import WARPGROUP_OPS
from hlocc.codegen.llvm import LlvmTranslator, TranslateOptions
from hlocc.codegen.pipeline import PipelineOptions, dump_file, pipeline_for, run_pipeline
from hlocc.codegen.schedule.choice import forced_schedule_key
from hlocc.codegen.target import Target, gpu_target
from hlocc.errors import HloError
from hlocc.hlo.ir import HloComputation
from hlocc.hlo.printer import computation_fingerprint
from hlocc.hlo.symbolic import DimExpr, evaluate, parse_dim_expr
from hlocc.hlo.types import Shape
from hlocc.runtime.cache import timed_get, timed_put, versions_key, warn_once

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
SM_COUNTS = {"sm_80": 108, "sm_86": 84, "sm_89": 128, "sm_90": 132, "sm_90a": 132, "sm_100": 148, "sm_120": 84}
"""Streaming multiprocessors of the arch's flagship part (A100, A10/3090, L40, H100, B200,
RTX 5090): what the launch heuristics assume when no device says otherwise."""

BUFFER_ALIGNMENT = 16
"""Bytes every kernel buffer is aligned to (XLA's kEntryParameterAlignBytes): the runtime's slices
are 64-byte aligned and cuMemAlloc's 256, so vector loads of up to 16 bytes can be aligned."""

_LOCK = threading.Lock()


class PtxError(HloError):
    """PTX that ptxas (or the NVPTX backend) rejects, or a kernel that does not fit the GPU."""


@dataclass
class PtxKernel:
    """A kernel compiled to PTX. Its `.entry` function `name` takes one `.param .u64` (a global
    pointer) per buffer: the fusion's parameters, then its outputs, in physical layout order, the
    same order as the CPU backend's CompiledKernel; then, for a kernel with runtime dims, one
    `.param .u64` per dimension variable of `symbols`, its value (module doc). Launch with grid
    (launch_dims.blocks, 1, 1) — `launch_at(dims)` for runtime dims —, block
    (launch_dims.threads_per_block, 1, 1) and `dynamic_shared_bytes(shared_bytes)` of dynamic shared
    memory (0 where its `shared_bytes` fit the static 48 KiB)."""

    name: str
    ptx: str
    arch: str  # "sm_80", "sm_90", ...
    launch_dims: LaunchDims
    param_shapes: list[Shape]
    output_shapes: list[Shape]
    shared_bytes: int = 0
    emitter: str = "loop"
    output_aliases: tuple[tuple[int, int], ...] = ()  # (output, parameter), as CompiledKernel's
    computation: HloComputation | None = None
    llvm_ir: str = ""
    times_ms: dict[str, float] = field(default_factory=dict)
    symbols: tuple[str, ...] = ()  # dimension variables passed by value after the buffers (module doc)
    # TMA kernels (sm_90a): per `.param .align 64 .b8 [128]` after the dims, (buffer, TensorMapSpec)
    # of the CUtensorMap the launch encodes for that buffer's address (backends/cuda/tensor_map.py)
    tensor_maps: tuple = ()

    @property
    def has_work(self) -> bool:
        """False when every output is empty; with runtime dims, whether it has code (`launch_at`
        decides per binding)."""
        if self.symbols:
            return bool(self.ptx)
        return bool(self.ptx) and any(s.num_elements for s in self.output_shapes)

    def launch_at(self, dims: Sequence[int]) -> LaunchDims | None:
        """The launch at the values `dims` of `symbols` (in order), or None when no output has an
        element there: the block count evaluated, at least one (the CPU's rule)."""
        if len(dims) != len(self.symbols):
            raise PtxError(f"kernel '{self.name}' takes the values of {len(self.symbols)} dimension variable(s) "
                           f"({', '.join(self.symbols) or 'none'}), got {len(dims)}")
        if not self.symbols:
            return self.launch_dims if self.has_work else None
        binding = dict(zip(self.symbols, (int(d) for d in dims)))
        if not self.ptx or not any(_elements(s, binding) for s in self.output_shapes):
            return None
        return self.launch_dims.at(binding)


def _elements(shape: Shape, binding: Mapping[str, int]) -> int:
    n = 1
    for d in shape.dims:
        n *= evaluate(d, binding)
    return n


def target_for(arch: str, sm_count: int | None = None) -> Target:
    """The GPU `Target` of an arch (launch heuristics as XLA's, for `sm_count` SMs)."""
    _check_arch(arch)
    return gpu_target(sm_count or SM_COUNTS.get(arch, 132), name=arch)


_CACHE: dict[tuple, PtxKernel] = {}


def compile_ptx(fusion: HloComputation, arch: str = "sm_90", name: str = "main",
                options: PipelineOptions | None = None, noalias: bool = True,
                sm_count: int | None = None) -> PtxKernel:
    """Compile a fused computation into a PTX kernel for `arch`. Cached by the computation's
    structure, the target and `noalias`, in-process (XLA's KernelReuseCache) and on disk (the PTX
    and its launch plan, `ptx_key`), unless `options` asks for IR dumps."""
    target = target_for(arch, sm_count)
    fingerprint = computation_fingerprint(fusion)
    forced = forced_schedule_key()
    key = (fingerprint, target, noalias, forced)
    leaves = array_leaves(fusion.root.shape)
    params = [p.shape for p in fusion.parameters]
    times: dict[str, float] = {}
    disk_key = ptx_key(fingerprint, target, noalias, forced)
    if options is None:
        with _LOCK:
            cached = _CACHE.get(key)
        if cached is not None:
            return dataclasses.replace(cached, computation=fusion)
        stored = load_cached_ptx(disk_key, params, leaves, times)
        if stored is not None:
            stored.computation = fusion
            with _LOCK:
                return _CACHE.setdefault(key, stored)
    kernel = emit_fusion(fusion, target, name, times)
    if kernel is None:
        return PtxKernel(name, "", arch, LaunchDims(1, 0), params, leaves, computation=fusion,
                         emitter=computation_emitter_kind(fusion).value, symbols=fusion_symbols(fusion))
    compiled = compile_kernel_module_to_ptx(kernel, target, params, leaves, options, noalias, times)
    compiled.computation = fusion
    if options is None:
        store_ptx(disk_key, compiled)
        with _LOCK:
            _CACHE[key] = compiled
    return compiled


# -- PTX on disk ----------------------------------------------------------------------------------
PTX_KEY_VERSION = "hlocc-cuda-ptx 2"  # 2: symbols (runtime dims) and a symbolic block count in the plan


def ptx_key(fingerprint: str, target: Target, noalias: bool, schedule: str = "") -> str:
    """A PTX kernel's key in the persistent cache (runtime/cache.py): the fused computation's
    canonical fingerprint, the target (arch, launch heuristics), noalias, the GPU pipeline, the
    matmul schedule in force if any (`forced_schedule_key`) and the versions of hlocc, xDSL, llvmlite
    and LLVM (the host CPU plays no part)."""
    return (f"{PTX_KEY_VERSION}\nfusion: {fingerprint}\ntarget: {target!r}\nnoalias: {noalias}\n"
            f"pipeline: {','.join(pipeline_for('gpu', target.has_fma))}\nversions: {versions_key()}"
            + (f"\nschedule: {schedule}" if schedule else ""))


def _plan_of(kernel: PtxKernel) -> dict:
    blocks = kernel.launch_dims.blocks
    return {"name": kernel.name, "arch": kernel.arch, "threads_per_block": kernel.launch_dims.threads_per_block,
            "blocks": str(blocks) if isinstance(blocks, DimExpr) else blocks, "shared_bytes": kernel.shared_bytes,
            "emitter": kernel.emitter, "output_aliases": [list(a) for a in kernel.output_aliases],
            "symbols": list(kernel.symbols),
            "tensor_maps": [[buffer, dataclasses.asdict(spec)] for buffer, spec in kernel.tensor_maps]}


def store_ptx(key: str, kernel: PtxKernel) -> None:
    """Store a kernel's PTX and the plan to launch it, as plain data, when the cache is on."""
    timed_put(key, _plan_of(kernel), kernel.ptx.encode(), kernel.times_ms, "cache_store")


def load_cached_ptx(key: str, param_shapes: list[Shape], output_shapes: list[Shape],
                    times: dict[str, float]) -> PtxKernel | None:
    """The PTX kernel the persistent cache holds for `key`, or None (a miss, or a bad entry:
    warned about once, and the caller compiles it again)."""
    found = timed_get(key, times, "cache_lookup")
    if found is None:
        return None
    cache, entry = found
    plan = entry.plan
    try:
        raw = plan["blocks"]
        blocks = parse_dim_expr(raw) if isinstance(raw, str) else int(raw)
        kernel = PtxKernel(str(plan["name"]), entry.payload.decode(), str(plan["arch"]),
                           LaunchDims(int(plan["threads_per_block"]), blocks), list(param_shapes),
                           list(output_shapes), int(plan["shared_bytes"]), str(plan["emitter"]),
                           tuple((int(o), int(p)) for o, p in plan["output_aliases"]), times_ms=times,
                           symbols=tuple(str(v) for v in plan.get("symbols", ())),
                           tensor_maps=tuple((int(buffer), _spec(fields)) for buffer, fields
                                             in plan.get("tensor_maps", ())))
    except (KeyError, TypeError, ValueError, UnicodeDecodeError, HloError) as e:
        warn_once(f"hlocc cache: entry {cache.path(key)}: malformed PTX kernel plan ({e!r}); compiling again")
        return None
    if f".entry {kernel.name}(" not in kernel.ptx:
        warn_once(f"hlocc cache: entry {cache.path(key)} holds no entry '{kernel.name}'; compiling again")
        return None
    return kernel


def _spec(fields: dict) -> TensorMapSpec:
    dims, strides, box = (tuple(int(v) for v in fields[k]) for k in ("dims", "strides", "box"))
    return TensorMapSpec(str(fields["element"]), dims, strides, box, int(fields["swizzle"]))


STATIC_SHARED_BYTES = 48 * 1024
"""Shared memory a block may declare statically on every arch. A kernel that needs more takes it as
dynamic shared memory (one `extern .shared` array, codegen/llvm/gpu_ops.py): the driver opts its
function in to that size and every launch passes it (driver.py `CudaKernel.dynamic_shared_bytes`),
up to the arch's `Target.max_shared_memory_bytes`."""


def _requested_shared_bytes(kernel: KernelModule) -> int:
    return sum(op.size.value.data for op in kernel.module.walk() if isinstance(op, SharedMemoryOp))


WGMMA_SHARED_ALIGNMENT = 1024
"""Alignment of the shared buffers of a kernel with wgmma: its tiles' 128-byte swizzle pattern
repeats every 1024 bytes of shared address and its descriptors take base offset 0."""


def _uses_wgmma(kernel: KernelModule) -> bool:
    return any(isinstance(op, WARPGROUP_OPS) for op in kernel.module.walk())


def dynamic_shared_bytes(shared_bytes: int) -> int:
    """The shared memory a launch passes for a kernel of `shared_bytes` (0: all of it static)."""
    return shared_bytes if shared_bytes > STATIC_SHARED_BYTES else 0


def compile_kernel_module_to_ptx(kernel: KernelModule, target: Target, param_shapes: list[Shape],
                                 output_shapes: list[Shape], options: PipelineOptions | None = None,
                                 noalias: bool = True, times: dict[str, float] | None = None) -> PtxKernel:
    """Lower an emitted kernel module (in place) with the GPU pipeline and compile it to PTX."""
    times = times if times is not None else {}
    run_pipeline(kernel.module, pipeline_for("gpu", target.has_fma), options, timings=times,
                 verify_each=False)  # as the CPU's
    t0 = time.perf_counter()
    threads = kernel.launch.threads_per_block
    translator = LlvmTranslator(kernel.entry, TranslateOptions(noalias=noalias), NVPTX_TRIPLE, gpu=True,
                                lane_mask=-1 if threads >= 32 else (1 << threads) - 1)
    translator.dynamic_shared = _requested_shared_bytes(kernel) > STATIC_SHARED_BYTES
    if _uses_wgmma(kernel):
        if target.name not in ARCH_SPECIFIC:
            raise PtxError(f"kernel '{kernel.entry}' uses wgmma, which only sm_90a has (compile it for sm_90a, "
                           f"not {target.name})")
        translator.shared_alignment = WGMMA_SHARED_ALIGNMENT
    llmod = translator.translate(kernel.module)
    if translator.shared_bytes > target.max_shared_memory_bytes:
        raise PtxError(f"kernel '{kernel.entry}' needs {translator.shared_bytes} bytes of shared memory; "
                       f"a block of {target.name} has {target.max_shared_memory_bytes}")
    written = {param for _, param in kernel.output_aliases}
    readonly = [k < kernel.num_params and k not in written and noalias
                for k in range(kernel.num_params + kernel.num_outputs)]
    wrapper = f"{kernel.entry}_kernel"
    maps = tensor_map_params(kernel)
    add_kernel_wrapper(llmod, llmod.get_global(kernel.entry), readonly, noalias, threads, wrapper,
                       symbols=len(kernel.symbols), tensor_maps=len(maps))
    llvm_ir = str(llmod)
    times["to_llvm"] = (time.perf_counter() - t0) * 1e3
    if options is not None:
        if options.print_ir_after_all:
            options.stream(f"// -----// LLVM IR (NVPTX) //----- //\n{llvm_ir}")
        dump_file(options, "nvptx.ll", llvm_ir)
    ptx = emit_ptx(llvm_ir, target.name, times)
    if options is not None:
        dump_file(options, "ptx", ptx)
    return PtxKernel(wrapper, ptx, target.name, kernel.launch, list(param_shapes), list(output_shapes),
                     translator.shared_bytes, kernel.emitter, kernel.output_aliases, None, llvm_ir, times,
                     tuple(kernel.symbols), maps)


def tensor_map_params(kernel: KernelModule) -> tuple:
    """(buffer index, TensorMapSpec) of each `xla.tensor_map` of the entry, in order: the kernel's
    tensor-map parameters (codegen/llvm/tma_ops.py)."""
    entry = next(op for op in kernel.module.walk() if isinstance(op, func.FuncOp) and op.sym_name.data == kernel.entry)
    params = []
    for op in entry.walk():
        if isinstance(op, TensorMapOp):
            source = op.source
            if not (isinstance(source, BlockArgument) and source.owner is entry.body.block):
                raise PtxError(f"kernel '{kernel.entry}': a tensor map of a value that is not one of its buffers")
            params.append((source.index, op.spec))
    return tuple(params)


def add_kernel_wrapper(module: ir.Module, entry: ir.Function, readonly: list[bool], noalias: bool, threads: int,
                       name: str, symbols: int = 0, tensor_maps: int = 0) -> ir.Function:
    """`ptx_kernel void name(ptr addrspace(1) noalias [readonly] align 16 %buffer..., i64 %dim...)`:
    calls the always-inline entry with generic pointers (address-space inference keeps them
    global), for a kernel with `symbols` runtime dims a local table of their values (what its
    body loads them from: folded into the parameters after inlining), and the thread and block
    ids; launch bounds `threads`. Then, for a TMA kernel, `tensor_maps` CUtensorMaps by value
    (`ptr byval([128 x i8]) align 64 "nvvm.grid_constant"`: `.param .align 64 .b8 [128]`), whose
    addresses the entry takes after the ids."""
    global_ptr = ir.PointerType(addrspace=1)
    i32, i64 = ir.IntType(32), ir.IntType(64)
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [global_ptr] * len(readonly) + [i64] * symbols
                                             + [ir.PointerType()] * tensor_maps), name=name)
    fn.calling_convention = "ptx_kernel"
    fn.attributes = _LaunchBounds(threads)
    for arg, ro in zip(fn.args, readonly):
        if noalias:
            arg.add_attribute("noalias")
        if ro:
            arg.attributes = _ReadonlyArgument(arg.attributes)
        arg.attributes.align = BUFFER_ALIGNMENT
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ids = []
    for register in ("tid.x", "ctaid.x"):
        sreg = f"llvm.nvvm.read.ptx.sreg.{register}"
        reader = module.globals.get(sreg) or ir.Function(module, ir.FunctionType(i32, []), name=sreg)
        ids.append(b.zext(b.call(reader, []), i64))
    buffers = [b.addrspacecast(arg, ir.PointerType()) for arg in fn.args[:len(readonly)]]
    maps = list(fn.args[len(fn.args) - tensor_maps:]) if tensor_maps else []
    for k, arg in enumerate(maps):
        arg.name = f"tensor_map{k}"
        arg.attributes = _TensorMapArgument()
    if symbols:
        table = b.alloca(ir.ArrayType(i64, symbols), name="dims")
        table.type = ir.PointerType()  # as an opaque pointer, the form the translated body takes
        for k, value in enumerate(fn.args[len(readonly):len(readonly) + symbols]):
            value.name = f"dim{k}"
            b.store(value, b.gep(table, [ir.Constant(i64, k)], inbounds=True, source_etype=i64))
        buffers.append(table)
    b.call(entry, [*buffers, *ids, *maps] if len(entry.args) > len(buffers) else buffers)
    b.ret_void()
    return fn


class _ReadonlyArgument(ir.values.ArgumentAttributes):
    """An argument's attributes plus `readonly`, which llvmlite's list of argument attributes lacks."""

    _known = {**ir.values.ArgumentAttributes._known, "readonly": False}

    def __init__(self, attributes: ir.values.ArgumentAttributes):
        super().__init__([*attributes, "readonly"])


class _TensorMapArgument(ir.values.ArgumentAttributes):
    """A CUtensorMap passed by value as a __grid_constant__ (its address may be taken: TMA reads it
    in param space), which llvmlite's byval (typed by a pointee) cannot spell for opaque pointers."""

    def _to_list(self, typ):
        return ["byval([128 x i8])", "align 64", '"nvvm.grid_constant"']


class _LaunchBounds(ir.values.FunctionAttributes):
    """The function attribute `"nvvm.maxntid"="N"` (launch bounds), which llvmlite does not know."""

    def __init__(self, threads: int):
        self._bound = f'"nvvm.maxntid"="{threads}"'
        self._known = {*ir.values.FunctionAttributes._known, self._bound}
        super().__init__()
        self.add(self._bound)


@functools.cache
def _init_nvptx() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


ARCH_SPECIFIC = ("sm_90a",)
"""Arch-specific targets (PTX's `a` suffix: features of that arch only, e.g. sm_90a's wgmma), which
this backend knows."""


def _check_arch(arch: str) -> int:
    if arch in ARCH_SPECIFIC:
        return int(arch[3:-1])
    if not (arch.startswith("sm_") and arch[3:].isdigit() and int(arch[3:]) >= 70):
        raise PtxError(f"unknown GPU arch '{arch}': expected sm_70 or newer, e.g. sm_80, sm_90, sm_90a")
    return int(arch[3:])


def ptx_version(arch: str) -> int:
    """The PTX ISA version emitted for `arch`: 7.8 (CUDA 11.8: every driver since accepts it) up to
    sm_90, the first version that knows the arch beyond; 8.0 for sm_90a, the first with its
    `wgmma` (CUDA 12.0), which only kernels that need it target."""
    sm = _check_arch(arch)
    if arch in ARCH_SPECIFIC:
        return 80
    return 78 if sm <= 90 else 86 if sm <= 100 else 87


def nvptx_target_machine(arch: str) -> llvm.TargetMachine:
    _init_nvptx()
    target = llvm.Target.from_triple(NVPTX_TRIPLE)
    return target.create_target_machine(cpu=arch, features=f"+ptx{ptx_version(arch)}", opt=3)


def emit_ptx(llvm_ir: str, arch: str, times: dict[str, float] | None = None) -> str:
    """Verify, optimise at O3 for `arch` and emit PTX."""
    from hlocc.runtime.jit import optimize

    times = times if times is not None else {}
    tm = nvptx_target_machine(arch)
    t0 = time.perf_counter()
    with _LOCK:
        mod = llvm.parse_assembly(llvm_ir)
        mod.triple = NVPTX_TRIPLE
        mod.data_layout = str(tm.target_data)
        mod.verify()
        optimize(mod, tm)
        times["llvm_opt"] = (time.perf_counter() - t0) * 1e3
        t0 = time.perf_counter()
        ptx = tm.emit_assembly(mod)
    times["llvm_codegen"] = (time.perf_counter() - t0) * 1e3
    return ptx


# -- ptxas ---------------------------------------------------------------------------------------

def find_ptxas() -> str | None:
    """ptxas from $HLOCC_PTXAS, the PATH, $CUDA_HOME, /usr/local/cuda, or the `nvidia-cuda-nvcc`
    wheel (the test extra); None when there is none."""
    candidates = [os.environ.get("HLOCC_PTXAS"), shutil.which("ptxas")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(os.path.join(home, "bin", "ptxas"))
    try:
        import nvidia.cuda_nvcc as nvcc  # the pip wheel's toolkit

        for root in list(getattr(nvcc, "__path__", [])):
            candidates.append(os.path.join(root, "bin", "ptxas"))
    except ImportError:
        pass
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def validate_ptx(ptx: str, arch: str, ptxas: str | None = None) -> None:
    """Assemble `ptx` for `arch` with ptxas; raise PtxError with ptxas's message if it rejects it."""
    ptxas = ptxas or find_ptxas()
    if ptxas is None:
        raise PtxError("no ptxas found (set HLOCC_PTXAS, or install the CUDA toolkit or the "
                       "'nvidia-cuda-nvcc-cu12' wheel)")
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as f:
            f.write(ptx)
        result = subprocess.run([ptxas, f"-arch={arch}", source, "-o", os.path.join(tmp, "kernel.cubin")],
                                capture_output=True, text=True)
    if result.returncode != 0:
        raise PtxError(f"ptxas rejected the PTX for {arch}: {result.stderr.strip() or result.stdout.strip()}")


__all__ = ["NVPTX_TRIPLE", "PtxError", "PtxKernel", "compile_ptx", "emit_ptx", "find_ptxas", "target_for",
           "validate_ptx"]
