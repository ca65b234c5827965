"""Shared fixtures: synthetic models are built into a per-session cache."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

# pytester's in-process runs drop modules first imported inside them; native
# extensions such as numpy cannot be imported twice, so load them up front.
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

import pytest_specdec.backends.simulated  # noqa: F401


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Keep synthetic models out of the user's cache (shared by in-process pytester runs)."""
    path = tmp_path_factory.mktemp("specdec-models")
    previous = os.environ.get("SPECDEC_CACHE_DIR")
    os.environ["SPECDEC_CACHE_DIR"] = str(path)
    yield path
    if previous is None:
        os.environ.pop("SPECDEC_CACHE_DIR", None)
    else:
        os.environ["SPECDEC_CACHE_DIR"] = previous
