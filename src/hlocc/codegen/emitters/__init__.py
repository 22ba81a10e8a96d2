"""Fusion emitters, one per file, on the shared base (emitters/base.py)."""
