"""The night's accept pull request: candidates merged into baselines/, releases pinned, tampering refused."""

from __future__ import annotations

from pathlib import Path

from pytest_specdec.gate.accepting import accept_from_artifacts
from pytest_specdec.gate.lockfile import Pin, mark_build, read_pins, write_pins
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
    cmake = Pin("cmake", "4.1.0", ("12" * 32,), build=True)  # a locked sdist's build requirement
    (leg / "gate-lock.txt").write_text(f"{ran.line}\n{Pin('cmake', '4.2.0', ('34' * 32,)).line}\n")
    lock.write_text(f"mlx-lm==0.32.0 --hash=sha256:{'ef' * 32}\n{kept.line}\n{cmake.line}\n")
    lines, machines = accept_from_artifacts(tmp_path / "artifacts", tmp_path / "baselines")
    assert lines[0].startswith(f"accepted 1 candidate(s) of {sample_run.machine_class}/mlx: wrote ")
    stored = BaselineStore(tmp_path / "baselines", sample_run.machine_class).load("mlx")
    assert list(stored.entries) == [baseline_key(record)]
    assert read_pins(lock) == {"mlx-lm": ran, "numpy": kept, "cmake": Pin("cmake", "4.2.0", ("34" * 32,), True)}, (
        "the environment that ran, merged into the lock; a build requirement stays marked '# build'"
    )
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


def _leg(tmp_path: Path, name: str, record: object, machine: str, pin: Pin) -> None:
    leg = tmp_path / "artifacts" / name
    leg.mkdir(parents=True)
    entry = BaselineEntry(record, Provenance.MEASURED, "2026-12-01T03:00:00+00:00")  # type: ignore[arg-type]
    (leg / "candidates.json").write_text(dumps(BaselineFile(machine, "mlx", {baseline_key(record): entry})))  # type: ignore[arg-type]
    (leg / "gate-lock.txt").write_text(pin.line + "\n")


def test_an_older_protocols_candidate_never_replaces_a_newer_baseline(tmp_path: Path, sample_run: RunRecord) -> None:
    from dataclasses import replace

    from pytest_specdec.store.records import MEASUREMENT_PROTOCOL

    newer = replace(sample_run.comparisons[0], protocol=MEASUREMENT_PROTOCOL)
    older = replace(newer, protocol=MEASUREMENT_PROTOCOL - 1, treatment_tps=1.0)
    store = BaselineStore(tmp_path / "baselines", sample_run.machine_class)
    store.write("mlx", {baseline_key(newer): BaselineEntry(newer, Provenance.MEASURED, "2026-11-30")})
    _leg(tmp_path, "specdec-mlx", older, sample_run.machine_class, Pin("mlx-lm", "0.33.0", ("cd" * 32,)))
    lines, _ = accept_from_artifacts(tmp_path / "artifacts", tmp_path / "baselines")
    assert any(line.startswith("kept 1 baseline(s) measured under a newer measurement protocol") for line in lines)
    stored = BaselineStore(tmp_path / "baselines", sample_run.machine_class).load("mlx")
    assert stored.entries[baseline_key(newer)].result.protocol == newer.protocol


def test_two_legs_accepted_together_keep_both_pins(tmp_path: Path, sample_run: RunRecord) -> None:
    """The lock is read, merged and written under the store's lock: a second merge sees the first's pins."""
    import threading

    machine = sample_run.machine_class
    record = sample_run.comparisons[0]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _leg(tmp_path / "a", "specdec-mlx", record, machine, Pin("mlx-lm", "0.33.0", ("cd" * 32,)))
    _leg(tmp_path / "b", "specdec-mlx", record, machine, Pin("numpy", "2.4.6", ("ab" * 32,)))
    store = BaselineStore(tmp_path / "baselines", machine)
    done: list[object] = []
    with store.locked():  # one accepting run holds the lock: the others wait for it, then merge
        runs = [threading.Thread(target=lambda d=d: done.append(accept_from_artifacts(tmp_path / d / "artifacts",
                                                                                       tmp_path / "baselines")))
                for d in ("a", "b")]  # fmt: skip
        for run in runs:
            run.start()
        assert not done, "no merge happens while the lock is held"
    for run in runs:
        run.join(timeout=60)
    assert len(done) == 2
    assert set(read_pins(tmp_path / "baselines" / machine / "gate-lock.txt")) == {"mlx-lm", "numpy"}


def test_a_baseline_from_a_future_or_negative_protocol_is_refused_in_one_line(
    tmp_path: Path, sample_run: RunRecord
) -> None:
    import pytest

    from pytest_specdec.errors import SpecdecUsageError
    from pytest_specdec.store.records import MEASUREMENT_PROTOCOL

    record = sample_run.comparisons[0]
    for protocol, said in (
        (MEASUREMENT_PROTOCOL + 1, "newer than this pytest-specdec's"),
        (-1, "which no release wrote"),
    ):
        root = tmp_path / str(protocol)
        path = root / sample_run.machine_class / "mlx.json"
        path.parent.mkdir(parents=True)
        entry = BaselineEntry(replace_protocol(record, protocol), Provenance.MEASURED, "2026-11-30")
        path.write_text(dumps(BaselineFile(sample_run.machine_class, "mlx", {baseline_key(record): entry})))
        with pytest.raises(SpecdecUsageError, match=said):
            BaselineStore(root, sample_run.machine_class).load("mlx")


def replace_protocol(record: object, protocol: int) -> object:
    from dataclasses import replace

    return replace(record, protocol=protocol)  # type: ignore[type-var]


def test_the_lock_step_marks_build_tools_from_its_platforms_locks(tmp_path: Path) -> None:
    """The environment that ran cannot tell a build tool from the rest: the marks come from the locks of its
    platform (a new machine class's first lock included), by PEP 503 name; another platform's marks do not."""
    for machine, platform, marked in (
        ("A", "darwin-arm64-py3.12", "scikit-build-core"),
        ("B", "linux-x86_64-py3.12", "numpy"),
    ):
        pins = {marked: Pin(marked, "1.0", ("ab" * 32,), build=True)}
        write_pins(tmp_path / machine / "gate-lock.txt", pins, platform)
    ran = {
        "scikit_build_core": Pin("scikit_build_core", "1.1", ("cd" * 32,)),
        "numpy": Pin("numpy", "2.0", ("ef" * 32,)),
    }
    marked = mark_build(ran, tmp_path, "darwin-arm64-py3.12")
    assert {name: pin.build for name, pin in marked.items()} == {"scikit_build_core": True, "numpy": False}
