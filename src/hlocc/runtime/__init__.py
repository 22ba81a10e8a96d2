"""The runtime side of hlocc: sequential schedules, buffer assignment (and later thunks and the
executable). `schedule.py` orders each computation; `dataflow.py`, `buffer_sharing.py`,
`liveness.py`, `alias_analysis.py` and `heap_simulator.py` are the analyses behind
`buffer_assignment.py`, whose `assign_buffers` is the entry point the thunk emitter uses."""
