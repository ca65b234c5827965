"""The runner's state is data, checked on read: a file that does not validate is set aside, never trusted."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_specdec.gate.budget import read_timings
from pytest_specdec.gate.runner_state import leg_history, state_root


def test_the_state_folder_is_one_per_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPECDEC_GATE_STATE")
    monkeypatch.setenv("GITHUB_REPOSITORY", "owner/project")
    assert state_root() == Path.home() / ".specdec-gate" / "owner+project"


@pytest.mark.parametrize("text", ['["not", "an", "object"]', "{not json", '{"t": "x"}'])
def test_a_timings_file_that_is_not_ours_is_set_aside_with_one_line(
    runner_state: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = runner_state / "timings" / "M--mlx.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    timings = read_timings(path)
    assert timings == {}
    if text.startswith('{"'):
        assert path.exists(), "a valid object with nothing usable is kept"
        return
    (aside,) = path.parent.glob("M--mlx.json.set-aside-*")
    assert aside.read_text() == text
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"specdec gate: set aside {path} (")


def test_a_torn_runner_history_is_set_aside_and_the_repository_history_still_read(
    tmp_path: Path, runner_state: Path
) -> None:
    (runner_state / "history").mkdir(parents=True)
    (runner_state / "history" / "M.jsonl").write_text('{"backend": "mlx"}\nnot json at all\n{"backend": "mlx"}\n')
    (tmp_path / "baselines" / "history").mkdir(parents=True)
    (tmp_path / "baselines" / "history" / "M.jsonl").write_text(
        '{"time": "t", "machine_class": "M", "backend": "mlx", "key": "k", "nodeid": "n", "category": "code", '
        '"verdict": "holds", "release": "1", "speedup": {"estimate": 1.0, "low": 0.9, "high": 1.1}}\n'
    )
    lines = leg_history("mlx", tmp_path / "baselines", "M")
    assert [night.key for night in lines] == ["k"]
    assert list((runner_state / "history").glob("M.jsonl.set-aside-*"))
