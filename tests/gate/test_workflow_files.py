"""The gate's workflows and scripts come from the wheel: written into a repository by ``gate init``, and this
project's own ``.github/`` is the same bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_specdec.cli import main
from pytest_specdec.gate.workflow_files import HARDWARE_COPY, shipped, write_gate_files
from pytest_specdec.hardware import lock_platform

REPO = Path(__file__).resolve().parents[2]


def test_this_projects_gate_is_the_shipped_one_byte_for_byte() -> None:
    files = shipped()
    assert len(files) == 6
    for relative, source in files.items():
        assert (REPO / relative).read_text(encoding="utf-8") == source.read_text(encoding="utf-8"), (
            f"{relative} differs from pytest_specdec/gate/templates: edit the template, then "
            "'pytest-specdec gate init --workflows'"
        )
    assert os.access(REPO / ".github" / "scripts" / "gate.sh", os.X_OK)
    assert (REPO / ".github" / "scripts" / "gate.sh").is_symlink(), "the scripts link to the templates: one copy"
    assert not (REPO / ".github" / "scripts" / HARDWARE_COPY).exists(), "this checkout has hardware.py itself"


def test_init_writes_the_gate_into_another_repository_and_keeps_what_it_did_not_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["gate", "init", "--workflows"]) == 0
    said = capsys.readouterr().out
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file())
    assert written == [
        ".github/scripts/gate.sh", ".github/scripts/lock_for_here.py", f".github/scripts/{HARDWARE_COPY}",
        ".github/workflows/specdec-accept.yml", ".github/workflows/specdec-gate-runner.yml",
        ".github/workflows/specdec-gate.yml", ".github/workflows/specdec-watchdog.yml",
    ]  # fmt: skip
    assert "specdec gate: wrote .github/scripts/gate.sh" in said
    assert os.access(tmp_path / ".github" / "scripts" / "gate.sh", os.X_OK)
    gate = tmp_path / ".github" / "scripts" / "gate.sh"
    gate.write_text("# mine\n", encoding="utf-8")
    again = write_gate_files(tmp_path, replace=False)
    assert again.kept == (Path(".github/scripts/gate.sh"),)
    assert len(again.unchanged) == 6
    assert gate.read_text(encoding="utf-8") == "# mine\n"
    assert any("kept .github/scripts/gate.sh: it differs" in line for line in again.lines())
    assert write_gate_files(tmp_path, replace=True).written == (Path(".github/scripts/gate.sh"),)
    assert gate.read_text(encoding="utf-8").startswith("#!/usr/bin/env bash")


def test_the_lock_chooser_reads_the_machine_class_in_a_repository_without_the_package(tmp_path: Path) -> None:
    write_gate_files(tmp_path, replace=False)
    (tmp_path / "baselines" / "Mine").mkdir(parents=True)
    lock = tmp_path / "baselines" / "Mine" / "gate-lock.txt"
    lock.write_text(f"# platform: {lock_platform()}\n", encoding="utf-8")
    environment = {**os.environ, "SPECDEC_MACHINE_CLASS": "Mine"}
    environment.pop("PYTHONPATH", None)  # the copy beside the script, never the package: -S, no site-packages
    done = subprocess.run([sys.executable, "-I", "-S", ".github/scripts/lock_for_here.py", "baselines"], cwd=tmp_path,
                          capture_output=True, text=True, check=False, env=environment)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "baselines/Mine/gate-lock.txt"
    assert "this machine class's lock" in done.stderr
    pin = f"numpy==2.4.6 --hash=sha256:{'ab' * 32}\n"
    lock.write_text(f"# platform: {lock_platform()}\n{pin}{pin.replace('numpy', 'NumPy')}", encoding="utf-8")
    twice = subprocess.run([sys.executable, "-I", "-S", ".github/scripts/lock_for_here.py", "baselines"],
                           cwd=tmp_path, capture_output=True, text=True, check=False, env=environment)  # fmt: skip
    assert twice.returncode == 1, "refused before set-up installs anything"
    assert (
        twice.stderr.strip() == "gate.sh: baselines/Mine/gate-lock.txt pins numpy twice — keep one line per "
        "package (the accept pull request writes it whole)"
    )
    (tmp_path / ".github" / "scripts" / HARDWARE_COPY).unlink()
    gone = subprocess.run([sys.executable, "-I", "-S", ".github/scripts/lock_for_here.py"], cwd=tmp_path,
                          capture_output=True, text=True, check=False, env=environment)  # fmt: skip
    assert gone.returncode == 1
    assert f"no {HARDWARE_COPY} beside lock_for_here.py — run 'pytest-specdec gate init --workflows'" in gone.stderr
