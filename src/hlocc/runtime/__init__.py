"""The runtime side of hlocc (XLA's GpuCompiler back half and its thunks): `executable.py`'s
`build_executable` runs the HLO pipeline a backend gives it, schedules, assigns buffers and emits
the thunks (`thunks.py`; library calls in `library.py`) that a ThunkExecutable runs.
`schedule.py` orders each computation; `dataflow.py`, `buffer_sharing.py`, `liveness.py`,
`alias_analysis.py` and `heap_simulator.py` are the analyses behind `buffer_assignment.py`, whose
`assign_buffers` is the entry point the thunk emitter uses. The call graph it reads is
hlo/call_graph.py."""
