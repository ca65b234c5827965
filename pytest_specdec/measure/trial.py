"""One measured generation, timed by the burst: :class:`Trial`, and the clock's reading of a stream.

:func:`timed_generation` runs one request and times every burst as it arrives on this
process's clock: the first burst's arrival is the first token, the last burst's the last.
:func:`~pytest_specdec.measure.run_trial` turns that into a :class:`Trial` (a server's own
timings win where it reports them); :func:`~pytest_specdec.measure.streams.run_streams` turns
several streams at once into one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from pytest_specdec.backends.base import Backend, GenerationRequest, GenerationStats

Clock = Callable[[], float]


@dataclass(frozen=True)
class StreamTiming:
    """One stream of several in flight at once: its own decode tok/s and time to first token."""

    decode_tps: float
    ttft_s: float


@dataclass(frozen=True)
class Trial:
    """One measured generation (or, under concurrency, the streams of one request in flight at once)."""

    arm: str
    prompt_id: str
    token_ids: tuple[int, ...]
    prompt_tokens: int
    ttft_s: float
    decode_s: float
    decode_tokens: int
    drafted: int | None = None
    accepted: int | None = None
    peak_memory_bytes: int | None = None
    load_s: float | None = None  # a server's (re)load before this generation, not timed as decode
    units: str = "token"
    client_tps: float | None = None  # this process's clock, when a server's own timing was used instead
    streams: tuple[StreamTiming, ...] = ()  # each stream's own timing, when several ran at once

    @property
    def decode_tps(self) -> float:
        """Decode tokens per second (first token excluded; every stream's, over their span, when several ran)."""
        return self.decode_tokens / self.decode_s if self.decode_s > 0 else math.inf


@dataclass(frozen=True)
class Timed:
    """One generation as this process's clock saw it."""

    start: float
    first_at: float  # the first burst's arrival
    last_at: float  # the last burst's
    tokens: tuple[int, ...]
    first_burst: int  # tokens in the first burst (they are time to first token, not decode)
    stats: GenerationStats

    @property
    def decode_tokens(self) -> int:
        """Tokens after the first burst (bursts of text: the backend's count less the first token)."""
        if self.stats.generated_tokens is not None:
            return self.stats.generated_tokens - 1
        return len(self.tokens) - self.first_burst


def timed_generation(backend: Backend, request: GenerationRequest, clock: Clock) -> Timed:
    """Run one request, timing every burst as it arrives."""
    tokens: list[int] = []
    first_burst = 0
    start = clock()
    first_at = last_at = start
    stream = backend.generate(request)
    while True:
        try:
            burst = next(stream)
        except StopIteration as stop:
            stats = stop.value
            break
        now = clock()
        if not tokens:
            first_at, first_burst = now, len(burst.token_ids)
        last_at = now
        tokens.extend(burst.token_ids)
    return Timed(start, first_at, last_at, tuple(tokens), first_burst, stats)
