"""The HLO layer: the IR (`ir.py`: module, computation, instruction, with the one naming rule in
`name_uniquer.py`), its text form (`scanner.py`, `parser.py`, `printer.py`, `attribute_syntax.py`,
`literals.py`), types and shapes (`types.py`, shape and layout facts in `shape_util.py`; symbolic
sizes in `symbolic.py`, call-time guards on them in `guards.py`, binding and specialization to
concrete sizes in `specialize.py`),
attributes (`attributes.py`), the opcode registry (`opcodes.py`), shape inference
(`shape_inference.py` and the `shape_rules_<area>.py` modules), the verifier (`verifier.py`) and
the call graph (`call_graph.py`).

Importing the package registers every opcode's shape rule, so `HloComputation.add` and the
verifier can infer shapes through the registry whichever HLO module was imported first.
"""

from hlocc.hlo import shape_inference  # noqa: F401  (registers the shape rules)
