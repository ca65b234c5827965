"""``pytest-specdec doctor``'s Ollama lines: which pulled tags can toggle SD, and how to pair the rest.

Asks the running server (``OLLAMA_HOST``, default 127.0.0.1:11434) for its release
(``/api/version``), its tags (``/api/tags``) and each tag's ``/api/show``, and applies the
same rules the backend applies before measuring (:mod:`.model`): ``sd=option`` toggles SD
only on a GGUF tag with MTP layers or a DRAFT on Ollama ≥ 0.30.0; an MLX-engine tag
drafts whenever it ships a drafter, which shows in no API field, so it needs a plain twin
(``sd=tag``).
"""

from __future__ import annotations

import os
from typing import Any

from pytest_specdec.backends.ollama.model import OllamaModel, describe_model, option_evidence
from pytest_specdec.errors import SpecdecUsageError

MOST_TAGS = 20  # a machine with more pulled tags gets the first ones, and a count
REQUEST_S = 10.0  # each request whole within this (a server that drips bytes is cut off): the check ends in
# at most (2 + MOST_TAGS) x REQUEST_S


def _host() -> str:
    host = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434").rstrip("/")
    return host if host.startswith(("http://", "https://")) else f"http://{host}"


def _line(version: str, model: OllamaModel) -> str:
    try:
        option_evidence(version, model)
    except SpecdecUsageError:
        pass
    else:
        return f"ollama {model.tag}: {model.drafter} — sd=option toggles SD on it (draft_num_predict γ vs 0)"
    if not model.gguf:
        return (
            f"ollama {model.tag}: MLX engine — a DRAFT shows in no API field and drafts on every request, so "
            f"compare it with a plain twin: import the same safetensors without DRAFT "
            f"(`ollama create {model.tag.split(':')[0]}:plain` from a Modelfile with the same FROM and no DRAFT), "
            "then --specdec-backend-option sd=tag plain_model=<that tag>"
        )
    if model.mtp_layers or model.draft_layer:
        return f"! ollama {model.tag}: {model.drafter}, but Ollama {version} predates draft_num_predict — upgrade it"
    return f"ollama {model.tag}: no MTP layers and no DRAFT — Ollama cannot speculate on it"


def tag_findings() -> list[str]:
    """One line per pulled tag, or one line saying no server answered."""
    import httpx

    from pytest_specdec.backends.http_client import deadline_transport

    host = _host()
    try:
        with httpx.Client(base_url=host, timeout=REQUEST_S, transport=deadline_transport(REQUEST_S)) as client:
            version = str(client.get("/api/version").json().get("version", "unknown"))
            tags = [str(m.get("name") or m.get("model")) for m in client.get("/api/tags").json().get("models") or []]
            shown: list[tuple[str, Any]] = [
                (tag, client.post("/api/show", json={"model": tag}).json()) for tag in tags[:MOST_TAGS]
            ]
    except (httpx.HTTPError, ValueError, AttributeError) as error:
        return [f"ollama: no server answered at {host} ({type(error).__name__}) — start `ollama serve` to see "
                "which pulled tags can toggle SD"]  # fmt: skip
    lines = [f"ollama {version} at {host}: {len(tags)} pulled tag(s)"]
    lines += [_line(version, describe_model(tag, show if isinstance(show, dict) else {})) for tag, show in shown]
    if len(tags) > MOST_TAGS:
        lines.append(f"ollama: {len(tags) - MOST_TAGS} more tag(s) not shown")
    return lines
