"""Figures, drawn with matplotlib (imported only when a plot is asked for).

* :func:`forest_plot`: one row per comparison, the speedup and its interval, the
  claim's bounds as ticks, coloured by verdict; the title names the backends and model
  profiles, the legend the measurement protocol of the accepted baselines drawn.
* :func:`history_plot`: speedup against backend release, from the history files: one
  panel per comparison key, sharing the release axis, legible with a dozen keys.

Each figure stands alone: what was measured, with what, and which baselines are drawn
is said on it. Each PNG carries the plotted values as a ``specdec`` text chunk, so what
was drawn can be checked against the data it was drawn from. :func:`forest_figure` and
:func:`history_figure` give the figure before it is saved.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_specdec.axes.num_draft import draft_label
from pytest_specdec.stats import Interval
from pytest_specdec.store.files import write_atomically
from pytest_specdec.store.night_statistics import erosions
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion

OTHER = "#757575"
FLIPPED = "#c62828"
# Per measurement protocol, newest first: results of two protocols are not comparable.
PROTOCOL_STYLES = (("o", "#1565c0"), ("s", OTHER), ("^", "#6a1b9a"), ("D", "#00838f"), ("v", "#4e342e"))


@dataclass(frozen=True)
class Drawing:
    """A figure before it is saved, and the values it draws (the PNG's ``specdec`` chunk)."""

    figure: Any  # matplotlib.figure.Figure
    drawn: list[dict[str, Any]]


# A row's colour says what it means for the question, "does SD pay off here?" (against 1x), never the claim's
# verdict: a refuted "SD ≤ 1.3x" is the answer a user hopes for, and red would say "bad". The verdict is in the label.
ANSWERS = {
    "SD pays off": "#2e7d32",
    "SD does not pay off": "#6a1b9a",
    "breaks even": "#757575",
    "can't tell yet": "#f9a825",
    "SD changed the output": "#000000",
}


def answer(record: ComparisonRecord) -> str:
    """What the row means for the question, in :data:`ANSWERS`' words."""
    conclusion, s = record.judgement.conclusion, record.speedup
    if conclusion is Conclusion.FAILED:
        return "SD changed the output"
    if s.low > 1.0:
        return "SD pays off"
    if s.high < 1.0:
        return "SD does not pay off"
    return "can't tell yet" if conclusion is Conclusion.INCONCLUSIVE else "breaks even"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(drawing: Drawing, path: Path) -> Path:
    buffer = io.BytesIO()
    metadata = {"specdec": json.dumps(drawing.drawn, sort_keys=True)}
    drawing.figure.savefig(buffer, format="png", dpi=100, metadata=metadata)
    _pyplot().close(drawing.figure)
    write_atomically(path, buffer.getvalue())
    return path


def short_name(reference: str | None) -> str:
    """The last path component of a model reference, without ``embedded:``/``pypi:``."""
    if not reference:
        return ""
    return reference.rstrip("/").rsplit("/", 1)[-1].removeprefix("embedded:").removeprefix("pypi:")


def row_label(record: ComparisonRecord) -> str:
    """``gemma-3-270m-q4_k_m.gguf + draft-aligned · copy · γ=3``: models, category and γ, and the conditions
    beyond greedy decode at a short prompt (``· T=0.7 · ctx=8K``), so a sweep's rows are told apart."""
    models = short_name(record.target)[:26]
    if record.draft:
        models += f" + {short_name(record.draft)[:18]}"
    return " · ".join((models, record.category, f"γ={draft_label(record.num_draft)}", *record.conditions.labels))


def speedup_axis(axes: Any, low: float, high: float, *, horizontal: bool = True) -> None:
    """A log axis with ticks a reader can read: ``0.5x``, ``1x``, ``1.5x``, ``2x`` …"""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    candidates = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
    ticks = [t for t in candidates if low / 1.05 <= t <= high * 1.05] or [1.0]
    if len(ticks) < 3:  # a narrow range: finer steps
        steps = (0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.75)
        finer = sorted({*(t for t in candidates if not 0.5 < t < 2.0), *steps})
        ticks = [t for t in finer if low / 1.05 <= t <= high * 1.05] or [1.0]
    elif len(ticks) > 7:  # a wide one: fewer, so that a short panel stays readable
        ticks = [t for t in ticks if t in (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0)]
    axis = axes.xaxis if horizontal else axes.yaxis
    (axes.set_xscale if horizontal else axes.set_yscale)("log")
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))


def _finite(values: Sequence[float], fallback: float) -> list[float]:
    return [v for v in values if 0 < v < float("inf")] or [fallback]


def _listed(noun: str, values: Sequence[object]) -> str:
    """``backend mlx``, ``backends llama-cpp, mlx`` (each value once, in order)."""
    unique = list(dict.fromkeys(str(value) for value in values if value not in (None, "")))
    return f"{noun}{'s' if len(unique) > 1 else ''} {', '.join(unique)}" if unique else ""


def measured_with(records: Sequence[ComparisonRecord]) -> str:
    """``backend llama-cpp · profile embedded-1b``: what the results were measured with."""
    parts = (_listed("backend", [r.backend for r in records]), _listed("profile", [r.profile for r in records]))
    return " · ".join(part for part in parts if part)


def _protocols_text(protocols: Sequence[int]) -> str:
    """``measurement protocol 2``, ``measurement protocols 1, 2``."""
    return _listed("measurement protocol", sorted(set(protocols)))


def forest_figure(records: Sequence[ComparisonRecord], title: str) -> Drawing:
    """Speedup with interval per comparison, coloured by verdict; the accepted baseline beside it
    (grey, just above) when it was consulted; each claimed bound as a labelled tick.

    A baseline measured under another protocol (a re-baseline) is drawn as a hollow diamond.
    """
    plt = _pyplot()
    height = 1.4 + 0.55 * max(1, len(records))
    figure, axes = plt.subplots(figsize=(11, height))
    drawn = []
    extremes: list[float] = [1.0]
    same: list[int] = []  # the protocols of the baselines drawn as squares (the result's own)
    other = False
    for row, record in enumerate(reversed(records)):
        s = record.speedup
        colour = ANSWERS[answer(record)]
        axes.errorbar(
            [s.estimate], [row], xerr=[[s.estimate - s.low], [max(0.0, s.high - s.estimate) if s.high < float("inf") else 0.0]],
            fmt="o", color=colour, capsize=3,
        )  # fmt: skip
        extremes += _finite([s.low, s.high, s.estimate], 1.0)
        check = record.check
        baseline = check.baseline_speedup if check is not None else None
        change = check.change.value if check is not None else None
        if baseline is not None:
            rebaselined = change == Change.REBASELINE.value
            other = other or rebaselined
            if not rebaselined:
                same.append(record.protocol)
            axes.errorbar(
                [baseline.estimate], [row + 0.28],
                xerr=[[baseline.estimate - baseline.low], [baseline.high - baseline.estimate]],
                fmt="D" if rebaselined else "s", color=OTHER, capsize=2, markersize=4, alpha=0.8,
                markerfacecolor="white" if rebaselined else OTHER,
            )  # fmt: skip
            extremes += _finite([baseline.low, baseline.high], 1.0)
        if change in ("flip", "drift"):  # a row that contradicts its baseline stands out without its label
            ring = FLIPPED if change == "flip" else "#ef6c00"
            axes.scatter([s.estimate], [row], s=220, facecolors="none", edgecolors=ring, linewidths=2, zorder=5)
        for bound in record.judgement.bounds:
            if bound.metric == "speedup":
                axes.plot([bound.bound], [row], marker="|", markersize=18, color="black")
                axes.annotate(f"{bound.kind}={bound.bound:g}", (bound.bound, row - 0.33), fontsize=7, ha="center")
        drawn.append(
            {
                "row": row,
                "label": f"{record.nodeid} [{', '.join((record.category, *record.conditions.labels))}]",
                "estimate": s.estimate,
                "low": s.low,
                "high": s.high,
                "verdict": record.judgement.shown,
                "answer": answer(record),
                "baseline": None if baseline is None else [baseline.estimate, baseline.low, baseline.high],
                "change": change,
            }
        )
    labels = [f"{row_label(r)} · {r.judgement.shown}{_change_suffix(r)}" for r in reversed(records)]
    axes.set_yticks(range(len(records)), labels)
    axes.set_ylim(-0.8, len(records) - 0.3)
    axes.axvline(1.0, color=OTHER, linestyle="--", linewidth=1)
    speedup_axis(axes, min(extremes), max(extremes))
    axes.set_xlabel("speedup (plain time ÷ SD time: decode, or end to end where a row says so), log scale; "
                    "| = claimed bound, the claim's verdict in the label; grey = accepted baseline")  # fmt: skip
    axes.set_title("\n".join(part for part in (title, measured_with(records)) if part))
    shown = {answer(r) for r in records}
    handles = [plt.Line2D([], [], color=c, marker="o", linestyle="", label=f"{a} (vs 1x)")
               for a, c in ANSWERS.items() if a in shown]  # fmt: skip
    if same:
        said = f"accepted baseline, {_protocols_text(same)}"
        handles.append(plt.Line2D([], [], color=OTHER, marker="s", linestyle="", label=said))
    if other:
        said = "accepted baseline of another\nmeasurement protocol (re-baseline)"
        handles.append(plt.Line2D([], [], color=OTHER, marker="D", markerfacecolor="white", linestyle="", label=said))
    for ring, said in ((FLIPPED, "flipped against it"), ("#ef6c00", "drifted from it")):
        handles.append(plt.Line2D([], [], color=ring, marker="o", markerfacecolor="none", linestyle="", label=said))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    figure.tight_layout()
    return Drawing(figure, drawn)


def forest_plot(records: Sequence[ComparisonRecord], path: Path, title: str) -> Path:
    """:func:`forest_figure`, saved as a PNG at ``path``."""
    return _save(forest_figure(records, title), path)


def _change_suffix(record: ComparisonRecord) -> str:
    change = record.check.change.value if record.check is not None else None
    return {"flip": "  (FLIPPED)", "drift": "  (drifted)"}.get(change or "", "")


def baselines_drawn(lines: Nights) -> str:
    """``accepted baselines, measurement protocol 2``: which results a history plot draws."""
    if not lines:
        return "no results"
    accepted = {night.accepted for night in lines}
    what = (
        "accepted baselines"
        if accepted == {True}
        else "results not accepted as baselines"
        if accepted == {False}
        else "accepted baselines (filled) and results not accepted (hollow)"
    )
    protocols = sorted({night.protocol or 1 for night in lines}, reverse=True)
    if len(protocols) > 1:
        return f"{what}\n{_protocols_text(protocols)}, told apart by marker (not comparable across protocols)"
    return f"{what}, {_protocols_text(protocols)}"


def panel_title(key: str, night: Night) -> str:
    """``claim c · test_x[code] [code, γ=3, target-1b + draft-1b] · profile embedded-1b``: one key, readable."""
    nodeid = night.nodeid or key.split(" [", 1)[0]
    inside = key.removeprefix(nodeid).strip().removeprefix("[").removesuffix("]")
    scope = inside.rpartition(" @")[0] or inside  # the model digest is left out
    parts = scope.split(", ", 2)
    if len(parts) == 3:  # category, γ, models
        parts[2] = " + ".join(short_name(model) for model in parts[2].split(" + "))
    who = f"claim {night.claim_id} · " if night.claim_id else ""
    profile = f" · profile {night.profile}" if night.profile else ""
    return f"{who}{nodeid.rsplit('::', 1)[-1]} [{', '.join(parts)}]{profile}"


def _titles(series: Mapping[str, Sequence[Night]]) -> dict[str, str]:
    """Each key's panel title; the model digest is added where two keys would read alike."""
    titles = {key: panel_title(key, points[-1]) for key, points in series.items()}
    counts = [*titles.values()]
    return {k: t + (f" @{k.rpartition(' @')[2].rstrip(']')}" if counts.count(t) > 1 else "") for k, t in titles.items()}


def _bar(estimate: float, interval: Interval) -> tuple[float, float]:
    """Error-bar lengths below and above; an end at 0 or infinity (a failed comparison) is not drawn."""
    low, high = interval.low, interval.high
    return (estimate - low if low > 0 else 0.0, max(0.0, high - estimate) if high < float("inf") else 0.0)


def _spread(xs: Sequence[float], width: float = 0.3) -> list[float]:
    """Runs on one release side by side, in the order they ran, instead of on top of each other."""
    counts = {x: xs.count(x) for x in xs}
    seen: dict[float, int] = {}
    spread = []
    for x in xs:
        index = seen.get(x, 0)
        seen[x] = index + 1
        n = counts[x]
        spread.append(x if n == 1 else x - width / 2 + width * index / (n - 1))
    return spread


def _draw_key(
    axes: Any,
    points: Sequence[Night],
    releases: Sequence[str],
    styles: Mapping[int, tuple[str, str, float]],
) -> tuple[list[float], list[tuple[float, float]]]:
    """One key's results in its panel, one line per protocol; the extremes drawn and the flipped points."""
    extremes: list[float] = []
    flips: list[tuple[float, float]] = []
    for protocol, (marker, colour, offset) in styles.items():
        mine = [p for p in points if (p.protocol or 1) == protocol]
        if not mine:
            continue
        xs = _spread([releases.index(p.release) + offset for p in mine])
        ys = [p.speedup.estimate for p in mine]
        lows, highs = zip(*(_bar(y, p.speedup) for y, p in zip(ys, mine, strict=True)), strict=True)
        axes.errorbar(xs, ys, yerr=[list(lows), list(highs)], fmt="-", color=colour, capsize=3, linewidth=1)
        for accepted, face in ((True, colour), (False, "white")):
            chosen = [(x, y) for x, y, p in zip(xs, ys, mine, strict=True) if p.accepted is accepted]
            if chosen:
                axes.scatter(
                    *zip(*chosen, strict=True), marker=marker, s=36, facecolors=face, edgecolors=colour, zorder=4
                )
        flips += [(x, y) for x, y, p in zip(xs, ys, mine, strict=True) if p.change == "flip"]
        extremes += _finite(ys + [p.speedup.low for p in mine] + [p.speedup.high for p in mine], 1.0)
    if flips:
        axes.scatter(*zip(*flips, strict=True), s=160, facecolors="none", edgecolors=FLIPPED, linewidths=2, zorder=5)
    return extremes, flips


def history_figure(lines: Nights, title: str) -> Drawing:
    """Speedup vs backend release: one panel per comparison key, sharing the release axis.

    Each panel is titled with its claim and draws that key's claimed bounds (dotted; bold
    where a conclusion erodes toward one, ``store.night_statistics``), a red ring where the conclusion
    flipped, and one line per measurement protocol (marker and colour; the figure's title
    says which baselines are drawn, see :func:`baselines_drawn`).
    """
    plt = _pyplot()
    eroding = {e.key: e for e in erosions(lines)}
    series: dict[str, list[Night]] = {}
    releases: list[str] = []
    for night in sorted(lines, key=lambda n: n.time):
        series.setdefault(night.key, []).append(night)
        if night.release not in releases:
            releases.append(night.release)
    protocols = sorted({night.protocol or 1 for night in lines}, reverse=True)
    spread = 0.12 if len(protocols) > 1 else 0.0  # side by side at one release
    styles = {
        p: (*PROTOCOL_STYLES[i % len(PROTOCOL_STYLES)], spread * (i - (len(protocols) - 1) / 2))
        for i, p in enumerate(protocols)
    }
    panels = max(1, len(series))
    figure, grid = plt.subplots(
        panels, 1, figsize=(11, 1.6 + 1.8 * panels), sharex=True, squeeze=False, layout="constrained"
    )
    titles = _titles(series)
    drawn = []
    for axes, (key, points) in zip(grid[:, 0], series.items(), strict=False):
        trend = eroding.get(key)
        extremes, flips = _draw_key(axes, points, releases, styles)
        claimed = {
            name.removeprefix("speedup "): float(name.rsplit("=", 1)[-1])
            for name in points[-1].bounds
            if name.startswith("speedup ")
        }
        bounds = sorted(set(claimed.values()))
        for said, bound in claimed.items():  # every claimed bound; bolder where it is being approached
            axes.axhline(bound, color="black", linestyle=":", linewidth=1.6 if trend else 0.9)
            axes.annotate(said, (1.0, bound), xycoords=("axes fraction", "data"), fontsize=7, va="bottom", ha="right")
        eroding_text = f" — ERODING toward {trend.bound_label}" if trend else ""
        axes.set_title(titles[key] + eroding_text, fontsize="small", loc="left")
        axes.axhline(1.0, color=OTHER, linestyle="--", linewidth=1)
        low, high = min([1.0, *extremes, *bounds]), max([1.0, *extremes, *bounds])
        speedup_axis(axes, low, high, horizontal=False)
        axes.set_ylim(low / 1.08, high * 1.08)
        axes.set_ylabel("speedup", fontsize="small")
        drawn.append(
            {
                "key": key,
                "releases": [p.release for p in points],
                "estimates": [p.speedup.estimate for p in points],
                "flips": len(flips),
                "eroding": trend.bound_label if trend else None,
                "bounds": bounds,
            }
        )
    bottom = grid[-1, 0]
    bottom.set_xticks(range(len(releases)), releases, rotation=20, ha="right")
    bottom.set_xlim(-0.5, max(0.5, len(releases) - 0.5))
    bottom.set_xlabel("backend release (in the order first measured)")
    handles = [
        plt.Line2D([], [], marker=marker, color=colour, linestyle="-", label=_protocols_text([p]))
        for p, (marker, colour, _) in styles.items()
    ]
    if {night.accepted for night in lines} == {True, False}:
        handles.append(plt.Line2D([], [], marker="o", color=OTHER, markerfacecolor="white", linestyle="", label="not accepted as a baseline"))  # fmt: skip
    handles += [
        plt.Line2D([], [], color=FLIPPED, marker="o", markerfacecolor="none", linestyle="", label="conclusion flipped"),
        plt.Line2D([], [], color="black", linestyle=":", label="claimed bound"),
        plt.Line2D([], [], color=OTHER, linestyle="--", label="1x (no speedup)"),
    ]
    legend = figure.legend(  # the legend's title is the figure's: constrained layout keeps them apart
        handles=handles, loc="outside upper center", ncols=min(len(handles), 6), fontsize="small", frameon=False,
        title=f"{title}\n{baselines_drawn(lines)}", title_fontsize="large", alignment="center",
    )  # fmt: skip
    legend.get_title().set_multialignment("center")
    return Drawing(figure, drawn)


def history_plot(lines: Nights, path: Path, title: str) -> Path:
    """:func:`history_figure`, saved as a PNG at ``path``."""
    return _save(history_figure(lines, title), path)
