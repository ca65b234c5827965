"""Stand-in for the mlx-vlm server (``python -m mlx_vlm.server``) with a block drafter or an MTP head, whose
weights cannot be had here. Paths are inside the mlx-vlm 0.7.10 wheel (``mlx_vlm/``); lines are of that release.

* ``GET /health`` (``server/app.py`` L1133-1151): ``status``, ``loaded_model``; no version, no drafter.
* ``GET /openapi.json``: FastAPI's ``info.version`` is the package's ``__version__`` (``server/app.py``
  L490-495, ``version.py``).
* ``GET /v1/settings`` (``server/app.py`` L1212-1243): ``current.draft_model`` and ``current.draft_kind``.
* ``POST /v1/chat/completions`` (``server/openai.py``): ``model`` must be the loaded model (another one would be
  loaded in its place: ``get_cached_model``, ``server/app.py`` L616-639); ``max_tokens``, ``temperature``.
  Non-streaming: ``choices[0].message.content``, ``usage`` and ``timings`` (``openai.py`` L2696-2705).
  Streaming: content chunks, a finish chunk, then, only with ``stream_options.include_usage``, a chunk with
  ``choices: []``, ``usage`` and the full ``timings`` (``openai.py`` L2078-2080, L2258-2283), then ``[DONE]``.
* ``timings`` (``server/schemas.py`` L525-589) carries ``draft_kind``, ``draft_rounds``, ``draft_n`` and
  ``draft_n_accepted``: ``null`` without a drafter or when no speculative round ran (``speculative/common.py``
  L377-391). Per round the drafter proposes ``block size - 1`` tokens (``speculative/dflash.py`` L418).
* A plain language model given as ``--draft-model`` loads as a ``dflash`` drafter and every generation fails
  with HTTP 500 ``{"detail": "Generation failed: ..."}`` (``server/openai.py`` L2765-2775), or, streaming, with
  an ``{"error": ...}`` event and no ``[DONE]`` (L2486-2497) (the drafter has no
  ``target_layer_ids``, ``speculative/utils.py`` L101-102): setting ``drafter=plain-lm``. A drafter whose
  compatibility check fails is dropped with a warning and the server decodes plainly (``server/generation.py``
  L1160-1168): setting ``drafter=incompatible``.

Settings (what the real server takes on its command line): ``draft_kind`` (``dflash``, ``eagle3``, ``mtp``; empty:
no ``--draft-model``), ``block_size`` (the drafter's, default 4: 3 drafts a round), ``drafter``.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, GenerationEngine, Piece, collect
from pytest_specdec.backends.standin.http import StandinHandler

MODEL = "specdec/synthetic-target"
VERSION = "0.7.10"


class MlxVlmHandler(StandinHandler):
    """The endpoints the mlx-vlm backend uses."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/health"): "health",
        ("GET", "/openapi.json"): "openapi",
        ("GET", "/v1/settings"): "settings",
        ("POST", "/v1/chat/completions"): "chat",
    }

    def error_body(self, status: int, message: str) -> object:
        """FastAPI's ``HTTPException`` body."""
        return {"detail": message}

    def not_found_body(self, path: str) -> object:
        """FastAPI's 404."""
        return {"detail": "Not Found"}

    @property
    def _kind(self) -> str:
        return self.server.settings.get("draft_kind", "")

    def health(self, _: object) -> None:
        """Readiness and the loaded model."""
        self.send_json(200, {"status": "healthy", "loaded_model": MODEL, "loaded_adapter": None})

    def openapi(self, _: object) -> None:
        """FastAPI's schema head: the release."""
        self.send_json(200, {"openapi": "3.1.0", "info": {"title": "mlx-vlm", "version": VERSION}, "paths": {}})

    def settings(self, _: object) -> None:
        """The drafter the server was started with."""
        draft = f"specdec/synthetic-{self._kind or 'none'}-drafter" if self._kind else None
        self.send_json(200, {"current": {"draft_model": draft, "draft_kind": self._kind or None}})

    def chat(self, body: dict[str, Any]) -> None:
        """``/v1/chat/completions`` on the loaded model, drafting when a drafter is loaded."""
        if self.fail_if_asked():
            return
        if body.get("model") != MODEL:
            self.send_json(400, self.error_body(400, f"Failed to load model: {body.get('model')} not found"))
            return
        drafter = self.server.settings.get("drafter", "")
        if self._kind and drafter == "plain-lm":
            failure = "'ModelConfig' object has no attribute 'target_layer_ids'"
            if body.get("stream"):  # an error event and no [DONE] (openai.py L2486-2497)
                self.stream("text/event-stream", [f"data: {json.dumps({'error': failure})}\n\n".encode()])
            else:
                self.send_json(500, self.error_body(500, f"Generation failed: {failure}"))
            return
        prompt = "".join(str(m.get("content", "")) for m in body.get("messages") or [])
        drafting = bool(self._kind) and drafter != "incompatible"
        num_draft = int(self.server.settings.get("block_size", "4")) - 1 if drafting else 0
        engine: GenerationEngine = self.server.engine
        events = engine.generate(prompt, int(body.get("max_tokens") or 2048), num_draft, int(body.get("seed") or 0))
        created = int(time.time())
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = (f"data: {json.dumps(e)}\n\n".encode() for e in self._stream(events, drafting, created, usage))
            self.stream("text/event-stream", itertools.chain(chunks, [b"data: [DONE]\n\n"]))
            return
        pieces, stats = collect(events)
        answer = {"role": "assistant", "content": "".join(p.text for p in pieces)}
        self.send_json(200, self._frame(created, [{"index": 0, "finish_reason": "length", "message": answer}])
                       | {"usage": self._usage(stats), "timings": self._timings(stats, drafting)})  # fmt: skip

    def _frame(self, created: int, choices: list[dict[str, Any]], kind: str = "chat.completion") -> dict[str, Any]:
        return {"id": f"chatcmpl-{created}", "object": kind, "created": created, "model": MODEL, "choices": choices}

    def _usage(self, stats: EngineStats) -> dict[str, Any]:
        total = stats.prompt_tokens + stats.decode_tokens
        return {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.decode_tokens, "total_tokens": total}

    def _timings(self, stats: EngineStats, drafting: bool) -> dict[str, Any]:
        """``GenerationTimings``: the draft fields ``null`` unless a speculative round ran."""
        rounds = stats.decode_tokens - 1 - stats.accepted if drafting and stats.drafted else 0
        rate = stats.decode_tokens / stats.decode_s if stats.decode_s else 0.0
        return {
            "prompt_n": stats.prompt_tokens,
            "cache_n": 0,
            "predicted_n": stats.decode_tokens,
            "prompt_ms": stats.prompt_s * 1000.0,
            "predicted_ms": stats.decode_s * 1000.0,
            "predicted_per_second": rate,
            "draft_kind": self._kind if rounds else None,
            "draft_rounds": rounds or None,
            "draft_n": stats.drafted if rounds else None,
            "draft_n_accepted": stats.accepted if rounds else None,
        }

    def _stream(
        self, events: Iterator[Piece | EngineStats], drafting: bool, created: int, usage: bool
    ) -> Iterator[dict[str, Any]]:
        kind = "chat.completion.chunk"
        for item in events:
            if isinstance(item, Piece):
                yield self._frame(created, [{"index": 0, "finish_reason": None, "delta": {"content": item.text}}], kind)
                continue
            yield self._frame(created, [{"index": 0, "finish_reason": "length", "delta": {"content": None}}], kind)
            if usage:
                yield self._frame(created, [], kind) | {
                    "usage": self._usage(item),
                    "timings": self._timings(item, drafting),
                }
