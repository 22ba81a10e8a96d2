"""The fusion emitters (XLA's xla/backends/gpu/codegen/emitters/), one per file: loop, transpose,
reduction (with reduction_tiling.py and reduce_partials.py, the CPU row partials), scatter,
concatenate, dynamic_update_slice, input_slices; elemental_reduce.py registers reduce and
reduce-window as index ops of elemental emission. They share base.py (partitioning, subgraph
functions, the entry function); registry.py picks the emitter of a fusion."""
