"""Erosion: a conclusion creeping toward its bound over releases, before anything flips.

From the history lines of one machine class, each comparison key's last result per
backend release (releases in the order they first appeared) is placed against each speedup bound it was judged
on. The distance to a bound is ``log(bound / estimate)`` for ``max`` and
``log(estimate / bound)`` for ``min`` (positive while on the holding side). A key
*erodes* when, over its last ``window`` releases, the distance kept its sign (a verdict
that flipped is a flip, not erosion) and shrank at every release, at least ``share``
of it is gone, and the first and last intervals do not overlap (noise within the
intervals, each widened by the machine's run-to-run spread of that key once it is known
(:mod:`~pytest_specdec.store.spread`), is not a trend) — e.g. 0.80x → 0.90x → 0.98x against ``max=1.0``, or a
refuted 1.40x → 1.20x → 1.05x creeping toward holding. Only results of the newest
measurement protocol count: a change of the tool is not a trend of the backend.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pytest_specdec.stats import Interval
from pytest_specdec.store.spread import RunSpread, line_protocol, line_time, run_spread, widened

BOUND_LABEL = re.compile(r"^speedup (?P<kind>min|max)=(?P<bound>[0-9.eE+-]+)$")
WINDOW = 3
SHARE = 0.5


@dataclass(frozen=True)
class Erosion:
    """One comparison's estimates over releases, moving toward one bound."""

    key: str
    nodeid: str
    category: str
    claim_id: str | None
    bound_label: str
    releases: tuple[str, ...]
    estimates: tuple[float, ...]
    share_gone: float

    @property
    def text(self) -> str:
        """``claim d [copy]: 0.80x → 0.90x → 0.98x against speedup max=1 over … (90 % of the margin gone)``."""
        who = f"claim {self.claim_id}" if self.claim_id else self.nodeid.split("::")[-1]
        path = " → ".join(f"{value:.2f}x" for value in self.estimates)
        return (
            f"{who} [{self.category}]: {path} against {self.bound_label} over {' → '.join(self.releases)} "
            f"({self.share_gone:.0%} of the margin to the bound gone; no verdict flipped yet)"
        )


def _distance(kind: str, bound: float, estimate: float) -> float:
    if estimate <= 0 or bound <= 0:
        return math.nan
    return math.log(bound / estimate) if kind == "max" else math.log(estimate / bound)


def _overlap(first: Mapping[str, Any], last: Mapping[str, Any], spread: RunSpread) -> bool:
    """Whether two nights' intervals, each widened by the run-to-run spread, overlap."""
    one, other = (
        widened(Interval(float(s["estimate"]), float(s["low"]), float(s["high"]), float(s.get("confidence") or 0.95), 0),
                spread)
        for s in (first, last)
    )  # fmt: skip
    return one.low <= other.high and other.low <= one.high


def per_release(lines: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Each (backend, key)'s last line per release, releases in the order they first appeared (in time, as moments).

    Two backends that run the same test on the same models share a key; their releases are never one trend.
    """
    by_key: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for line in sorted(lines, key=lambda item: line_time(item) or datetime.min.replace(tzinfo=UTC)):
        releases = by_key.setdefault((str(line.get("backend", "")), str(line.get("key", ""))), {})
        releases[str(line.get("release", ""))] = line
    return {group: list(releases.values()) for group, releases in by_key.items()}


def erosions(lines: Sequence[Mapping[str, Any]], window: int = WINDOW, share: float = SHARE) -> list[Erosion]:
    """The keys whose conclusion is eroding (see the module's description)."""
    found: list[Erosion] = []
    newest = max((line_protocol(line) or 1 for line in lines), default=1)
    lines = [line for line in lines if line_protocol(line) == newest]
    every: dict[tuple[str, str], list[Mapping[str, Any]]] = {}  # each key's nights, for its run-to-run spread
    for line in lines:
        every.setdefault((str(line.get("backend", "")), str(line.get("key", ""))), []).append(line)
    for (backend, key), points in sorted(per_release(lines).items()):
        recent = points[-window:]
        if len(recent) < window:
            continue
        labels = recent[-1].get("bounds") or {}
        for label in sorted(labels):
            match = BOUND_LABEL.match(str(label))
            if match is None:
                continue
            kind, bound = match.group("kind"), float(match.group("bound"))
            estimates = [float(p["speedup"]["estimate"]) for p in recent]
            distances = [_distance(kind, bound, value) for value in estimates]
            if not all(math.isfinite(d) and d != 0 and (d > 0) == (distances[0] > 0) for d in distances):
                continue
            shrinking = all(abs(later) < abs(earlier) for earlier, later in itertools.pairwise(distances))
            gone = 1.0 - distances[-1] / distances[0]
            apart = not _overlap(recent[0]["speedup"], recent[-1]["speedup"], run_spread(every[backend, key]))
            if shrinking and gone >= share and apart:
                last = recent[-1]
                found.append(
                    Erosion(
                        key=key,
                        nodeid=str(last.get("nodeid", key)),
                        category=str(last.get("category", "")),
                        claim_id=last.get("claim_id"),
                        bound_label=str(label),
                        releases=tuple(str(p.get("release", "")) for p in recent),
                        estimates=tuple(estimates),
                        share_gone=gone,
                    )
                )
    return found
