"""Seed claim a: Ollama's built-in speculative decoding ("auto-MTP") is net-zero or negative.

Runs against an Ollama server (``--backend=ollama``): plain vs SD through
``draft_num_predict`` (or two tags, see the README). On ``--specdec-profile seed`` it
measures the document's three tags; elsewhere the configured model. The document's
plain-decode figures are also checked against the M1 Max roofline, which flags the
62 tok/s of deepseek-r1:14b as implausible.
"""

from __future__ import annotations

import pytest

from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_where
from pytest_specdec.fixture import SpecdecFixture
from pytest_specdec.roofline import check_plausibility
from pytest_specdec.seed.document import CLAIMS, SEED_BANDWIDTH_GBS

SEED_TAGS = ["qwen3-coder:30b", "gemma4:26b-nvfp4", "deepseek-r1:14b"]


@pytest.mark.claim(**claim_marker_kwargs("a"))
@pytest.mark.speedup(max=1.0)
@pytest.mark.parametrize("tag", SEED_TAGS)
def test_ollama_auto_mtp_is_net_zero_or_negative(specdec: SpecdecFixture, tag: str) -> None:
    only_where(specdec, "a")
    if specdec.profile != "seed" and tag != SEED_TAGS[0]:
        pytest.skip(f"does not apply: {tag} runs with --specdec-profile seed (this run measures the configured model)")
    specdec.compare(category="code", target=tag if specdec.profile == "seed" else None)


@pytest.mark.claim(**claim_marker_kwargs("a"))
def test_published_plain_decode_figures_against_the_roofline(specdec: SpecdecFixture) -> None:
    flagged = []
    for figure in CLAIMS["a"].figures:
        check = check_plausibility(figure.label, figure.tps, figure.model, SEED_BANDWIDTH_GBS, figure.context)
        specdec.note(f"M1 Max roofline: {check.describe()}")
        if not check.plausible:
            flagged.append(figure.label)
    assert "deepseek-r1:14b without SD (short context)" in flagged, (
        "the roofline must flag 62 tok/s for a 9 GB dense model"
    )
