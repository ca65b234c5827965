"""Accepted baselines in two files: the reviewed one (small, sorted, an interval a line) and its details beside it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.baseline_files import details_path
from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, Provenance, baseline_key, load_any
from pytest_specdec.store.records import ComparisonRecord

REPO = Path(__file__).resolve().parent.parent.parent


def _stored(root: Path, make_record: Callable[..., ComparisonRecord]) -> tuple[BaselineStore, ComparisonRecord]:
    store = BaselineStore(root, "M")
    record = make_record("code", 0.94, "holds", None)
    store.write("mlx", {baseline_key(record): BaselineEntry(record, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")})
    return store, record


def test_the_details_join_back_into_the_very_record(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord]
) -> None:
    store, record = _stored(tmp_path, make_record)
    path = store.path("mlx")
    assert details_path(path).name == "mlx.samples.jsonl"
    assert '"samples":' not in path.read_text(encoding="utf-8"), "the per-pair samples live beside, not in review"
    (entry,) = BaselineStore(tmp_path, "M").load("mlx").entries.values()
    assert entry.result == record
    assert entry.result.samples == record.samples


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda text: text.replace("40.0", "41.0", 1), "are not the ones mlx.json accepted"),  # a sample edited
        (lambda text: "", "has no details for "),
        (lambda text: "{not json\n", ":1 is not JSON"),
    ],
)
def test_details_that_are_not_the_accepted_ones_are_refused_in_one_line(
    tmp_path: Path, make_record: Callable[..., ComparisonRecord], damage: Callable[[str], str], said: str
) -> None:
    store, _ = _stored(tmp_path, make_record)
    side = details_path(store.path("mlx"))
    side.write_text(damage(side.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(SpecdecUsageError, match=said) as refused:
        BaselineStore(tmp_path, "M").load("mlx")
    assert "\n" not in str(refused.value)
    assert str(refused.value).endswith(("restore both files from version control", "restore it from version control",
                                        "or accept that result again"))  # fmt: skip


def test_a_file_written_whole_before_the_split_is_read_as_it_is() -> None:
    shipped = REPO / "baselines" / "NVIDIA-H200" / "mlx.json"
    assert not details_path(shipped).exists()
    loaded = load_any(shipped)
    assert loaded.entries
    assert all(entry.result.samples for entry in loaded.entries.values())
