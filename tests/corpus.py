"""Where the shared corpora live (../shared/corpus beside the checkout) and how to read them.
Tests that need them skip with a reason where they are absent; the corpora are never copied here."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
XLA_DIR = CORPUS / "xla"
JAX_DIR = CORPUS / "jax"

# Modules of the XLA corpus that are not valid on their own: split from a multi-module lit file,
# they call a computation defined in another part (XLA's parser rejects them too).
INVALID_ALONE = {"hlo_to_mhlo__while__3.hlo"}


def corpus_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.hlo")) if directory.is_dir() else []


def require(directory: Path) -> None:
    if not directory.is_dir():
        pytest.skip(f"corpus not found at {directory} (shared/ is not beside this checkout)")


def jax_cases() -> list[dict]:
    """Rows of shared/corpus/jax/index.tsv (name, inputs, outputs, rtol, atol, perf, ...)."""
    index = JAX_DIR / "index.tsv"
    if not index.is_file():
        return []
    with index.open() as f:
        return list(csv.DictReader(f, delimiter="\t"))


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as data:
        return dict(data)
