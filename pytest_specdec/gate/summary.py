"""The step summary of one leg: its state, tonight's release changes, erosion, the report."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from pytest_specdec.store.baselines import read_history
from pytest_specdec.store.trends import Erosion, erosions


def leg_erosions(backend: str, baselines: Path, machine_class: str) -> list[Erosion]:
    """The conclusions of ``backend`` creeping toward a bound in this machine class's history."""
    path = baselines / "history" / f"{machine_class}.jsonl"
    if not path.is_file():
        return []
    return erosions([line for line in read_history(path, []) if line.get("backend") == backend])


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
    trends = leg_erosions(backend, baselines, machine_class)
    if trends:
        lines += ["", "Eroding (no verdict flipped yet):", *[f"- {trend.text}" for trend in trends]]
    report = out / "report.md"
    if report.is_file():
        lines += ["", report.read_text(encoding="utf-8").rstrip()]
    return "\n".join(lines) + "\n"
