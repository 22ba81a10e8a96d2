"""Kernel lowering passes, one per module; codegen/pipeline.py lists their order."""
