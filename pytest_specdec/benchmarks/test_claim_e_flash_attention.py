"""Seed claim e: flash attention gives 1.4–2.2x (``speedup(min=1.4)``, flash attention off vs on).

Not plain-vs-SD: two arms of one backend, through the same paired protocol. On
llama.cpp the arms load the model with ``flash_attn`` off and on; on Ollama (with
``--specdec-ollama-serve``) each arm gets its own managed server with
``OLLAMA_FLASH_ATTENTION=0`` or ``1`` (unset means ``auto``, not a valid "off"). mlx
has no flash-attention switch.
"""

from __future__ import annotations

import shutil

import pytest

from pytest_specdec import Arm
from pytest_specdec.benchmarks.kit import claim_marker_kwargs, only_for
from pytest_specdec.fixture import SpecdecFixture

ARMS = {
    "llama-cpp": (Arm("fa-off", options={"flash_attn": False}), Arm("fa-on", options={"flash_attn": True})),
    "ollama": (
        Arm("fa-off", options={"serve": True, "serve_env": "OLLAMA_FLASH_ATTENTION=0"}),
        Arm("fa-on", options={"serve": True, "serve_env": "OLLAMA_FLASH_ATTENTION=1"}),
    ),
}


@pytest.mark.claim(**claim_marker_kwargs("e"))
@pytest.mark.speedup(min=1.4)
@pytest.mark.parametrize("category", ["prose", "copy"])
def test_flash_attention_gives_1_4x(specdec: SpecdecFixture, category: str) -> None:
    only_for(specdec, ARMS)
    arms = ARMS[specdec.backend_name]
    if specdec.backend_name == "ollama" and shutil.which("ollama") is None:
        pytest.skip("could not run here: switching OLLAMA_FLASH_ATTENTION needs the 'ollama' binary on PATH")
    baseline, treatment = arms
    specdec.compare(category=category, baseline=baseline, treatment=treatment)
