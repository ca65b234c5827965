"""The mlx-vlm server: a plain server beside one with a drafter (DFlash, EAGLE-3 or an MTP head)."""

from __future__ import annotations

from pytest_specdec.backends.base import BackendSpec, ModelPair, OptionSpec
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.embedded.models import DEFAULT_DRAFT, DEFAULT_TARGET

SPEC = BackendSpec(
    name="mlx-vlm",
    target="pytest_specdec.backends.mlx_vlm.adapter:MlxVlmBackend",
    summary="mlx-vlm server: plain vs --draft-model (dflash / eagle3 / mtp), its own timings.draft_n counts",
    requires=("httpx",),
    extra="mlx-vlm",
    distributions=("mlx-vlm",),
    options=(
        OptionSpec("plain_url", "str", "a running mlx-vlm server without a drafter (with sd_url=)"),
        OptionSpec("sd_url", "str", "a running mlx-vlm server started with --draft-model (with plain_url=)"),
        OptionSpec(
            "draft_kind", "str", "--draft-kind of the server the plugin starts: dflash, eagle3 or mtp", arm=True
        ),
        OptionSpec("python", "str", "the interpreter that runs mlx_vlm.server (default: this one)"),
        OptionSpec("timeout", "float", "seconds a request may take in all"),
        OptionSpec("stream", "bool", "stream completions (tokens as they arrive)"),
    ),
    # The embedded pair (a plain draft model, which mlx-vlm loads as a DFlash drafter and fails: docs/measurements.md);
    # otherwise --specdec-model and --specdec-draft (a Qwen3.5 checkpoint with bundled MTP weights may name its own
    # path, as mlx-vlm's --draft-model help says).
    pairs={"embedded": ModelPair(DEFAULT_TARGET, DEFAULT_DRAFT)},
    kinds=(SpeculationKind.BLOCK_DRAFTER, SpeculationKind.MTP_HEAD, SpeculationKind.DRAFT_MODEL),
    evidence_family="mlx-vlm",
    standin="pytest_specdec.backends.mlx_vlm.standin:MlxVlmHandler",
)
