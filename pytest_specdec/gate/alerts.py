"""Telling people: one GitHub issue per (machine class, backend, claim), and a webhook.

``alert`` comments on the open issue with the same title, or opens one, through ``gh``;
its body names the release change that the upgrade step recorded. Inconclusive,
undecided, re-baselined or drifted results open nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.records import ComparisonRecord, RunRecord


def issue_title(machine_class: str, backend: str, record: ComparisonRecord) -> str:
    """One title per (machine class, backend, claim)."""
    claim = f"claim {record.claim_id}" if record.claim_id else record.nodeid.split("::")[-1]
    return f"specdec: conclusion changed — {claim} on {machine_class} ({backend})"


def _gh(gh: str, *args: str) -> str:
    done = subprocess.run([gh, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"'gh {' '.join(args[:2])}' failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def post_issue(gh: str, title: str, body: str) -> str:
    """Comment on the open issue titled ``title``, or open it; what was done."""
    listed = json.loads(_gh(gh, "issue", "list", "--state", "open", "--search", f"{title} in:title",
                            "--json", "number,title", "--limit", "100") or "[]")  # fmt: skip
    match = next((issue for issue in listed if issue.get("title") == title), None)
    if match is not None:
        _gh(gh, "issue", "comment", str(match["number"]), "--body", body)
        return f"commented on #{match['number']}: {title}"
    _gh(gh, "issue", "create", "--title", title, "--body", body)
    return f"opened: {title}"


def alert(
    run: RunRecord, confirmed: Sequence[ComparisonRecord], gh: str, run_url: str, release_changes: Sequence[str] = ()
) -> list[str]:
    """Create or comment on one issue per (machine class, backend, claim); returns what was done.

    ``release_changes`` are the upgrade step's before → after lines (``mlx-lm 0.32.2 → 0.33.0``).
    """
    groups: dict[str, list[ComparisonRecord]] = {}
    for record in confirmed:
        groups.setdefault(issue_title(run.machine_class, record.backend, record), []).append(record)
    changed = [f"- {line}" for line in release_changes] or ["- none recorded (the upgrade step did not run)"]
    actions = []
    for title, records in groups.items():
        lines = [f"- `{r.nodeid}` [{r.category}]: {r.check.message if r.check else r.judgement.shown}" for r in records]
        body = "\n".join(
            [f"Confirmed by a re-run. Run: {run_url}", "", *lines, "", "Releases changed by tonight's upgrade:",
             *changed, ""]
        )  # fmt: skip
        actions.append(post_issue(gh, title, body))
    return actions


def verdicts_payload(run: RunRecord) -> dict[str, object]:
    """The verdict JSON a webhook receives."""
    return {
        "machine_class": run.machine_class,
        "finished": run.finished,
        "comparisons": [
            {
                "nodeid": r.nodeid,
                "backend": r.backend,
                "release": r.release,
                "category": r.category,
                "speedup": r.speedup.estimate,
                "interval": [r.speedup.low, r.speedup.high],
                "verdict": r.judgement.shown,
                "change": r.check.change if r.check else None,
            }
            for r in run.comparisons
        ],
    }


def notify(run: RunRecord, url: str) -> str:
    """POST the verdicts; a webhook that fails is reported, never fatal."""
    import httpx

    try:
        response = httpx.post(url, json=verdicts_payload(run), timeout=30)
    except httpx.HTTPError as error:
        return f"webhook not reached ({error}) — the gate's result stands"
    return f"webhook answered HTTP {response.status_code}"


def run_url() -> str:
    """This GitHub Actions run's page, from the runner's environment."""
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{os.environ.get('GITHUB_REPOSITORY', '?')}/actions/runs/{os.environ.get('GITHUB_RUN_ID', '?')}"
