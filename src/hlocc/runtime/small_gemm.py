"""Products of a few rows by a constant f32 matrix (out[m, n] = a[m, k] @ w[k, n], m small, w a
constant of the program): the weights packed once into column panels, then one generated kernel
that streams each panel once per call with the rows' sums in registers.

Why: a BLAS gemm packs both operands on every call. At small m the product is a few flops per
weight and the packing of w (a copy of all of it, every call) is most of the call: numpy's
OpenBLAS took 210-240 µs for [2, 512] @ [512, 2048] on the 2-vCPU development machine, where reading
the 4 MiB of weights once takes ~70 µs; the MLP of `benchmarks/dynamic.py` (two such products)
ran at batch 2-16 at 0.4-0.9x XLA:CPU's speed, at batch 1 (a gemv, which packs nothing) at 2x.
Constant weights need packing once: at plan time (library.GemmRecipe.of).

Layout: `pack(w)` is [panels, k, PANEL] C-contiguous, panel p holding columns [p*PANEL,
(p+1)*PANEL) of every row of w, the last panel zero-padded. The kernel
`hlocc_small_gemm_f32(m, first_panel, end_panel, k, a, lda, packed, out, ldo, n)` runs, per panel,
blocks of up to ROWS rows: ROWS × PANEL/VECTOR vector accumulators, one vector load of the panel
per k and vector, one broadcast of a[r, k] per row; the stores of the last panel are masked to the
n columns. Each row-block size (1..ROWS) is its own loop (no test per k). The sums run in k order
per column, as a gemm's may: within the contraction tolerance of the reference evaluator.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

ROWS = 6
"""Rows a block holds in registers (6 × 4 vectors of 16: 24 of the 32 zmm registers)."""
VECTOR = 16
PANEL = 64
"""Columns a panel holds: 4 vectors."""
MAX_ROWS = 16
"""Up to this many rows the packed kernel runs: measured alone against numpy's OpenBLAS (two
threads, loaded 2-vCPU machine) on the MLP's [m, 512] @ [512, 2048] and [m, 2048] @ [2048, 512],
1.3-1.6x at m = 2-8 and 1.0-1.3x at 16; at 31 0.9-1.2x. (Against one BLAS thread it stays ahead
to 32 rows, 1.3-1.7x on the transformer's 1 MiB weights: two threads are what BLAS has over it.)"""
MIN_WEIGHT_BYTES = 1 << 20
"""Smaller weights stay with BLAS: its per-call packing of a matrix that fits in L2 is cheap, and
BLAS's blocked loop is faster than this kernel's (256 × 256 at 4-8 rows: 0.65-0.8x against one
BLAS thread)."""

_SYMBOL = "hlocc_small_gemm_f32"
_LOCK = threading.Lock()


def pack(w: np.ndarray) -> np.ndarray:
    """`w` [k, n] as [panels, k, PANEL] (module doc), f32, C-contiguous."""
    k, n = w.shape
    panels = -(-n // PANEL)
    padded = np.zeros((k, panels * PANEL), np.float32)
    padded[:, :n] = w
    return np.ascontiguousarray(padded.reshape(k, panels, PANEL).transpose(1, 0, 2))


def _row_loop(rows: int, vectors: int) -> str:
    """LLVM IR of one row block of `rows` rows over one panel: %a_rows (the block's first row of
    a), %panel, %out_rows (its first row of out), %k, %lda, %ldo, %mask (the columns to store)."""
    b = f"rows{rows}"
    lines = [f"{b}:", f"  br label %{b}.loop", f"{b}.loop:",
             f"  %{b}.kk = phi i64 [0, %{b}], [%{b}.kk1, %{b}.loop]"]
    for r in range(rows):
        for v in range(vectors):
            lines.append(f"  %{b}.acc{r}_{v} = phi <16 x float> [zeroinitializer, %{b}], "
                         f"[%{b}.nacc{r}_{v}, %{b}.loop]")
    lines.append(f"  %{b}.woff = mul i64 %{b}.kk, {PANEL}")
    for v in range(vectors):
        lines += [f"  %{b}.wi{v} = add i64 %{b}.woff, {v * VECTOR}",
                  f"  %{b}.wp{v} = getelementptr float, ptr %panel, i64 %{b}.wi{v}",
                  f"  %{b}.w{v} = load <16 x float>, ptr %{b}.wp{v}, align 4"]
    for r in range(rows):
        lines += [f"  %{b}.arow{r} = mul i64 %lda, {r}",
                  f"  %{b}.ai{r} = add i64 %{b}.arow{r}, %{b}.kk",
                  f"  %{b}.ap{r} = getelementptr float, ptr %a_rows, i64 %{b}.ai{r}",
                  f"  %{b}.as{r} = load float, ptr %{b}.ap{r}, align 4",
                  f"  %{b}.ai1_{r} = insertelement <16 x float> poison, float %{b}.as{r}, i64 0",
                  f"  %{b}.av{r} = shufflevector <16 x float> %{b}.ai1_{r}, <16 x float> poison, "
                  f"<16 x i32> zeroinitializer"]
        for v in range(vectors):
            lines.append(f"  %{b}.nacc{r}_{v} = call <16 x float> @llvm.fma.v16f32(<16 x float> %{b}.av{r}, "
                         f"<16 x float> %{b}.w{v}, <16 x float> %{b}.acc{r}_{v})")
    lines += [f"  %{b}.kk1 = add i64 %{b}.kk, 1",
              f"  %{b}.more = icmp ult i64 %{b}.kk1, %k",
              f"  br i1 %{b}.more, label %{b}.loop, label %{b}.store", f"{b}.store:"]
    for r in range(rows):
        lines += [f"  %{b}.orow{r} = mul i64 %ldo, {r}"]
        for v in range(vectors):
            lines += [f"  %{b}.oi{r}_{v} = add i64 %{b}.orow{r}, {v * VECTOR}",
                      f"  %{b}.op{r}_{v} = getelementptr float, ptr %out_rows, i64 %{b}.oi{r}_{v}",
                      f"  %{b}.mask{v} = extractvalue [{vectors} x <16 x i1>] %mask, {v}" if r == 0 else "",
                      f"  call void @llvm.masked.store.v16f32.p0(<16 x float> %{b}.nacc{r}_{v}, "
                      f"ptr %{b}.op{r}_{v}, i32 4, <16 x i1> %{b}.mask{v})"]
    lines.append("  br label %next_block")
    return "\n".join(line for line in lines if line)


def kernel_ir() -> str:
    """The LLVM module of the kernel (module doc)."""
    vectors = PANEL // VECTOR
    lanes = ", ".join(f"i64 {i}" for i in range(VECTOR))
    mask_parts = []
    for v in range(vectors):
        mask_parts += [f"  %base{v} = add i64 %col0, {v * VECTOR}",
                       f"  %bs{v} = insertelement <16 x i64> poison, i64 %base{v}, i64 0",
                       f"  %bv{v} = shufflevector <16 x i64> %bs{v}, <16 x i64> poison, <16 x i32> zeroinitializer",
                       f"  %cols{v} = add <16 x i64> %bv{v}, <{lanes}>",
                       f"  %m{v} = icmp ult <16 x i64> %cols{v}, %nv",
                       f"  {'%mask' if v == vectors - 1 else f'%mask{v}.agg'} = insertvalue [{vectors} x <16 x i1>] "
                       f"{'poison' if v == 0 else f'%mask{v - 1}.agg'}, <16 x i1> %m{v}, {v}"]
    switch = " ".join(f"i64 {r}, label %rows{r}" for r in range(1, ROWS))
    blocks = "\n".join(_row_loop(r, vectors) for r in range(1, ROWS + 1))
    return f"""
declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)
declare void @llvm.masked.store.v16f32.p0(<16 x float>, ptr, i32, <16 x i1>)

define void @{_SYMBOL}(i64 %m, i64 %p0, i64 %p1, i64 %k, ptr noalias readonly %a, i64 %lda,
                        ptr noalias readonly %packed, ptr noalias %out, i64 %ldo, i64 %n) {{
entry:
  %ns = insertelement <16 x i64> poison, i64 %n, i64 0
  %nv = shufflevector <16 x i64> %ns, <16 x i64> poison, <16 x i32> zeroinitializer
  %any = icmp ult i64 %p0, %p1
  %rows_any = icmp sgt i64 %m, 0
  %k_any = icmp sgt i64 %k, 0
  %go0 = and i1 %any, %rows_any
  %go = and i1 %go0, %k_any
  br i1 %go, label %panel_loop, label %done
panel_loop:
  %p = phi i64 [%p0, %entry], [%p_next, %panel_next]
  %col0 = mul i64 %p, {PANEL}
  %poff0 = mul i64 %p, %k
  %poff = mul i64 %poff0, {PANEL}
  %panel = getelementptr float, ptr %packed, i64 %poff
{chr(10).join(mask_parts)}
  br label %block
block:
  %r0 = phi i64 [0, %panel_loop], [%r0_next, %next_block]
  %aoff = mul i64 %r0, %lda
  %a_rows = getelementptr float, ptr %a, i64 %aoff
  %ooff0 = mul i64 %r0, %ldo
  %ooff = add i64 %ooff0, %col0
  %out_rows = getelementptr float, ptr %out, i64 %ooff
  %left = sub i64 %m, %r0
  %big = icmp sge i64 %left, {ROWS}
  %rows = select i1 %big, i64 {ROWS}, i64 %left
  switch i64 %rows, label %rows{ROWS} [{switch}]
{blocks}
next_block:
  %r0_next = add i64 %r0, %rows
  %rows_left = icmp slt i64 %r0_next, %m
  br i1 %rows_left, label %block, label %panel_next
panel_next:
  %p_next = add i64 %p, 1
  %panels_left = icmp ult i64 %p_next, %p1
  br i1 %panels_left, label %panel_loop, label %done
done:
  ret void
}}
"""


_Function = ctypes.CFUNCTYPE(None, *([ctypes.c_int64] * 4), ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                             ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


_COMPILED: list[tuple] = []  # [(the kernel, the object that keeps its code alive)] once compiled


def _kernel() -> tuple:
    """The compiled kernel, compiled at the first use in the process (~65 ms)."""
    if not _COMPILED:
        with _LOCK:
            if not _COMPILED:
                _COMPILED.append(_compile())
    return _COMPILED[0]


def _compile() -> tuple:
    import llvmlite.binding as llvm

    from hlocc.runtime.jit import _LOCK as LLVM_LOCK
    from hlocc.runtime.jit import ObjectEngine, host_target_machine

    machine = host_target_machine()
    with LLVM_LOCK:  # (the IR is the loops as they should run: instruction selection only, no IR passes)
        module = llvm.parse_assembly(kernel_ir())
        module.triple, module.data_layout = machine.triple, str(machine.target_data)
        module.verify()
        data = machine.emit_object(module)
    loaded = ObjectEngine().load(data, [_SYMBOL])
    return _Function(loaded.address(_SYMBOL)), loaded


def run_addresses(m: int, k: int, n: int, a: int, packed: int, panels: int, out: int) -> None:
    """out[m, n] = a[m, k] @ w for pack(w) of `panels` panels at address `packed`, a and out
    row-major and contiguous at their addresses (the caller keeps all three alive)."""
    _kernel()[0](m, 0, panels, k, a, k, packed, out, n, n)


def run(a: np.ndarray, packed: np.ndarray, out: np.ndarray, n: int) -> None:
    """out[:m, :n] = a @ w for `packed` = pack(w): a [m, k] and out [m, n] f32 with unit column
    stride (rows may be strided)."""
    m, k = a.shape
    function, _ = _kernel()
    function(m, 0, packed.shape[0], k, a.ctypes.data, a.strides[0] // 4, packed.ctypes.data, out.ctypes.data,
             out.strides[0] // 4, n)


__all__ = ["MAX_ROWS", "MIN_WEIGHT_BYTES", "PANEL", "ROWS", "kernel_ir", "pack", "run", "run_addresses"]
