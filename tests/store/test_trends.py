"""Erosion: a conclusion creeping toward its bound over releases, before any flip."""

from __future__ import annotations

from typing import Any

from pytest_specdec.store.night_statistics import erosions
from pytest_specdec.store.nights import Night, Nights


def kept(lines: list[dict[str, Any]]) -> Nights:
    return tuple(Night.of_line(line) for line in lines)


def lines(estimates: list[float], bound: str = "speedup max=1", key: str = "k [copy]") -> list[dict[str, Any]]:
    return [
        {
            "time": f"2026-11-{day:02d}",
            "release": f"mlx-lm 0.3{day}",
            "key": key,
            "nodeid": "benchmarks/test_claim_d.py::test_d[copy]",
            "category": "copy",
            "claim_id": "d",
            "bounds": {bound: "holds"},
            "speedup": {"estimate": value, "low": value * 0.97, "high": value * 1.03},
        }
        for day, value in enumerate(estimates, start=1)
    ]


def test_a_conclusion_creeping_toward_max_is_eroding() -> None:
    (found,) = erosions(kept(lines([0.80, 0.90, 0.98])))
    assert found.releases == ("mlx-lm 0.31", "mlx-lm 0.32", "mlx-lm 0.33")
    assert found.share_gone > 0.9
    assert found.text.startswith("claim d [copy]: 0.80x → 0.90x → 0.98x against speedup max=1 over mlx-lm 0.31")


def test_min_bounds_erode_from_above() -> None:
    assert erosions(kept(lines([1.60, 1.40, 1.15], bound="speedup min=1.1")))


def test_steady_noisy_or_receding_results_are_not_erosion() -> None:
    assert erosions(kept(lines([0.80, 0.81, 0.80]))) == []  # not shrinking at every release
    assert erosions(kept(lines([0.90, 0.85, 0.80]))) == []  # moving away
    assert erosions(kept(lines([0.80, 0.82, 0.84]))) == []  # too little of the margin gone
    assert erosions(kept(lines([0.80, 0.98]))) == [], "two releases are not a trend"
    assert erosions(kept(lines([0.80, 0.95, 1.05]))) == [], "past the bound is a flip, not erosion"


def test_the_last_result_of_each_release_counts() -> None:
    repeated = lines([0.80, 0.90, 0.98])
    rerun = dict(repeated[1], time="2026-11-09", speedup={"estimate": 0.99, "low": 0.97, "high": 1.01})
    assert erosions(kept([*repeated, rerun])) == [], "mlx-lm 0.32 last measured 0.99x, then 0.98x: not shrinking"


def test_a_refuted_conclusion_creeping_toward_holding_erodes_too() -> None:
    (found,) = erosions(kept(lines([1.40, 1.20, 1.05])))
    assert found.estimates == (1.40, 1.20, 1.05)


def test_noise_within_the_intervals_and_other_protocols_are_not_trends() -> None:
    assert erosions(kept(lines([0.95, 0.96, 0.98]))) == [], "0.95x [0.92, 0.98] and 0.98x [0.95, 1.01] overlap"
    older = [dict(line, protocol=1) for line in lines([0.80, 0.90])]
    newer = [dict(line, protocol=2) for line in lines([0.98])[0:1]]
    assert erosions(kept([*older, *newer])) == [], "a change of the tool is not a backend trend"


def test_two_backends_sharing_a_key_are_never_one_trend() -> None:
    """The same test on the same models under two backends has one key: each backend's releases are its own."""
    mlx = [dict(line, backend="mlx") for line in lines([0.80, 0.90])]
    llama = [dict(line, backend="llama-cpp", release=f"llama.cpp b{n}", time=f"2026-11-{n + 10:02d}")
             for n, line in enumerate(lines([0.98, 0.99]))]  # fmt: skip
    assert erosions(kept([*mlx, *llama])) == [], "0.80 → 0.90 on mlx and 0.98 on llama.cpp are two histories"
    (found,) = erosions(kept([*mlx, *[dict(line, backend="mlx") for line in lines([0.80, 0.90, 0.98])]]))
    assert found.estimates == (0.80, 0.90, 0.98)
