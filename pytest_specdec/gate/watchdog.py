"""The gate never goes quiet: a hosted check that notices a night that did not happen.

A self-hosted night can fail to happen without failing: GitHub disables scheduled
workflows after 60 days without repository activity, an offline runner leaves the job
queued, and a newer run can cancel a queued one. The watchdog runs on a GitHub-hosted
runner, asks for the gate workflow's completed scheduled runs (``gh run list``), and counts
as a night only one that **measured**: a run in which a measuring job (``measure (<leg>)``,
on the self-hosted runner) uploaded its leg's night for the verdict to read (``gh run view
--json jobs``). A run whose verdict job failed because no runner took the measuring jobs
is completed and failed, and is no night. When no night measured within ``hours`` it
re-enables the workflow (``gh workflow enable``), opens (or comments on, or reopens) one
issue, and fails; the first check that finds a measured night again closes it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.alerts import AlertKey, clear_alert, gh_json, gh_output, known_issues, raise_alert, run_url

# Only the scheduled night measures every leg: a manual run may measure one optional leg, without the
# upgrade or on another profile, and a push-triggered run is no night at all.
NIGHTS = ("schedule",)
# The workflow's measuring job (one per leg, on the self-hosted runner) and its step that hands the night on.
MEASURING_JOB = "measure ("
NIGHT_HANDED_ON = "Upload the leg's results, night and logs"


def finished_nights(runs: list[dict[str, object]]) -> list[tuple[datetime, dict[str, object]]]:
    """Completed, not cancelled, scheduled runs with when they finished, newest first."""
    finished = [
        (datetime.fromisoformat(str(run.get("updatedAt", "")).replace("Z", "+00:00")), run)
        for run in runs
        if run.get("status") == "completed" and run.get("event") in NIGHTS and run.get("conclusion") != "cancelled"
    ]
    return sorted(finished, key=lambda item: item[0], reverse=True)


def last_night(runs: list[dict[str, object]]) -> datetime | None:
    """When the newest completed night finished (``None``: none in the list), whether or not it measured."""
    finished = finished_nights(runs)
    return finished[0][0] if finished else None


def measured(jobs: object) -> bool:
    """Whether a run's jobs (``gh run view --json jobs``) include a measuring job that handed its night on."""
    listed = jobs.get("jobs") if isinstance(jobs, dict) else None
    return any(
        str(job.get("name", "")).startswith(MEASURING_JOB)
        and any(step.get("name") == NIGHT_HANDED_ON and step.get("conclusion") == "success"
                for step in job.get("steps") or [] if isinstance(step, dict))
        for job in listed or [] if isinstance(job, dict)
    )  # fmt: skip


def last_measured_night(gh: str, runs: list[dict[str, object]]) -> tuple[datetime | None, int]:
    """When the newest night that measured finished, and how many newer completed ones did not measure."""
    skipped = 0
    for finished, run in finished_nights(runs):
        jobs = gh_json(gh, "run", "view", str(run.get("databaseId", "")), "--json", "jobs")
        if measured(jobs):
            return finished, skipped
        skipped += 1
    return None, skipped


def check_nights(gh: str, workflow: str, hours: float, now: datetime | None = None) -> tuple[bool, list[str]]:
    """``(quiet, lines)``: whether no night completed within ``hours``, and what was done."""
    # Scheduled runs only: a week of manual runs would otherwise push the last night out of the 50.
    runs = gh_json(gh, "run", "list", "--workflow", workflow, "--event", "schedule", "--limit", "50",
                   "--json", "databaseId,status,conclusion,event,createdAt,updatedAt")  # fmt: skip
    current = now or datetime.now(UTC)
    last, unmeasured = last_measured_night(gh, runs if isinstance(runs, list) else [])
    key = quiet_key(workflow)
    if last is not None and current - last <= timedelta(hours=hours):
        lines = [f"last night of {workflow} that measured finished {last.isoformat()} — within {hours:g} hours"]
        issue = known_issues(gh).get(key)
        if issue is not None and issue.open:
            lines.append(clear_alert(gh, issue, f"Cleared: {lines[0]}.\n\nWatchdog run: {run_url()}"))
        return False, lines
    said = f"the last finished {last.isoformat()}" if last else "none in its recent runs"
    since = f"; {unmeasured} later scheduled run(s) completed without measuring" if unmeasured else ""
    lines = [f"no night of {workflow} has measured for {hours:g} hours ({said}{since})"]
    try:
        gh_output(gh, "workflow", "enable", workflow)
        lines.append(f"re-enabled {workflow} (GitHub disables scheduled workflows after 60 days without activity)")
    except SpecdecUsageError as error:
        lines.append(f"could not re-enable {workflow}: {error}")
    body = (
        f"{lines[0]}.\n\nLikely causes: the self-hosted runner is offline (its measuring jobs never ran, so the "
        "verdict had no night to read), the scheduled workflow was disabled "
        "after 60 days without repository activity, or a queued night was cancelled by a newer run.\n\n"
        f"Watchdog run: {run_url()}\n"
    )
    lines.append(raise_alert(gh, key, body, known_issues(gh)))
    return True, lines


def quiet_key(workflow: str) -> AlertKey:
    """The watchdog's one issue: no night measured (per workflow; a fleet's runners each have their legs)."""
    return AlertKey("every machine class", "every leg", "the nightly gate", "no night measured", workflow)
