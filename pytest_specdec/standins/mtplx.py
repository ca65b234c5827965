"""Stand-in for ``mtplx serve``: ``/health``, ``/metrics``, ``/v1/completions``.

MTPLX drafts with the target's own MTP heads (no separate draft model): ``/health``
reports ``mtp_enabled``, ``depth``, ``generation_mode`` and
``available_generation_modes``; a request picks ``generation_mode`` ``"mtp"`` or
``"ar"`` (``ar`` reports ``mtp_depth`` 0). Responses follow the OpenAI completion
shape plus ``mtplx_stats`` (``generation_mode``, ``mtp_depth``, ``drafted_tokens``,
``accepted_drafts``, ``decode_tok_s``, ``ttft_s``, ``elapsed_s``) and llama-server
style ``timings``; the SSE stream ends with ``data: [DONE]``. Errors are
``{"error": {"message", "type", "code", "param"}}``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.standins.engine import EngineStats, Piece, collect
from pytest_specdec.standins.http import StandinHandler
from pytest_specdec.standins.llama_server import timings

MODEL = "specdec-synthetic-mtp"
DEPTH = 3


class MtplxHandler(StandinHandler):
    """The endpoints the MTPLX backend uses."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/health"): "health",
        ("GET", "/metrics"): "metrics",
        ("POST", "/v1/completions"): "completions",
    }
    latest: ClassVar[list[dict[str, Any]]] = []

    def error_body(self, status: int, message: str) -> object:
        """OpenAI's error object, as MTPLX builds it."""
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "code": str(status), "param": None}}

    def not_found_body(self, path: str) -> object:
        """FastAPI's 404, wrapped by MTPLX's handler."""
        return self.error_body(404, "Not Found")

    def health(self, _: object) -> None:
        """Readiness and the MTP configuration."""
        self.send_json(
            200,
            {
                "ok": True,
                "model": MODEL,
                "model_path": str(self.server.engine.backend.target_path),
                "generation_mode": "mtp",
                "default_generation_mode": "mtp",
                "available_generation_modes": ["mtp", "ar"],
                "load_mtp": True,
                "mtp_enabled": True,
                "depth": DEPTH,
                "draft_head_identity": "target's own MTP head (stand-in: aligned synthetic draft)",
                "version": "2.12.2-standin",
            },
        )

    def metrics(self, _: object) -> None:
        """``latest``, ``recent`` (last 32 turns) and ``tool_parse_counters``."""
        recent = type(self).latest[-32:]
        self.send_json(200, {"latest": recent[-1] if recent else None, "recent": recent, "tool_parse_counters": {}})

    def completions(self, body: dict[str, Any]) -> None:
        """``/v1/completions`` in ``ar`` or ``mtp`` mode."""
        if self.fail_if_asked():
            return
        mode = str(body.get("generation_mode") or "mtp")
        if mode not in ("mtp", "ar"):
            self.send_json(422, self.error_body(422, f"generation_mode must be 'mtp' or 'ar', got {mode!r}"))
            return
        depth = int(body.get("depth") or DEPTH) if mode == "mtp" else 0
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(body.get("max_tokens") or 16), depth, int(body.get("seed") or 0)
        )
        created = int(time.time())
        if body.get("stream"):
            chunks = (f"data: {json.dumps(e)}\n\n".encode() for e in self._stream(events, mode, depth, created))
            self.stream("text/event-stream", itertools.chain(chunks, [b"data: [DONE]\n\n"]))  # lazily: as decoded
            return
        pieces, stats = collect(events)
        self.send_json(200, self._payload(stats, mode, depth, created, "".join(p.text for p in pieces)))

    def _payload(self, stats: EngineStats, mode: str, depth: int, created: int, text: str) -> dict[str, Any]:
        mtplx_stats = {
            "generation_mode": mode,
            "mtp_depth": depth,
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.decode_tokens,
            "drafted_tokens": stats.drafted,
            "accepted_drafts": stats.accepted,
            "ttft_s": stats.prompt_s,
            "elapsed_s": stats.prompt_s + stats.decode_s,
            "decode_tok_s": stats.decode_tokens / stats.decode_s if stats.decode_s else 0.0,
            "finish_reason": "length",
        }
        type(self).latest.append(mtplx_stats)
        payload: dict[str, Any] = {
            "id": f"cmpl-{created}",
            "object": "text_completion",
            "created": created,
            "model": MODEL,
            "choices": [{"index": 0, "text": text, "finish_reason": "length"}],
            "usage": {
                "prompt_tokens": stats.prompt_tokens,
                "completion_tokens": stats.decode_tokens,
                "total_tokens": stats.prompt_tokens + stats.decode_tokens,
            },
            "mtplx_stats": mtplx_stats,
            "timings": timings(stats),
        }
        if "no-timings" in self.server.faults:
            del payload["timings"]
            del payload["mtplx_stats"]
        return payload

    def _stream(
        self, events: Iterator[Piece | EngineStats], mode: str, depth: int, created: int
    ) -> Iterator[dict[str, Any]]:
        for item in events:
            if isinstance(item, Piece):
                choice = {"index": 0, "text": item.text, "finish_reason": None}
                yield {
                    "id": f"cmpl-{created}",
                    "object": "text_completion",
                    "created": created,
                    "model": MODEL,
                    "choices": [choice],
                }
            else:
                final = self._payload(item, mode, depth, created, "")
                yield final
