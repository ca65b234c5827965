"""Published speculative-decoding speedups by chip, with the user's own results beside them.

Takes plain data (:class:`PublishedPoint`, :class:`OwnPoint`) so that rendering needs
nothing from :mod:`pytest_specdec.seed`; the caller turns evidence rows into points.
matplotlib is imported only when a plot is asked for. The PNG carries the plotted
values as a ``specdec`` text chunk, as :mod:`pytest_specdec.render.plots` does.
"""

from __future__ import annotations

import io
import json
import math
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from pytest_specdec.store.files import write_atomically

# Colours and markers handed to runtime families in name order (told apart without colour too);
# families come from the published rows and the registered backends, never from a list here.
PALETTE: tuple[tuple[str, str], ...] = (
    ("#2e7d32", "^"),
    ("#6a1b9a", "s"),
    ("#1565c0", "o"),
    ("#c62828", "D"),
    ("#ef6c00", "v"),
    ("#00838f", "X"),
    ("#5d4037", "*"),
    ("#ad1457", "h"),
)
OTHER = "other"
OTHER_STYLE = ("#757575", "P")
REFERENCE = "#424242"
TICKS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.0, 10.0)
_TIERS = ("", "Pro", "Max", "Ultra")
_APPLE_CHIP = re.compile(r"M(\d+)(?: (Pro|Max|Ultra))?")


class PublishedPoint(NamedTuple):
    """One published speedup: chip (``M1 Max``), runtime family, speedup, roofline suspect, label (row id)."""

    chip: str
    backend: str
    speedup: float
    suspect: bool
    label: str


class OwnPoint(NamedTuple):
    """One of the user's results: chip, runtime family, estimate and interval (``None`` when not known), label."""

    chip: str
    backend: str
    estimate: float
    low: float | None
    high: float | None
    label: str


def chip_sort_key(chip: str) -> tuple[int, int, str]:
    """Apple chips by generation then tier (base, Pro, Max, Ultra); other chips after them, by name."""
    match = _APPLE_CHIP.fullmatch(chip)
    if match is None:
        return (999, 0, chip)
    return (int(match.group(1)), _TIERS.index(match.group(2) or ""), "")


Styles = dict[str, tuple[str, str]]


def family_styles(families: Sequence[str]) -> Styles:
    """A colour and marker per family, in name order ("other" last, grey); past the palette, "other"'s."""
    named = sorted({family for family in families if family != OTHER})
    styles = {family: PALETTE[index] if index < len(PALETTE) else OTHER_STYLE for index, family in enumerate(named)}
    return styles | {OTHER: OTHER_STYLE}


def _label(value: float) -> str:
    return f"{value:g}x"


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _offsets(points: Sequence[PublishedPoint], chips: Sequence[str], width: float, styles: Styles) -> list[float]:
    """x for each point: the chip's slot, the family's lane within it, a small spread within the lane."""
    families = [family for family in styles if any(_family(p.backend) == family for p in points)]
    lane_width = width / max(1, len(families))
    placed: dict[tuple[str, str], int] = {}
    counts: dict[tuple[str, str], int] = {}
    for point in points:
        key = (point.chip, _family(point.backend))
        counts[key] = counts.get(key, 0) + 1
    xs = []
    for point in points:
        family = _family(point.backend)
        key = (point.chip, family)
        index = placed.get(key, 0)
        placed[key] = index + 1
        lane = -0.42 + lane_width * (families.index(family) + 0.5)
        spread = 0.0 if counts[key] == 1 else (index / (counts[key] - 1) - 0.5) * lane_width * 0.7
        xs.append(chips.index(point.chip) + lane + spread)
    return xs


def _family(backend: str | None) -> str:
    return backend or OTHER


def _log_axis(axes: Any, values: Sequence[float]) -> float:
    """A log speedup axis labelled 0.5x, 1x, 2x (not 10^0), with the 1x line; returns its top."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    axes.axhline(1.0, color=REFERENCE, linestyle="--", linewidth=1.3, zorder=1)
    axes.set_yscale("log")
    positive = [v for v in values if math.isfinite(v) and v > 0] + [1.0]
    bottom, top = min(positive) / 1.15, max(positive) * 1.15
    axes.set_ylim(bottom, top)
    axes.yaxis.set_major_locator(FixedLocator([t for t in TICKS if bottom <= t <= top]))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: _label(value)))
    axes.yaxis.set_minor_locator(NullLocator())
    axes.yaxis.set_minor_formatter(NullFormatter())
    axes.grid(axis="y", color="#e0e0e0", linewidth=0.8, zorder=0)
    axes.set_ylabel("speedup (SD tok/s ÷ plain tok/s), log scale")
    return top


def _chip_axis(axes: Any, chips: Sequence[str], usable: Sequence[PublishedPoint], top: float) -> None:
    """One slot per chip, labelled with its count of published figures; non-Apple chips set apart."""
    names = [chip if _APPLE_CHIP.fullmatch(chip) else textwrap.fill(chip, 9) for chip in chips]
    counts = [sum(p.chip == chip for p in usable) for chip in chips]
    axes.set_xticks(range(len(chips)), [f"{name}\n({count})" for name, count in zip(names, counts, strict=True)])
    axes.set_xlim(-0.6, len(chips) - 0.4)
    for boundary in range(1, len(chips)):
        axes.axvline(boundary - 0.5, color="#eeeeee", linewidth=0.8, zorder=0)
    apple = sum(_APPLE_CHIP.fullmatch(chip) is not None for chip in chips)
    if 0 < apple < len(chips):
        axes.axvline(apple - 0.5, color="#9e9e9e", linewidth=1.2, zorder=0)
        axes.text(apple - 0.4, top / 1.08, "not Apple silicon", fontsize="small", color="#616161", va="top")
    axes.set_xlabel("chip (number of published figures)")


def _legend(plt: Any, axes: Any, usable: Sequence[PublishedPoint], mine: Sequence[OwnPoint], styles: Styles) -> None:
    """Families present, then what hollow and black mean, then the 1x line; outside the axes."""
    present = [f for f in styles if any(_family(p.backend) == f for p in usable)]
    handles = [plt.Line2D([], [], color=styles[f][0], marker=styles[f][1], linestyle="", label=f) for f in present]
    if any(p.suspect for p in usable):
        hollow = "hollow: at/above the roofline"
        handles.append(
            plt.Line2D([], [], color="black", marker="o", markerfacecolor="none", linestyle="", label=hollow)
        )
    if mine:
        handles.append(
            plt.Line2D([], [], color="black", marker="D", linestyle="-", label="yours (black; marker = runtime)")
        )
    handles.append(plt.Line2D([], [], color=REFERENCE, linestyle="--", label="1x: break-even"))
    axes.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)


def evidence_plot(points: Sequence[PublishedPoint], own: Sequence[OwnPoint], path: Path, title: str) -> Path:
    """Published speedups by chip (x, by generation and tier) and runtime family (colour and marker).

    Log y axis labelled 0.5x, 1x, 2x…; a dashed line at 1x; roofline suspects hollow;
    the user's own results in black (marker = runtime) with their intervals. The legend sits
    outside the axes. Returns ``path``.
    """
    plt = _pyplot()
    usable = [p for p in points if math.isfinite(p.speedup) and p.speedup > 0]
    mine = [o for o in own if math.isfinite(o.estimate) and o.estimate > 0]
    chips = sorted({p.chip for p in usable} | {o.chip for o in mine}, key=chip_sort_key)
    figure, axes = plt.subplots(figsize=(max(7.0, 1.0 + 0.75 * len(chips)) + 2.4, 5.0), layout="constrained")
    drawn: list[dict[str, Any]] = []
    # With results of the user's own, the right quarter of each chip's slot is theirs.
    published_width = 0.62 if mine else 0.84
    styles = family_styles([_family(p.backend) for p in usable] + [_family(o.backend) for o in mine])
    for x, point in zip(_offsets(usable, chips, published_width, styles), usable, strict=True):
        colour, marker = styles[_family(point.backend)]
        axes.plot(
            [x],
            [point.speedup],
            marker=marker,
            linestyle="",
            markersize=7,
            markeredgecolor=colour,
            markerfacecolor="none" if point.suspect else colour,
            alpha=0.85,
        )
        drawn.append(
            {
                "kind": "published",
                "chip": point.chip,
                "backend": point.backend,
                "speedup": point.speedup,
                "suspect": point.suspect,
                "label": point.label,
            }
        )
    for result in mine:
        same_chip = [o for o in mine if o.chip == result.chip]
        x = chips.index(result.chip) + 0.3 + 0.12 * (same_chip.index(result) + 0.5) / len(same_chip)
        low = result.low if result.low is not None and 0 < result.low <= result.estimate else result.estimate
        high = result.high if result.high is not None and result.high >= result.estimate else result.estimate
        axes.errorbar(
            [x],
            [result.estimate],
            yerr=[[result.estimate - low], [high - result.estimate]],
            fmt=styles[_family(result.backend)][1],
            color="black",
            markersize=8,
            capsize=4,
            zorder=5,
        )
        drawn.append(
            {
                "kind": "own",
                "chip": result.chip,
                "backend": result.backend,
                "estimate": result.estimate,
                "low": result.low,
                "high": result.high,
                "label": result.label,
            }
        )
    top = _log_axis(
        axes,
        [p.speedup for p in usable]
        + [o.estimate for o in mine]
        + [v for o in mine for v in (o.low, o.high) if v is not None],
    )
    _chip_axis(axes, chips, usable, top)
    axes.set_title(title)
    _legend(plt, axes, usable, mine, styles)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"specdec": json.dumps(drawn, sort_keys=True)})
    plt.close(figure)
    write_atomically(path, buffer.getvalue())
    return path
