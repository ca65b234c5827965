"""``mlx_lm.server``, one server per arm, as a user starts it: plain, and with ``--draft-model``.

Each arm's server is the plugin's launcher (:mod:`~pytest_specdec.backends.mlx_server.launcher`) running
``mlx_lm.server``'s own ``main()`` with its own flags, on a free loopback port
(:class:`~pytest_specdec.backends.server_process.ServerProcess`), stopped at the end. A request is
``POST /v1/completions``, streamed; the server returns text, not token ids, so outputs are compared
as text and ``usage.completion_tokens`` counts the tokens.

**Observed, inside the server**: after each request the adapter reads the launcher's line for it from
the server's log — the path it took (``single`` or ``batched``), the draft's forward calls (drafted) and
the responses ``from_draft`` (accepted). The line is written when the generation ends, which may come
just after the last chunk, so the adapter waits for it (polling the log, at most ``LINE_WAIT_S``).

**The plain arm takes the path the SD arm takes**: a server with a draft model serves one request at
a time (``ModelProvider.is_batchable`` is false with a draft); a plain server batches unless the
request carries a ``seed`` (``ResponseGenerator._is_batchable``, mlx-lm 0.32). So the plain arm sends
its seed and runs the single-request path; ``plain_path=batched`` is the user's batched path, a
labelled arm (measured from outside, 1.035x [1.022, 1.049] slower, which would inflate SD by ~3.5 %).

**The prompt cache is the user's**: both servers run mlx_lm.server's default (10 entries). With a draft
model, mlx-lm 0.32 saves a cache shorter than its key after a request (``speculative_generate_step``'s
``_rewind_cache`` trims the target's cache by ``num_draft - num_accept`` and the draft's by one less;
``LRUPromptCache.fetch_nearest_cache`` then trims both by the key's length), so a later identical
request runs with a prompt token missing and greedy SD stops matching plain decoding: the lossless check
fails it. ``prompt_cache_size=0`` turns the cache off (a labelled option).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from importlib.metadata import version
from pathlib import Path
from typing import Any, ClassVar

from pytest_specdec.backends.base import (
    BackendOptions,
    Fingerprint,
    GenerationRequest,
    GenerationStats,
    GenerationStream,
    ModelPair,
    TokenBurst,
)
from pytest_specdec.backends.files import model_dir_digest
from pytest_specdec.backends.http_client import HttpService, text_units
from pytest_specdec.backends.mlx_lm_parts import resolve_reference
from pytest_specdec.backends.mlx_server.launcher import PREFIX
from pytest_specdec.backends.server_process import ServerProcess
from pytest_specdec.errors import BackendRuntimeError, BackendUnavailable, ModelLoadError, SpecdecUsageError

LINE_WAIT_S = 5.0
DEFAULT_CACHE = "10 (mlx_lm.server's default)"


def request_lines(log: str) -> list[dict[str, Any]]:
    """The launcher's per-request lines in ``log``, in order.

    >>> log = 'INFO x\\nspecdec-mlx-server {"path": "single", "drafted": 6, "accepted": 4, "tokens": 8}\\n'
    >>> request_lines(log)
    [{'path': 'single', 'drafted': 6, 'accepted': 4, 'tokens': 8}]
    >>> request_lines(log + 'specdec-mlx-server {"path": "sin')  # a line still being written waits
    [{'path': 'single', 'drafted': 6, 'accepted': 4, 'tokens': 8}]
    """
    whole = log[: log.rfind("\n") + 1] if not log.endswith("\n") else log  # a line still being written waits
    return [json.loads(line[len(PREFIX) :]) for line in whole.splitlines() if line.startswith(PREFIX)]


class MlxServerBackend:
    """A plain and a speculative ``mlx_lm.server`` of the plugin's own."""

    name: ClassVar[str] = "mlx-server"

    def __init__(self, pair: ModelPair, options: Mapping[str, str]) -> None:
        reader = BackendOptions(self.name, options)
        cache = reader.integer("prompt_cache_size", -1, low=0, high=10_000)
        self._plain_path = reader.choice("plain_path", "single", ("single", "batched"))
        self._timeout_s = reader.number("timeout", 600.0, low=0.1, high=86_400)
        reader.reject_unknown()
        if pair.draft is None:
            raise SpecdecUsageError("mlx-server speculates with a draft model — set --specdec-draft")
        self._cache_flags = [] if cache < 0 else ["--prompt-cache-size", str(cache)]
        self._cache_said = DEFAULT_CACHE if cache < 0 else f"{cache} (prompt_cache_size)"
        self._target, self._draft = resolve_reference(pair.target), resolve_reference(pair.draft)
        self._pair = ModelPair(self._target, self._draft)
        self._servers: dict[bool, ServerProcess] = {}
        self._services: dict[bool, HttpService] = {}
        self._paths: dict[bool, set[str]] = {False: set(), True: set()}
        try:
            for speculative in (False, True):
                self._start(speculative)
        except BackendUnavailable as error:
            self.close()
            raise ModelLoadError(f"{error} — check the model paths") from None

    def _start(self, speculative: bool) -> None:
        draft = ["--draft-model", self._draft] if speculative else []

        def command(port: int) -> list[str]:
            return [sys.executable, "-m", "pytest_specdec.backends.mlx_server.launcher", "--model", self._target,
                    *draft, "--host", "127.0.0.1", "--port", str(port), *self._cache_flags]  # fmt: skip

        label = "sd" if speculative else "plain"
        server = ServerProcess(f"mlx-server-{label}", command, ready_path="/health").start()
        self._servers[speculative] = server
        self._services[speculative] = HttpService("mlx_lm.server", server.base_url, self._timeout_s, "see its log")

    @property
    def pair(self) -> ModelPair:
        """The model folders (or repos) the servers load."""
        return self._pair

    def fingerprint(self) -> Fingerprint:
        """mlx and mlx-lm, the servers' prompt cache and the paths each arm's requests took (from the server)."""
        versions = {name: version(name) for name in ("mlx", "mlx-lm")}
        details = {"servers": "managed, one per arm (plugin launcher running mlx_lm.server's main)",
                   "prompt_cache_size": self._cache_said, "plain_path_asked": self._plain_path}  # fmt: skip
        for speculative, paths in self._paths.items():
            details[f"path[{'sd' if speculative else 'plain'}]"] = ", ".join(sorted(paths)) or "no request yet"
        return Fingerprint(self.name, f"mlx-lm {versions['mlx-lm']}", versions, "mlx_lm.server (in its process)",
                           details)  # fmt: skip

    def model_digest(self) -> str:
        """Digest of each model folder, or of its name where it is a repo the server fetches itself."""
        import hashlib

        return "-".join(model_dir_digest(Path(m)) if Path(m).is_dir() else hashlib.sha256(m.encode()).hexdigest()[:16]
                        for m in (self._target, self._draft))  # fmt: skip

    def generate(self, request: GenerationRequest) -> GenerationStream:
        """One streamed completion on the arm's server; counts from the server's own line for it."""
        speculative = request.arm.speculative
        server, service = self._servers[speculative], self._services[speculative]
        seen = len(request_lines(server.log_text()))
        body: dict[str, Any] = {"prompt": request.prompt, "max_tokens": request.max_tokens, "stream": True,
                                "stream_options": {"include_usage": True}, "temperature": 0.0}  # fmt: skip
        if not request.sampling.greedy:
            body.update(temperature=request.sampling.temperature, top_p=request.sampling.top_p)
        if speculative or self._plain_path == "single":
            body["seed"] = request.seed  # a seed keeps a plain request off the batched path (_is_batchable)
        if speculative:
            body["num_draft_tokens"] = request.arm.num_draft
        usage: dict[str, Any] = {}
        for event in service.events("/v1/completions", body, stream=True):
            usage = event.get("usage") or usage
            for choice in event.get("choices", []):
                text = str(choice.get("text", ""))
                if text:
                    yield TokenBurst(text_units(text))
        line = self._line_after(server, seen)
        self._paths[speculative].add(line["path"])
        asked = "single" if speculative else self._plain_path
        completion = usage.get("completion_tokens")
        if line["path"] != asked or (
            line["path"] == "single"
            and completion is not None
            and abs(line["tokens"] - completion) > 1  # usage counts a final EOS
        ):
            raise BackendRuntimeError(
                f"mlx_lm.server's line for this request does not match it (path {line['path']}, {line['tokens']} "
                f"tokens; asked {asked}, {completion} tokens) — an earlier request's line? no result kept"
            )
        return GenerationStats(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            drafted=int(line["drafted"]),
            accepted=int(line["accepted"]),
            generated_tokens=int(usage.get("completion_tokens", line["tokens"])),
            output_units="character",
        )

    def _line_after(self, server: ServerProcess, seen: int) -> dict[str, Any]:
        """The server's line for the request just served (the first after ``seen``), waiting for it briefly."""
        deadline = time.monotonic() + LINE_WAIT_S
        while True:
            lines = request_lines(server.log_text())
            if len(lines) > seen:
                return lines[seen]
            if time.monotonic() >= deadline:
                raise BackendRuntimeError(
                    f"mlx_lm.server at {server.base_url} wrote no line for the request within {LINE_WAIT_S:g} s — "
                    f"its log: {server.last_log_line() or 'empty'}"
                )
            time.sleep(0.01)  # polling the server's log for the line it writes as the generation ends

    def streams_refusal(self, streams: int) -> str | None:
        """No concurrency axis: mlx_lm.server serves one request at a time while a draft model is loaded."""
        return (
            "mlx_lm.server stops batching while a draft model is loaded (ModelProvider.is_batchable), so its SD "
            "arm serves one stream at a time — measure concurrency on llama-server"
        )

    def close(self) -> None:
        """Close the clients and stop both servers."""
        for service in self._services.values():
            service.close()
        for server in self._servers.values():
            server.stop()
        self._services.clear()
        self._servers.clear()
