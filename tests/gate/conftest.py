"""The gate's tests keep the runner's state folder in a temporary directory."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def runner_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "runner-state"
    monkeypatch.setenv("SPECDEC_GATE_STATE", str(state))
    return state


def write_pyproject(root: Path, text: str) -> Path:
    (root / "pyproject.toml").write_text(text, encoding="utf-8")
    return root
