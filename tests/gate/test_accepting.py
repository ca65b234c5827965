"""The night's accept pull request: candidates merged into baselines/, releases pinned, tampering refused."""

from __future__ import annotations

from pathlib import Path

from pytest_specdec.gate.accepting import accept_from_artifacts
from pytest_specdec.gate.lockfile import Pin, read_pins
from pytest_specdec.store.baselines import BaselineEntry, BaselineFile, BaselineStore, baseline_key
from pytest_specdec.store.files import dumps
from pytest_specdec.store.records import Provenance, RunRecord


def test_candidates_become_accepted_baselines_and_their_releases_are_pinned(
    tmp_path: Path, sample_run: RunRecord
) -> None:
    record = sample_run.comparisons[0]
    leg = tmp_path / "artifacts" / "specdec-mlx"
    leg.mkdir(parents=True)
    entry = BaselineEntry(record, Provenance.MEASURED, "2026-12-01T03:00:00+00:00")
    candidates = BaselineFile(sample_run.machine_class, "mlx", {baseline_key(record): entry})
    (leg / "candidates.json").write_text(dumps(candidates))
    ran = Pin("mlx-lm", "0.33.0", ("cd" * 32,))
    (leg / "gate-lock.txt").write_text(ran.line + "\n")
    lock = tmp_path / "baselines" / sample_run.machine_class / "gate-lock.txt"
    lock.parent.mkdir(parents=True)
    kept = Pin("numpy", "2.4.6", ("ab" * 32,))
    lock.write_text(f"mlx-lm==0.32.0 --hash=sha256:{'ef' * 32}\n{kept.line}\n")
    lines, machines = accept_from_artifacts(tmp_path / "artifacts", tmp_path / "baselines")
    assert lines[0].startswith(f"accepted 1 candidate(s) of {sample_run.machine_class}/mlx: wrote ")
    stored = BaselineStore(tmp_path / "baselines", sample_run.machine_class).load("mlx")
    assert list(stored.entries) == [baseline_key(record)]
    assert read_pins(lock) == {"mlx-lm": ran, "numpy": kept}, "the environment that ran, merged into the lock"
    assert machines == {sample_run.machine_class}


def test_a_lock_from_the_artifact_without_hashes_is_refused(tmp_path: Path, sample_run: RunRecord) -> None:
    record = sample_run.comparisons[0]
    leg = tmp_path / "artifacts" / "specdec-mlx"
    leg.mkdir(parents=True)
    entry = BaselineEntry(record, Provenance.MEASURED, "2026-12-01T03:00:00+00:00")
    (leg / "candidates.json").write_text(dumps(BaselineFile(sample_run.machine_class, "mlx", {"k": entry})))
    (leg / "gate-lock.txt").write_text("mlx-lm==0.33.0\n")
    lines, machines = accept_from_artifacts(tmp_path / "artifacts", tmp_path / "baselines")
    assert lines == [lines[0]]
    assert lines[0].startswith("refused: ")
    assert machines == set()
    assert not (tmp_path / "baselines").exists(), "a leg is accepted whole or not at all"


def test_a_tampered_candidates_file_is_refused_with_one_line(tmp_path: Path) -> None:
    leg = tmp_path / "artifacts" / "specdec-mlx"
    leg.mkdir(parents=True)
    (leg / "candidates.json").write_text('{"schema_version": 2, "machine_class": "M", "backend": "mlx", "entries": 1}')
    (line,), machines = accept_from_artifacts(tmp_path / "artifacts", tmp_path / "baselines")
    assert machines == set()
    assert line.startswith("refused: ")
    assert "\n" not in line
    assert not (tmp_path / "baselines").exists()
