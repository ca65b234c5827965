"""A sweep over one axis, told and drawn: the speedup at each value, decode and end to end, and where it changes.

One renderer for every axis (γ, temperature, context, …): :func:`sweep_line` is the run
summary's line — each value's decode and end-to-end speedups with their intervals and the
acceptance, then where each answer changes ("pays off up to ctx=2K, slower from ctx=8K") and
where the test's verdict changes; over a knob (γ) also the best value and each value's
break-even acceptance. :func:`sweep_plot` draws the same numbers (the acceptance on a second
axis, a line where the verdict changes). Both read only what was measured; a value that could
not run here is listed with its reason.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_specdec.axes import Axis
from pytest_specdec.axes.metric import END_TO_END
from pytest_specdec.measure import Comparison
from pytest_specdec.stats import Interval
from pytest_specdec.store.records import ComparisonRecord


@dataclass(frozen=True)
class SweepPoint:
    """One value of a sweep, as measured."""

    label: str  # ``ctx=8K``, ``T=0.7``, ``γ=3``
    value: object  # the axis's value as stored (``8192``, ``{"temperature": 0.7, "top_p": 1.0}``, ``3``)
    position: float  # where the plot puts it
    prompt_tokens: str  # as the backend counted them: ``2231`` or a range over the prompts
    decode: Interval | None  # None: not read (an end-to-end comparison of fewer than two pairs reads only its own)
    end_to_end: Interval | None
    acceptance: Interval | None
    verdict: str  # the test's conclusion at this value: holds, refuted, inconclusive, measured, failed …
    failed: bool  # a lossless failure or SD not engaged: says nothing about speed
    break_even: str = "-"  # the acceptance below which SD loses at this value (theory), ``none`` or ``-``


def sweep_point(axis: Axis[Any], record: ComparisonRecord, comparison: Comparison) -> SweepPoint:
    """A sweep's point from one comparison's record and measurement."""
    decode: Interval | None = comparison.speedup
    other = comparison.other_metric
    if comparison.plan.speedup_of == END_TO_END:
        decode, other = other, comparison.speedup  # never the end-to-end figure under the decode label
    ran = sorted(t.prompt_tokens for p in comparison.pairs for t in (p.baseline, p.treatment))
    theory = record.theory
    even = theory.break_even_alpha if theory is not None else None
    value = record.conditions.get(axis)
    return SweepPoint(
        label=axis.label(value),
        value=axis.dump(value),
        position=axis.position(value),
        prompt_tokens=f"{ran[0]}–{ran[-1]}" if ran and ran[0] != ran[-1] else str(ran[0] if ran else 0),
        decode=decode,
        end_to_end=other,
        acceptance=record.acceptance,
        verdict=record.judgement.conclusion.value,
        failed=record.judgement.conclusion.says_nothing_about_speed,
        break_even="-" if theory is None or theory.c is None else ("none" if even is None else f"{even:.2f}"),
    )


def answer(interval: Interval) -> str:
    """``pays off`` (the interval above 1), ``slower`` (below 1) or ``undecided``."""
    return "pays off" if interval.low > 1.0 else "slower" if interval.high < 1.0 else "undecided"


def change_line(steps: Sequence[tuple[str, str]]) -> str:
    """Where an answer changes over the values, reading decisive answers only (an undecided value is no change).

    ``[("ctx=0", "pays off"), ("ctx=2K", "undecided"), ("ctx=8K", "slower")]`` →
    ``pays off up to ctx=0, slower from ctx=8K``.
    """
    decisive = [(label, said) for label, said in steps if said not in ("undecided", "inconclusive", "measured")]
    if not decisive:
        return "undecided at every value"
    for (before_label, before), (label, said) in itertools.pairwise(decisive):
        if said != before:
            return f"{before} up to {before_label}, {said} from {label}"
    return f"{decisive[0][1]} at every value decided ({', '.join(label for label, _ in decisive)})"


def sweep_line(
    nodeid: str, axis: Axis[Any], category: str, points: Sequence[SweepPoint], skipped: Sequence[str]
) -> str:
    """The summary line of one sweep."""
    cells = []
    for point in points:
        tokens = f" ({point.prompt_tokens} prompt tokens)" if axis.tells_prompt_tokens else ""
        e2e = f", end to end {_shown(point.end_to_end)}"
        rate = f", acceptance {point.acceptance.estimate:.2f}" if point.acceptance is not None else ""
        failed = f" ({point.verdict}: says nothing about speed)" if point.failed else ""
        cells.append(f"{point.label}{tokens} decode {_shown(point.decode)}{e2e}{rate}{failed}")
    judged = [p for p in points if not p.failed]
    changes = []
    for metric, pick in (("decode", _decode), ("end to end", _end_to_end)):
        said = [(p.label, answer(i)) for p in judged if (i := pick(p)) is not None]
        if said:
            changes.append(f"{metric} {change_line(said)}")
    if any(p.verdict in ("holds", "refuted", "inconclusive") for p in judged):
        changes.append(f"verdict {change_line([(p.label, p.verdict) for p in judged])}")
    if axis.knob and judged:
        best = max(judged, key=lambda p: (p.decode or p.end_to_end or Interval(0, 0, 0, 0, 0)).estimate)
        shown = best.decode or best.end_to_end
        changes.append(f"best {best.label} ({shown.estimate:.2f}x)" if shown else f"best {best.label}")
        changes.append("break-even α: " + ", ".join(f"{p.label} {p.break_even}" for p in points))
    line = f"{nodeid} {axis.title} sweep [{category}]: {'; '.join(cells) or 'no value ran'} — {'; '.join(changes)}"
    return line + "".join(f"; not measured here: {reason}" for reason in skipped)


def verdict_change(points: Sequence[SweepPoint]) -> tuple[SweepPoint, str] | None:
    """The first value whose decided verdict differs from the decided one before it, and ``holds → refuted``."""
    decided = [p for p in points if not p.failed and p.verdict in ("holds", "refuted")]
    for before, point in itertools.pairwise(decided):
        if point.verdict != before.verdict:
            return point, f"{before.verdict} → {point.verdict}"
    return None


def _shown(interval: Interval | None) -> str:
    return f"{interval.estimate:.2f}x [{interval.low:.2f}, {interval.high:.2f}]" if interval is not None else "-"


def _decode(point: SweepPoint) -> Interval | None:
    return point.decode


def _end_to_end(point: SweepPoint) -> Interval | None:
    return point.end_to_end


def sweep_plot(
    axis: Axis[Any], points: Sequence[SweepPoint], path: Path, title: str, skipped: Sequence[str] = ()
) -> Path:
    """Speedup against the axis's values, decode and end to end, each with its interval, and 1x marked; the
    acceptance on a second axis; a line where the verdict changes; the values not measured, with why.

    The PNG carries the drawn values as a ``specdec`` text chunk, like every figure of this package.
    """
    from pytest_specdec.render.plots import Drawing, _pyplot, _save

    plt = _pyplot()
    figure, axes = plt.subplots(figsize=(7.5, 4.6 if skipped else 4.2))
    symlog = axis.plot_scale == "symlog"
    xs = [max(p.position, 1.0) if symlog else p.position for p in points]
    spread = (max(xs) - min(xs)) if xs else 0.0
    drawn: list[dict[str, object]] = []
    series: tuple[tuple[str, str, float, Callable[[SweepPoint], Interval | None]], ...] = (
        ("decode", "#1565c0", -1.0, _decode),
        ("end to end", "#6a1b9a", 1.0, _end_to_end),
    )

    def nudge(x: float, side: float) -> float:  # decode a little left, end to end a little right
        return x * (1 + 0.03 * side) if symlog else x + 0.01 * side * (spread or 1.0)

    for name, colour, side, pick in series:
        shown = [(nudge(x, side), i, p) for x, p in zip(xs, points, strict=True) if (i := pick(p)) is not None]
        if not shown:
            continue
        axes.errorbar(
            [x for x, _, _ in shown],
            [i.estimate for _, i, _ in shown],
            yerr=[[i.estimate - i.low for _, i, _ in shown], [i.high - i.estimate for _, i, _ in shown]],
            fmt="o-", color=colour, capsize=4, label=f"{name} speedup",
        )  # fmt: skip
        drawn += [
            {"metric": name, axis.name: p.value, "estimate": i.estimate, "low": i.low, "high": i.high}
            for _, i, p in shown
        ]
    rates = [(x, p.acceptance, p) for x, p in zip(xs, points, strict=True) if p.acceptance is not None]
    if rates:
        second = axes.twinx()
        second.errorbar(
            [x for x, _, _ in rates], [a.estimate for _, a, _ in rates],
            yerr=[[a.estimate - a.low for _, a, _ in rates], [a.high - a.estimate for _, a, _ in rates]],
            fmt="s:", color="#2e7d32", capsize=3, alpha=0.8, label="acceptance (right axis)",
        )  # fmt: skip
        second.set_ylim(0.0, 1.05)
        second.set_ylabel("acceptance", color="#2e7d32")
        second.legend(loc="lower left", fontsize=8)
        drawn += [
            {"metric": "acceptance", axis.name: p.value, "estimate": a.estimate, "low": a.low, "high": a.high}
            for _, a, p in rates
        ]
    change = verdict_change(points)
    if change is not None:
        point, said = change
        where = xs[points.index(point)]
        axes.axvline(where, color="#c62828", linestyle=":", linewidth=1.5)
        axes.annotate(f"verdict {said} from {point.label}", (where, 1.0), xytext=(-4, -12),
                      xycoords=("data", "axes fraction"), textcoords="offset points", ha="right",
                      color="#c62828", fontsize=8)  # fmt: skip
        drawn.append({"metric": "verdict change", axis.name: point.value, "said": said})
    if skipped:
        figure.text(0.01, 0.01, "not measured here: " + "; ".join(skipped), fontsize=7, color="#616161", wrap=True)
        drawn += [{"metric": "not measured", "reason": reason} for reason in skipped]
    axes.axhline(1.0, color="#757575", linestyle="--", linewidth=1)
    if symlog:
        axes.set_xscale("symlog", linthresh=512)
    axes.set_xticks(xs, [p.label.partition("=")[2] or p.label for p in points])
    axes.set_xlabel(axis.axis_label or axis.title)
    axes.set_ylabel("speedup (plain time ÷ SD time)")
    axes.set_title(title, fontsize=10)
    axes.legend(loc="upper right", fontsize=8)
    figure.tight_layout(rect=(0, 0.06 if skipped else 0, 1, 1))
    return _save(Drawing(figure, drawn), path)
