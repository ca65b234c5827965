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


def row_label(record: ComparisonRecord) -> str:
    """``gemma-3-270m-q4_k_m.gguf · copy · γ=3``: model, category and γ, short enough for an axis."""
    model = record.target.rstrip("/").rsplit("/", 1)[-1].removeprefix("embedded:")
    return f"{model[:28]} · {record.category} · γ={record.num_draft}"


def forest_plot(records: Sequence[ComparisonRecord], path: Path, title: str) -> Path:
    """Speedup with interval per comparison; bounds drawn; colour by verdict."""
    plt = _pyplot()
    height = 1.2 + 0.45 * max(1, len(records))
    figure, axes = plt.subplots(figsize=(10, height))
    drawn = []
    for row, record in enumerate(reversed(records)):
        s = record.speedup
        colour = _colour(record.verdict)
        axes.errorbar(
            [s.estimate], [row], xerr=[[s.estimate - s.low], [s.high - s.estimate]], fmt="o", color=colour, capsize=3
        )
        for bound in record.bounds:
            if bound.metric == "speedup":
                axes.plot([bound.bound], [row], marker="|", markersize=16, color="black")
        drawn.append(
            {
                "row": row,
                "label": f"{record.nodeid} [{record.category}]",
                "estimate": s.estimate,
                "low": s.low,
                "high": s.high,
                "verdict": record.verdict,
            }
        )
    labels = [row_label(r) for r in reversed(records)]
    axes.set_yticks(range(len(records)), labels)
    axes.axvline(1.0, color=OTHER, linestyle="--", linewidth=1)
    axes.set_xscale("log")
    axes.set_xlabel("speedup (SD tok/s ÷ plain tok/s), log scale; | = claimed bound")
    axes.set_title(title)
    handles = [plt.Line2D([], [], color=c, marker="o", linestyle="", label=v) for v, c in COLOURS.items()]
    axes.legend(handles=handles, loc="best", fontsize="small")
    figure.tight_layout()
    return _save(figure, path, drawn)


def history_plot(lines: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Speedup vs backend release, one series per comparison key, in time order."""
    plt = _pyplot()
    series: dict[str, list[Mapping[str, Any]]] = {}
    for line in sorted(lines, key=lambda item: str(item.get("time", ""))):
        series.setdefault(str(line["key"]), []).append(line)
    releases: list[str] = []
    for line in sorted(lines, key=lambda item: str(item.get("time", ""))):
        if line["release"] not in releases:
            releases.append(str(line["release"]))
    figure, axes = plt.subplots(figsize=(9, 4.5))
    drawn = []
    for key, points in series.items():
        xs = [releases.index(str(p["release"])) for p in points]
        ys = [float(p["speedup"]["estimate"]) for p in points]
        lows = [y - float(p["speedup"]["low"]) for y, p in zip(ys, points, strict=True)]
        highs = [float(p["speedup"]["high"]) - y for y, p in zip(ys, points, strict=True)]
        axes.errorbar(xs, ys, yerr=[lows, highs], marker="o", capsize=3, label=key.split(" [", 1)[-1][:60])
        drawn.append({"key": key, "releases": [p["release"] for p in points], "estimates": ys})
    axes.axhline(1.0, color=OTHER, linestyle="--", linewidth=1)
    axes.set_xticks(range(len(releases)), releases, rotation=20, ha="right")
    axes.set_ylabel("speedup")
    axes.set_title(title)
    if series:
        axes.legend(fontsize="x-small", loc="best")
    figure.tight_layout()
    return _save(figure, path, drawn)
