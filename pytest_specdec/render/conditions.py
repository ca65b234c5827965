"""Notes on the conditions a comparison ran under: how it sampled, the speedup end to end, the streams at once.

Under each comparison: which lossless check a sampled comparison passed (the exact one,
or the distribution check with its p-value), the speedup the verdict does not read —
end to end (prompt in, last token out, each arm's prefill included) beside decode, or the
reverse — with each arm's median time to first token, and, with several streams at once,
each stream's own rate and time to first token beside the aggregate the verdict reads.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from pytest_specdec.measure import END_TO_END, Comparison, StreamTiming


def sampled_check_note(comparison: Comparison) -> str:
    """Which lossless check a sampled comparison passed or failed, and on how much."""
    output, sampling = comparison.output, comparison.plan.sampling.label()
    check = output.distribution
    if check is not None:
        verdict = "same distribution" if check.same else check.finding
        return (
            f"lossless check at {sampling} by distribution: {check.generations} continuations of {check.tokens} "
            f"tokens per arm and prompt, {verdict} (permutation p={check.p_value:.3g}, fails at ≤ {check.alpha:g})"
        )
    return (
        f"lossless at {sampling} by the exact check: with one seed per pair SD drew plain's very tokens in all "
        f"{len(comparison.pairs)} pairs (this backend draws the same tokens per seed with and without SD)"
    )


def end_to_end_note(comparison: Comparison) -> str:
    """The speedup the verdict does not read (end to end beside decode, or the reverse) and each arm's first token."""
    other, plan = comparison.other_metric, comparison.plan
    assert other is not None
    shown = f"{other.estimate:.2f}x [{other.low:.2f}, {other.high:.2f}]"
    ttft = (
        f"time to first token: plain {comparison.ttft_s('baseline') * 1e3:.0f} ms, "
        f"{plan.treatment.label} {comparison.ttft_s('treatment') * 1e3:.0f} ms (medians)"
    )
    if plan.speedup_of == END_TO_END:
        return f"decode speedup (first token to last) {shown}; the verdict reads end to end; {ttft}"
    return f"end-to-end speedup (prompt in, last token out, {plan.max_tokens} tokens) {shown}; {ttft}"


def condition_notes(comparison: Comparison) -> list[str]:
    """The lines under a comparison about its conditions: the sampled lossless check, the other metric, streams."""
    notes = [] if comparison.plan.sampling.greedy else [sampled_check_note(comparison)]
    notes += [end_to_end_note(comparison)] if comparison.other_metric is not None else []
    streams = streams_note(comparison)
    return notes + ([streams] if streams else [])


def streams_note(comparison: Comparison) -> str | None:
    """Under concurrency: what the verdict read (the aggregate decode rate) and each stream's own rate and first token."""
    pairs = comparison.pairs
    if not pairs or not pairs[0].baseline.streams:
        return None
    label = comparison.plan.treatment.label

    def median(arm: str, read: Callable[[StreamTiming], float]) -> float:
        return statistics.median(
            read(s) for p in pairs for s in (p.baseline if arm == "baseline" else p.treatment).streams
        )

    count = len(pairs[0].baseline.streams)
    return (
        f"{count} streams at once on servers started for {count}: the verdict reads the aggregate decode rate "
        f"(plain {comparison.arm_tps('baseline'):.1f} tok/s, {label} {comparison.arm_tps('treatment'):.1f} tok/s in all); "
        f"per stream plain {median('baseline', _rate):.1f} tok/s, {label} {median('treatment', _rate):.1f} tok/s, "
        f"time to first token plain {median('baseline', _first) * 1e3:.0f} ms, {label} "
        f"{median('treatment', _first) * 1e3:.0f} ms (medians over streams)"
    )


def _rate(stream: StreamTiming) -> float:
    return stream.decode_tps


def _first(stream: StreamTiming) -> float:
    return stream.ttft_s
