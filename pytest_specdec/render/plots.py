"""Figures, drawn with matplotlib (imported only when a plot is asked for).

* :func:`forest_plot`: one row per comparison, the speedup and its interval, the
  claim's bounds as ticks, coloured by verdict.
* :func:`history_plot`: speedup against backend release, from the history files.

Each PNG carries the plotted values as a ``specdec`` text chunk, so what was drawn
can be checked against the data it was drawn from.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_specdec.stats import Verdict
from pytest_specdec.store.files import write_atomically
from pytest_specdec.store.records import ComparisonRecord, Conclusion
from pytest_specdec.store.trends import erosions

COLOURS = {
    Verdict.HOLDS.value: "#2e7d32",
    Verdict.REFUTED.value: "#c62828",
    Verdict.INCONCLUSIVE.value: "#f9a825",
    Conclusion.MEASURED.value: "#1565c0",
}
OTHER = "#757575"


def _colour(conclusion: Conclusion) -> str:
    verdict = conclusion.verdict
    return COLOURS.get(verdict.value if verdict else conclusion.value, OTHER)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(figure: Any, path: Path, drawn: object) -> Path:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"specdec": json.dumps(drawn, sort_keys=True)})
    _pyplot().close(figure)
    write_atomically(path, buffer.getvalue())
    return path


def short_name(reference: str | None) -> str:
    """The last path component of a model reference, without ``embedded:``/``pypi:``."""
    if not reference:
        return ""
    return reference.rstrip("/").rsplit("/", 1)[-1].removeprefix("embedded:").removeprefix("pypi:")


def row_label(record: ComparisonRecord) -> str:
    """``gemma-3-270m-q4_k_m.gguf + draft-aligned · copy · γ=3``: models, category and γ."""
    models = short_name(record.target)[:26]
    if record.draft:
        models += f" + {short_name(record.draft)[:18]}"
    return f"{models} · {record.category} · γ={record.num_draft}"


def speedup_axis(axes: Any, low: float, high: float, *, horizontal: bool = True) -> None:
    """A log axis with ticks a reader can read: ``0.5x``, ``1x``, ``1.5x``, ``2x`` …"""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    candidates = (0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0)
    ticks = [t for t in candidates if low / 1.05 <= t <= high * 1.05] or [1.0]
    axis = axes.xaxis if horizontal else axes.yaxis
    (axes.set_xscale if horizontal else axes.set_yscale)("log")
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_minor_locator(NullLocator())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))


def _finite(values: Sequence[float], fallback: float) -> list[float]:
    return [v for v in values if 0 < v < float("inf")] or [fallback]


def forest_plot(records: Sequence[ComparisonRecord], path: Path, title: str) -> Path:
    """Speedup with interval per comparison, coloured by verdict; the accepted baseline beside it
    (grey, just above) when it was consulted; each claimed bound as a labelled tick."""
    plt = _pyplot()
    height = 1.4 + 0.55 * max(1, len(records))
    figure, axes = plt.subplots(figsize=(11, height))
    drawn = []
    extremes: list[float] = [1.0]
    for row, record in enumerate(reversed(records)):
        s = record.speedup
        colour = _colour(record.judgement.conclusion)
        axes.errorbar(
            [s.estimate], [row], xerr=[[s.estimate - s.low], [max(0.0, s.high - s.estimate) if s.high < float("inf") else 0.0]],
            fmt="o", color=colour, capsize=3,
        )  # fmt: skip
        extremes += _finite([s.low, s.high, s.estimate], 1.0)
        check = record.check
        baseline = check.baseline_speedup if check is not None else None
        if baseline is not None:
            axes.errorbar(
                [baseline.estimate], [row + 0.28],
                xerr=[[baseline.estimate - baseline.low], [baseline.high - baseline.estimate]],
                fmt="s", color=OTHER, capsize=2, markersize=4, alpha=0.8,
            )  # fmt: skip
            extremes += _finite([baseline.low, baseline.high], 1.0)
        change = check.change.value if check is not None else None
        if change in ("flip", "drift"):  # a row that contradicts its baseline stands out without its label
            ring = "#c62828" if change == "flip" else "#ef6c00"
            axes.scatter([s.estimate], [row], s=220, facecolors="none", edgecolors=ring, linewidths=2, zorder=5)
        for bound in record.judgement.bounds:
            if bound.metric == "speedup":
                axes.plot([bound.bound], [row], marker="|", markersize=18, color="black")
                axes.annotate(f"{bound.kind}={bound.bound:g}", (bound.bound, row - 0.33), fontsize=7, ha="center")
        drawn.append(
            {
                "row": row,
                "label": f"{record.nodeid} [{record.category}]",
                "estimate": s.estimate,
                "low": s.low,
                "high": s.high,
                "verdict": record.judgement.shown,
                "baseline": None if baseline is None else [baseline.estimate, baseline.low, baseline.high],
                "change": change,
            }
        )
    labels = [row_label(r) + _change_suffix(r) for r in reversed(records)]
    axes.set_yticks(range(len(records)), labels)
    axes.set_ylim(-0.8, len(records) - 0.3)
    axes.axvline(1.0, color=OTHER, linestyle="--", linewidth=1)
    speedup_axis(axes, min(extremes), max(extremes))
    axes.set_xlabel("speedup (SD tok/s ÷ plain tok/s), log scale; | = claimed bound; grey square = accepted baseline")
    axes.set_title(title)
    handles = [plt.Line2D([], [], color=c, marker="o", linestyle="", label=v) for v, c in COLOURS.items()]
    handles.append(plt.Line2D([], [], color=OTHER, marker="s", linestyle="", label="accepted baseline"))
    for ring, said in (("#c62828", "flipped against it"), ("#ef6c00", "drifted from it")):
        handles.append(plt.Line2D([], [], color=ring, marker="o", markerfacecolor="none", linestyle="", label=said))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    figure.tight_layout()
    return _save(figure, path, drawn)


def _change_suffix(record: ComparisonRecord) -> str:
    change = record.check.change.value if record.check is not None else None
    return {"flip": "  (FLIPPED)", "drift": "  (drifted)"}.get(change or "", "")


def history_plot(lines: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Speedup vs backend release, one line per comparison key in time order.

    Flips are marked with a red ring; a key eroding toward a bound (``store.trends``)
    gets that bound drawn as a dotted line in its colour and "eroding" in its label.
    """
    plt = _pyplot()
    eroding = {e.key: e for e in erosions(lines)}
    ordered = sorted(lines, key=lambda item: str(item.get("time", "")))
    series: dict[str, list[Mapping[str, Any]]] = {}
    releases: list[str] = []
    for line in ordered:
        series.setdefault(str(line["key"]), []).append(line)
        if str(line["release"]) not in releases:
            releases.append(str(line["release"]))
    figure, axes = plt.subplots(figsize=(11, 4.8))
    drawn = []
    extremes: list[float] = [1.0]
    for key, points in series.items():
        xs = [releases.index(str(p["release"])) for p in points]
        ys = [float(p["speedup"]["estimate"]) for p in points]
        lows = [y - float(p["speedup"]["low"]) for y, p in zip(ys, points, strict=True)]
        highs = [float(p["speedup"]["high"]) - y for y, p in zip(ys, points, strict=True)]
        label = key.split("::", 1)[-1][:70]
        trend = eroding.get(key)
        if trend is not None:
            label += f" — eroding toward {trend.bound_label}"
        bars = axes.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3, label=label)
        bounds = sorted(
            {float(name.rsplit("=", 1)[-1]) for name in (points[-1].get("bounds") or {}) if name.startswith("speedup ")}
        )
        for bound in bounds:  # every claimed bound, in the series' colour; bolder where it is being approached
            axes.axhline(bound, color=bars.lines[0].get_color(), linestyle=":", linewidth=1.5 if trend else 0.8)
            extremes.append(bound)
        flips = [(x, y) for x, y, p in zip(xs, ys, points, strict=True) if p.get("change") == "flip"]
        if flips:
            axes.scatter(
                *zip(*flips, strict=True), s=160, facecolors="none", edgecolors="#c62828", linewidths=2, zorder=5
            )
        extremes += _finite(
            [float(p["speedup"]["low"]) for p in points] + [float(p["speedup"]["high"]) for p in points], 1.0
        )
        drawn.append(
            {
                "key": key,
                "releases": [p["release"] for p in points],
                "estimates": ys,
                "flips": len(flips),
                "eroding": trend.bound_label if trend else None,
                "bounds": bounds,
            }
        )
    axes.axhline(1.0, color=OTHER, linestyle="--", linewidth=1)
    axes.set_xticks(range(len(releases)), releases, rotation=20, ha="right")
    speedup_axis(axes, min(extremes), max(extremes), horizontal=False)
    axes.set_ylabel("speedup (log scale)")
    axes.set_title(title + " — red ring: the conclusion flipped; dotted: the claimed bounds")
    if series:
        axes.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    figure.tight_layout()
    return _save(figure, path, drawn)
