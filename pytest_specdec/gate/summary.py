"""The step summary of one leg: its state, tonight's release changes, erosion, the report.

A checkout is cleaned before every job, so the nights' history lines would be lost
with it: the measure step also appends them to the runner's own state folder
(``SPECDEC_GATE_STATE``, default ``~/.specdec-gate``), and trends read both histories.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_specdec.store.baselines import BaselineStore, history_line, read_history
from pytest_specdec.store.records import RunRecord
from pytest_specdec.store.trends import Erosion, erosions


def state_root() -> Path:
    """The runner's own folder for what outlives a checkout, one per repository."""
    explicit = os.environ.get("SPECDEC_GATE_STATE", "")
    if explicit:
        return Path(explicit)
    repository = os.environ.get("GITHUB_REPOSITORY", "") or "local"
    return Path.home() / ".specdec-gate" / repository.replace("/", "+")


def keep_history(run: RunRecord) -> Path:
    """Append a measured night's results to the runner's history."""
    lines = [history_line(record, run.machine_class, False, run.finished) for record in run.comparisons]
    return BaselineStore(state_root(), run.machine_class).append_history(lines)


def leg_history(backend: str, baselines: Path, machine_class: str) -> list[dict[str, Any]]:
    """This backend's history lines from the repository and the runner, each once."""
    seen: set[tuple[str, str, str]] = set()
    lines: list[dict[str, Any]] = []
    for root in (baselines, state_root()):
        path = root / "history" / f"{machine_class}.jsonl"
        for line in read_history(path, []) if path.is_file() else []:
            # The same result reaches both histories with different time stamps (the ledger's and the run's).
            mark = (str(line.get("key")), str(line.get("release")), json.dumps(line.get("speedup"), sort_keys=True))
            if line.get("backend") == backend and mark not in seen:
                seen.add(mark)
                lines.append(line)
    return lines


def leg_erosions(backend: str, baselines: Path, machine_class: str) -> list[Erosion]:
    """The conclusions of ``backend`` creeping toward a bound."""
    return erosions(leg_history(backend, baselines, machine_class))


def leg_summary(backend: str, out: Path, baselines: Path, machine_class: str, status: Mapping[str, object]) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``."""
    lines = [f"## specdec gate: {backend} on {machine_class}", ""]
    reason = str(status.get("reason", "the measure step did not run"))
    if status.get("measurable"):
        lines.append(f"**measured** (pytest exit {status.get('pytest_exit')})")
    elif status.get("required"):
        lines.append(f"**FAILED — required leg not measurable**: {reason}")
    else:
        lines.append(f"**warning — optional leg not measurable**: {reason}")
    changes_file = out / "release-changes.json"
    if changes_file.is_file():
        changes = json.loads(changes_file.read_text(encoding="utf-8"))
        lines += ["", "Releases changed by tonight's upgrade:" if changes else "No release changed tonight."]
        lines += [f"- {line}" for line in changes]
    history = leg_history(backend, baselines, machine_class)
    trends = erosions(history)
    if trends:
        lines += ["", "Eroding (no verdict flipped yet):", *[f"- {trend.text}" for trend in trends]]
    if len({line.get("release") for line in history}) > 1:
        from pytest_specdec.render.plots import history_plot

        history_plot(history, out / "history.png", f"{backend} on {machine_class}: speedup by release")
        lines += ["", "History plot: `history.png` in this leg's artifact."]
    report = out / "report.md"
    if report.is_file():
        lines += ["", report.read_text(encoding="utf-8").rstrip()]
    return "\n".join(lines) + "\n"
