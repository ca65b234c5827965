"""Shared by the backend tests: the stand-ins' generation engine."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def engine() -> Iterator[object]:
    """Real generations behind the stand-in servers (the synthetic pair on llama-cpp-python)."""
    pytest.importorskip("llama_cpp", reason="the stand-ins generate with llama-cpp-python (extra [llama-cpp])")
    from pytest_specdec.backends.standin.engine import GenerationEngine

    shared = GenerationEngine()
    yield shared
    shared.close()
