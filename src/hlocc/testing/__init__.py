"""Self-checking tools (issue 20): the parser and verifier fuzzer (`hlo_fuzz`), the random HLO
program generator and its differential runner (`programs`, `differential`) and the test-case
reducer behind `hlocc reduce` (`reduce`). Used by tests/reliability and the CLI; the hypothesis
strategies need the `[test]` extra."""
