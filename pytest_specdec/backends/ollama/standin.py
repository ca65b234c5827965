"""Stand-in for the Ollama server API, with real generations, for what cannot run here.

Endpoints: ``/``, ``/api/version``, ``/api/tags``, ``/api/ps``, ``/api/show``,
``/api/generate``. Each behaviour follows Ollama's source (``ollama/ollama``):

* ``draft_num_predict`` exists from v0.30.0 (``api/types.go``, ``Runner``); a server
  of an older ``version`` setting ignores it (``Options.FromMap`` logs "invalid option
  provided" and goes on).
* GGUF tags speculate only with MTP layers (``<arch>.nextn_predict_layers`` in
  ``model_info``) or a ``DRAFT`` layer, and only when ``draft_num_predict`` > 0; left
  unset on a tag without a DRAFT it is forced to 0, with a DRAFT it defaults to 4
  (``server/routes.go``; ``llm/llama_server.go`` ``hasMTPDraft``, ``appendDraftArgs``).
* safetensors tags run on the MLX engine: it never reads ``draft_num_predict`` and
  drafts on every request when the tag ships a drafter, unless ``logprobs`` is asked
  (``x/mlxrunner/runner.go``, ``speculate.go``); the drafter shows in no API field. Its
  depth adapts (``speculate_depth.go``): cold at 0, deeper as it goes, kept per model.
* A change of a runner option (``draft_num_predict`` among them) between requests
  reloads a GGUF runner: ``load_duration`` on that request is a model load; MLX
  models never reload for it (``server/sched.go`` ``needsReload``). The stand-in reports
  the load without spending the time.
* ``think`` defaults to true on thinking-capable tags; the text then arrives in
  ``thinking`` and ``response`` stays empty (``server/routes.go``).
* An error after the first bytes is one more NDJSON line ``{"error": ...}`` under the
  HTTP 200 already sent, with no ``done`` chunk (``streamResponse``; fault ``midstream``).
* Durations are nanoseconds; ``eval_count`` / ``eval_duration`` are the decoded tokens
  and their time (``api.Metrics``); no draft counters are exposed in the API. From v0.32.6 the MLX
  engine logs them per request at INFO on the server's stderr (``x/mlxrunner/speculate_stats.go``,
  ``stats_line``), only for a request that may draft (a drafter, no ``logprobs``).

Settings: ``version`` (default ``0.32.4``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, Piece, collect
from pytest_specdec.backends.standin.http import StandinHandler

VERSION = "0.32.4"
DRAFT_OPTION_SINCE = (0, 30, 0)
DRAFT_DEFAULT = 4  # api/types.go DefaultOptions
STATS_AT_INFO_SINCE = (0, 32, 6)  # the MLX runner's stats line, DEBUG before (commit 3ff2dcb)
MLX_DEPTH = 3
RELOAD_NS = 1_500_000_000  # a GGUF runner reload, as reported in load_duration
ENVIRONMENT = ("OLLAMA_FLASH_ATTENTION", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_CONTEXT_LENGTH", "OLLAMA_NUM_PARALLEL")


@dataclass(frozen=True)
class Tag:
    """How one served tag is built."""

    format: str  # "gguf" or "safetensors"
    mtp: bool = False
    draft: bool = False  # GGUF: a DRAFT layer; safetensors: a drafter (invisible in the API)
    thinking: bool = False


TAGS = {
    "specdec-synthetic:latest": Tag("gguf"),
    "specdec-synthetic:mtp": Tag("gguf", mtp=True),
    "specdec-synthetic:gguf-draft": Tag("gguf", draft=True),
    "specdec-synthetic:think": Tag("gguf", mtp=True, thinking=True),
    "specdec-synthetic:draft": Tag("safetensors", draft=True),
    "specdec-synthetic:draft-b": Tag("safetensors", draft=True),
    "specdec-synthetic:plain": Tag("safetensors"),
}


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def stats_line(stats: EngineStats, depth: int) -> str:
    """The runner's per-request line in slog's text format (``x/mlxrunner/speculate_stats.go`` line 62 at v0.32.6+:
    ``slog.Info("speculative decode stats", "iterations", …, "drafted", …, "accepted", …, "acceptance", "%.2f",
    "avg_draft", "%.2f", "max_draft", …, "avg_accepted", "%.2f", "depth_over_time", …)``; ``logutil/logutil.go``
    adds ``source`` as the file's base name)."""
    iterations = max(1, stats.decode_tokens - stats.accepted)  # one target step per round
    acceptance = stats.accepted / stats.drafted if stats.drafted else 0.0
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return (
        f'time={stamp} level=INFO source=speculate_stats.go:62 msg="speculative decode stats" '
        f"iterations={iterations} drafted={stats.drafted} accepted={stats.accepted} acceptance={acceptance:.2f} "
        f"avg_draft={stats.drafted / iterations:.2f} max_draft={depth} avg_accepted={stats.accepted / iterations:.2f} "
        f"depth_over_time={depth:.1f}/{depth}"
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("-", 1)[0].split(".")[:3])


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

    @property
    def ollama_version(self) -> str:
        """The Ollama release this stand-in plays."""
        return self.server.settings.get("version", VERSION)

    def details(self, tag: str) -> dict[str, Any]:
        """``ModelDetails``."""
        return {
            "parent_model": "",
            "format": TAGS[tag].format,
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
        self.send_json(200, {"version": self.ollama_version, "standin_environment": environment})

    def _model(self, tag: str) -> dict[str, Any]:
        engine = self.server.engine
        return {
            "name": tag,
            "model": tag,
            "modified_at": _now(),
            "size": engine.size_bytes,
            # Each tag its own manifest digest (server/routes.go, ListHandler: Digest is the manifest's
            # digest): a tag and its plain twin are two manifests; CopyHandler's second name shares one.
            "digest": hashlib.sha256(f"{engine.digest} {tag}".encode()).hexdigest(),
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
        """``ShowResponse``: MTP layers in ``model_info``, a ``DRAFT`` line in the modelfile (GGUF only)."""
        tag = self._known(body)
        if tag is None:
            return
        spec = TAGS[tag]
        info: dict[str, Any] = {"general.architecture": "llama", "llama.block_count": 8, "llama.context_length": 4096}
        if spec.mtp:
            info["llama.nextn_predict_layers"] = 1
        modelfile = f'# Modelfile generated by "ollama show"\nFROM /blobs/{tag}\n'
        if spec.format == "gguf" and spec.draft:
            modelfile += f"DRAFT /blobs/{tag}-draft\n"
        self.send_json(
            200,
            {
                "modelfile": modelfile,
                "parameters": "temperature 0",
                "template": "{{ .Prompt }}",
                "details": self.details(tag),
                "model_info": info,
                "tensors": [{"name": "token_embd.weight", "type": "F16", "shape": [256, 256]}],
                "capabilities": ["completion", *(["thinking"] if spec.thinking else [])],
                "modified_at": _now(),
            },
        )

    def _num_draft(self, tag: str, body: dict[str, Any]) -> int:
        """How many tokens this request drafts per step, as the real server would decide."""
        spec = TAGS[tag]
        options = body.get("options") or {}
        if spec.format == "safetensors":
            asked_logprobs = bool(body.get("logprobs")) or bool(body.get("top_logprobs"))
            if not spec.draft or asked_logprobs:
                return 0
            # The depth adapts and is the model's, carried from request to request: a cold model
            # starts at 0 (plain decode) and probes one step deeper as rounds go by, up to its limit
            # (x/mlxrunner/speculate_depth.go, depthController.next; speculate.go keeps it per model).
            # Here: one step deeper per request. No request option or API field touches it.
            depths: dict[str, int] = self.server.state.setdefault("mlx_depth", {})
            depth = depths.get(tag, 0)
            depths[tag] = min(MLX_DEPTH, depth + 1)
            return depth
        if _version(self.ollama_version) < DRAFT_OPTION_SINCE or not (spec.mtp or spec.draft):
            return 0
        requested = options.get("draft_num_predict")
        if requested is None:
            return DRAFT_DEFAULT if spec.draft else 0
        return max(0, int(requested))

    def _load_ns(self, tag: str, num_draft: int) -> int:
        """A GGUF runner reloads when a runner option changed since its last request."""
        if TAGS[tag].format != "gguf":
            return 0
        loaded: dict[str, int] = self.server.state.setdefault("runner_options", {})
        previous = loaded.get(tag)
        loaded[tag] = num_draft
        return RELOAD_NS if previous is not None and previous != num_draft else 0

    def generate(self, body: dict[str, Any]) -> None:
        """``/api/generate``: NDJSON stream by default, one object with ``stream: false``."""
        tag = self._known(body)
        if tag is None or self.fail_if_asked():
            return
        options = body.get("options") or {}
        num_draft = self._num_draft(tag, body)
        spec = TAGS[tag]
        # The MLX runner's stats line is written only for a request that may draft (speculate_stats.go, logStats:
        # "if !s.enabled { return }"; enabled = a drafter and no logprobs, speculate.go open), at INFO from 0.32.6.
        asked_logprobs = bool(body.get("logprobs")) or bool(body.get("top_logprobs"))
        self.logs_stats = (spec.format == "safetensors" and spec.draft and not asked_logprobs
                           and _version(self.ollama_version) >= STATS_AT_INFO_SINCE)  # fmt: skip
        self.depth = num_draft
        load_ns = self._load_ns(tag, num_draft)
        thinking = TAGS[tag].thinking and body.get("think") is not False
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(options.get("num_predict", 128)), num_draft, int(options.get("seed", 0))
        )
        if body.get("stream", True):
            lines = (json.dumps(event).encode() + b"\n" for event in self._events(tag, events, thinking, load_ns))
            self.stream("application/x-ndjson", lines)
            return
        pieces, stats = collect(events)
        text = "".join(p.text for p in pieces)
        self.send_json(200, self._final(tag, stats, "" if thinking else text, load_ns, text if thinking else ""))

    def _final(self, tag: str, stats: EngineStats, response: str, load_ns: int, thinking: str = "") -> dict[str, Any]:
        if getattr(self, "logs_stats", False):
            print(stats_line(stats, self.depth), file=sys.stderr, flush=True)
        final: dict[str, Any] = {
            "model": tag,
            "created_at": _now(),
            "response": response,
            "done": True,
            "done_reason": "length",
            "total_duration": int((stats.prompt_s + stats.decode_s) * 1e9) + load_ns,
            "load_duration": load_ns,
            "prompt_eval_count": stats.prompt_tokens,
            "prompt_eval_duration": int(stats.prompt_s * 1e9),
            "eval_count": stats.decode_tokens,
            "eval_duration": int(stats.decode_s * 1e9),
        }
        if thinking:
            final["thinking"] = thinking
        if "no-timings" in self.server.faults:
            for key in ("total_duration", "prompt_eval_duration", "eval_count", "eval_duration"):
                del final[key]
        return final

    def _events(
        self, tag: str, events: Iterator[Piece | EngineStats], thinking: bool, load_ns: int
    ) -> Iterator[dict[str, Any]]:
        for index, item in enumerate(events):
            if "midstream" in self.server.faults and index == 2:
                yield {"error": "llama runner process has terminated: signal: killed"}
                return
            if isinstance(item, Piece):
                text = {"thinking": item.text, "response": ""} if thinking else {"response": item.text}
                yield {"model": tag, "created_at": _now(), **text, "done": False}
            else:
                yield self._final(tag, item, "", load_ns)
