"""Real generations behind the stand-in servers: the synthetic pair on llama-cpp-python.

The engine asks the registry for the ``llama-cpp`` backend rather than importing it, so
the backend folders stay independent of each other.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

from pytest_specdec.backends.base import Arm, GenerationRequest, ModelPair
from pytest_specdec.backends.files import files_digest
from pytest_specdec.embedded import models


@dataclass(frozen=True)
class Piece:
    """One generated token and its text."""

    token: int
    text: str


@dataclass(frozen=True)
class EngineStats:
    """What a finished generation measured, in seconds."""

    prompt_tokens: int
    prompt_s: float
    decode_tokens: int
    decode_s: float
    drafted: int
    accepted: int


class GenerationEngine:
    """One GGUF target with its aligned draft; one generation at a time."""

    def __init__(self, target: str = models.DEFAULT_TARGET, draft: str = models.DEFAULT_DRAFT) -> None:
        from pytest_specdec.backends import load_backend

        # The llama-cpp adapter (its target_path and detokenize are used below).
        self.backend = cast(Any, load_backend("llama-cpp", ModelPair(target, draft), {"n_ctx": "1024"}))
        self.digest = "sha256:" + files_digest([self.backend.target_path]) * 4
        self.size_bytes = self.backend.target_path.stat().st_size
        self._lock = threading.Lock()

    def generate(self, prompt: str, max_tokens: int, num_draft: int, seed: int) -> Iterator[Piece | EngineStats]:
        """Pieces as they are decoded, then the stats; ``num_draft`` 0 decodes plainly."""
        arm = Arm("sd", True, num_draft) if num_draft > 0 else Arm("plain")
        with self._lock:
            start = time.perf_counter()
            first = last = start
            count = 0
            stream = self.backend.generate(GenerationRequest(prompt, arm, max_tokens, seed))
            try:
                while True:
                    burst = next(stream)
                    last = time.perf_counter()
                    if count == 0:
                        first = last
                    for token in burst.token_ids:
                        count += 1
                        yield Piece(token, self.backend.detokenize([token]))
            except StopIteration as stop:
                stats = stop.value
            finally:
                # A client that hangs up abandons this generator; the model's own generator
                # must be closed while the lock is held, or its clean-up races the next request.
                stream.close()
            yield EngineStats(
                prompt_tokens=stats.prompt_tokens,
                prompt_s=first - start,
                decode_tokens=count,
                decode_s=last - first,
                drafted=stats.drafted or 0,
                accepted=stats.accepted or 0,
            )

    def close(self) -> None:
        """Free the models."""
        self.backend.close()


def collect(events: Iterator[Piece | EngineStats]) -> tuple[list[Piece], EngineStats]:
    """A whole generation at once (for non-streaming responses)."""
    pieces: list[Piece] = []
    for item in events:
        if isinstance(item, EngineStats):
            return pieces, item
        pieces.append(item)
    raise RuntimeError("the engine ended without its stats")


def timings(stats: EngineStats, *, speculating: bool = True) -> dict[str, Any]:
    """llama-server's ``timings`` object for one completion.

    Draft counts only when this request drafted (``result_timings::to_json`` in
    ``tools/server/server-common.cpp``: ``if (n_draft_tokens > 0)``).
    """
    decode_ms = stats.decode_s * 1000.0
    shown = {
        "prompt_n": stats.prompt_tokens,
        "prompt_ms": stats.prompt_s * 1000.0,
        "prompt_per_token_ms": stats.prompt_s * 1000.0 / max(1, stats.prompt_tokens),
        "prompt_per_second": stats.prompt_tokens / stats.prompt_s if stats.prompt_s else 0.0,
        "predicted_n": stats.decode_tokens,
        "predicted_ms": decode_ms,
        "predicted_per_token_ms": decode_ms / max(1, stats.decode_tokens),
        "predicted_per_second": stats.decode_tokens / stats.decode_s if stats.decode_s else 0.0,
    }
    if speculating and stats.drafted > 0:
        shown.update({"draft_n": stats.drafted, "draft_n_accepted": stats.accepted})
    return shown
