"""Statistics over nights: the run-to-run spread, drift, erosion and the pooling of several machines' readings.

A comparison's interval is its *within-run* error: the pairs of one run, on one night. A run on
another night starts from another state of the machine (thermal state, background load, memory
layout, the instance the library loaded), and its whole level can shift — on quiet cores one
configuration's estimates spread 3.3× their reported standard error over 60 back-to-back runs
(docs/measurements.md). Whatever compares results of different runs reads that between-run part too.

- :func:`run_spread` — τ, the between-run standard deviation of log speedup for one key, from the
  machine's own :data:`~pytest_specdec.store.nights.Nights`: DerSimonian–Laird's moment estimator
  (:func:`dersimonian_laird`) on each night's log estimate and within-run variance (its ``log_se``, or
  read back from its interval), grouped by release and by the spans between accepted moves (a release
  change or a moved level accepted anew is no run-to-run spread; an acceptance where nothing moved splits
  nothing). It needs 4 degrees of freedom — :data:`MIN_NIGHTS` nights of one release and level, or more
  over several: the estimator's own relative error is about ``√(2/df)``. The newest :data:`MAX_NIGHTS`
  nights of the newest measurement protocol count.
- :func:`widened` puts τ into an interval on the log scale (half-widths ``√(h² + (zτ)²)``).
- :func:`drift` — the one drift test: tonight's level against the accepted one across nights once the
  spread is known, else tonight's pairs against the baseline's (Welch, widened by the spread).
- :func:`erosions` — a conclusion creeping toward its bound over releases, before anything flips.
- :func:`pool_intervals` — several machines' readings as one answer (DerSimonian–Laird, Hartung–Knapp).

scipy has no DerSimonian–Laird estimator; its t and normal quantiles are used throughout.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pytest_specdec.stats import Interval
from pytest_specdec.store.nights import Night, Nights, utc_moment

MIN_NIGHTS = 5  # of one release and level: 4 degrees of freedom (or more nights over several)
MAX_NIGHTS = 30  # the newest nights of a key that count
WINDOW = 3  # drift reads tonight's level as the mean of tonight and its release's nights since the acceptance
MOVES = ("drift", "flip")  # a night's change that says its level moved: accepted after it, the new normal
Point = tuple[float, float]  # (log estimate, within-run variance)


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


def log_se(log_ratios: Sequence[float]) -> float | None:
    """The within-run standard error of a run's mean log speedup, kept in its night (``log_se``); ``None``
    where it has no finite value (fewer than two pairs, or a pair whose rate was infinite or zero).

    >>> log_se([0.1, 0.3]) is not None, log_se([0.1, float("inf")])
    (True, None)
    """
    if len(log_ratios) < 2 or not all(math.isfinite(v) for v in log_ratios):
        return None
    spread = statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return spread if math.isfinite(spread) and spread > 0 else None


def interval_point(interval: Interval, kept_se: float | None = None) -> Point | None:
    """``(log estimate, within-run variance)`` of an interval: ``kept_se`` where known, else read back from the
    interval as if it were a plain normal one (a sequential interval is wider: τ then reads smaller)."""
    estimate, low, high, confidence = interval.estimate, interval.low, interval.high, interval.confidence
    if kept_se is not None and math.isfinite(kept_se) and kept_se > 0 and 0 < estimate < math.inf:
        return math.log(estimate), kept_se * kept_se
    if not (0 < low <= estimate <= high < math.inf) or high == low or not 0 < confidence < 1:
        return None
    from scipy.stats import norm

    se = (math.log(high) - math.log(low)) / (2 * float(norm.ppf(0.5 + confidence / 2)))
    return math.log(estimate), se * se


def _point(night: Night) -> Point | None:
    return None if night.interrupted else interval_point(night.speedup, night.log_se)


def dersimonian_laird(groups: Sequence[Sequence[Point]]) -> tuple[float, int] | None:
    """``(τ², degrees of freedom)``: DerSimonian–Laird's moment estimate of the variance between readings beyond
    their own errors, ``τ² = max(0, (ΣQ − Σ(k − 1)) / Σ(Σw − Σw²/Σw))`` with ``w = 1/v``, pooled over groups
    whose means may differ (None: no group of two readings).

    >>> tau2, df = dersimonian_laird([[(0.0, 0.01), (0.3, 0.01)], [(1.0, 0.01), (1.0, 0.01)]])
    >>> round(tau2, 4), df
    (0.0125, 2)
    """
    q = c = 0.0
    df = 0
    for points in groups:
        if len(points) < 2:
            continue
        weights = [1 / v for _, v in points]
        total = math.fsum(weights)
        mean = math.fsum(w * y for w, (y, _) in zip(weights, points, strict=True)) / total
        q += math.fsum(w * (y - mean) ** 2 for w, (y, _) in zip(weights, points, strict=True))
        c += total - math.fsum(w * w for w in weights) / total
        df += len(points) - 1
    return (max(0.0, (q - df) / c), df) if df and c > 0 else None


def _counted(nights: Nights) -> list[Night]:
    """The nights of the newest protocol with a readable time, oldest first, the newest :data:`MAX_NIGHTS`."""
    readable = [n for n in nights if n.protocol is not None and n.moment is not None]
    newest = max((n.protocol or 1 for n in readable), default=1)
    kept = [n for n in readable if n.protocol == newest]
    return sorted(kept, key=lambda n: n.moment or datetime.min.replace(tzinfo=UTC))[-MAX_NIGHTS:]


def _spans(nights: Sequence[Night]) -> list[tuple[str, int]]:
    """Each night's span, oldest first: its release, and how many accepted moves of the key came before it — the
    run of moved nights an acceptance closes (the new normal) is a span of its own, apart from the nights before
    it, and the nights after it start another, as a release does. An acceptance where nothing moved (``--specdec-
    update-baselines`` accepts every key of the backend) splits nothing: the level is the same."""
    closing: set[int] = set()  # each accepted night that moved, or closes moved nights, with those nights
    for index, night in enumerate(nights):
        if night.accepted:
            first = index
            while first > 0 and nights[first - 1].change in MOVES and not nights[first - 1].accepted:
                first -= 1
            if first < index or night.change in MOVES:
                closing.update(range(first, index + 1))
    spans: list[tuple[str, int]] = []
    count = 0
    for index, night in enumerate(nights):
        count += index in closing and (index == 0 or index - 1 not in closing)
        spans.append((night.release, count))
        count += night.accepted and index in closing
    return spans


def _by_span(nights: Sequence[Night]) -> dict[tuple[str, int], list[Point]]:
    """The readable nights' points grouped by span (:func:`_spans`), spans in the order they began."""
    readable = [(night, point) for night in nights if (point := _point(night)) is not None]
    groups: dict[tuple[str, int], list[Point]] = {}
    for span, (_, point) in zip(_spans([night for night, _ in readable]), readable, strict=True):
        groups.setdefault(span, []).append(point)
    return groups


def run_spread(nights: Nights) -> RunSpread:
    """τ for one key from its nights (any order; other keys' nights must be left out by the caller).

    >>> def night(day, e):
    ...     return Night(f"2026-01-0{day}", "b", "r 1", "k", Interval(e, e * 0.98, e / 0.98, 0.95, 8))
    >>> nights = tuple(night(d, e) for d, e in enumerate([1.0, 1.1, 0.9, 1.05, 0.95], 1))
    >>> spread = run_spread(nights)
    >>> spread.nights, round(spread.tau, 3)
    (5, 0.079)
    >>> run_spread(nights[:4]).tau is None
    True
    """
    groups = list(_by_span(_counted(nights)).values())
    found = dersimonian_laird(groups)
    if found is None or found[1] < MIN_NIGHTS - 1:
        return RunSpread(None, sum(len(points) for points in groups))
    return RunSpread(math.sqrt(found[0]), sum(len(points) for points in groups if len(points) > 1), found[1])


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


def drift(
    nights: Nights, tonight: Interval, tonight_release: str, accepted_release: str, accepted_at: str,
    *, tonight_pairs: Sequence[float] = (), accepted_pairs: Sequence[float] = (), tonight_se: float | None = None,
) -> tuple[float, float] | None:  # fmt: skip
    """``(ratio, p-value)`` of tonight's speedup against the accepted one: the one drift test.

    **Across nights**, once :data:`MIN_NIGHTS` nights of one span are kept up to the acceptance: tonight's level
    is the mean log speedup of tonight and the nights of its release since the acceptance (:data:`WINDOW` at
    most: a move one night cannot show, three can); the accepted level is the mean of the accepted release's
    nights since the key's last accepted move (or of the moved nights it accepted). A night's scatter about its
    level is read from the nights up to the acceptance (pooled within spans; the nights since never count, so a
    lasting move cannot hide in it); a window night whose within-run variance is above theirs adds the excess.
    The difference is on a t with those nights' degrees of freedom (more by Satterthwaite's rule where a known
    excess makes part of it). **Otherwise, on the pairs** (``tonight_pairs``, ``accepted_pairs``: per-pair log
    speedups): Welch's t, with twice the run-to-run variance added where the spread is known (Satterthwaite's
    degrees of freedom). None when neither can be read. ``tonight_se``: tonight's within-run standard error of
    log speedup, as its night will keep it (default: from ``tonight_pairs``; else read back from its interval).

    >>> def night(day, estimate):
    ...     return Night(f"2026-01-{day:02d}", "b", "r 1", "k", Interval(estimate, estimate * 0.98, estimate / 0.98,
    ...                  0.95, 8), log_se=0.01)
    >>> kept = tuple(night(d, e) for d, e in enumerate([1.0, 1.03, 0.98, 1.01, 0.99, 1.02], 1))
    >>> ratio, p_value = drift(kept, Interval(1.2, 1.15, 1.25, 0.95, 32), "r 1", "r 1", "2026-01-06")
    >>> round(ratio, 2), p_value < 0.01  # 1.2 against nights about 1.005
    (1.19, True)
    >>> drift(kept, Interval(1.01, 0.97, 1.05, 0.95, 32), "r 1", "r 1", "2026-01-06")[1] > 0.5
    True
    >>> round(drift((), tonight=Interval(1.2, 1, 1.4, 0.95, 3), tonight_release="r", accepted_release="r",
    ...             accepted_at="t", tonight_pairs=[0.1, 0.2, 0.15], accepted_pairs=[0.0, 0.05, 0.02])[1], 3)
    0.03
    """
    across = _across_nights(
        nights, tonight, tonight_release, accepted_release, accepted_at,
        tonight_se=log_se(tonight_pairs) if tonight_se is None else tonight_se,
    )  # fmt: skip
    if across is not None or not tonight_pairs or not accepted_pairs:
        return across
    spread = run_spread(nights)
    return _pairs_drift(tonight_pairs, accepted_pairs, 2 * spread.tau**2 if spread.tau else 0.0, spread.df or math.inf)


def _across_nights(
    nights: Nights, tonight: Interval, tonight_release: str, accepted_release: str, accepted_at: str,
    *, tonight_se: float | None,
) -> tuple[float, float] | None:  # fmt: skip
    accepted = utc_moment(accepted_at)
    tonight_point = interval_point(tonight, tonight_se)
    if accepted is None or tonight_point is None:
        return None
    counted = [(night, point) for night in _counted(nights) if (point := _point(night)) is not None]
    since = [point for night, point in counted
             if night.release == tonight_release and (night.moment or accepted) > accepted][-(WINDOW - 1) :]  # fmt: skip
    groups = _by_span([night for night, _ in counted if (night.moment or accepted) <= accepted])
    spans = [span for span in groups if span[0] == accepted_release]
    reference = [y for y, _ in groups[spans[-1]]] if spans else []
    kept = [points for points in groups.values() if len(points) > 1]
    df = sum(len(points) - 1 for points in kept)
    if df < MIN_NIGHTS - 1 or not reference:
        return None
    scatter = math.fsum(
        math.fsum((y - statistics.fmean(y for y, _ in points)) ** 2 for y, _ in points) for points in kept
    ) / df  # fmt: skip
    typical = statistics.fmean(v for points in kept for _, v in points)
    window = [*since, tonight_point]
    moved = statistics.fmean(y for y, _ in window) - statistics.fmean(reference)
    estimated = scatter * (1 / len(window) + 1 / len(reference))
    variance = estimated + math.fsum(max(0.0, v - typical) for _, v in window) / len(window) ** 2
    if variance <= 0:
        return math.exp(moved), 1.0 if moved == 0 else 0.0
    from scipy.stats import t

    freedom = df * (variance / estimated) ** 2 if estimated > 0 else math.inf
    return math.exp(moved), float(2 * t.sf(abs(moved) / math.sqrt(variance), freedom))


def _pairs_drift(new: Sequence[float], old: Sequence[float], between: float, between_df: float) -> tuple[float, float]:
    """Welch's t on two runs' per-pair log speedups, ``between`` (the two runs' levels' variance) added."""
    ratio = math.exp(math.fsum(new) / len(new) - math.fsum(old) / len(old))
    if len(new) < 2 or len(old) < 2:
        return ratio, math.nan
    from scipy import stats as scipy_stats

    result = scipy_stats.ttest_ind(new, old, equal_var=False)
    p_value = float(result.pvalue)
    if between > 0:
        within = statistics.variance(new) / len(new) + statistics.variance(old) / len(old)
        statistic = math.log(ratio) / math.sqrt(within + between)
        df = (within + between) ** 2 / (within**2 / float(result.df) + between**2 / between_df)
        p_value = float(
            2 * (scipy_stats.t.sf(abs(statistic), df) if math.isfinite(df) else scipy_stats.norm.sf(abs(statistic)))
        )
    if math.isnan(p_value):  # both samples constant
        p_value = 0.0 if ratio != 1.0 else 1.0
    return ratio, p_value


BOUND_LABEL = re.compile(r"^speedup (?P<kind>min|max)=(?P<bound>[0-9.eE+-]+)$")


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


def per_release(nights: Nights) -> dict[tuple[str, str], list[Night]]:
    """Each (backend, key)'s last night per release, releases in the order they first appeared (in time).

    Two backends that run the same test on the same models share a key; their releases are never one trend.
    """
    by_key: dict[tuple[str, str], dict[str, Night]] = {}
    for night in sorted(nights, key=lambda n: n.moment or datetime.min.replace(tzinfo=UTC)):
        by_key.setdefault((night.backend, night.key), {})[night.release] = night
    return {group: list(releases.values()) for group, releases in by_key.items()}


def erosions(nights: Nights, window: int = WINDOW, share: float = 0.5) -> list[Erosion]:
    """The keys whose conclusion erodes: over their last ``window`` releases (the newest protocol's nights, each
    key's last per release) the distance to a bound (``log(bound / estimate)`` for ``max``, ``log(estimate /
    bound)`` for ``min``) kept its sign (a verdict that flipped is a flip, not erosion) and shrank at every
    release, at least ``share`` of it is gone, and the first and last intervals, each widened by the key's
    run-to-run spread, do not overlap — e.g. 0.80x → 0.90x → 0.98x against ``max=1.0``."""
    found: list[Erosion] = []
    newest = max((n.protocol or 1 for n in nights), default=1)
    nights = tuple(n for n in nights if n.protocol == newest)
    every: dict[tuple[str, str], list[Night]] = {}
    for night in nights:
        every.setdefault((night.backend, night.key), []).append(night)
    for (backend, key), points in sorted(per_release(nights).items()):
        recent = points[-window:]
        if len(recent) < window:
            continue
        for label in sorted(recent[-1].bounds):
            match = BOUND_LABEL.match(label)
            if match is None:
                continue
            kind, bound = match.group("kind"), float(match.group("bound"))
            estimates = [p.speedup.estimate for p in recent]
            distances = [
                math.nan if v <= 0 or bound <= 0 else math.log(bound / v) if kind == "max" else math.log(v / bound)
                for v in estimates
            ]
            if not all(math.isfinite(d) and d != 0 and (d > 0) == (distances[0] > 0) for d in distances):
                continue
            shrinking = all(abs(later) < abs(earlier) for earlier, later in itertools.pairwise(distances))
            gone = 1.0 - distances[-1] / distances[0]
            spread = run_spread(tuple(every[backend, key]))
            first, last = (widened(p.speedup, spread) for p in (recent[0], recent[-1]))
            if shrinking and gone >= share and not (first.low <= last.high and last.low <= first.high):
                found.append(Erosion(key, recent[-1].nodeid or key, recent[-1].category, recent[-1].claim_id, label,
                                     tuple(p.release for p in recent), tuple(estimates), gone))  # fmt: skip
    return found


@dataclass(frozen=True)
class Pooled:
    """Several machines' readings of one thing as one answer: the pooled speedup and how far the machines differ."""

    interval: Interval  # ``n``: the readings pooled
    tau: float  # the between-reading standard deviation of log speedup (0: no more than their own errors)


def pool_intervals(intervals: Sequence[Interval], confidence: float) -> Pooled | None:
    """A random-effects pooling of ratio intervals on the log scale (``None`` for fewer than two readings).

    Each reading's standard error is read back from its interval at its own confidence (a sequential interval is
    wider than a fixed one: the pooled interval is then conservative); τ² is :func:`dersimonian_laird`'s; the
    interval is Hartung–Knapp's — a t with ``k − 1`` degrees of freedom on the weighted residual variance, never
    narrower than the plain inverse-variance one — which holds its level with few readings where the normal one
    does not.

    >>> pooled = pool_intervals([Interval(1.2, 1.1, 1.31, 0.95, 32), Interval(1.3, 1.2, 1.41, 0.95, 32)], 0.95)
    >>> round(pooled.interval.estimate, 3), pooled.interval.n, pooled.interval.low < 1.2 < 1.3 < pooled.interval.high
    (1.251, 2, True)
    """
    from scipy.stats import t

    points = [point for i in intervals if (point := interval_point(i)) is not None]
    found = dersimonian_laird([points])
    if found is None:
        return None
    k, tau2 = len(points), found[0]
    weights = [1 / (v + tau2) for _, v in points]
    total = math.fsum(weights)
    mean = math.fsum(w * y for w, (y, _) in zip(weights, points, strict=True)) / total
    spread = math.fsum(w * (y - mean) ** 2 for w, (y, _) in zip(weights, points, strict=True)) / (k - 1)
    half = float(t.ppf(0.5 + confidence / 2, k - 1)) * math.sqrt(max(spread, 1.0) / total)
    pooled = Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), confidence, k)
    return Pooled(pooled, math.sqrt(tau2))
