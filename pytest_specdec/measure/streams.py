"""Several streams of one generation in flight at once: a server serving *N* clients (the concurrency axis).

Each of the *N* streams sends the same request on a thread of its own, released together; every
burst of every stream is timed on this process's clock. The arm's trial then reads what a server
delivers under that load: its decode tokens are every stream's (each stream's first token left
out, as for one stream), over the span from the first stream's first token to the last stream's
last token; its time to first token is the first stream's, so that time to first token plus
decode time is the whole span from the requests' start to the last token out (end to end).
Each stream's own decode tok/s and time to first token are kept beside it, for the notes.
A server's own timings are per request and are not read here. The tokens compared by the
lossless check are the first stream's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

from pytest_specdec.backends.base import Backend, GenerationRequest
from pytest_specdec.errors import BackendRuntimeError
from pytest_specdec.measure.trial import StreamTiming, Timed, Trial, timed_generation

Clock = Callable[[], float]
RELEASE_S = 60.0  # the longest the streams wait for each other to start (a stuck thread is an error, never a hang)


def run_streams(backend: Backend, request: GenerationRequest, prompt_id: str, streams: int, clock: Clock) -> Trial:
    """``streams`` copies of ``request`` at once; one trial of their aggregate throughput."""
    start = threading.Barrier(streams)
    timed: list[Timed | None] = [None] * streams
    failures: list[BaseException] = []

    def one(index: int) -> None:
        try:
            start.wait(timeout=RELEASE_S)
            timed[index] = timed_generation(backend, request, clock)
        except BaseException as error:  # told to the caller, which raises the first
            failures.append(error)
            start.abort()

    threads = [threading.Thread(target=one, args=(i,), name=f"specdec-stream-{i}", daemon=True) for i in range(streams)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        first = failures[0]
        if isinstance(first, threading.BrokenBarrierError) and len(failures) < streams:
            first = next(f for f in failures if not isinstance(f, threading.BrokenBarrierError))
        raise BackendRuntimeError(
            f"one of {streams} streams at once failed: {type(first).__name__}: {first}"
        ) from first
    done = [t for t in timed if t is not None]
    return _aggregate(request, prompt_id, done)


def _aggregate(request: GenerationRequest, prompt_id: str, done: list[Timed]) -> Trial:
    began = min(t.start for t in done)
    first = min(t.first_at for t in done)
    last = max(t.last_at for t in done)
    tokens = sum(t.decode_tokens for t in done)
    drafted = [t.stats.drafted for t in done if t.stats.drafted is not None]
    accepted = [t.stats.accepted for t in done if t.stats.accepted is not None]
    peaks = [t.stats.peak_memory_bytes for t in done if t.stats.peak_memory_bytes is not None]
    lead = done[0]
    return Trial(
        arm=request.arm.label,
        prompt_id=prompt_id,
        token_ids=lead.tokens,
        prompt_tokens=lead.stats.prompt_tokens,
        ttft_s=first - began,
        decode_s=last - first,
        decode_tokens=tokens,
        drafted=sum(drafted) if drafted else None,
        accepted=sum(accepted) if accepted else None,
        peak_memory_bytes=max(peaks) if peaks else None,
        units=lead.stats.output_units,
        streams=tuple(StreamTiming(_rate(t), t.first_at - t.start) for t in done),
    )


def _rate(timed: Timed) -> float:
    span = timed.last_at - timed.first_at
    return timed.decode_tokens / span if span > 0 else math.inf
