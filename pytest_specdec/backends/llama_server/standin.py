"""Stand-in for llama.cpp's ``llama-server``: ``/health``, ``/props``, ``/completion``.

The tests run the real ``llama-server`` wherever they can; this stand-in is kept for
the faults the real program cannot be made to show on demand (a ``/health`` that stays
503, a stream cut mid-way, malformed JSON, a response without ``timings``, a server that
never answers). Where it imitates the real server it follows llama.cpp's source:

* speculation is chosen when the server starts (``--spec-type``), never per request — the
  request fields ``speculative.n_max/n_min/p_min`` are compiled out
  (``tools/server/server-schema.cpp``, ``#if 0``) and ignored here too;
* the draft length is the flag each spec type reads (``common_speculative_n_max`` in
  ``common/speculative.cpp``): ``--spec-draft-n-max`` for the ``draft-*`` types only,
  ``--spec-ngram-simple-size-m`` for ``ngram-simple``, ``--spec-ngram-mod-n-max`` for
  ``ngram-mod``, a fixed 8 for ``ngram-cache``;
* ``timings`` carry ``draft_n`` / ``draft_n_accepted`` only when the request drafted
  (``result_timings::to_json``, ``tools/server/server-common.cpp``);
* ``GET /slots`` gives each slot's ``speculative`` (``can_speculate()``,
  ``tools/server/server-context.cpp``): false with ``--spec-type none``, and false when the
  draft set-up failed and the server carried on without SD (the stand-in's
  ``--no-speculation-context``, logging upstream's "failed to initialize speculative
  decoding context" line);
* a final answer's ``generation_settings`` carries ``speculative.types``, the start-up
  configuration (``task_params::to_json``, ``tools/server/server-task.cpp``); ``/props``
  has ``default_generation_settings.params`` and ``n_ctx``, with no draft length in them;
* ``/health`` answers 503 ``{"error": {"code": 503, "message": "Loading model", ...}}``
  while the model loads (``tools/server/server.cpp``, the health handler);
* errors are ``{"error": {"code", "message", "type"}}`` (``format_error_response``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, Piece, collect, timings
from pytest_specdec.backends.standin.http import StandinHandler

BUILD = "b9330-standin"
ERROR_TYPES = {400: "invalid_request_error", 404: "not_found_error", 500: "server_error", 503: "unavailable_error"}


class LlamaServerHandler(StandinHandler):
    """The three endpoints the llama-server backend uses."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/health"): "health",
        ("GET", "/props"): "props",
        ("GET", "/slots"): "slots",
        ("POST", "/completion"): "completion",
        ("POST", "/detokenize"): "detokenize",
    }

    def error_body(self, status: int, message: str) -> object:
        """``{"error": {"code", "message", "type"}}``."""
        return {"error": {"code": status, "message": message, "type": ERROR_TYPES.get(status, "server_error")}}

    def not_found_body(self, path: str) -> object:
        """llama-server answers unknown paths with its error object."""
        return self.error_body(404, "File Not Found")

    def health(self, _: object) -> None:
        """``{"status": "ok"}``; 503 "Loading model" while the ``loading`` fault holds."""
        if "loading" in self.server.faults:
            self.send_json(503, self.error_body(503, "Loading model"))
            return
        self.send_json(200, {"status": "ok"})

    def _spec_type(self) -> str:
        return self.server.settings.get("spec_type", "none")

    def _speculates(self) -> bool:
        return self._spec_type() != "none" and self.server.settings.get("speculation_context", "ok") == "ok"

    def _num_draft(self) -> int:
        """The draft length the started spec type reads (common_speculative_n_max); 0 when not speculating."""
        if not self._speculates():
            return 0
        settings, kind = self.server.settings, self._spec_type()
        if kind.startswith("draft-"):
            return int(settings.get("n_max", "3"))
        if kind in ("ngram-simple", "ngram-map-k", "ngram-map-k4v"):
            return int(settings.get("ngram_simple_size_m", "48"))
        if kind == "ngram-mod":
            return int(settings.get("ngram_mod_n_max", "64"))
        return 8  # ngram-cache

    def _types(self) -> str:
        """``speculative.types`` as ``common_speculative_type_name_str`` names the configured list."""
        return "none" if self._spec_type() == "none" else f"none,{self._spec_type()}"

    def props(self, _: object) -> None:
        """Build, model and default settings (no draft length: upstream's /props has none)."""
        self.send_json(
            200,
            {
                "build_info": BUILD,
                "model_path": str(self.server.engine.backend.target_path),
                "total_slots": 1,
                "default_generation_settings": {"n_ctx": 1024, "params": {"speculative.types": self._types()}},
            },
        )

    def slots(self, _: object) -> None:
        """One slot and whether it can speculate."""
        self.send_json(200, [{"id": 0, "n_ctx": 1024, "speculative": self._speculates(), "is_processing": False}])

    def detokenize(self, body: dict[str, Any]) -> None:
        """``{"content": text}`` of ``tokens`` (``tools/server/server.cpp``, the detokenize handler)."""
        tokens = [int(t) for t in body.get("tokens") or []]
        self.send_json(200, {"content": self.server.engine.backend.detokenize(tokens)})

    def completion(self, body: dict[str, Any]) -> None:
        """One completion, streamed as server-sent events or whole."""
        if self.fail_if_asked():
            return
        # Request-level speculative.* fields are ignored, as the real server does.
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(body.get("n_predict", 16)), self._num_draft(), int(body.get("seed", 0))
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
            "timings": timings(stats, speculating=self._num_draft() > 0),
            "generation_settings": {"speculative.types": self._types()},
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
