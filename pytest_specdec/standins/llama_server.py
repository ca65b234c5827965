"""Stand-in for llama.cpp's ``llama-server``: ``/health``, ``/props``, ``/completion``.

Request fields read: ``prompt``, ``n_predict``, ``seed``, ``stream``,
``speculative.n_max`` (0: no drafting). Responses carry ``content``, ``tokens``,
``stop`` and, on the last one, ``timings`` with ``prompt_n``, ``prompt_ms``,
``predicted_n``, ``predicted_ms``, ``predicted_per_second``, ``draft_n``,
``draft_n_accepted``. Errors use llama-server's ``{"error": {"code", "message", "type"}}``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.standins.engine import EngineStats, Piece, collect
from pytest_specdec.standins.http import StandinHandler

BUILD = "b9330-standin"
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 500: "server_error", 503: "unavailable_error"}


def timings(stats: EngineStats) -> dict[str, Any]:
    """llama-server's ``timings`` object for one completion."""
    decode_ms = stats.decode_s * 1000.0
    return {
        "prompt_n": stats.prompt_tokens,
        "prompt_ms": stats.prompt_s * 1000.0,
        "prompt_per_token_ms": stats.prompt_s * 1000.0 / max(1, stats.prompt_tokens),
        "prompt_per_second": stats.prompt_tokens / stats.prompt_s if stats.prompt_s else 0.0,
        "predicted_n": stats.decode_tokens,
        "predicted_ms": decode_ms,
        "predicted_per_token_ms": decode_ms / max(1, stats.decode_tokens),
        "predicted_per_second": stats.decode_tokens / stats.decode_s if stats.decode_s else 0.0,
        "draft_n": stats.drafted,
        "draft_n_accepted": stats.accepted,
    }


class LlamaServerHandler(StandinHandler):
    """The three endpoints the llama-server backend uses."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/health"): "health",
        ("GET", "/props"): "props",
        ("POST", "/completion"): "completion",
    }

    def error_body(self, status: int, message: str) -> object:
        """``{"error": {"code", "message", "type"}}``."""
        return {"error": {"code": status, "message": message, "type": ERROR_TYPES.get(status, "server_error")}}

    def not_found_body(self, path: str) -> object:
        """llama-server answers unknown paths with its error object."""
        return self.error_body(404, "File Not Found")

    def health(self, _: object) -> None:
        """``{"status": "ok"}``."""
        self.send_json(200, {"status": "ok"})

    def props(self, _: object) -> None:
        """Build, model and default settings."""
        self.send_json(
            200,
            {
                "build_info": BUILD,
                "model_path": str(self.server.engine.backend.target_path),
                "total_slots": 1,
                "default_generation_settings": {"n_ctx": 1024, "params": {"speculative.n_max": 3}},
            },
        )

    def completion(self, body: dict[str, Any]) -> None:
        """One completion, streamed as server-sent events or whole."""
        if self.fail_if_asked():
            return
        num_draft = int(body.get("speculative.n_max", 3))
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(body.get("n_predict", 16)), num_draft, int(body.get("seed", 0))
        )
        if body.get("stream"):
            chunks = (f"data: {json.dumps(event)}\n\n".encode() for event in self._stream_events(events))
            self.stream("text/event-stream", chunks)
            return
        pieces, stats = collect(events)
        self.send_json(200, self._final(stats, "".join(p.text for p in pieces), [p.token for p in pieces]))

    def _final(self, stats: EngineStats, content: str, tokens: list[int]) -> dict[str, Any]:
        final: dict[str, Any] = {
            "content": content,
            "tokens": tokens,
            "stop": True,
            "stop_type": "limit",
            "tokens_predicted": stats.decode_tokens,
            "tokens_evaluated": stats.prompt_tokens,
            "timings": timings(stats),
        }
        if "no-timings" in self.server.faults:
            del final["timings"]
        return final

    def _stream_events(self, events: Iterator[Piece | EngineStats]) -> Iterator[dict[str, Any]]:
        for item in events:
            if isinstance(item, Piece):
                yield {"content": item.text, "tokens": [item.token], "stop": False}
            else:
                yield self._final(item, "", [])
