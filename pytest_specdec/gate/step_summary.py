"""The step summary of one leg: its state, its findings, tonight's release changes, erosion, the report."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from pytest_specdec.gate.runner_state import leg_history
from pytest_specdec.gate.runs import Leg
from pytest_specdec.store.night_statistics import erosions


def leg_summary(
    backend: str,
    out: Path,
    baselines: Path,
    machine_class: str,
    status: Leg,
    *,
    findings: Sequence[str] = (),
) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``; ``findings`` are the night's, each in its own word."""
    lines = [f"## specdec gate: {backend} on {machine_class}", ""]
    reason = status.reason
    if status.measurable:
        lines.append(f"**measured** (pytest exit {status.pytest_exit})")
    elif status.required:
        lines.append(f"**FAILED — required leg not measurable**: {reason}")
    else:
        lines.append(f"**warning — optional leg not measurable**: {reason}")
    lines += [f"- {line}" for line in findings]
    changes_file = out / "release-changes.json"
    if changes_file.is_file():
        changes = json.loads(changes_file.read_text(encoding="utf-8"))
        lines += ["", "Releases changed by tonight's upgrade:" if changes else "No release changed tonight."]
        lines += [f"- {line}" for line in changes]
    history = leg_history(backend, baselines, machine_class)
    trends = erosions(history)
    if trends:
        lines += ["", "Eroding (no verdict flipped yet):", *[f"- {trend.text}" for trend in trends]]
    if len({night.release for night in history}) > 1:
        from pytest_specdec.render.plots import history_plot

        history_plot(history, out / "history.png", f"{backend} on {machine_class}: speedup by release")
        lines += ["", "History plot: `history.png` in this leg's artifact."]
    report = out / "report.md"
    if report.is_file():
        lines += ["", report.read_text(encoding="utf-8").rstrip()]
    return "\n".join(lines) + "\n"
