"""The parts of `lower-matmul` (codegen/transforms/lower_matmul.py) that are not a pass of their
own: the packed macro-kernel (`packed.py`). Kept apart so the pass module stays readable."""
