"""Control: a draft that rarely agrees with its target must make SD lose.

Our own claim, not the document's: if SD "wins" with an unrelated draft, the
measurement is broken. Runs only on the embedded profile, where that draft exists.
"""

from __future__ import annotations

import pytest
from conftest import only_for


@pytest.mark.speedup(max=1.0)
def test_unrelated_draft_makes_sd_lose(specdec):
    only_for(specdec, ["mlx", "llama-cpp"], profiles=["embedded"])
    specdec.compare(category="prose", draft="embedded:draft-unrelated")
