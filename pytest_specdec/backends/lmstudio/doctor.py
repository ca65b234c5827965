"""``pytest-specdec doctor``'s LM Studio lines: whether its server answers, its release, and which models are loaded.

Asks through the ``lmstudio`` SDK, as the backend does: the host in ``$LMSTUDIO_HOST``, else the SDK's own
probe of LM Studio's default ports (``/lmstudio-greeting``); ``listLoaded`` for the loaded models.
"""

from __future__ import annotations

import os
from typing import Any

REQUEST_S = 10.0  # the SDK waits at most this long between two messages


def server_findings() -> list[str]:
    """One line on the server, one per loaded model (or one saying none is)."""
    try:
        import httpx
        import lmstudio
    except ImportError:
        return ["lmstudio: the lmstudio SDK is not installed — pip install 'pytest-specdec[lmstudio]'"]
    host = os.environ.get("LMSTUDIO_HOST", "") or None
    where = host or "LM Studio's default ports"
    lmstudio.set_sync_api_timeout(REQUEST_S)
    try:
        with lmstudio.Client(host) as client:
            answer: Any = client.system.remote_call("version")
            loaded = [str(model.identifier) for model in client.llm.list_loaded()]
    except (lmstudio.LMStudioError, httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
        return [f"lmstudio: no server answered as LM Studio at {where} ({type(error).__name__}) — start it "
                "(`lms server start`) to measure draft models through LM Studio"]  # fmt: skip
    version = answer.get("version", "unknown") if isinstance(answer, dict) else "unknown"
    lines = [f"lmstudio {version} at {where}: {len(loaded)} model(s) loaded"]
    lines += [f"lmstudio: {key} loaded — measure it with --specdec-model={key} --specdec-draft=<a smaller model of its "
              "family>" for key in loaded]  # fmt: skip
    if not loaded:
        lines.append("! lmstudio: no model loaded — `lms load MODEL_KEY`, or let the run load it (it asks for the key)")
    return lines
