"""A stand-in server for the tests: OpenAI's completions with vLLM's speculative counters.

Built from pytest-specdec's stand-in kit (real generations on the synthetic pair), which
is all a third-party backend needs to ship a stand-in of its own.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import signal
import threading
from collections.abc import Sequence
from typing import Any, ClassVar

from pytest_specdec.backends.standin.engine import EngineStats, GenerationEngine
from pytest_specdec.backends.standin.http import StandinHandler, StandinServer

MODELS = {"plain": 0, "sd": 3}  # served model → draft tokens per step


class OpenAISpecHandler(StandinHandler):
    """``/v1/models``, ``/v1/completions`` (streamed), ``/metrics``, ``/version``, ``/health``."""

    routes: ClassVar[dict[tuple[str, str], str]] = {
        ("GET", "/health"): "health",
        ("GET", "/version"): "version",
        ("GET", "/v1/models"): "models",
        ("GET", "/metrics"): "metrics",
        ("POST", "/v1/completions"): "completions",
    }

    def health(self, _: object) -> None:
        self.send_bytes(200, b"", "text/plain")

    def version(self, _: object) -> None:
        self.send_json(200, {"version": "0.1.0"})

    def models(self, _: object) -> None:
        self.send_json(200, {"object": "list", "data": [{"id": name, "object": "model"} for name in MODELS]})

    def metrics(self, _: object) -> None:
        counts = self.server.state.setdefault("counts", {"drafted": 0, "accepted": 0})
        text = (
            f'vllm:spec_decode_num_draft_tokens_total{{model_name="sd"}} {counts["drafted"]}.0\n'
            f'vllm:spec_decode_num_accepted_tokens_total{{model_name="sd"}} {counts["accepted"]}.0\n'
        )
        self.send_bytes(200, text.encode(), "text/plain; version=0.0.4")

    def completions(self, body: dict[str, Any]) -> None:
        model = str(body.get("model", ""))
        if model not in MODELS:
            self.send_json(404, {"error": {"message": f"The model `{model}` does not exist.", "code": 404}})
            return
        events = self.server.engine.generate(
            str(body.get("prompt", "")), int(body.get("max_tokens") or 16), MODELS[model], int(body.get("seed") or 0)
        )
        counts = self.server.state.setdefault("counts", {"drafted": 0, "accepted": 0})

        def chunks() -> Any:
            for item in events:
                if isinstance(item, EngineStats):
                    counts["drafted"] += item.drafted
                    counts["accepted"] += item.accepted
                    usage = {"prompt_tokens": item.prompt_tokens, "completion_tokens": item.decode_tokens}
                    yield {"choices": [], "usage": usage}
                else:
                    yield {"choices": [{"index": 0, "text": item.text}]}

        encoded = (f"data: {json.dumps(event)}\n\n".encode() for event in chunks())
        self.stream("text/event-stream", itertools.chain(encoded, [b"data: [DONE]\n\n"]))


def main(argv: Sequence[str] | None = None) -> int:
    """``specdec-openai-spec-serve --port N``: serve until SIGTERM."""
    parser = argparse.ArgumentParser(prog="specdec-openai-spec-serve")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    server = StandinServer(OpenAISpecHandler, GenerationEngine(), args.port).start()
    print(f"openai-spec stand-in listening on {server.url}", flush=True)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    with contextlib.suppress(KeyboardInterrupt):
        stopped.wait()
    server.stop()
    server.engine.close()
    return 0
