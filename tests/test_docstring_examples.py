"""Every example in a docstring holds: the house style asks for one in every hookspec and renderer, and an
example that no longer runs misleads more than none."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import pytest_specdec

# The shipped claims (benchmarks) are pytest tests of their own, collected by their own runs; a __main__ runs.
MODULES = sorted(
    found.name
    for found in pkgutil.walk_packages(pytest_specdec.__path__, "pytest_specdec.")
    if not found.name.startswith("pytest_specdec.benchmarks") and not found.name.endswith(".__main__")
)


@pytest.mark.parametrize("name", MODULES)
def test_the_examples_in_a_modules_docstrings_hold(name: str) -> None:
    module = importlib.import_module(name)
    said: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test, out=said.append)
    assert runner.summarize(verbose=False).failed == 0, "".join(said)
