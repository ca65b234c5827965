"""Stand-in for the Ollama server API (``/api/version``, ``/api/tags``, ``/api/show``,
``/api/ps``, ``/api/generate``), with real generations.

Tags served (all the synthetic GGUF pair):

* ``specdec-synthetic:latest`` — the GGUF / llama-server path: speculation only when
  the request sets ``options.draft_num_predict`` > 0 (Ollama forces 0 otherwise);
* ``specdec-synthetic:draft`` — the MLX path with a draft head: always speculates
  (depth 3), ``draft_num_predict`` is not read;
* ``specdec-synthetic:plain`` — the same weights without a draft.

Durations are nanoseconds; ``eval_count`` / ``eval_duration`` are the committed
tokens and the decode time; errors are ``{"error": "..."}`` with the HTTP status.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

from pytest_specdec.standins.engine import EngineStats, Piece, collect
from pytest_specdec.standins.http import StandinHandler

VERSION = "0.31.0"
TAGS = {
    "specdec-synthetic:latest": ("gguf", "option"),
    "specdec-synthetic:draft": ("safetensors", "always"),
    "specdec-synthetic:plain": ("safetensors", "never"),
}
ENVIRONMENT = ("OLLAMA_FLASH_ATTENTION", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL")


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


class OllamaHandler(StandinHandler):
    """The endpoints the Ollama backend and the ``ollama`` client use."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/"): "root",
        ("GET", "/api/version"): "version",
        ("GET", "/api/tags"): "tags",
        ("GET", "/api/ps"): "ps",
        ("POST", "/api/show"): "show",
        ("POST", "/api/generate"): "generate",
    }

    def details(self, tag: str) -> dict[str, Any]:
        """``ModelDetails``."""
        return {
            "parent_model": "",
            "format": TAGS[tag][0],
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "10.6M",
            "quantization_level": "F16",
        }

    def root(self, _: object) -> None:
        """``Ollama is running``."""
        self.send_bytes(200, b"Ollama is running", "text/plain; charset=utf-8")

    def version(self, _: object) -> None:
        """``{"version": ...}``; the stand-in's environment rides along for the managed-server test."""
        environment = {key: os.environ[key] for key in ENVIRONMENT if key in os.environ}
        self.send_json(200, {"version": VERSION, "standin_environment": environment})

    def _model(self, tag: str) -> dict[str, Any]:
        engine = self.server.engine
        return {
            "name": tag,
            "model": tag,
            "modified_at": _now(),
            "size": engine.size_bytes,
            "digest": engine.digest.removeprefix("sha256:"),
            "details": self.details(tag),
        }

    def tags(self, _: object) -> None:
        """Every served tag."""
        self.send_json(200, {"models": [self._model(tag) for tag in TAGS]})

    def ps(self, _: object) -> None:
        """Loaded models: fully in "VRAM" (``size_vram == size``)."""
        models = [
            {
                **self._model(tag),
                "expires_at": _now(),
                "size_vram": self.server.engine.size_bytes,
                "context_length": 4096,
            }
            for tag in TAGS
        ]
        self.send_json(200, {"models": models})

    def _known(self, body: dict[str, Any]) -> str | None:
        tag = str(body.get("model", ""))
        tag = tag if ":" in tag else tag + ":latest"
        if tag in TAGS and "not-found" not in self.server.faults:
            return tag
        self.send_json(404, {"error": f"model '{body.get('model', '')}' not found"})
        return None

    def show(self, body: dict[str, Any]) -> None:
        """``ShowResponse`` (no digest: that is in ``/api/tags``)."""
        tag = self._known(body)
        if tag is None:
            return
        self.send_json(
            200,
            {
                "modelfile": f"FROM {tag}\n",
                "parameters": "temperature 0",
                "template": "{{ .Prompt }}",
                "details": self.details(tag),
                "model_info": {"general.architecture": "llama", "llama.block_count": 8, "llama.context_length": 4096},
                "capabilities": ["completion"],
                "modified_at": _now(),
            },
        )

    def generate(self, body: dict[str, Any]) -> None:
        """``/api/generate``: NDJSON stream by default, one object with ``stream: false``."""
        tag = self._known(body)
        if tag is None or self.fail_if_asked():
            return
        options = body.get("options") or {}
        mode = TAGS[tag][1]
        num_draft = {"option": int(options.get("draft_num_predict", 0) or 0), "always": 3, "never": 0}[mode]
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(options.get("num_predict", 128)), num_draft, int(options.get("seed", 0))
        )
        if body.get("stream", True):
            lines = (json.dumps(event).encode() + b"\n" for event in self._events(tag, events))
            self.stream("application/x-ndjson", lines)
            return
        pieces, stats = collect(events)
        self.send_json(200, self._final(tag, stats, "".join(p.text for p in pieces)))

    def _final(self, tag: str, stats: EngineStats, response: str) -> dict[str, Any]:
        final: dict[str, Any] = {
            "model": tag,
            "created_at": _now(),
            "response": response,
            "done": True,
            "done_reason": "length",
            "total_duration": int((stats.prompt_s + stats.decode_s) * 1e9),
            "load_duration": 0,
            "prompt_eval_count": stats.prompt_tokens,
            "prompt_eval_duration": int(stats.prompt_s * 1e9),
            "eval_count": stats.decode_tokens,
            "eval_duration": int(stats.decode_s * 1e9),
        }
        if "no-timings" in self.server.faults:
            for key in ("total_duration", "prompt_eval_duration", "eval_count", "eval_duration"):
                del final[key]
        return final

    def _events(self, tag: str, events: Iterator[Piece | EngineStats]) -> Iterator[dict[str, Any]]:
        for item in events:
            if isinstance(item, Piece):
                yield {"model": tag, "created_at": _now(), "response": item.text, "done": False}
            else:
                yield self._final(tag, item, "")
