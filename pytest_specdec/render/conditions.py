"""Notes on the conditions a comparison ran under: how it sampled, and the speedup end to end.

Under each comparison: which lossless check a sampled comparison passed (the exact one,
or the distribution check with its p-value), and the speedup the verdict does not read —
end to end (prompt in, last token out, each arm's prefill included) beside decode, or the
reverse — with each arm's median time to first token.
"""

from __future__ import annotations

from pytest_specdec.measure import END_TO_END, Comparison


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
    """The lines under a comparison about its conditions: the sampled lossless check, the other metric."""
    notes = [] if comparison.plan.sampling.greedy else [sampled_check_note(comparison)]
    return notes + ([end_to_end_note(comparison)] if comparison.other_metric is not None else [])
