"""Run-to-run spread: how far one night's speedup wanders from another's when nothing changed.

A comparison's interval is its *within-run* error: the pairs of one run, on one night. A run
on another night starts from another state of the machine (its thermal state, background
load, memory layout, the instance the library loaded), and its whole level can shift — on
quiet cores one configuration's estimates spread 3.3× their reported standard error over 60
back-to-back runs (docs/measurements.md). Drift, erosion and the reading against an accepted
verdict compare results of different runs, so their error has a between-run part too.

:func:`run_spread` estimates that part from the machine's own history of the same key, as a
random-effects meta-analysis does (DerSimonian–Laird's moment estimator on log speedup):
each night's estimate ``y`` with its within-run variance ``v`` (the ``log_se`` its history line
keeps, or read back from its stored interval for lines written before), grouped by release and
by the spans between accepted moves (a release change, or a moved level accepted anew, is no
run-to-run spread; an acceptance where nothing moved splits nothing), ``Q = Σ w (y − ȳ_w)²``
with ``w = 1/v`` in each group, and

    τ² = max(0, (ΣQ − Σ(k − 1)) / Σ(Σw − Σw²/Σw))

pooled over the groups. It needs 4 degrees of freedom — :data:`MIN_NIGHTS` nights of one
release and level, or more over several (a night less per span): the moment estimator's own relative
standard error is about ``√(2/df)``, 100 % at 3 nights and 71 % at 5. Before that it is "not
yet known" and every comparison keeps its within-run interval. The newest :data:`MAX_NIGHTS`
nights of the newest measurement protocol count, so a machine's old regime fades; times are
compared as moments (UTC), and a line without a readable time or protocol is not counted.

:func:`widened` puts τ into an interval on the log scale (half-widths ``√(h² + (zτ)²)``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pytest_specdec.stats import Interval

MIN_NIGHTS = 5  # of one release and level: 4 degrees of freedom (or more nights over several)
MAX_NIGHTS = 30  # the newest nights of a key that count


@dataclass(frozen=True)
class RunSpread:
    """The between-run standard deviation of log speedup for one key (``tau`` None: not yet known).

    >>> RunSpread(0.03, 7).text
    'run-to-run spread ±3.0% (7 nights)'
    >>> RunSpread(None, 2).text
    'run-to-run spread not yet known (2 nights; 5 of one release, or 4 degrees of freedom, needed)'
    """

    tau: float | None
    nights: int
    df: int = 0  # the estimate's degrees of freedom: nights less one per release

    @property
    def text(self) -> str:
        """How the spread reads beside a result."""
        if self.tau is None:
            return (
                f"run-to-run spread not yet known ({self.nights} nights; {MIN_NIGHTS} of one release, or "
                f"{MIN_NIGHTS - 1} degrees of freedom, needed)"
            )
        return f"run-to-run spread ±{math.expm1(self.tau):.1%} ({self.nights} nights)"


UNKNOWN = RunSpread(None, 0)


def line_time(line: Mapping[str, Any]) -> datetime | None:
    """A line's time in UTC (a time without a zone is UTC), or None when it has no readable one."""
    try:
        moment = datetime.fromisoformat(str(line.get("time", "")))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def line_protocol(line: Mapping[str, Any]) -> int | None:
    """A line's measurement protocol (1 when it names none), or None when it names an unreadable one."""
    value = line.get("protocol", 1)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def log_se(log_ratios: Sequence[float]) -> float | None:
    """The within-run standard error of a run's mean log speedup, kept in its history line (``log_se``); ``None``
    where it has no finite value (fewer than two pairs, or a pair whose rate was infinite or zero).

    >>> log_se([0.1, 0.3]) is not None, log_se([0.1, float("inf")])
    (True, None)
    """
    if len(log_ratios) < 2 or not all(math.isfinite(v) for v in log_ratios):
        return None
    spread = statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return spread if math.isfinite(spread) and spread > 0 else None


def _log_point(line: Mapping[str, Any]) -> tuple[float, float] | None:
    """``(log estimate, within-run variance)`` of a history line: its ``log_se`` where kept, else read back from
    its interval as if it were a plain normal one (a sequential interval is wider: τ then reads smaller)."""
    speedup = line.get("speedup")
    if not isinstance(speedup, Mapping) or line.get("interrupted"):
        return None
    try:
        estimate, low, high = (float(speedup[name]) for name in ("estimate", "low", "high"))
        confidence = float(speedup.get("confidence") or 0.95)
        kept = float(line.get("log_se") or math.nan)
    except (KeyError, TypeError, ValueError):
        return None
    if math.isfinite(kept) and kept > 0 and 0 < estimate < math.inf:
        return math.log(estimate), kept * kept
    if not (0 < low <= estimate <= high < math.inf) or high == low or not 0 < confidence < 1:
        return None
    from scipy.stats import norm

    se = (math.log(high) - math.log(low)) / (2 * float(norm.ppf(0.5 + confidence / 2)))
    return math.log(estimate), se * se


def _counted(lines: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The lines of the newest protocol with a readable time, oldest first, the newest :data:`MAX_NIGHTS`."""
    readable = [line for line in lines if line_protocol(line) is not None and line_time(line) is not None]
    newest = max((line_protocol(line) or 1 for line in readable), default=1)
    kept = [line for line in readable if line_protocol(line) == newest]
    return sorted(kept, key=lambda line: line_time(line) or datetime.min.replace(tzinfo=UTC))[-MAX_NIGHTS:]


def _by_span(lines: Sequence[Mapping[str, Any]]) -> dict[tuple[str, int], list[tuple[float, float]]]:
    """The readable lines' ``(log estimate, within-run variance)`` points grouped by span (:func:`_spans`), spans
    in the order they began, points in the lines' order."""
    readable = [(line, point) for line in lines if (point := _log_point(line)) is not None]
    groups: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for span, (_, point) in zip(_spans([line for line, _ in readable]), readable, strict=True):
        groups.setdefault(span, []).append(point)
    return groups


def run_spread(lines: Sequence[Mapping[str, Any]]) -> RunSpread:
    """τ for one key from its history lines (any order; other keys' lines must be left out by the caller).

    >>> nights = [{"release": "r 1", "time": f"2026-01-0{i}", "speedup": {"estimate": e, "low": e * 0.98,
    ...           "high": e / 0.98, "confidence": 0.95}} for i, e in enumerate([1.0, 1.1, 0.9, 1.05, 0.95], 1)]
    >>> spread = run_spread(nights)
    >>> spread.nights, round(spread.tau, 3)
    (5, 0.079)
    >>> run_spread(nights[:4]).tau is None
    True
    """
    groups = _by_span(_counted(lines))
    q = df = c = 0.0
    nights = 0
    for points in groups.values():
        if len(points) < 2:
            continue
        weights = [1 / v for _, v in points]
        total = math.fsum(weights)
        mean = math.fsum(w * y for w, (y, _) in zip(weights, points, strict=True)) / total
        q += math.fsum(w * (y - mean) ** 2 for w, (y, _) in zip(weights, points, strict=True))
        df += len(points) - 1
        c += total - math.fsum(w * w for w in weights) / total
        nights += len(points)
    if df < MIN_NIGHTS - 1 or c <= 0:
        return RunSpread(None, sum(len(points) for points in groups.values()))
    return RunSpread(math.sqrt(max(0.0, (q - df) / c)), nights, int(df))


WINDOW = 3  # drift reads tonight's level as the mean of tonight and the nights of its release since the acceptance


@dataclass(frozen=True)
class Nights:
    """One key's history lines: its run-to-run spread, and drift read across nights once that is known."""

    lines: tuple[Mapping[str, Any], ...] = ()

    @property
    def spread(self) -> RunSpread:
        """The key's run-to-run spread (:func:`run_spread`): every night kept (tonight's is not yet)."""
        return run_spread(self.lines)

    def drift(
        self, tonight: Interval, tonight_release: str, accepted_release: str, accepted_at: str,
        tonight_se: float | None = None,
    ) -> tuple[float, float] | None:  # fmt: skip
        """``(ratio, p-value)`` of tonight's level against the accepted level, from the nights up to the acceptance.

        Tonight's level is the mean log speedup of tonight and the nights of its release since the acceptance,
        :data:`WINDOW` at most (a move that one night cannot show, three can; a new release starts its own
        window). The accepted level is the mean of the accepted release's nights since the key's last
        accepted move — or, where the nights just before this acceptance moved (their change was drift or a flip:
        a new normal accepted), of those nights. A night's scatter about its level, within-run error and
        run-to-run spread together, is read from the nights up to the acceptance (their variance pooled within
        releases and the spans between accepted moves; the nights since never count, so a lasting move cannot
        hide in it); a window night whose within-run variance ``v`` is above theirs adds the excess. The
        difference of the two means is then on a t with those nights' degrees of freedom (more by
        Satterthwaite's rule where a night's own excess, known, makes part of it): one test a night, a
        prediction of tonight's level. ``tonight_se``: tonight's within-run standard error of log speedup, as its
        history line will keep it (else read back from its interval). None while fewer than :data:`MIN_NIGHTS`
        nights of one span (4 degrees of freedom) are kept up to the acceptance.

        >>> def night(day, estimate, release="r 1"):
        ...     return {"release": release, "time": f"2026-01-{day:02d}", "log_se": 0.01,
        ...             "speedup": {"estimate": estimate, "low": estimate * 0.98, "high": estimate / 0.98}}
        >>> kept = Nights(tuple(night(d, e) for d, e in enumerate([1.0, 1.03, 0.98, 1.01, 0.99, 1.02], 1)))
        >>> ratio, p_value = kept.drift(Interval(1.2, 1.15, 1.25, 0.95, 32), "r 1", "r 1", "2026-01-06")
        >>> round(ratio, 2), p_value < 0.01  # 1.2 against nights about 1.005
        (1.19, True)
        >>> kept.drift(Interval(1.01, 0.97, 1.05, 0.95, 32), "r 1", "r 1", "2026-01-06")[1] > 0.5
        True
        """
        accepted = line_time({"time": accepted_at})
        tonight_point = (
            (math.log(tonight.estimate), tonight_se**2)
            if tonight_se and tonight_se > 0 and 0 < tonight.estimate < math.inf
            else _log_point({"speedup": {"estimate": tonight.estimate, "low": tonight.low, "high": tonight.high,
                                         "confidence": tonight.confidence}})
        )  # fmt: skip
        if accepted is None or tonight_point is None:
            return None
        counted = [(line, point) for line in _counted(self.lines) if (point := _log_point(line)) is not None]
        since = [point for line, point in counted if str(line.get("release", "")) == tonight_release
                 and (line_time(line) or accepted) > accepted][-(WINDOW - 1) :]  # fmt: skip
        groups = _by_span([line for line, _ in counted if (line_time(line) or accepted) <= accepted])
        reference = _accepted_level(groups, accepted_release)
        kept = [points for points in groups.values() if len(points) > 1]
        df = sum(len(points) - 1 for points in kept)
        if df < MIN_NIGHTS - 1 or not reference:
            return None
        scatter = (
            math.fsum(
                math.fsum((y - statistics.fmean(y for y, _ in points)) ** 2 for y, _ in points) for points in kept
            )
            / df
        )
        typical = statistics.fmean(v for points in kept for _, v in points)
        window = [*since, tonight_point]
        moved = statistics.fmean(y for y, _ in window) - statistics.fmean(reference)
        estimated = scatter * (1 / len(window) + 1 / len(reference))
        variance = estimated + math.fsum(max(0.0, v - typical) for _, v in window) / len(window) ** 2
        if variance <= 0:
            return math.exp(moved), 1.0 if moved == 0 else 0.0
        from scipy.stats import t

        # Satterthwaite: only the scatter is estimated (on ``df``); a window night's excess is its own, known
        freedom = df * (variance / estimated) ** 2 if estimated > 0 else math.inf
        return math.exp(moved), float(2 * t.sf(abs(moved) / math.sqrt(variance), freedom))


MOVES = ("drift", "flip")  # a night's change that says its level moved: accepted after it, the new normal


def _spans(lines: Sequence[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Each line's span, oldest first: its release, and how many accepted moves of the key came before it — the run
    of moved nights an acceptance closes (the new normal) is a span of its own, apart from the nights before it,
    and the nights after it start another, as a release does. An acceptance where nothing moved (``--specdec-
    update-baselines`` accepts every key of the backend) splits nothing: the level is the same."""
    spans: list[tuple[str, int]] = []
    count = 0
    closing = _moved_before_acceptance(lines)
    for index, line in enumerate(lines):
        count += index in closing and (index == 0 or index - 1 not in closing)
        spans.append((str(line.get("release", "")), count))
        count += bool(line.get("accepted")) and index in closing
    return spans


def _moved_before_acceptance(lines: Sequence[Mapping[str, Any]]) -> set[int]:
    """The indexes of each accepted line and the moved nights (:data:`MOVES`) right before it, where it or they
    moved: an accepted moved night alone is a new normal too."""
    found: set[int] = set()
    for index, line in enumerate(lines):
        if not line.get("accepted"):
            continue
        first = index
        while first > 0 and lines[first - 1].get("change") in MOVES and not lines[first - 1].get("accepted"):
            first -= 1
        if first < index or line.get("change") in MOVES:
            found.update(range(first, index + 1))
    return found


def _accepted_level(groups: Mapping[tuple[str, int], Sequence[tuple[float, float]]], release: str) -> list[float]:
    """The accepted level's nights (log speedups), from the nights up to the acceptance grouped by span: the last
    span's nights of the accepted release (those since its last accepted move, or the moved nights it accepted)."""
    spans = [span for span in groups if span[0] == release]
    return [y for y, _ in groups[spans[-1]]] if spans else []


NO_NIGHTS = Nights()


def widened(interval: Interval, spread: RunSpread) -> Interval:
    """``interval`` with the run-to-run spread added on the log scale (unchanged while τ is not known or 0).

    >>> wide = widened(Interval(1.2, 1.1, 1.3, 0.95, 16), RunSpread(0.05, 6))
    >>> round(wide.low, 3), round(wide.high, 3)
    (1.053, 1.362)
    """
    if not spread.tau or interval.estimate <= 0 or interval.low <= 0:
        return interval
    from scipy.stats import norm

    extra = float(norm.ppf(0.5 + interval.confidence / 2)) * spread.tau
    centre = math.log(interval.estimate)
    below = math.hypot(centre - math.log(interval.low), extra)
    above = math.hypot(math.log(interval.high) - centre, extra)
    return Interval(interval.estimate, math.exp(centre - below), math.exp(centre + above), interval.confidence,
                    interval.n)  # fmt: skip
