"""Pictures that stand alone: a panel per claim, the protocol of the baselines drawn, what was measured with what.

The figures are inspected as matplotlib drew them (``*_figure``) and as saved (``*_plot``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba

from pytest_specdec.render.plots import (
    FLIPPED,
    baselines_drawn,
    forest_figure,
    history_figure,
    history_plot,
    panel_title,
)
from pytest_specdec.stats import Interval
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import Change, CheckRecord, ComparisonRecord, Provenance

RELEASES = ("llama-cpp-python 0.3.36", "llama-cpp-python 0.3.37")
CATEGORIES = ("code", "copy", "prose", "unpredictable")


def kept(lines: list[dict[str, Any]]) -> Nights:
    """History lines as the nights a reader gets."""
    return tuple(Night.of_line(line) for line in lines)


@pytest.fixture(autouse=True)
def _close_figures() -> Iterator[None]:
    yield
    plt.close("all")


def line(index: int, release: int, **extra: object) -> dict[str, Any]:
    """A history line of key ``index`` (its own bound ``max=1.{index:02d}``) on ``RELEASES[release]``."""
    category = CATEGORIES[index % len(CATEGORIES)]
    nodeid = f"benchmarks/test_claim_{index}.py::test_claim_{index}[{category}]"
    estimate = 0.8 + 0.05 * index + 0.02 * release
    return {
        "time": f"2026-11-{10 + release:02d}T00:00:{index:02d}",
        "backend": "llama-cpp",
        "release": RELEASES[release],
        "key": f"{nodeid} [{category}, γ=3, embedded:target-1b + embedded:draft-1b-aligned @d{index}]",
        "nodeid": nodeid,
        "claim_id": f"c{index}",
        "profile": "embedded-1b",
        "category": category,
        "speedup": {"estimate": estimate, "low": estimate * 0.97, "high": estimate * 1.03},
        "bounds": {f"speedup max=1.{index:02d}": "holds"},
        "change": "unchanged",
        "accepted": True,
        "protocol": 2,
        **extra,
    }


def thirteen_series(**extra: object) -> list[dict[str, Any]]:
    return [line(index, release, **extra) for index in range(13) for release in (0, 1)]


def legend_text(figure: Any) -> str:
    """The figure legend's title and labels, one text."""
    (legend,) = figure.legends
    return "\n".join([legend.get_title().get_text(), *(text.get_text() for text in legend.get_texts())])


def dotted_levels(axes: Any) -> list[float]:
    return sorted(float(drawn.get_ydata()[0]) for drawn in axes.get_lines() if drawn.get_linestyle() == ":")


def markers(axes: Any) -> list[PathCollection]:
    """The marker collections of a panel (not the error bars)."""
    return [collection for collection in axes.collections if isinstance(collection, PathCollection)]


def ringed(axes: Any) -> list[tuple[float, float]]:
    """The points a red ring is drawn around."""
    red = to_rgba(FLIPPED)
    return [
        (float(x), float(y))
        for collection in markers(axes)
        if tuple(collection.get_edgecolor()[0]) == red
        for x, y in collection.get_offsets()
    ]


def test_thirteen_claims_get_thirteen_panels_each_titled_and_bounded_by_its_own_claim() -> None:
    lines = thirteen_series()
    lines[2 * 5 + 1] = {**lines[2 * 5 + 1], "change": "flip"}  # key 5 flipped on the second release
    figure = history_figure(kept(lines), "llama-cpp on NVIDIA-H200").figure
    panels = figure.axes
    assert len(panels) == 13
    for index, axes in enumerate(panels):
        title = axes.get_title(loc="left")
        category = CATEGORIES[index % len(CATEGORIES)]
        assert f"claim c{index} · test_claim_{index}[{category}]" in title
        assert f"[{category}, γ=3, target-1b + draft-1b-aligned]" in title, "models by short name, no digest"
        assert "profile embedded-1b" in title
        assert dotted_levels(axes) == [pytest.approx(1 + index / 100)], "its own claimed bound, nobody else's"
        assert axes.get_shared_x_axes().joined(panels[0], axes), "one release axis for every panel"
        assert axes.get_yscale() == "log"
    assert ringed(panels[5]) == [(pytest.approx(1.0), pytest.approx(0.8 + 0.25 + 0.02))]
    assert all(not ringed(axes) for index, axes in enumerate(panels) if index != 5)
    releases = [label.get_text() for label in panels[-1].get_xticklabels()]
    assert releases == list(RELEASES)


def test_the_figure_grows_with_its_panels_and_saves_what_it_drew(tmp_path: Path) -> None:
    from PIL import Image

    lines = thirteen_series()
    heights = []
    for count in (2, 13):
        chosen = [item for item in lines if int(item["claim_id"][1:]) < count]
        path = history_plot(kept(chosen), tmp_path / f"history-{count}.png", "t")
        with Image.open(path) as image:
            heights.append(image.size[1])
            drawn = json.loads(image.text["specdec"])
        assert [entry["key"] for entry in drawn] == list(dict.fromkeys(item["key"] for item in chosen))
        assert all(entry["releases"] == list(RELEASES) for entry in drawn)
    assert heights[1] - heights[0] >= 11 * 150, f"each added panel gets at least 1.5 inches: {heights}"


def test_the_legend_names_the_protocol_of_the_accepted_baselines_drawn() -> None:
    figure = history_figure(kept(thirteen_series()), "t").figure
    text = legend_text(figure)
    assert "accepted baselines, measurement protocol 2" in text
    assert "protocol 1" not in text


def test_lines_of_several_protocols_are_said_and_told_apart() -> None:
    old = [{key: value for key, value in line(0, 0).items() if key != "protocol"}]  # written before the field: 1
    new = [line(0, 0, accepted=False, time="2026-11-30")]
    figure = history_figure(kept(old + new), "t").figure
    text = legend_text(figure)
    assert "accepted baselines (filled) and results not accepted (hollow)" in text
    assert "measurement protocols 1, 2, told apart by marker" in text
    (legend,) = figure.legends
    shapes = {handle.get_label(): handle.get_marker() for handle in legend.legend_handles}
    assert shapes["measurement protocol 2"] != shapes["measurement protocol 1"]
    (axes,) = figure.axes
    xs = sorted(float(x) for collection in markers(axes) for x, _ in collection.get_offsets())
    assert len(xs) == 2
    assert xs[0] < xs[1], "the two protocols' results at one release are drawn side by side"
    assert baselines_drawn(kept([])) == "no results"


def test_two_keys_that_read_alike_are_told_apart_by_their_digest() -> None:
    first = line(0, 0)
    second = {**first, "key": first["key"].replace("@d0", "@e9")}
    figure = history_figure(kept([first, second]), "t").figure
    titles = [axes.get_title(loc="left") for axes in figure.axes]
    assert titles[0].endswith("@d0")
    assert titles[1].endswith("@e9")
    assert panel_title("k [code]", Night.of_line({})) == "k [code]", "a bare key stays readable"


def sweep(make_record: Callable[..., ComparisonRecord], check: CheckRecord | None) -> list[ComparisonRecord]:
    base = make_record("code", 1.2, "holds", check)
    return [
        replace(
            base,
            backend="llama-cpp",
            profile="embedded-1b",
            conditions=base.conditions.with_(num_draft=gamma),
            protocol=2,
        )
        for gamma in (1, 2, 4)
    ]


def test_the_gamma_sweep_names_its_profile_and_backend_and_the_protocol_of_its_baselines(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    check = CheckRecord(Change.UNCHANGED, "agrees", Interval(1.2, 1.1, 1.3, 0.98, 30), "0.3.36", Provenance.MEASURED)
    axes = forest_figure(sweep(make_record, check), "pytest-specdec on NVIDIA-H200").figure.axes[0]
    assert axes.get_title() == "pytest-specdec on NVIDIA-H200\nbackend llama-cpp · profile embedded-1b"
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "accepted baseline, measurement protocol 2" in labels
    assert not any("another" in label for label in labels)
    assert [label.get_text() for label in axes.get_yticklabels()][-1].endswith("γ=1 · holds"), (
        "the verdict in the label"
    )


def test_a_baseline_of_another_protocol_is_drawn_and_said_apart(make_record: Callable[..., ComparisonRecord]) -> None:
    moved = CheckRecord(
        Change.REBASELINE, "re-baseline", Interval(1.1, 1.0, 1.2, 0.95, 30), "0.3.36", Provenance.MEASURED
    )
    records = [*sweep(make_record, moved), replace(make_record("code", 0.9, "holds", None), backend="mlx")]
    axes = forest_figure(records, "t").figure.axes[0]
    assert axes.get_title() == "t\nbackends llama-cpp, mlx · profiles embedded-1b, seed"
    labels = [text.get_text() for text in axes.get_legend().get_texts()]
    assert "accepted baseline of another\nmeasurement protocol (re-baseline)" in labels
    assert not any(label.startswith("accepted baseline,") for label in labels), "no baseline of protocol 2 drawn"


def test_the_forest_plot_colours_what_a_row_means_and_labels_the_claims_verdict(
    make_record: Callable[..., ComparisonRecord],
) -> None:
    """A refuted "SD ≤ 1.3x" at 1.41x is SD paying off: green, not the red of "bad"; the verdict is in the label."""
    from matplotlib.colors import to_hex

    from pytest_specdec.render.plots import ANSWERS

    pays = make_record("code", 1.41, "refuted", None)
    loses = make_record("prose", 0.82, "holds", None)
    axes = forest_figure([pays, loses], "t").figure.axes[0]
    colours = [to_hex(line.get_color()) for line in axes.lines if line.get_marker() == "o"]
    assert colours == [ANSWERS["SD does not pay off"], ANSWERS["SD pays off"]], "bottom row first: the last record"
    labels = [label.get_text() for label in axes.get_yticklabels()]
    assert labels[1].endswith("· code · γ=3 · refuted")
    assert labels[0].endswith("· prose · γ=3 · holds")
    legend = [text.get_text() for text in axes.get_legend().get_texts()]
    assert {"SD pays off (vs 1x)", "SD does not pay off (vs 1x)"} <= set(legend)


def test_runs_on_one_release_are_drawn_side_by_side(make_record: Callable[..., ComparisonRecord]) -> None:
    from pytest_specdec.render.plots import history_figure
    from pytest_specdec.store.nights import Night

    lines = [Night.of_record(make_record("code", s, "holds", None), "M", False, f"2026-11-0{i}")
             for i, s in enumerate((0.9, 1.0, 1.1), 1)]  # fmt: skip
    axes = history_figure(tuple(lines), "t").figure.axes[0]
    xs = sorted({round(float(x), 3) for collection in axes.collections for x, _ in collection.get_offsets()})
    assert len(xs) == 3, "three runs on one release are three points, not one"
    assert max(xs) - min(xs) <= 0.31
