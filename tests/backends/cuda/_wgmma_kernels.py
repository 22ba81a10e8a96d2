"""A hand-written GPU-form kernel with one `xla.wgmma_mma_async` (codegen/ir/warpgroup_ops.py), for
the SIMT simulation and PTX tests: 128 threads (one warpgroup) copy an image of shared memory in,
then multiply with descriptors and accumulators each thread reads from the kernel's arguments, so
a test can build both from PTX's documented layouts independently of any lowering."""

from __future__ import annotations


def wgmma_kernel(n: int, image: int, element: str = "bf16", threads: int = 128, b_offset: int | None = None) -> str:
    """d[t] = wgmma(desc[t, 0], desc[t, 1], c[t]) over `image` 16-bit elements of shared memory
    (copied from `x`); c and d are [threads, N/2] f32. With `b_offset`, the descriptors are instead
    `xla.wgmma_descriptor`s (128-byte swizzle, SBO 1024) of shared elements 0 (A) and b_offset (B)."""
    if b_offset is None:
        descriptors = (f"  %da = tensor.extract %desc[%t, %i0] : tensor<{threads}x2xi64>\n"
                       f"  %db = tensor.extract %desc[%t, %i1] : tensor<{threads}x2xi64>\n")
    else:
        attrs = "{swizzle = 128 : i64, lbo = 16 : i64, sbo = 1024 : i64}"
        descriptors = (f"  %ib = arith.constant {b_offset} : index\n"
                       f"  %da = xla.wgmma_descriptor %s4[%i0] {attrs} : tensor<{image}xi16>\n"
                       f"  %db = xla.wgmma_descriptor %s4[%ib] {attrs} : tensor<{image}xi16>\n")
    r = n // 2
    acc = f"vector<{r}xf32>"
    gather = [f"  %g0 = arith.constant dense<0.0> : {acc}\n"]
    scatter = []
    for i in range(r):
        gather.append(f"  %ci{i} = arith.constant {i} : index\n"
                      f"  %ce{i} = tensor.extract %c[%t, %ci{i}] : tensor<{threads}x{r}xf32>\n"
                      f"  %g{i + 1} = vector.insert %ce{i}, %g{i} [{i}] : f32 into {acc}\n")
        scatter.append(f"  %dx{i} = vector.extract %w#0[{i}] : f32 from {acc}\n"
                       f"  %d{i + 1} = tensor.insert %dx{i} into %d{i}[%t, %ci{i}] : tensor<{threads}x{r}xf32>\n")
    rounds = -(-image // threads)
    return f"""
func.func @main(%x: tensor<{image}xi16>, %desc: tensor<{threads}x2xi64>, %c: tensor<{threads}x{r}xf32>,
                %d0: tensor<{threads}x{r}xf32>) -> tensor<{threads}x{r}xf32> {{
  %t = "gpu.thread_id"() <{{dimension = #gpu<dim x>}}> {{xla.range = [0 : index, {threads - 1} : index]}} : () -> index
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %rounds = arith.constant {rounds} : index
  %size = arith.constant {image} : index
  %step = arith.constant {threads} : index
  %s0 = xla.allocate_shared : tensor<{image}xi16>
  %s1 = scf.for %j = %i0 to %rounds step %i1 iter_args(%s = %s0) -> (tensor<{image}xi16>) {{
    %e0 = arith.muli %j, %step : index
    %e = arith.addi %e0, %t : index
    %in = arith.cmpi ult, %e, %size : index
    %s2 = scf.if %in -> (tensor<{image}xi16>) {{
      %v = tensor.extract %x[%e] : tensor<{image}xi16>
      %s3 = tensor.insert %v into %s[%e] : tensor<{image}xi16>
      scf.yield %s3 : tensor<{image}xi16>
    }} else {{
      scf.yield %s : tensor<{image}xi16>
    }}
    scf.yield %s2 : tensor<{image}xi16>
  }}
  xla.fence_proxy_async
  %s4 = xla.sync_threads %s1 : tensor<{image}xi16>
{descriptors}{''.join(gather)}  xla.wgmma_fence
  %acc = xla.wgmma_mma_async %da, %db, %g{r} {{n = {n} : i64, element = "{element}"}} : {acc} -> {acc}
  xla.wgmma_commit_group
  %w:1 = xla.wgmma_wait_group %acc {{pending = 0 : i64}} : {acc} -> {acc}
{''.join(scatter)}  func.return %d{r} : tensor<{threads}x{r}xf32>
}}
"""


_SM90A_PTX_SCRIPT = """
import json, os, subprocess, tempfile
from hlocc.backends.cuda.ptx import compile_ptx, find_ptxas, validate_ptx
from hlocc.codegen.pipeline import PipelineOptions
from hlocc.codegen.schedule import MatmulSchedule, use_schedule
from hlocc.hlo.parser import parse_hlo
with use_schedule({schedule}):
    kernel = compile_ptx(parse_hlo({text!r}).entry, "sm_90a", options=PipelineOptions(False, None, "kernel",
                                                                                      lambda s: None))
validate_ptx(kernel.ptx, "sm_90a")
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "k.ptx")
    with open(path, "w") as f:
        f.write(kernel.ptx)
    info = subprocess.run([find_ptxas(), "-arch=sm_90a", "-v", path, "-o", os.path.join(tmp, "k.cubin")],
                          capture_output=True, text=True).stderr
print(json.dumps(dict(ptx=kernel.ptx, threads=kernel.launch_dims.threads_per_block, blocks=kernel.launch_dims.blocks,
                      shared=kernel.shared_bytes, info=info, {extra})))
"""


def sm90a_ptx_script(text: str, schedule: str, extra: str = "") -> str:
    """A script for `_ptx_device.ptx_in_subprocess`: compile the HLO `text` for sm_90a under
    `schedule` (a `MatmulSchedule(...)` expression), check it with ptxas -v, and print as JSON the
    PTX, the launch, the shared bytes, ptxas' report and the `extra` items (`key=expression` over
    `kernel`)."""
    return _SM90A_PTX_SCRIPT.format(schedule=schedule, text=text, extra=extra)
