"""mlx-lm: ``draft_model=`` against plain ``stream_generate`` (Metal on a Mac, the CPU or CUDA elsewhere)."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET
from pytest_specdec.embedded.packaged import GEMMA_GGUF

SPEC = BackendSpec(
    name="mlx",
    target="pytest_specdec.backends.mlx.adapter:MlxBackend",
    summary="mlx-lm with a draft model (draft_model=) vs plain stream_generate",
    requires=("mlx", "mlx_lm"),
    extra="mlx",
    distributions=("mlx", "mlx-lm"),
    # mx.device_info() from mlx 0.30.4; mlx_lm.utils._download from mlx-lm 0.28.3
    minimum={"mlx": "0.30.4", "mlx-lm": "0.28.3"},
    options=(OptionSpec("chat_template", "bool", "wrap instruction prompts in the model's chat template", arm=True),),
    pairs={
        "embedded": ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT),
        # The GGUF converted for mlx-lm; the draft is its own first 15 of 18 layers (early exit).
        "gemma": ModelPair(GEMMA_GGUF, GEMMA_GGUF + "#early-exit=15"),
        "seed": ModelPair("mlx-community/Qwen2.5-7B-Instruct-4bit", "mlx-community/Qwen2.5-0.5B-Instruct-4bit"),
        "embedded-1b": ModelPair("embedded:target-1b", "embedded:draft-1b-aligned"),
    },
    kinds=(SpeculationKind.DRAFT_MODEL, SpeculationKind.EARLY_EXIT),
    evidence_family="mlx-lm",
    in_process=True,
)
