"""The alert job: every leg's ``night.json`` read back, the night's colour, and what GitHub is told.

This runs apart from the measuring job, with the write token and without any upgraded
backend package: it reads only the artifact, and a file that does not validate is
refused with one line (its leg counts as not reported). One issue per alert key (machine
class, leg, claim, state, cause), closed when a later night shows it cleared and reopened
when it returns (:mod:`pytest_specdec.gate.alerts`); the night's results that have
no accepted baseline go into one accept pull request (:mod:`pytest_specdec.gate.accepting`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.alerts import LEGACY_CAUSE, AlertKey, KnownIssue, clear_alert, known_issues, raise_alert
from pytest_specdec.gate.findings import (
    NIGHT_FILE,
    Finding,
    LegNight,
    NightColour,
    State,
    artifact_name,
    night_colour,
    runner_name,
    silent_legs,
)
from pytest_specdec.gate.leg_account import read_night


def load_legs(artifacts: Path, expected: Mapping[str, bool], runner: str = "") -> tuple[list[LegNight], list[str]]:
    """Each planned leg's night from ``artifacts/specdec-<leg>/night.json`` (a fleet's runner's:
    ``specdec-<runner>--<leg>``); the refusals, one line each.

    The file was written by a job that ran tonight's upgraded packages, so what it says of
    itself is checked: it must lie in its own leg's folder, the leg must be planned tonight,
    and whether it is required comes from the configuration, not from the file.
    """
    legs: list[LegNight] = []
    refused: list[str] = []
    for path in sorted(artifacts.glob(f"*/{NIGHT_FILE}")):
        try:
            leg = read_night(path)
        except SpecdecUsageError as error:
            refused.append(str(error))
            continue
        if path.parent.name != artifact_name(runner, leg.backend) or leg.backend not in expected:
            refused.append(
                f"{path} says it is the night of the {leg.backend!r} leg, which is not the leg of its folder or not "
                "a leg planned tonight — nothing in it was used"
            )
            continue
        legs.append(replace(leg, required=expected[leg.backend]))
    return legs, refused


def alert_key(leg: LegNight, finding: Finding) -> AlertKey:
    """The finding's issue: (machine class, leg, claim, state, cause, profile)."""
    profile = "" if finding.state.before_a_night else leg.profile  # a silent leg said no profile
    return AlertKey(leg.machine_class, leg.backend, finding.subject, finding.state.value, finding.cause, profile)


def issue_body(leg: LegNight, finding: Finding, run_url: str) -> str:
    """What happened, the history where there is one, tonight's release changes and the run."""
    where = f"`{finding.nodeid}` [{finding.category}]: " if finding.nodeid else ""
    lines = [f"**{finding.state.value}** on {leg.machine_class} ({leg.backend}).", "", f"- {where}{finding.message}"]
    if finding.history:
        lines += ["", "History (newest last; the plot is `history.png` in the night's artifact):", "", finding.history]
    changed = [f"- {line}" for line in leg.release_changes] or ["- none tonight (no upgrade ran, or it moved nothing)"]
    lines += ["", "Releases changed by tonight's upgrade:", *changed, "", f"Run and artifacts: {run_url}", ""]
    return "\n".join(lines)


def told(legs: Sequence[LegNight]) -> list[tuple[LegNight, Finding]]:
    """The findings GitHub hears about: a required leg's red ones, and undecided or eroding ones of any leg."""
    chosen = []
    for leg in legs:
        for finding in leg.findings:
            if not finding.state.opens_issue:
                continue
            if finding.state.turns_red and not leg.required:
                continue  # an optional leg warns in the summary and an annotation only
            chosen.append((leg, finding))
    return chosen


SEPARATED = (State.FLIP, State.REBASELINE)  # an old-versus-new run's calls: the release, or the machine


def cleared(key: AlertKey, legs: Sequence[LegNight]) -> str | None:
    """Why ``key``'s state is shown cleared tonight; ``None`` when tonight does not show it (not measured, or
    still there). Only a leg that reported can clear it (on the key's machine class; a leg that reported nothing
    was keyed before its machine class was known), a claim only when every gating result of it tonight decided
    its accepted verdict again (an inconclusive one clears nothing), and a release's change only on that release
    (a night that measured an older one, by hand, says nothing about it)."""
    silent = State(key.state).before_a_night if key.state in {s.value for s in State} else False
    leg = next((n for n in legs if n.backend == key.leg and (silent or (n.machine_class == key.machine_class
                                                                     and key.same_profile(n.profile)))), None)  # fmt: skip
    if leg is None or any(f.state.before_a_night for f in leg.findings):
        return None
    if any(f.subject == key.subject and f.state.value == key.state for f in leg.findings):
        return None
    if key.subject == "leg":
        if silent:
            return f"Cleared: the {key.leg} leg reported tonight."
        if not leg.measured:
            return None
        return f'Cleared: the {key.leg} leg reported and was measured tonight without "{key.state}".'
    if key.state == State.FLIP_NOT_SEPARATED.value:  # tonight's old-versus-new run told release from machine
        told = next((f for f in leg.findings if f.subject == key.subject and f.state in SEPARATED), None)
        if told is not None:
            return (f"Cleared: tonight's old-versus-new run separated the release from the machine for "
                    f'{key.subject}: "{told.state.value}" (its own issue).')  # fmt: skip
    if leg.measured and key.subject in leg.shown_only and key.state in {s.value for s in State if s.from_the_verdict}:
        return (
            f"Cleared: {key.subject} was measured tonight on {key.machine_class} for another profile's claim "
            f"(profile {leg.shown_only[key.subject]}): its verdict is shown, never gating, and opens no issue."
        )
    release = leg.agreeing.get(key.subject) if leg.measured else None
    if release is None:
        return None
    _, arrow, newer = key.cause.partition(" → ")
    if arrow and release != newer and not release.endswith(f" {newer}"):
        return None
    return (
        f"Cleared: {key.subject} was measured tonight on {key.machine_class} ({release}) and agrees with its "
        "accepted verdict."
    )


def _continued(key: AlertKey, known: Mapping[AlertKey, KnownIssue]) -> AlertKey:
    """The open issue that already tells ``key``'s change, else ``key``: the same claim and state away from the
    same accepted release (a flip that lasts through the next release, ``0.32.2 → 0.33.0`` then ``0.32.2 →
    0.33.1``, is the same change going on: commented there, not opened again), a key written before profiles
    were keyed, or an issue from before keys (:data:`~pytest_specdec.gate.alerts.LEGACY_CAUSE`)."""
    if key in known:
        return key
    accepted, arrow, _ = key.cause.partition(" → ")

    def continues(k: AlertKey) -> bool:
        same = (k.machine_class, k.leg, k.subject, k.state) == (key.machine_class, key.leg, key.subject, key.state)
        cause = k.cause in (key.cause, LEGACY_CAUSE) or bool(arrow and k.cause.startswith(f"{accepted} → "))
        return same and cause and k.same_profile(key.profile)

    same = [k for k, issue in known.items() if issue.open and continues(k)]
    return max(same, key=lambda k: known[k].number) if same else key


def tell(legs: Sequence[LegNight], gh: str, run_url: str, runner: str = "") -> list[str]:
    """One issue per alert key: opened, commented on or reopened; the gate's open issues shown cleared are
    closed with a comment. What was done, one line each.

    A fleet's runner (``runner``) judges only its own issues: those of the machine classes its legs reported
    tonight, its own "runner did not report" ones and those of the single runner the gate had before the fleet;
    another runner's are left for that runner's verdict."""
    bodies: dict[AlertKey, list[str]] = {}
    for leg, finding in told(legs):
        bodies.setdefault(alert_key(leg, finding), []).append(issue_body(leg, finding, run_url))
    known = known_issues(gh)
    raised: dict[AlertKey, list[str]] = {}
    for key, parts in bodies.items():  # two of tonight's keys may continue one issue: both bodies go there
        raised.setdefault(_continued(key, known), []).extend(parts)
    done = [raise_alert(gh, key, "\n---\n\n".join(parts), known) for key, parts in raised.items()]
    # A fleet's runner also judges the issues of the one runner the gate had before it (keyed "its self-hosted
    # runner"): they would otherwise stay open for good once the gate runs a fleet.
    mine = {leg.machine_class for leg in legs} | {runner_name(runner), runner_name("")}
    for key, issue in sorted(known.items()):
        if runner and key.machine_class not in mine:
            continue
        why = cleared(key, legs) if issue.open and key not in raised else None
        if why is not None:
            done.append(clear_alert(gh, issue, f"{why}\n\nRun and artifacts: {run_url}"))
    return done


def workflow_commands(colour: NightColour, legs: Sequence[LegNight]) -> list[str]:
    """GitHub workflow commands: an error per red line, a warning per warning, a notice for the ungated."""
    shown = [f"::error title=specdec gate::{line}" for line in colour.lines]
    shown += [f"::warning title=specdec gate::{line}" for line in colour.warnings]
    waiting = sum(leg.awaiting for leg in legs)
    if waiting:
        shown.append(f"::notice title=specdec gate::not yet gated: {waiting} result(s) await acceptance")
    return shown


def night_summary(colour: NightColour, legs: Sequence[LegNight], refused: Sequence[str]) -> str:
    """Markdown for the alert job's step summary: the colour first, then each leg's findings in their words."""
    head = "## specdec gate: RED" if colour.red else "## specdec gate: green"
    lines = [head, ""]
    lines += [f"- **{line}**" for line in colour.lines]
    lines += [f"- warning: {line}" for line in colour.warnings]
    lines += [f"- refused: {line}" for line in refused]
    for leg in legs:
        lines += ["", f"### {leg.backend} ({'required' if leg.required else 'optional'})", ""]
        lines.append("measured" if leg.measured else f"not measured: {leg.reason}")
        if leg.budget:
            lines.append(f"budget: {leg.budget}")
        lines += [f"- **{f.state.value}** — {f.subject}: {f.message}" for f in leg.findings]
        if not leg.findings and leg.measured:
            lines.append("- every result agrees with its accepted baseline")
    return "\n".join(lines) + "\n"


def decide(
    artifacts: Path, expected: Mapping[str, bool], runner: str = ""
) -> tuple[NightColour, list[LegNight], list[str]]:
    """The night's legs as reported (on ``runner``, a fleet's label; ``""``: the one runner), its colour, and
    the files refused."""
    legs, refused = load_legs(artifacts, expected, runner)
    legs += silent_legs(legs, expected, runner, artifacts)  # each with its own issue: its set-up's word, or silence
    return night_colour(legs, expected, runner), legs, refused
