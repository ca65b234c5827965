"""Stand-in for ``mtplx serve`` (which cannot start on Linux): ``/health``, ``/metrics``, ``/v1/completions``.

Each behaviour follows the PyPI wheel's ``mtplx/server/openai.py``:

* ``/health`` reports ``mtp_enabled`` (the runtime's truth), ``depth``, the server's
  default ``generation_mode`` and a hard-coded ``available_generation_modes``; it
  carries **no MTPLX version** (only ``mlx_runtime``, mlx's own).
* A request's ``generation_mode`` (``mtp`` or ``ar``; anything else is 400) counts only
  when client controls are allowed (``_client_controls_allowed``): the default policy
  ``honor`` allows them; ``MTPLX_CLIENT_CONTROLS_DEFAULT=hints`` (setting
  ``client_controls``) ignores them unless the header ``X-MTPLX-Allow-Client-Controls``
  is truthy. Ignored fields are listed in ``mtplx_stats.client_control_fields_ignored``
  and ``mtplx_stats.generation_mode`` is the mode that ran.
* ``mtp`` without MTP heads loaded (setting ``mtp_enabled=false``) is 400
  "generation_mode 'mtp' requires a runtime loaded with MTP".
* Responses follow the OpenAI completion shape plus ``mtplx_stats`` and llama.cpp-style
  ``timings`` with ``draft_n`` / ``draft_n_accepted`` (``_build_timings``; ``ar`` drafts
  0); the SSE stream ends with ``data: [DONE]``. Errors are
  ``{"error": {"message", "type", "code", "param"}}``.
* Depth (MTPLX 2.12.2): a client ``depth`` outside the family's range is 400 "must be
  between" (``_request_depth_for_generation``; the native-MTP families allow 1-3, setting
  ``max_depth``), never clamped. The depth that runs may be lower than the one asked: the
  long-context cap (``resolve_long_context_mtp_depth``, ``mtplx/profiles.py``; off by
  default, settings ``long_context_depth`` / ``long_context_chars`` here) caps it for
  long prompts. ``mtplx_stats.mtp_depth`` is the depth that ran (the ceiling after the
  cap) and ``requested_mtp_depth`` the one asked (``_metrics_envelope``); ``/health``
  reports the configured ``depth`` and ``adaptive`` (``--adaptive-policy``, ``none`` by
  default: setting ``adaptive``).
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, Piece, collect, timings
from pytest_specdec.backends.standin.http import StandinHandler

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
                "load_mtp": self._mtp_enabled,
                "mtp_enabled": self._mtp_enabled,
                "depth": DEPTH,
                "adaptive": self.server.settings.get("adaptive", "none"),
                "draft_head_identity": "target's own MTP head (stand-in: aligned synthetic draft)",
                "mlx_runtime": {"version": "0.32.2"},
            },
        )

    @property
    def _mtp_enabled(self) -> bool:
        return self.server.settings.get("mtp_enabled", "true") == "true"

    def _controls_allowed(self) -> bool:
        if self.headers.get("X-MTPLX-Allow-Client-Controls", "").lower() in ("1", "true", "yes", "on", "allow"):
            return True
        return self.server.settings.get("client_controls", "honor") != "hints"

    def metrics(self, _: object) -> None:
        """``latest``, ``recent`` (last 32 turns) and ``tool_parse_counters``."""
        recent = type(self).latest[-32:]
        self.send_json(200, {"latest": recent[-1] if recent else None, "recent": recent, "tool_parse_counters": {}})

    def completions(self, body: dict[str, Any]) -> None:
        """``/v1/completions`` in ``ar`` or ``mtp`` mode."""
        if self.fail_if_asked():
            return
        allowed = self._controls_allowed()
        ignored = [] if allowed else [k for k in ("generation_mode", "depth", "temperature", "top_k") if k in body]
        mode = str((body.get("generation_mode") if allowed else None) or "mtp")
        if mode not in ("mtp", "ar"):
            self.send_json(400, self.error_body(400, "generation_mode must be 'mtp' or 'ar'"))
            return
        if mode == "mtp" and not self._mtp_enabled:
            self.send_json(400, self.error_body(400, "generation_mode 'mtp' requires a runtime loaded with MTP"))
            return
        asked = int((body.get("depth") if allowed else None) or DEPTH) if mode == "mtp" else 0
        highest = int(self.server.settings.get("max_depth", "3"))
        if mode == "mtp" and not 1 <= asked <= highest:
            self.send_json(400, self.error_body(400, f"depth must be between 1 and {highest}"))
            return
        depth = self._capped(asked, str(body.get("prompt", "")))
        self.server.state["ignored"] = ignored
        self.server.state["requested_depth"] = asked
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

    def _capped(self, depth: int, prompt: str) -> int:
        """The long-context cap, when its setting is on: a long prompt runs a lower depth."""
        cap, length = self.server.settings.get("long_context_depth"), self.server.settings.get("long_context_chars")
        if depth and cap and length and len(prompt) >= int(length):
            return min(depth, int(cap))
        return depth

    def _payload(self, stats: EngineStats, mode: str, depth: int, created: int, text: str) -> dict[str, Any]:
        mtplx_stats = {
            "generation_mode": mode,
            "mtp_depth": depth,
            "requested_mtp_depth": self.server.state.get("requested_depth", depth),
            "prompt_tokens": stats.prompt_tokens,
            "completion_tokens": stats.decode_tokens,
            "drafted_tokens": stats.drafted,
            "accepted_drafts": stats.accepted,
            "ttft_s": stats.prompt_s,
            "elapsed_s": stats.prompt_s + stats.decode_s,
            "decode_tok_s": stats.decode_tokens / stats.decode_s if stats.decode_s else 0.0,
            "finish_reason": "length",
            "client_controls_allowed": not self.server.state.get("ignored"),
            "client_control_fields_ignored": self.server.state.get("ignored", []),
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
