"""Control: a draft that rarely agrees with its target must make SD lose.

Our own claim, not the document's: if SD "wins" with an unrelated draft, the
measurement is broken. Runs only on the embedded profile, where that draft exists.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import only_for
from pytest_specdec.fixture import SpecdecFixture


@pytest.mark.speedup(max=1.0)
def test_unrelated_draft_makes_sd_lose(specdec: SpecdecFixture) -> None:
    only_for(specdec, ["mlx", "llama-cpp"], profiles=["embedded"])
    specdec.compare(category="prose", draft="embedded:draft-unrelated")
