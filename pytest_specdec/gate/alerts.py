"""Telling people: an issue found again by its exact title, and a webhook.

Which findings become issues, and their titles, is :mod:`pytest_specdec.gate.verdict`'s.
"""

from __future__ import annotations

import json
import os
import subprocess

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.store.records import RunRecord


def gh_output(gh: str, *args: str) -> str:
    """What ``gh ARGS`` prints; a failure is one line naming the command."""
    done = subprocess.run([gh, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SpecdecUsageError(f"'gh {' '.join(args[:2])}' failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def find_issue(gh: str, title: str) -> int | None:
    """The open issue titled exactly ``title``: a phrase search narrows, an exact comparison decides.

    GitHub's search matches words, not titles (an unquoted search also finds longer titles
    with the same words), and a phrase cannot hold a double quote, so the answer is always
    compared with the title itself.
    """
    phrase = title.replace('"', " ")
    listed = json.loads(
        gh_output(gh, "issue", "list", "--state", "open", "--search", f'"{phrase}" in:title',
                  "--json", "number,title", "--limit", "100") or "[]"
    )  # fmt: skip
    numbers = [int(issue["number"]) for issue in listed if issue.get("title") == title]
    return min(numbers) if numbers else None


def post_issue(gh: str, title: str, body: str) -> str:
    """Comment on the open issue titled ``title``, or open it; what was done."""
    number = find_issue(gh, title)
    if number is not None:
        gh_output(gh, "issue", "comment", str(number), "--body", body)
        return f"commented on #{number}: {title}"
    gh_output(gh, "issue", "create", "--title", title, "--body", body)
    return f"opened: {title}"


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
