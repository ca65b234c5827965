"""What an Ollama server's answers say about speculation, before anything is measured.

Every rule follows Ollama's source (``ollama/ollama``; versions from its tags):

* ``draft_num_predict`` is a load-time runner option added in **v0.30.0**
  (``api/types.go``, ``Runner.DraftNumPredict``). Older servers log "invalid option
  provided" and ignore it (``Options.FromMap``): both arms would run the same way.
* A **GGUF** model (``/api/show`` ``details.format`` ``gguf``) speculates only when it
  ships MTP layers (``<arch>.nextn_predict_layers`` > 0 in ``model_info``, or ``mtp.*``
  tensors on qwen35) or a ``DRAFT`` layer (``llm/llama_server.go``: ``hasMTPDraft``,
  ``appendDraftArgs``), and only with ``draft_num_predict`` > 0, which the server forces
  to 0 when a request leaves it unset on a model without a DRAFT (``server/routes.go``).
* A **safetensors** model runs on the MLX engine, which never reads
  ``draft_num_predict`` and drafts on every request when the model ships a drafter
  (``x/mlxrunner/runner.go``, ``speculate.go``); that drafter shows in no API field.
* ``OLLAMA_FLASH_ATTENTION`` is read only on the GGUF path (``llm/llama_server.go``);
  the MLX engine ignores it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_specdec.backends.base import SpeculationEvidence
from pytest_specdec.errors import SpecdecUsageError

DRAFT_OPTION_SINCE = (0, 30, 0)
# draft_num_predict when a request leaves it unset on a GGUF model with a DRAFT layer (api/types.go DefaultOptions,
# server/routes.go); unset on a model with MTP layers only it is forced to 0: no SD by default there.
DRAFT_NUM_PREDICT_DEFAULT = 4
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``0.31.2`` or ``0.30.0-rc22`` → ``(0, 31, 2)``; ``None`` when there is no version."""
    match = _VERSION.search(text)
    return (int(match.group(1)), int(match.group(2)), int(match.group(3))) if match else None


@dataclass(frozen=True)
class OllamaModel:
    """One tag as ``/api/show`` describes it."""

    tag: str
    format: str  # "gguf" or "safetensors" ("" on old manifests, which Ollama treats as gguf)
    mtp_layers: bool
    draft_layer: bool
    thinking: bool

    @property
    def gguf(self) -> bool:
        """Whether the tag runs on the GGUF (llama-server) path."""
        return self.format in ("gguf", "")

    @property
    def drafter(self) -> str:
        """What the server's answers show of a drafter."""
        if not self.gguf:
            return "MLX engine (a drafter, if any, shows in no API field)"
        shown = [name for name, present in (("MTP layers", self.mtp_layers), ("DRAFT", self.draft_layer)) if present]
        return " and ".join(shown) or "no MTP layers and no DRAFT"


def describe_model(tag: str, show: Mapping[str, object]) -> OllamaModel:
    """An :class:`OllamaModel` from a ``/api/show`` answer (as a plain mapping)."""
    details = show.get("details") or {}
    model_format = str(details.get("format", "") if isinstance(details, Mapping) else "")
    info = show.get("model_info") or {}
    mtp = any(
        str(key).endswith(".nextn_predict_layers") and isinstance(value, int) and value > 0
        for key, value in (info.items() if isinstance(info, Mapping) else [])
    )
    tensors = show.get("tensors") or []
    architecture = str(info.get("general.architecture", "")) if isinstance(info, Mapping) else ""
    if architecture.startswith("qwen35") and isinstance(tensors, Sequence):
        mtp = mtp or any(
            str(getattr(t, "name", None) or (t.get("name") if isinstance(t, Mapping) else "")).startswith("mtp.")
            for t in tensors
        )
    modelfile = str(show.get("modelfile") or "")
    draft = any(line.startswith("DRAFT ") for line in modelfile.splitlines())
    capabilities = show.get("capabilities") or []
    thinking = "thinking" in capabilities if isinstance(capabilities, Sequence) else False
    return OllamaModel(tag, model_format, mtp, draft, thinking)


def option_evidence(version: str, model: OllamaModel) -> SpeculationEvidence:
    """``sd=option``: one tag, ``draft_num_predict`` γ vs 0 — refused where it cannot toggle SD."""
    parsed = parse_version(version)
    if parsed is not None and parsed != (0, 0, 0) and parsed < DRAFT_OPTION_SINCE:
        raise SpecdecUsageError(
            f"Ollama {version} predates draft_num_predict (added in v0.30.0) and ignores it: both arms would run "
            "plain — upgrade Ollama, or compare two tags (sd=tag plain_model=...)"
        )
    if not model.gguf:
        raise SpecdecUsageError(
            f"{model.tag} runs on Ollama's MLX engine, which never reads draft_num_predict and drafts on every "
            "request when the model ships a drafter: both arms would be the same — compare two tags "
            "(sd=tag plain_model=<the same weights without a drafter>)"
        )
    if not (model.mtp_layers or model.draft_layer):
        raise SpecdecUsageError(
            f"{model.tag} has no MTP layers and no DRAFT, and Ollama speculates on GGUF models only with one: "
            "draft_num_predict changes nothing, both arms would run plain — use a model that ships MTP layers or a DRAFT"
        )
    return SpeculationEvidence(
        sd_arm=True,
        plain_arm=False,
        reason=f"Ollama {version}, GGUF with {model.drafter}: draft_num_predict switches llama-server's drafting",
    )


def tag_evidence(version: str, sd: OllamaModel, plain: OllamaModel) -> SpeculationEvidence:
    """``sd=tag``: a tag with a drafter vs the same weights without — what each tag can do."""
    if sd.tag == plain.tag:
        raise SpecdecUsageError(f"sd=tag compares {sd.tag} with itself — set plain_model= to the tag without a drafter")
    if sd.gguf != plain.gguf:
        raise SpecdecUsageError(
            f"sd=tag compares {sd.tag} ({sd.format or 'gguf'}) with {plain.tag} ({plain.format or 'gguf'}): two engines, "
            "not SD on and off — choose two tags of one format (the same weights, with and without a drafter)"
        )
    parsed = parse_version(version)
    draft_capable = parsed is None or parsed == (0, 0, 0) or parsed >= DRAFT_OPTION_SINCE
    if sd.gguf and not (sd.mtp_layers or sd.draft_layer):
        raise SpecdecUsageError(
            f"{sd.tag} has no MTP layers and no DRAFT: on Ollama's GGUF path it cannot speculate — "
            "choose a tag that ships one"
        )
    sd_arm = draft_capable if sd.gguf else None
    plain_arm = False if plain.gguf else None  # a GGUF plain tag is sent draft_num_predict 0
    reason = f"Ollama {version}; SD tag {sd.tag}: {sd.drafter}; plain tag {plain.tag}: {plain.drafter}"
    if sd_arm is False:
        reason += "; this server predates drafting on GGUF (v0.30.0)"
    return SpeculationEvidence(sd_arm=sd_arm, plain_arm=plain_arm, reason=reason)


def refuse_flash_attention_on_mlx(model: OllamaModel, environment: Mapping[str, str]) -> None:
    """Flash attention off vs on is one arm on the MLX engine, which ignores ``OLLAMA_FLASH_ATTENTION``."""
    if "OLLAMA_FLASH_ATTENTION" in environment and not model.gguf:
        raise SpecdecUsageError(
            f"{model.tag} runs on Ollama's MLX engine, which ignores OLLAMA_FLASH_ATTENTION (only the GGUF path reads "
            "it): flash attention off and on would be the same arm — use a GGUF tag"
        )
