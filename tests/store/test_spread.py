"""Run-to-run spread: estimated from a key's own nights, and carried into the readings across nights."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_specdec.stats import Interval
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key, compare_with_baseline
from pytest_specdec.store.ledger import BaselineLedger, LedgerPolicy
from pytest_specdec.store.night_statistics import (
    MIN_NIGHTS,
    RunSpread,
    _pairs_drift,
    drift,
    erosions,
    run_spread,
    widened,
)
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import Change, ComparisonRecord, Provenance

Factory = Callable[..., ComparisonRecord]


def kept(lines: list[dict[str, Any]]) -> Nights:
    """History lines as the nights a reader gets."""
    return tuple(Night.of_line(line) for line in lines)


def nights(
    levels: list[float], se: float = 0.02, release: str = "r 1", start: str = "2026-01-01", **extra: Any
) -> list[dict[str, Any]]:
    """History lines of one key, one per night from ``start``, each with a 95 % interval of within-run error ``se``."""
    z = 1.959963984540054
    first = datetime.fromisoformat(start).replace(tzinfo=UTC)
    return [
        {"key": "k", "release": release, "time": (first + timedelta(days=night)).isoformat(), "protocol": 1, **extra,
         "speedup": {"estimate": level, "low": level * math.exp(-z * se), "high": level * math.exp(z * se),
                     "confidence": 0.95}}
        for night, level in enumerate(levels)
    ]  # fmt: skip


@pytest.mark.parametrize("tau", [0.0, 0.03, 0.08])
def test_the_spread_between_nights_is_recovered_from_the_nights_own_estimates(tau: float) -> None:
    rng = np.random.default_rng(7)
    found = []
    for _ in range(200):  # 200 machines of 30 nights each: the estimator's average and its spread
        levels = np.exp(rng.normal(0, math.hypot(tau, 0.02), 30))  # each night: its level and its own error
        spread = run_spread(kept(nights(list(levels))))
        assert spread.tau is not None
        found.append(spread.tau)
    assert np.median(found) == pytest.approx(tau, abs=0.006)


def test_not_known_before_five_nights_of_one_release_and_a_release_change_is_no_spread() -> None:
    wandering = [1.0, 1.1, 0.9, 1.05, 0.95]
    assert run_spread(kept(nights(wandering[: MIN_NIGHTS - 1]))).tau is None
    assert run_spread(kept(nights(wandering))).tau == pytest.approx(0.077, abs=0.001)
    steady_releases = nights([1.0, 1.0, 1.0], release="r 1") + nights([1.5] * 3, release="r 2", start="2026-02-01")
    assert run_spread(kept(steady_releases)).tau == 0.0, "two releases at two levels: 4 degrees of freedom, no spread"
    assert RunSpread(None, 3).text.startswith("run-to-run spread not yet known (3 nights; 5 of one release")


def test_a_night_cut_short_of_another_protocol_or_without_a_time_does_not_count() -> None:
    counted = nights([1.0, 1.01, 0.99, 1.0])
    cut = nights([2.0], start="2026-03-01", interrupted=True)
    older = nights([0.5, 3.0], start="2026-04-01", protocol=0)
    odd = [dict(line, protocol="v2") for line in nights([0.2, 5.0], start="2026-05-01")]
    timeless = [dict(line, time="last night") for line in nights([0.2, 5.0], start="2026-06-01")]
    assert run_spread(kept(counted + cut)).tau is None, "four nights and one cut short: not yet five"
    fifth = nights([1.0], start="2026-02-01")
    assert run_spread(kept([*counted, *fifth, *older, *odd, *timeless])).tau == pytest.approx(0.0, abs=0.005)


def test_times_are_moments_not_text() -> None:
    """09:00 at UTC-5 is 14:00 UTC: after an acceptance at 10:00 UTC, though it sorts before it as text."""
    reference = nights([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], start="2026-01-01T10:00:00+00:00")
    accepted_at = "2026-01-06T10:00:00+00:00"
    later = [dict(nights([1.3], start="2026-01-07")[0], time="2026-01-07T09:00:00-05:00")]
    tonight = Interval(1.3, 1.3 * 0.96, 1.3 / 0.96, 0.95, 64)
    alone = drift(kept(reference), tonight, "r 1", "r 1", accepted_at)
    pooled = drift(kept(reference + later), tonight, "r 1", "r 1", accepted_at)
    assert alone is not None
    assert pooled is not None
    assert pooled[1] < alone[1], "the night at 09:00-05:00 is read as one since the acceptance, pooled with tonight"


def test_widening_adds_the_spread_on_the_log_scale_and_nothing_while_unknown() -> None:
    interval = Interval(1.2, 1.1, 1.3, 0.95, 16)
    assert widened(interval, RunSpread(None, 3)) == interval
    assert widened(interval, RunSpread(0.0, 9)) == interval
    wide = widened(interval, RunSpread(0.05, 9))
    extra = 1.959963984540054 * 0.05
    assert math.log(1.2 / wide.low) == pytest.approx(math.hypot(math.log(1.2 / 1.1), extra))
    assert math.log(wide.high / 1.2) == pytest.approx(math.hypot(math.log(1.3 / 1.2), extra))


WANDERING = [math.exp(x) for x in (0.0, 0.08, -0.07, 0.05, -0.06, 0.09, -0.04, 0.03, -0.08)]


def _against(make_record: Factory, levels: list[float]) -> tuple[Change, str]:
    old = make_record("code", 0.94, "holds", None)
    new = replace(make_record("code", 1.41, "refuted", None), release="mlx-lm 0.34.0")  # [1.34, 1.48] > max=1.3
    entry = BaselineEntry(old, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")
    history = kept(nights(levels, release="mlx-lm 0.33.0"))
    check = compare_with_baseline(new, entry, "M", nights=history)
    return check.change, check.message


def test_a_flip_within_the_run_only_says_so_and_warns(make_record: Factory) -> None:
    assert "within tonight's run only" not in _against(make_record, WANDERING[:4])[1], "not yet known"
    assert "within tonight's run only" not in _against(make_record, [1.0, 1.01, 0.99, 1.0, 1.01, 0.99])[1]
    change, message = _against(make_record, WANDERING)
    assert change is Change.FLIP, "the gate still measures it again, old release beside new"
    assert re.search(r"— within tonight's run only: not beyond this machine's run-to-run spread ±6\.\d% "
                     r"\(9 nights\) \(1\.41x \[1\.2\d, 1\.6\d\]\), so it warns", message), message  # fmt: skip


def test_drift_across_nights_stays_quiet_for_a_night_and_pools_nights_to_see_a_move() -> None:
    levels = [math.sqrt(level) for level in WANDERING]  # nights that wander about 3 %
    reference = nights(levels, se=0.02, release="r 1")  # the accepted release's nights, the last one accepted
    accepted_at = str(reference[-1]["time"])
    quiet = drift(kept(reference), Interval(1.05, 1.05 * 0.96, 1.05 / 0.96, 0.95, 64), "r 1", "r 1",
                                           accepted_at)  # fmt: skip
    assert quiet is not None
    assert quiet[0] == pytest.approx(1.05 / math.exp(np.mean(np.log(levels))), rel=0.01)
    assert quiet[1] > 0.1, "a night 5 % up on a machine whose nights wander 3 %: no drift"
    moved = nights([1.09, 1.09], se=0.02, start="2026-09-01")
    tonight = Interval(1.09, 1.09 * 0.96, 1.09 / 0.96, 0.95, 64)
    alone = drift(kept(reference), tonight, "r 1", "r 1", accepted_at)
    pooled = drift(kept(reference + moved), tonight, "r 1", "r 1", accepted_at)
    assert alone is not None
    assert pooled is not None
    assert pooled[1] < 0.02 < alone[1], "three nights 9 % up show what one cannot"
    assert drift(kept(reference[:3]), tonight, "r 1", "r 1", accepted_at) is None, "the spread not yet known"
    other = kept(reference + nights([1.09, 1.09], start="2026-09-01", release="r 2"))
    unpooled = drift(other, tonight, "r 1", "r 1", accepted_at)
    assert unpooled is not None
    assert unpooled[1] > 0.02, "another release's nights since the acceptance are not pooled with tonight"


@pytest.mark.parametrize("within_se", [0.0, 0.02])
def test_drift_on_nights_where_nothing_changed_is_raised_as_often_as_its_level_says(within_se: float) -> None:
    """Nights that scatter about one level (3 %, on top of each run's own error): tonight's p-value, read against
    eight accepted nights and alone or pooled with the nights since, is uniform — a test at 1 % raises drift on
    1 % of quiet nights, whatever the window."""
    rng = np.random.default_rng(11)
    found: dict[int, list[float]] = {0: [], 2: []}
    for _ in range(1500):
        levels = list(np.exp(rng.normal(0.1, math.hypot(0.03, within_se), 11)))
        reference = nights(levels[:8], se=within_se or 0.01)
        accepted_at = str(reference[-1]["time"])
        se = within_se or 0.01  # tonight's run as long as the others
        tonight = Interval(levels[10], levels[10] * math.exp(-1.96 * se), levels[10] * math.exp(1.96 * se), 0.95, 64)
        for pooled, p_values in found.items():
            since = nights(levels[8 : 8 + pooled], se=within_se or 0.01, start="2026-02-01")
            read = drift(kept(reference + since), tonight, "r 1", "r 1", accepted_at)
            assert read is not None
            p_values.append(read[1])
    for pooled, p_values in found.items():
        share = np.mean(np.array(p_values) < 0.01), np.mean(np.array(p_values) < 0.05)
        assert 0.004 < share[0] < 0.018, (pooled, share)
        assert 0.038 < share[1] < 0.064, (pooled, share)


def test_a_move_that_enters_the_window_is_drift_on_its_first_night() -> None:
    """Two quiet nights since the acceptance, then tonight 1.5x: the window's mean moves by a third of it and its
    scatter is read from the accepted nights only, so tonight is drift already (a scatter pooled with the window's
    own nights, as the two-sample t pools them, grows with the move and holds p near 0.1 however large it is)."""
    wander = [1.0, 1.03, 0.98, 1.01, 0.99, 1.02, 0.995, 1.005]
    reference = nights(wander, se=0.01)
    accepted_at = str(reference[-1]["time"])
    quiet = nights([1.01, 0.99], se=0.01, start="2026-02-01")
    for jump in (1.5, 3.0):
        tonight = Interval(jump, jump * math.exp(-1.96 * 0.01), jump * math.exp(1.96 * 0.01), 0.95, 64)
        read = drift(kept(reference + quiet), tonight, "r 1", "r 1", accepted_at, tonight_se=0.01)
        assert read is not None
        assert read[1] < 1e-4, f"{jump}x after two quiet nights: drift the night it comes"


def test_a_night_whose_own_run_was_short_counts_with_its_own_larger_error() -> None:
    reference = nights([1.0, 1.01, 0.99, 1.005, 0.995, 1.0], se=0.005)
    accepted_at = str(reference[-1]["time"])
    short = Interval(1.06, 1.06 * 0.8, 1.06 / 0.8, 0.95, 4)  # four pairs: ±20 %
    long = Interval(1.06, 1.06 * 0.99, 1.06 / 0.99, 0.95, 72)
    read_short = drift(kept(reference), short, "r 1", "r 1", accepted_at)
    read_long = drift(kept(reference), long, "r 1", "r 1", accepted_at)
    assert read_short is not None
    assert read_long is not None
    assert read_long[1] < 0.001, "6 % up on nights within 1 %: drift"
    assert read_short[1] > 0.3, "…unless tonight's own run cannot show it"


def test_the_drift_test_counts_both_nights_levels() -> None:
    rng = np.random.default_rng(3)
    old, new = list(rng.normal(0, 0.05, 40)), list(rng.normal(0.08, 0.05, 40))
    within = _pairs_drift(new, old, 0.0, math.inf)
    across = _pairs_drift(new, old, 2 * 0.04**2, math.inf)
    assert within[0] == across[0]
    assert within[1] < 1e-6, "significant within a night"
    assert 0.05 < across[1] < 0.5, "not across two"
    assert _pairs_drift(new, old, 2 * 0.5**2, math.inf)[1] > 0.8


def test_the_ledger_reads_the_spread_from_its_history_and_the_runners(tmp_path: Path, make_record: Factory) -> None:
    old = make_record("code", 0.94, "holds", None)
    store = BaselineStore(tmp_path, "M")
    store.write("mlx", {baseline_key(old): BaselineEntry(old, Provenance.MEASURED, "2026-11-30T00:00:00+00:00")})
    new = replace(make_record("code", 1.41, "refuted", None), release="mlx-lm 0.34.0")
    runner = tmp_path / "runner.jsonl"
    lines = [
        Night.of_record(replace(old, speedup=Interval(level, level * 0.97, level / 0.97, 0.95, 16)), "M", False,
                        f"2026-11-{day:02d}T03:00:00+00:00").as_line()
        for day, level in enumerate([0.94, 1.12, 0.85, 1.05, 0.9, 1.15], 1)
    ]  # fmt: skip
    runner.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    alone = BaselineLedger(store, LedgerPolicy())
    assert run_spread(alone.nights(new)).tau is None
    assert alone.decide(alone.check(new)).failure is not None, "a flip beyond what is known: it fails"
    with_runner = BaselineLedger(store, LedgerPolicy(), history_sources=(runner,))
    assert run_spread(with_runner.nights(new)).nights == 6
    decided = with_runner.decide(with_runner.check(new))
    assert decided.failure is None, "within the run only, on a machine whose nights wander: it warns"
    assert "within tonight's run only" in (decided.warning or "")
    other = replace(new, backend="llama-cpp")
    assert run_spread(with_runner.nights(other)).tau is None, "another backend's nights under the same key do not count"
    runner.write_text("not json\n{}\n", encoding="utf-8")
    assert run_spread(BaselineLedger(store, LedgerPolicy(), history_sources=(runner,)).nights(new)).tau is None, (
        "a runner history its owner sets aside is skipped, never a failed run"
    )
    store.history_path().parent.mkdir(parents=True, exist_ok=True)
    store.history_path().write_text('{"key": 1}\n{"no time": true}\n', encoding="utf-8")
    assert run_spread(BaselineLedger(store, LedgerPolicy()).nights(new)).tau is None, "a broken own history: no crash"


def test_erosion_is_a_trend_only_beyond_the_spread_between_nights() -> None:
    bound = {"speedup max=1": "holds"}
    creeping = [
        dict(line, release=f"r {n}", bounds=bound, nodeid="t", category="code")
        for n, line in enumerate(nights([0.80, 0.90, 0.97], se=0.01, start="2026-09-01"), 1)
    ]
    assert [e.estimates for e in erosions(kept(creeping))] == [(0.80, 0.90, 0.97)], "intervals apart: a trend"
    noisy_nights = [
        dict(line, bounds=bound, nodeid="t", category="code")
        for line in nights([0.80, 0.97, 0.85, 0.95, 0.83, 0.92], se=0.01, release="r 0", start="2026-08-01")
    ]
    assert erosions(kept([*noisy_nights, *creeping])) == [], "the same path on a machine whose nights wander that much"


def test_the_examples_in_the_docstrings_hold() -> None:
    import doctest

    from pytest_specdec import stats
    from pytest_specdec.store import night_statistics, nights

    for module in (night_statistics, nights, stats):
        assert doctest.testmod(module).failed == 0, module.__name__


def test_a_run_with_a_rate_that_is_infinite_or_zero_keeps_no_within_run_error() -> None:
    """A pair whose arm's rate was infinite or zero has no finite log ratio: the history line keeps no log_se
    (statistics.stdev raised AttributeError on it at the end of a real Gemma run through mlx_lm.server)."""
    from pytest_specdec.store.night_statistics import log_se

    assert log_se([0.1, math.inf]) is None
    assert log_se([0.1, -math.inf, 0.2]) is None
    assert log_se([0.1, math.nan, 0.2]) is None
    found = log_se([0.1, 0.3])
    assert found is not None
    assert found == pytest.approx(0.1)


def test_the_drift_benchmark_reads_its_machines_and_the_best_possible_reading() -> None:
    """``studies/run_spread.py`` as docs/measurements.md runs it, on three machines of five nights."""
    from studies.run_spread import COLUMNS, best_possible, machine, pooled_t

    rows = np.array([machine(seed, 0.03, 5) for seed in range(3)])
    assert rows.shape == (3, 2 * COLUMNS + 5 + 6), "readings both ways, then each night's log speedup"
    assert set(np.unique(rows[:, : 2 * COLUMNS])) <= {0.0, 1.0}
    best = best_possible(rows[:, 2 * COLUMNS :], 5, 0.01)
    own = pooled_t(rows[:, 2 * COLUMNS :], 5, 0.01)
    assert best.shape == own.shape == (3, COLUMNS)
    for found in (rows[:, :COLUMNS], best, own):
        assert (found[:, 3] >= found[:, 2]).all(), "caught on night 1 is caught within three"
        assert (found[:, 4] >= found[:, 5]).all(), "…after quiet nights too"


def test_the_benchmarks_references_hold_their_level_and_see_a_move_on_normal_nights() -> None:
    """The two references of ``studies/run_spread.py`` on nights that scatter normally (sd 20 %, so the 5 %
    least move never binds): at 5 %, each raises on about 5 % of quiet nights — the t test though it reads level
    and scatter from eight nights of each machine — and a move of two sds shows within three nights more often to
    the one that knows the machine."""
    from studies.run_spread import best_possible, pooled_t

    rng = np.random.default_rng(11)
    logs = rng.normal(0.1, 0.2, (4000, 8 + 6))
    logs[:, -3:] += 0.4
    own, best = pooled_t(logs, 8, 0.05), best_possible(logs, 8, 0.05)
    for found in (own, best):
        for quiet in (found[:, 0], found[:, 1]):
            assert 0.04 < quiet.mean() < 0.06, "quiet nights: the test's own 5 %"
    assert 0.5 < own[:, 3].mean() < best[:, 3].mean() - 0.05, "estimating level and scatter costs power"


def test_a_window_night_with_more_error_than_the_others_counts_its_excess() -> None:
    """Tonight's run was shorter than the history's (three times their within-run error): its level scatters
    more, and a 1 % test still raises drift on about 1 % of quiet nights."""
    rng = np.random.default_rng(5)
    p_values = []
    for _ in range(1500):
        history = list(np.exp(rng.normal(0.1, math.hypot(0.02, 0.01), 15)))
        reference = nights(history, se=0.01)
        level = math.exp(0.1 + rng.normal(0, 0.02) + rng.normal(0, 0.03))
        tonight = Interval(level, level * math.exp(-1.96 * 0.03), level * math.exp(1.96 * 0.03), 0.95, 16)
        read = drift(kept(reference), tonight, "r 1", "r 1", str(reference[-1]["time"]), tonight_se=0.03)
        assert read is not None
        p_values.append(read[1])
    assert 0.004 < np.mean(np.array(p_values) < 0.01) < 0.018
    assert 0.038 < np.mean(np.array(p_values) < 0.05) < 0.064


def test_a_lasting_move_stays_drift_and_an_accepted_new_normal_is_the_level() -> None:
    """Nights after the acceptance never join the scatter, so a move that lasts keeps reading as drift night
    after night; accepting the moved nights (their change was drift) makes their level the accepted one."""
    wander = [math.exp(x) for x in (0.0, 0.02, -0.015, 0.01, -0.02, 0.015, -0.01, 0.005, -0.005, 0.0)]
    reference = nights(wander)
    accepted_at = str(reference[-1]["time"])
    moved = nights([1.1 * w for w in wander[:8]], start="2026-02-01")
    tonight = Interval(1.1, 1.1 * 0.96, 1.1 / 0.96, 0.95, 64)
    for count in (0, 2, 8):
        read = drift(kept(reference + moved[:count]), tonight, "r 1", "r 1", accepted_at)
        assert read is not None
        assert read[1] < 0.001, f"+10 % on nights that wander 1.5 %, {count} nights on: still drift"
    drifted = [dict(line, change="drift") for line in moved[:3]]
    drifted[-1]["accepted"] = True  # the user accepts the new normal on the third drifted night
    history = [dict(reference[0], accepted=True), *reference[1:], *drifted]
    read = drift(kept(history), tonight, "r 1", "r 1", str(drifted[-1]["time"]))
    assert read is not None
    assert read[1] > 0.2, "1.1x against the 1.1x level just accepted: no drift"
    assert read[0] == pytest.approx(1.1 / math.exp(np.mean(np.log([1.1 * w for w in wander[:3]]))), rel=1e-9)


def test_a_level_accepted_anew_within_a_release_is_no_spread() -> None:
    """τ groups nights by release and by the spans between acceptances, as drift's scatter does: accepting a new
    normal (the moved nights, their change drift) starts a span of its own, so its step is not run-to-run spread."""
    steady = [1.0, 1.01, 0.99, 1.0, 1.01, 0.99]
    before = nights(steady, se=0.01)
    after = [dict(line, change="drift") for line in nights([1.2 * x for x in steady], se=0.01, start="2026-02-01")]
    unmarked = run_spread(kept(before + after))
    assert unmarked.tau is not None
    assert unmarked.tau > 0.05, "the same nights with nothing accepted: the step is τ"
    after[2]["accepted"] = True  # the third moved night accepted: the three are the new normal
    accepted = run_spread(kept(before + after))
    assert accepted.tau is not None
    assert accepted.tau < 0.01
    assert accepted.df == 5 + 2 + 2, "a degree of freedom less per span: before, the three accepted, after"
    after[2]["accepted"], after[0]["accepted"] = False, True  # the first moved night alone accepted
    alone = run_spread(kept(before + after))
    assert alone.tau is not None
    assert alone.tau < 0.01
    assert alone.df == 5 + 0 + 4
    level = drift(kept(before + after[:1]), Interval(1.2, 1.17, 1.23, 0.95, 64), "r 1", "r 1", str(after[0]["time"]))
    assert level is not None
    assert level[0] == pytest.approx(1.0), "the accepted moved night is the level"


def test_an_acceptance_where_nothing_moved_splits_no_span() -> None:
    """``--specdec-update-baselines`` accepts every key of the backend, moved or not: a key accepted night after
    night keeps one span, so τ and drift stay known and keep every night's degree of freedom."""
    rng = np.random.default_rng(3)
    levels = list(np.exp(rng.normal(0.0, 0.04, 30)))
    plain = run_spread(kept(nights(levels)))
    accepted = run_spread(kept(nights(levels, accepted=True)))
    assert plain.df == 29
    assert (accepted.tau, accepted.df) == (plain.tau, plain.df)
    every = nights(levels, accepted=True)
    read = drift(kept(every[:-1]), Interval(1.0, 0.97, 1.03, 0.95, 64), "r 1", "r 1", str(every[-2]["time"]))
    assert read is not None, "drift is known on a key accepted every night"
