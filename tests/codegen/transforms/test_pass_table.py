"""The kernel pass table (codegen/transforms/__init__.py): every pipeline names registered passes
only, and an unknown name is an error, never silently dropped."""

import pytest

from hlocc.codegen.pipeline import CPU_PIPELINE, KERNEL_PIPELINE, UnknownPassError, check_passes, run_pipeline
from hlocc.codegen.transforms import PASSES


def test_every_pipeline_names_registered_passes():
    for pipeline in (KERNEL_PIPELINE, CPU_PIPELINE):
        check_passes(pipeline)
        assert all(name in PASSES for name in pipeline)


def test_every_pass_module_is_in_the_table():
    """A pass written in transforms/ but left out of the table would be unreachable by name."""
    import pathlib

    import hlocc.codegen.transforms as transforms

    folder = pathlib.Path(transforms.__file__).parent
    modules = {p.stem for p in folder.glob("*.py")} - {"__init__", "util"}
    registered = {cls.__module__.rsplit(".", 1)[1] for cls in PASSES.values() if cls.__module__.startswith(transforms.__name__)}
    assert modules == registered


def test_an_unknown_pass_name_is_an_error():
    with pytest.raises(UnknownPassError, match=r"unknown kernel pass\(es\) no-such-pass; known: .*inline"):
        check_passes(["inline", "no-such-pass"])
    with pytest.raises(UnknownPassError, match="unknown kernel pass 'no-such-pass'"):
        run_pipeline(None, ["no-such-pass"])
