"""Self-checking tools (issue 20), used by tests/reliability, tests/hlo/test_fuzz.py and `hlocc
reduce` (tools/reduce.py):

- `hlo_fuzz`: seeded mutations of HLO text; any exception of parse + verify other than an HloError
  is a bug;
- `hlo_grammar`: grammar-aware random HLO text (a hypothesis strategy) for the same check;
- `programs`: random *valid* HLO programs (a hypothesis strategy) and their inputs with special
  values;
- `differential`: a module on several backends against the interpreter under per-type tolerances.

The hypothesis strategies need the `[test]` extra (hypothesis); `differential` and the input
generation do not.
"""
