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

A fleet (``[tool.specdec.gate.runners]``) is watched runner by runner: each runner's measuring
jobs are named ``measure (<leg> on <label>)``, and a runner whose jobs have measured no night
within ``hours`` has its own issue, while the others' nights go on counting. A runner just
added is not yet due: until some night has planned its jobs, and for ``hours`` after the first
that did, its silence is not an alarm.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.alerts import AlertKey, clear_alert, gh_json, gh_output, known_issues, raise_alert, run_url

# Only the scheduled night measures every leg: a manual run may measure one optional leg, without the
# upgrade or on another profile, and a push-triggered run is no night at all.
NIGHTS = ("schedule",)
# The workflow's measuring job (one per leg, on the self-hosted runner; "measure (LEG on LABEL)" in a fleet, and
# "night (LABEL) / measure (…)" as GitHub names a called workflow's jobs) and its step that hands the night on.
MEASURING_JOB = re.compile(r"(?:^|/ )measure \((?P<leg>[^()]*?)(?: on (?P<runner>[^()]+))?\)$")
NIGHT_HANDED_ON = "Upload the leg's results, night and logs"


def finished_nights(
    runs: list[dict[str, object]], *, still_running: bool = False
) -> list[tuple[datetime, dict[str, object]]]:
    """Completed, not cancelled, scheduled runs with when they finished (last updated), newest first;
    ``still_running``: runs in progress too — in a fleet a night's run stays in progress while one runner's
    jobs wait in its queue, and the other runners' nights in it have measured all the same."""
    states = ("completed", "in_progress", "queued") if still_running else ("completed",)
    finished = [
        (datetime.fromisoformat(str(run.get("updatedAt", "")).replace("Z", "+00:00")), run)
        for run in runs
        if run.get("status") in states and run.get("event") in NIGHTS and run.get("conclusion") != "cancelled"
    ]
    return sorted(finished, key=lambda item: item[0], reverse=True)


def last_night(runs: list[dict[str, object]]) -> datetime | None:
    """When the newest completed night finished (``None``: none in the list), whether or not it measured."""
    finished = finished_nights(runs)
    return finished[0][0] if finished else None


def planned(jobs: object, runner: str | None) -> bool:
    """Whether a run's jobs include a measuring job of ``runner`` (``None``: of any runner) at all, measured or not.

    >>> planned({"jobs": [{"name": "night (m4) / measure (mlx on m4)"}]}, "m4"), planned({"jobs": []}, "m4")
    (True, False)
    """
    listed = jobs.get("jobs") if isinstance(jobs, dict) else None
    return any(
        (name := MEASURING_JOB.search(str(job.get("name", "")))) is not None
        and (runner is None or name.group("runner") == runner)
        for job in listed or []
        if isinstance(job, dict)
    )


def measured(jobs: object, runner: str = "") -> bool:
    """Whether a run's jobs (``gh run view --json jobs``) include a measuring job (of ``runner``, a fleet's label;
    ``""``: any) that handed its night on.

    >>> step = {"name": NIGHT_HANDED_ON, "conclusion": "success"}
    >>> jobs = {"jobs": [{"name": "night (m4) / measure (mlx on m4)", "steps": [step]}]}
    >>> measured(jobs, "m4"), measured(jobs, "m1"), measured(jobs)
    (True, False, True)
    """
    listed = jobs.get("jobs") if isinstance(jobs, dict) else None
    for job in listed or []:
        name = MEASURING_JOB.search(str(job.get("name", ""))) if isinstance(job, dict) else None
        if name is None or (runner and name.group("runner") != runner):
            continue
        steps = [step for step in job.get("steps") or [] if isinstance(step, dict)]
        if any(step.get("name") == NIGHT_HANDED_ON and step.get("conclusion") == "success" for step in steps):
            return True
    return False


@dataclass(frozen=True)
class RunnerNights:
    """What the listed runs say of one runner."""

    last: datetime | None  # when its newest night that measured finished
    unmeasured: int  # newer completed nights that did not measure on it
    first_planned: datetime | None = None  # never measured: when the oldest run that planned its jobs began
    plan_since: datetime | None = None  # never planned: when the newest run that planned any runner's jobs began


def last_measured_night(
    gh: str, runs: list[dict[str, object]], runners: Sequence[str] = ("",)
) -> dict[str, RunnerNights]:
    """Per runner: its newest night that measured and the completed ones since that did not; for a fleet's runner
    that measured none, when the oldest scheduled run that planned its measuring jobs began (cancelled runs too),
    or — planned by none — when the newest run that planned anyone's did. Each run's jobs are asked for once."""
    found: dict[str, RunnerNights] = {}
    skipped = dict.fromkeys(runners, 0)
    jobs_of: dict[str, object] = {}

    def jobs(run: dict[str, object]) -> object:
        number = str(run.get("databaseId", ""))
        if number not in jobs_of:
            jobs_of[number] = gh_json(gh, "run", "view", number, "--json", "jobs")
        return jobs_of[number]

    for finished, run in finished_nights(runs, still_running=len(skipped) > 1 or "" not in skipped):
        if len(found) == len(skipped):
            break
        for runner in skipped:
            if runner not in found and measured(jobs(run), runner):
                found[runner] = RunnerNights(finished, skipped[runner])
            elif runner not in found:
                skipped[runner] += 1
    unplanned = [runner for runner in runners if runner and runner not in found]
    first_planned: dict[str, datetime] = {}
    plan_since: datetime | None = None
    for run in sorted((r for r in runs if r.get("event") in NIGHTS), key=_created, reverse=True) if unplanned else []:
        if plan_since is None and planned(jobs(run), None):
            plan_since = _created(run)
        for runner in unplanned:
            if planned(jobs(run), runner):
                first_planned[runner] = _created(run)  # newest first: the last one kept is the oldest
    return {
        runner: found.get(runner)
        or RunnerNights(None, count, first_planned.get(runner), None if runner in first_planned else plan_since)
        for runner, count in skipped.items()
    }


def _created(run: Mapping[str, object]) -> datetime:
    """When a run was created (its night began), UTC; the epoch when GitHub gave no readable time."""
    try:
        return datetime.fromisoformat(str(run.get("createdAt", "")).replace("Z", "+00:00"))
    except ValueError:
        return datetime.fromtimestamp(0, UTC)


def check_nights(
    gh: str, workflow: str, hours: float, now: datetime | None = None, runners: Sequence[str] = ("",)
) -> tuple[bool, list[str]]:
    """``(quiet, lines)``: whether some runner (``runners``: a fleet's labels; ``("",)``: the one runner) has measured
    no night within ``hours``, and what was done."""
    # Scheduled runs only: a week of manual runs would otherwise push the last night out of the 50.
    runs = gh_json(gh, "run", "list", "--workflow", workflow, "--event", "schedule", "--limit", "50",
                   "--json", "databaseId,status,conclusion,event,createdAt,updatedAt")  # fmt: skip
    current = now or datetime.now(UTC)
    lasts = last_measured_night(gh, runs if isinstance(runs, list) else [], runners)

    def recent(last: datetime | None) -> bool:
        return last is not None and current - last <= timedelta(hours=hours)

    known = known_issues(gh)

    def not_yet_due(runner: str) -> bool:
        """A fleet's runner that never measured, whose first planned night began within ``hours`` — or, planned by
        no run, added after a run that planned the others within ``hours``: its first night is still to come (a Mac
        just added is not yet quiet). Where no recent run planned anyone's jobs the plan is broken, and the runner
        is due like the rest; a runner whose quiet issue is open was due before and is never new again."""
        seen = lasts[runner]
        issue = known.get(quiet_key(workflow, runner))
        if not runner or seen.last is not None or (issue is not None and issue.open):
            return False
        return recent(seen.first_planned) or (seen.first_planned is None and recent(seen.plan_since))

    quiet = [runner for runner in runners if not recent(lasts[runner].last) and not not_yet_due(runner)]
    lines: list[str] = []
    if quiet:
        try:
            gh_output(gh, "workflow", "enable", workflow)
            enabled = f"re-enabled {workflow} (GitHub disables scheduled workflows after 60 days without activity)"
        except SpecdecUsageError as error:
            enabled = f"could not re-enable {workflow}: {error}"
    for runner in runners:
        last, unmeasured, first = lasts[runner].last, lasts[runner].unmeasured, lasts[runner].first_planned
        on = f" on runner {runner}" if runner else ""
        key = quiet_key(workflow, runner)
        if runner not in quiet:
            if last is None:
                line = (
                    f"runner {runner} has measured no night of {workflow} yet: "
                    + (f"its first planned night began {first.isoformat()}, within {hours:g} hours"
                       if first else "no night has planned its jobs yet (added since the last that planned the others)")
                    + " — not yet due"
                )  # fmt: skip
            else:
                line = (
                    f"last night of {workflow}{on} that measured finished {last.isoformat()} — within {hours:g} hours"
                )
            lines.append(line)
            issue = known.get(key)
            if issue is not None and issue.open and last is not None:  # only a night that measured clears it
                lines.append(clear_alert(gh, issue, f"Cleared: {line}.\n\nWatchdog run: {run_url()}"))
            continue
        said = f"the last finished {last.isoformat()}" if last else "none in its recent runs"
        since = f"; {unmeasured} later scheduled run(s) completed without measuring" if unmeasured else ""
        lines += [f"no night of {workflow}{on} has measured for {hours:g} hours ({said}{since})", enabled]
        runner_said = f"the self-hosted runner{' ' + runner if runner else ''} is offline"
        body = (
            f"{lines[-2]}.\n\nLikely causes: {runner_said} (its measuring jobs never ran, so the "
            "verdict had no night to read), the scheduled workflow was disabled "
            "after 60 days without repository activity, or a queued night was cancelled by a newer run.\n\n"
            f"Watchdog run: {run_url()}\n"
        )
        lines.append(raise_alert(gh, key, body, known))
    before = known.get(quiet_key(workflow)) if "" not in runners else None
    watched = [runner for runner in runners if runner not in quiet and lasts[runner].last is not None]
    if before is not None and before.open and watched:  # the one runner's issue, from before the gate ran a fleet
        line = (
            f"{workflow} now runs a fleet, watched runner by runner; runner {watched[0]} measured a night within "
            f"{hours:g} hours"
        )
        lines.append(clear_alert(gh, before, f"Cleared: {line}.\n\nWatchdog run: {run_url()}"))
    return bool(quiet), list(dict.fromkeys(lines))


def quiet_key(workflow: str, runner: str = "") -> AlertKey:
    """The watchdog's issue: no night measured (per workflow; in a fleet, per runner, named by its label)."""
    machine = f"runner {runner}" if runner else "every machine class"
    return AlertKey(machine, "every leg", "the nightly gate", "no night measured", workflow)
