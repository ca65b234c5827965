"""``mlx_lm.server``: mlx-lm's OpenAI-compatible server, one per arm, its drafts counted inside it."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET
from pytest_specdec.embedded.packaged import GEMMA_GGUF

SPEC = BackendSpec(
    name="mlx-server",
    target="pytest_specdec.backends.mlx_server.adapter:MlxServerBackend",
    summary="mlx_lm.server per arm (plain vs --draft-model), drafts counted inside the server",
    requires=("mlx_lm",),
    extra="mlx",
    distributions=("mlx", "mlx-lm"),
    minimum={"mlx-lm": "0.28.3"},
    options=(
        OptionSpec(
            "prompt_cache_size",
            "int",
            "--prompt-cache-size of both servers (default: mlx_lm.server's own, 10; 0 turns its prompt cache off)",
        ),
        OptionSpec(
            "plain_path",
            "str",
            "single (default: the one-request path the SD server takes) or batched (the user's plain path)",
        ),
        OptionSpec("timeout", "float", "seconds a request may take in all"),
    ),
    pairs={
        "embedded": ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT),
        # The GGUF converted for mlx-lm, as the mlx backend loads it; the draft is its own first 15 of 18 layers.
        "gemma": ModelPair(GEMMA_GGUF, GEMMA_GGUF + "#early-exit=15"),
        "seed": ModelPair("mlx-community/Qwen2.5-7B-Instruct-4bit", "mlx-community/Qwen2.5-0.5B-Instruct-4bit"),
    },
    kinds=(SpeculationKind.DRAFT_MODEL,),
    evidence_family="mlx-lm",
)
