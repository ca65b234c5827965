"""The nights of one key as an SVG chart, laid out here and written by a Jinja2 template (``nights.svg.j2``).

matplotlib took about 0.2 s a 365-night chart on a 2-core machine, 144 s for the 720 charts of a year on ten
machine classes (docs/measurements.md); the scoreboard's charts are simple — an interval band, a line, the
bounds, release changes, flips (hollow: one the gate did not confirm), acceptance — so they are laid out here
in scales and drawn by a template, in about a millisecond each. Nothing is fetched: the SVG is self-contained, with a title and a description.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_specdec.render.site.data import flip_word
from pytest_specdec.store.nights import Night, Nights

WIDTH, HEIGHT = 800, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 48, 12, 58
MOST_X_TICKS = 12
MOST_RELEASE_LABELS = 12


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values spanning ``[low, high]``.

    >>> nice_ticks(0.92, 1.41)
    [1.0, 1.1, 1.2, 1.3, 1.4]
    """
    span = max(high - low, 1e-9)
    raw = span / max(count, 1)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step - 1e-9) * step
    ticks, value = [], first
    while value <= high + 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def moved(before: Night, after: Night) -> str:
    """The packages that moved between two nights (their ``versions``), else the release strings.

    >>> moved(Night.of_line({"release": "a", "versions": {"mlx": "1", "mlx-lm": "0.1"}}),
    ...       Night.of_line({"release": "b", "versions": {"mlx": "1", "mlx-lm": "0.2"}}))
    'mlx-lm 0.1→0.2'
    """
    old, new = before.versions, after.versions
    changed = [f"{name} {old.get(name, '—')}→{new.get(name, '—')}" for name in sorted({*old, *new})
               if old.get(name) != new.get(name)]  # fmt: skip
    return ", ".join(changed) or f"{before.release}→{after.release}"


def layout(nights: Nights, bounds: Mapping[str, float], title: str) -> dict[str, Any]:
    """The template's context: every coordinate of the chart of ``nights`` (oldest first)."""
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    lows = [n.speedup.low for n in nights]
    highs = [n.speedup.high for n in nights]
    estimates = [n.speedup.estimate for n in nights]
    finite = [v for v in (*lows, *highs, *bounds.values(), 1.0) if math.isfinite(v)]
    bottom, ceiling = min(finite), max(finite)
    pad = (ceiling - bottom) * 0.06 or 0.05
    bottom, ceiling = bottom - pad, ceiling + pad

    def x(i: int) -> float:
        return round(LEFT + (i + 0.5) * plot_w / max(len(nights), 1), 1)

    def y(value: float) -> float:
        clipped = min(max(value, bottom), ceiling)  # an unbounded side is drawn at the edge
        return round(TOP + (ceiling - clipped) * plot_h / (ceiling - bottom), 1)

    def points(values: Sequence[float]) -> str:
        return " ".join(f"{x(i)},{y(v)}" for i, v in enumerate(values))

    step = max(1, math.ceil(len(nights) / MOST_X_TICKS))
    changes = [i for i in range(1, len(nights)) if nights[i].release != nights[i - 1].release]
    accepted = [n.acceptance for n in nights]
    has_acceptance = any(a is not None for a in accepted)
    return {
        "w": WIDTH, "h": HEIGHT, "left": LEFT, "top": TOP, "plot_w": plot_w, "plot_h": plot_h, "title": title,
        "y_ticks": [{"y": y(t), "label": f"{t:g}"} for t in nice_ticks(bottom, ceiling)],
        "x_ticks": [{"x": x(i), "label": nights[i].time[:10]} for i in range(0, len(nights), step)],
        "band": f"{points(highs)} {' '.join(f'{x(i)},{y(v)}' for i, v in reversed(list(enumerate(lows))))}",
        "line": points(estimates),
        "points": [{"x": x(i), "y": y(v)} for i, v in enumerate(estimates)] if len(nights) <= 60 else [],
        "one": y(1.0) if bottom <= 1.0 <= ceiling else None,
        "bounds": [{"y": y(b), "label": label} for label, b in bounds.items() if math.isfinite(b)],
        "changes": [{"x": round(x(i) - plot_w / max(len(nights), 1) / 2, 1),
                     "label": moved(nights[i - 1], nights[i]) if n < MOST_RELEASE_LABELS else ""}
                    for n, i in enumerate(changes)],
        "flips": [{"x": x(i), "y": y(estimates[i]), "told": flip_word(n.gate),
                   "unconfirmed": flip_word(n.gate) != "flipped"}
                  for i, n in enumerate(nights) if n.change == "flip"],
        "acceptance": " ".join(f"{x(i)},{round(TOP + (1 - a) * plot_h, 1)}"
                               for i, a in enumerate(accepted) if a is not None) if has_acceptance else "",
        "a_ticks": [{"y": round(TOP + (1 - a) * plot_h, 1), "label": f"{a:g}"} for a in (0.0, 0.5, 1.0)],
    }  # fmt: skip
