import sys
from pathlib import Path

# Make `tests/corpus.py` importable as `corpus` from every test directory.
sys.path.insert(0, str(Path(__file__).resolve().parent))
