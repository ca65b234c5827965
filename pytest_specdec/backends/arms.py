"""General A/B arms: any two configurations of one backend through the same protocol.

Plain-vs-SD runs both arms on one loaded model. Other comparisons — flash attention
off vs on, a 7B model vs a 30B one, MTPLX's MTP against mlx-lm's plain decoding of the
same weights — need a differently loaded backend per arm. An arm's ``options`` say how
it differs (``model``, ``draft``, ``runtime`` — another backend — and backend options
such as ``flash_attn``); :class:`ArmRouter` presents the two backends as one, sending
each generation to its arm's backend, so pairing, timing, statistics, baselines and
reports stay exactly the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import ClassVar

from pytest_specdec.backends.base import (
    AdaptsDraftLength,
    Arm,
    Backend,
    Fingerprint,
    GenerationRequest,
    GenerationStream,
    KnowsDefaultDraftLength,
    ModelPair,
)

MODEL_KEYS = ("model", "draft", "runtime")


def arm_pair(pair: ModelPair, arm: Arm) -> ModelPair:
    """The models an arm runs: its ``model`` / ``draft`` options, else the configured pair."""
    model = arm.options.get("model")
    draft = arm.options.get("draft")
    if model is None:
        return ModelPair(pair.target, str(draft) if draft is not None else pair.draft)
    return ModelPair(str(model), str(draft) if draft is not None else None)


def arm_backend_options(arm: Arm) -> dict[str, str]:
    """The arm's backend options (everything but the model keys), as strings."""
    return {
        key: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in arm.options.items()
        if key not in MODEL_KEYS
    }


def arm_runtime(arm: Arm) -> str | None:
    """The backend an arm runs on, when it is not the configured one."""
    runtime = arm.options.get("runtime")
    return str(runtime) if runtime else None


def needs_router(baseline: Arm, treatment: Arm) -> bool:
    """Whether the arms need backends of their own (they differ in more than SD on/off)."""
    return bool(baseline.options or treatment.options)


class ArmRouter:
    """Two loaded backends presented as one: each arm's generations go to its own."""

    name: ClassVar[str] = "arms"

    def __init__(self, backends: Mapping[str, Backend]) -> None:
        self._backends = dict(backends)
        first, second = list(self._backends.items())[:2]
        self.name = first[1].name  # type: ignore[misc]
        self._pair = ModelPair(f"{first[0]}: {first[1].pair.target}", f"{second[0]}: {second[1].pair.target}")

    @property
    def members(self) -> tuple[Backend, ...]:
        """The arms' own backends."""
        return tuple(self._backends.values())

    @property
    def pair(self) -> ModelPair:
        """``label: model`` of each arm."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """The first arm's fingerprint, with each arm's details prefixed by its label.

        Arms on different runtimes name both releases (``mlx-lm 0.32.2 | mtplx 2.12.2``) and
        both sets of versions: a release of either can change the conclusion.
        """
        fingerprints = {label: backend.fingerprint() for label, backend in self._backends.items()}
        first = next(iter(fingerprints.values()))
        details = {f"{label}.{k}": v for label, f in fingerprints.items() for k, v in f.details.items()}
        releases = list(dict.fromkeys(f.release for f in fingerprints.values()))
        versions = {k: v for f in fingerprints.values() for k, v in f.versions.items()}
        return replace(first, release=" | ".join(releases), versions=versions, details=details)

    def model_digest(self) -> str:
        """Each arm's digest, joined."""
        return "|".join(backend.model_digest() for backend in self._backends.values())

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """Run the request on its arm's backend (as that backend's own plain or SD arm)."""
        backend = self._backends[request.arm.label]
        arm = replace(request.arm, options={})
        return backend.generate(replace(request, arm=arm))

    def adapts_draft_length(self) -> bool:
        """The treatment arm's backend's answer (it is the arm that drafts)."""
        treatment = self.members[-1]
        return isinstance(treatment, AdaptsDraftLength) and treatment.adapts_draft_length()

    def default_num_draft(self) -> int | None:
        """The treatment arm's backend's own draft length, if it has one."""
        treatment = self.members[-1]
        return treatment.default_num_draft() if isinstance(treatment, KnowsDefaultDraftLength) else None

    def sampled_draws_per_seed(self) -> str:
        """``distribution``: the arms run on backends (or configurations) of their own, and nothing makes two
        of them draw alike for one seed, so their outputs' distributions are compared; an arm whose backend
        decodes greedily only is refused, by name."""
        from pytest_specdec.backends.sampling import Samples
        from pytest_specdec.errors import SpecdecUsageError

        for label, backend in self._backends.items():
            if not isinstance(backend, Samples):
                raise SpecdecUsageError(
                    f"the {label} arm's backend {backend.name} decodes greedily only here — drop temperature/top_p, "
                    "or give that arm llama-cpp, llama-server or mlx"
                )
        return "distribution"

    def close(self) -> None:
        """The session owns the backends and closes them."""
