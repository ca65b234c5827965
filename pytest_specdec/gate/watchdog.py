"""The gate never goes quiet: a hosted check that notices a night that did not happen.

A self-hosted night can fail to happen without failing: GitHub disables scheduled
workflows after 60 days without repository activity, an offline runner leaves the job
queued, and a newer run can cancel a queued one. The watchdog runs on a GitHub-hosted
runner, asks for the gate workflow's completed runs (``gh run list``), and when none
finished within ``hours`` it re-enables the workflow (``gh workflow enable``), opens
(or comments on) one issue, and fails.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.alerts import gh_output, post_issue, run_url

# Only the scheduled night measures every leg: a manual run may measure one optional leg, without the
# upgrade or on another profile, and a push-triggered run is no night at all.
NIGHTS = ("schedule",)


def last_night(runs: list[dict[str, object]]) -> datetime | None:
    """When the newest completed night finished (``None``: none in the list)."""
    finished = [
        datetime.fromisoformat(str(run.get("updatedAt", "")).replace("Z", "+00:00"))
        for run in runs
        if run.get("status") == "completed" and run.get("event") in NIGHTS and run.get("conclusion") != "cancelled"
    ]
    return max(finished) if finished else None


def check_nights(gh: str, workflow: str, hours: float, now: datetime | None = None) -> tuple[bool, list[str]]:
    """``(quiet, lines)``: whether no night completed within ``hours``, and what was done."""
    # Scheduled runs only: a week of manual runs would otherwise push the last night out of the 50.
    listed = gh_output(gh, "run", "list", "--workflow", workflow, "--event", "schedule", "--limit", "50",
                       "--json", "status,conclusion,event,createdAt,updatedAt")  # fmt: skip
    try:
        runs = json.loads(listed or "[]")
    except json.JSONDecodeError:
        raise SpecdecUsageError(f"'gh run list' answered something that is not JSON: {listed[:200]!r}") from None
    current = now or datetime.now(UTC)
    last = last_night(runs if isinstance(runs, list) else [])
    if last is not None and current - last <= timedelta(hours=hours):
        return False, [f"last night of {workflow} finished {last.isoformat()} — within {hours:g} hours"]
    said = f"the last finished {last.isoformat()}" if last else "none in its recent runs"
    lines = [f"no night of {workflow} has completed for {hours:g} hours ({said})"]
    try:
        gh_output(gh, "workflow", "enable", workflow)
        lines.append(f"re-enabled {workflow} (GitHub disables scheduled workflows after 60 days without activity)")
    except SpecdecUsageError as error:
        lines.append(f"could not re-enable {workflow}: {error}")
    body = (
        f"{lines[0]}.\n\nLikely causes: the self-hosted runner is offline, the scheduled workflow was disabled "
        "after 60 days without repository activity, or a queued night was cancelled by a newer run.\n\n"
        f"Watchdog run: {run_url()}\n"
    )
    lines.append(post_issue(gh, f"specdec: no gate night for {hours:g} hours ({workflow})", body))
    return True, lines
