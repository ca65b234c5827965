"""The ledger: checks at measure time, writes once at the end, never on interruption or failure."""

from __future__ import annotations

import errno
import json
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pytest_specdec.store.baselines import BaselineEntry, BaselineStore, baseline_key, load_any
from pytest_specdec.store.ledger import BaselineLedger, LedgerPolicy
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion, Provenance

Factory = Callable[..., ComparisonRecord]


def ledger(root: Path, **policy: object) -> BaselineLedger:
    return BaselineLedger(BaselineStore(root, "M"), LedgerPolicy(**policy))  # type: ignore[arg-type]


def test_a_result_without_baseline_is_new_and_becomes_a_candidate(tmp_path: Path, make_record: Factory) -> None:
    book = ledger(tmp_path)
    checked = book.check(make_record("code", 0.94, "holds", None))
    assert checked.check is not None
    assert checked.check.change is Change.NEW
    report = book.finish(interrupted=False, collected=None)
    assert any("written as candidates" in line for line in report.lines)
    assert book.store.path("mlx", candidates=True).is_file()
    assert not book.store.path("mlx").exists(), "a candidate is never accepted without --specdec-update-baselines"


def test_a_flip_fails_unless_updating_and_update_accepts_it(tmp_path: Path, make_record: Factory) -> None:
    old = make_record("code", 0.94, "holds", None)
    store = BaselineStore(tmp_path, "M")
    store.write("mlx", {baseline_key(old): BaselineEntry(old, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")})
    new = replace(make_record("code", 1.41, "refuted", None), release="mlx-lm 0.34.0")
    strict = ledger(tmp_path)
    flipped = strict.check(new)
    assert flipped.check is not None
    assert flipped.check.change is Change.FLIP
    assert "mlx-lm 0.33.0 → 0.34.0" in (strict.decide(flipped).failure or "")
    accepting = ledger(tmp_path, update=True)
    assert accepting.decide(accepting.check(new)).failure is None
    accepting.finish(interrupted=False, collected=None)
    stored = BaselineStore(tmp_path, "M").load("mlx").entries[baseline_key(new)]
    assert stored.result.judgement.conclusion is Conclusion.REFUTED
    assert stored.result.check is None


def test_an_interrupted_session_keeps_its_finished_comparisons_as_history_only(
    tmp_path: Path, make_record: Factory
) -> None:
    """Ctrl-C keeps what finished, marked interrupted; nothing is accepted or proposed for acceptance."""
    book = ledger(tmp_path, update=True)
    book.check(make_record("code", 0.94, "holds", None))
    book.check(make_record("prose", 1.1, "holds", None))
    (line,) = book.finish(interrupted=True, collected=None).lines
    history = tmp_path / "history" / "M.jsonl"
    assert line.startswith(f"interrupted: kept the 2 finished comparison(s) as history lines in {history}, marked")
    kept = [json.loads(text) for text in history.read_text().splitlines()]
    assert [(k["category"], k["interrupted"], k["accepted"]) for k in kept] == [("code", True, False),
                                                                             ("prose", True, False)]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history"], "no baseline, no candidate, no lock beside them"
    assert sorted(p.name for p in (tmp_path / "history").iterdir()) == [".gitignore", ".specdec.lock", "M.jsonl"]
    assert ledger(tmp_path).finish(interrupted=True, collected=set()).lines == (
        "interrupted before any comparison finished: nothing to keep",
    )


def test_a_failed_comparison_is_never_a_baseline_but_is_history(tmp_path: Path, make_record: Factory) -> None:
    book = ledger(tmp_path, update=True)
    failed = make_record("code", 0.94, "holds", None)
    book.check(replace(failed, judgement=replace(failed.judgement, conclusion=Conclusion.FAILED)))
    report = book.finish(interrupted=False, collected=None)
    assert not book.store.path("mlx").exists()
    assert any(line.startswith("history: 1 line(s)") for line in report.lines)


def test_stale_baselines_are_reported_only_for_whole_folder_runs(tmp_path: Path, make_record: Factory) -> None:
    gone = make_record("code", 0.94, "holds", None)
    BaselineStore(tmp_path, "M").write(
        "mlx", {baseline_key(gone): BaselineEntry(gone, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")}
    )
    book = ledger(tmp_path, write=False)
    book.check(replace(gone, nodeid="benchmarks/test_other.py::test"))
    assert book.finish(interrupted=False, collected=None).lines == ()
    lines = book.finish(interrupted=False, collected={"benchmarks/test_other.py::test"}, scopes=("benchmarks",)).lines
    assert len(lines) == 1
    assert lines[0].startswith("stale baseline:")


def test_inconclusive_against_a_decisive_baseline_is_undecided_never_re_confirmed(
    tmp_path: Path, make_record: Factory
) -> None:
    old = make_record("code", 0.94, "holds", None)
    BaselineStore(tmp_path, "M").write(
        "mlx", {baseline_key(old): BaselineEntry(old, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")}
    )
    new = replace(make_record("code", 1.2, "inconclusive", None), release="mlx-lm 0.34.0")
    book = ledger(tmp_path)
    checked = book.check(new)
    assert checked.check is not None
    assert checked.check.change is Change.UNDECIDED
    assert "not a flip and not a re-confirmation" in checked.check.message
    assert book.decide(checked).failure is None


def test_a_baseline_of_another_protocol_is_re_baselined_never_a_flip(tmp_path: Path, make_record: Factory) -> None:
    old = make_record("code", 0.94, "holds", None)
    BaselineStore(tmp_path, "M").write(
        "mlx", {baseline_key(old): BaselineEntry(old, Provenance.MEASURED, "2026-11-01T00:00:00+00:00")}
    )
    new = replace(make_record("code", 1.41, "refuted", None), release="mlx-lm 0.34.0", protocol=old.protocol + 1)
    book = ledger(tmp_path)
    checked = book.check(new)
    assert checked.check is not None
    assert checked.check.change is Change.REBASELINE
    assert f"protocol {old.protocol}, this result under {new.protocol}" in checked.check.message
    assert book.decide(checked).failure is None, "a tool change is never blamed on a backend release"
    book.finish(interrupted=False, collected=None)
    assert baseline_key(new) in load_any(BaselineStore(tmp_path, "M").path("mlx", candidates=True)).entries
    assert BaselineStore(tmp_path, "M").load("mlx").entries[baseline_key(old)].result.protocol == old.protocol


def test_a_published_figure_is_never_a_baseline_to_flip_against(tmp_path: Path, make_record: Factory) -> None:
    """A first night on the document's own chip is not yet gated, whatever the document measured there."""
    old = make_record("code", 0.94, "holds", None)
    BaselineStore(tmp_path, "M").write(
        "mlx", {baseline_key(old): BaselineEntry(old, Provenance.PUBLISHED, "2026-11-01T00:00:00+00:00")}
    )
    new = replace(make_record("code", 1.41, "refuted", None), release="mlx-lm 0.34.0")
    book = ledger(tmp_path)
    checked = book.check(new)
    assert checked.check is not None
    assert checked.check.change is Change.NEW
    assert checked.check.message.startswith("not yet gated:")
    assert book.decide(checked).failure is None


def test_an_accept_the_disk_cannot_hold_is_never_called_accepted_in_history(
    tmp_path: Path, make_record: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #51: a failed accept on a full disk left history lines saying ``"accepted": true``."""

    def full(self: BaselineStore, backend: str, entries: object, candidates: bool = False) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(self.path(backend)))

    book = ledger(tmp_path, update=True)
    book.check(make_record("code", 0.94, "holds", None))
    monkeypatch.setattr(BaselineStore, "write", full)
    report = book.finish(interrupted=False, collected=None)
    assert re.match(r"could not write the accepted baselines \(.*mlx\.json: No space left", report.error or "")
    (line,) = (tmp_path / "history" / "M.jsonl").read_text().splitlines()
    assert json.loads(line)["accepted"] is False
    assert not (tmp_path / "M" / "mlx.json").exists()


def test_an_accept_cut_short_after_one_backend_keeps_that_backends_history(
    tmp_path: Path, make_record: Factory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C while the second backend's baselines are written: the first backend's accept happened and its
    history line says so; the second's says it did not (review of issue #51's fix)."""
    real = BaselineStore.write

    def cut(self: BaselineStore, backend: str, entries: Any, candidates: bool = False) -> Path | None:
        if backend == "zz":
            raise KeyboardInterrupt
        return real(self, backend, entries, candidates=candidates)

    book = ledger(tmp_path, update=True)
    book.check(make_record("code", 0.94, "holds", None))
    book.check(replace(make_record("prose", 0.9, "holds", None), backend="zz"))
    monkeypatch.setattr(BaselineStore, "write", cut)
    with pytest.raises(KeyboardInterrupt):
        book.finish(interrupted=False, collected=None)
    lines = [json.loads(line) for line in (tmp_path / "history" / "M.jsonl").read_text().splitlines()]
    assert sorted((line["backend"], line["accepted"]) for line in lines) == [("mlx", True), ("zz", False)]
    assert (tmp_path / "M" / "mlx.json").exists()


def test_drift_is_raised_at_its_own_level_not_the_runs_confidence(tmp_path: Path, make_record: Factory) -> None:
    """A nightly alarm read at the run's 2 % would cry wolf twice in a hundred quiet nights: drift has its own
    level (``--specdec-drift-alpha``, 1 %), applied over the run's comparisons by Benjamini–Hochberg."""
    from pytest_specdec.store.records import CheckRecord

    def drifted(**policy: object) -> list[str]:
        book = ledger(tmp_path, write=False, **policy)
        for category, p_value in (("code", 0.015), ("copy", 0.004)):
            check = CheckRecord(Change.UNCHANGED, "agrees", drift_ratio=1.1, drift_p_value=p_value)
            book.records.append(replace(make_record(category, 1.2, "holds", None), check=check))
        return [record.category for record in book.control_drift()]

    assert drifted() == ["copy"], "the default level, 1 %: p=0.015 is no drift"
    assert drifted(drift_alpha=0.04) == ["code", "copy"]
    assert drifted(drift_alpha=0.04, min_effect=0.2) == [], "a 10 % move under a 20 % minimum is never drift"


def test_every_tested_comparison_counts_in_the_correction_before_the_least_move_is_asked(
    tmp_path: Path, make_record: Factory
) -> None:
    """Benjamini–Hochberg over every comparison whose drift was tested: one under the least move still counts, so
    a p of 0.009 among two tests at 1 % is no drift (0.009 > 1 % x 1/2), where read alone it would be."""
    from pytest_specdec.store.records import CheckRecord

    def drifted(*tests: tuple[str, float, float]) -> list[str]:
        book = ledger(tmp_path, write=False)
        for category, ratio, p_value in tests:
            check = CheckRecord(Change.UNCHANGED, "agrees", drift_ratio=ratio, drift_p_value=p_value)
            book.records.append(replace(make_record(category, 1.2, "holds", None), check=check))
        return [record.category for record in book.control_drift()]

    assert drifted(("code", 1.1, 0.009)) == ["code"]
    assert drifted(("code", 1.1, 0.009), ("copy", 1.01, 0.6)) == [], "the small move is a test too"
    assert drifted(("code", 1.1, 0.004), ("copy", 1.01, 0.001)) == ["code"], "discovered, but under 5 %: no drift"


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "no such history file"),
        ("{not json\n", ":1 is not valid JSON"),
        ('{"torn', "a torn last line (an interrupted append) was skipped"),
    ],
    ids=["missing", "malformed", "torn"],
)
def test_a_run_history_that_cannot_be_read_is_one_line_saying_what_it_costs(
    tmp_path: Path, content: str | None, said: str
) -> None:
    """--specdec-run-history (the gate's runner history) is optional: never silent when it is not read."""
    path = tmp_path / "runner.jsonl"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    kept = BaselineLedger(BaselineStore(tmp_path / "baselines", "M"), LedgerPolicy(), history_sources=(path,))
    assert len(kept.unread) == 1
    assert said in kept.unread[0]
    assert str(path) in kept.unread[0]
    assert "not counted in this machine's night-to-night spread" in kept.unread[0]
    quiet = BaselineLedger(BaselineStore(tmp_path / "baselines", "M"), LedgerPolicy())
    assert quiet.unread == [], "the repository's own history, absent, is no news"
