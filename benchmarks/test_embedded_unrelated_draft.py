"""Control: a draft that rarely agrees with its target must make SD lose.

Our own claim, not the document's: if SD "wins" with an unrelated draft, the
measurement is broken. Runs only on the embedded profile, where that draft exists.
"""

from __future__ import annotations

import pytest


@pytest.mark.speedup(max=1.0)
def test_unrelated_draft_makes_sd_lose(specdec):
    if specdec.profile != "embedded" or specdec.backend_name not in ("mlx", "llama-cpp"):
        pytest.skip("not measurable here: the unrelated draft exists only in the embedded profile (mlx, llama-cpp)")
    specdec.compare(category="prose", draft="embedded:draft-unrelated")
