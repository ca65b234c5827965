"""What one leg's night means: its findings, each with its own word, and whether it turns the night red.

The measuring job writes one :class:`LegNight` per leg (``night.json`` in the leg's
artifact); the alert job reads every leg's file back, validated against this schema,
and decides the night's colour with :func:`night_colour`. Nothing here runs a backend or
talks to GitHub.

A required leg is red on a confirmed flip, a lossless failure, SD no longer engaged
(not measurable where the accepted baseline was measurable), a backend that failed
mid-run, a claim that measured nothing (refused by the backend or by its own arguments),
a run cut short, a leg that could not be measured, or results left without an
accepted baseline for too many nights. An optional leg's red findings are warnings.
Undecided and eroding conclusions open an issue without turning the night red.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from pytest_specdec.gate.ab_call import Call
from pytest_specdec.store.baselines import baseline_key
from pytest_specdec.store.nights import Night, Nights
from pytest_specdec.store.records import Change, ComparisonRecord, Conclusion, Role, RunRecord

NIGHT_SCHEMA_VERSION = 1
NIGHT_FILE = "night.json"


class State(StrEnum):
    """A finding's word: the step summary's, and its issue title's."""

    FLIP = "conclusion changed"
    # Confirmed by a re-run on the upgraded machine only (no old release could run beside the new one).
    FLIP_NOT_SEPARATED = "conclusion changed (release not separated from the machine)"
    LOSSY = "SD changed the output"
    NOT_ENGAGED = "SD no longer engaged"
    CRASHED = "backend failed"
    PLAIN_SPECULATES = "the plain arm now speculates"  # a release whose default drafts: no comparison, not a flip
    NOT_MEASURED = "claim not measured"
    CUT_SHORT = "run cut short"
    UNMEASURABLE = "leg not measurable"
    NOT_REPORTED = "runner did not report"  # no night file came back from the leg's measuring job
    TAMPERED = "lock does not match: possible tampering"  # a locked package's hash differed: nothing installed
    SETUP_FAILED = "set-up failed"  # the runner reported, but its environment could not be built from the lock
    UNGATED = "not gated for too long"
    NOT_YET_GATED = "not yet gated"
    UNDECIDED = "undecided for nights"
    ERODING = "eroding"
    REBASELINE = "re-baseline needed"  # shown: both releases contradict the accepted verdict tonight
    NOT_CONFIRMED = "flip not confirmed"  # a flip neither the release nor the machine was shown to make
    METRIC_CHANGED = "metric changed, not speed"
    ACCEPTANCE_FELL = "acceptance fell"  # the engine drafts worse: red before the speedup crosses a bound

    @property
    def from_the_verdict(self) -> bool:
        """Whether the finding is about a claim's verdict (its bounds), not about what the engine did."""
        return self in (State.FLIP, State.FLIP_NOT_SEPARATED, State.UNDECIDED, State.ERODING, State.NOT_CONFIRMED,
                        State.REBASELINE)  # fmt: skip

    @property
    def before_a_night(self) -> bool:
        """Whether the leg never reached a night of its own (keyed before its machine class and profile were known)."""
        return self in (State.NOT_REPORTED, State.TAMPERED, State.SETUP_FAILED)

    @property
    def turns_red(self) -> bool:
        """Whether the finding, on a required leg, fails the night."""
        return self not in (State.NOT_YET_GATED, State.UNDECIDED, State.ERODING, State.NOT_CONFIRMED,
                            State.METRIC_CHANGED)  # fmt: skip

    @property
    def opens_issue(self) -> bool:
        """Whether the finding is told as an issue (one per title, commented on after); a flip not confirmed
        opens one as "undecided for nights" once it has lasted the configured nights."""
        return self not in (State.NOT_YET_GATED, State.NOT_CONFIRMED)


class LegCause(StrEnum):
    """The kind of a leg-level finding: an alert's cause, so two kinds of refusal are two issues."""

    CONFIGURATION = "leg configuration refused"
    RUNTIME_MISSING = "backend runtime not installed"
    UNAVAILABLE = "backend or server unavailable"
    MODEL_UNAVAILABLE = "model not available"
    PYTEST_REFUSED = "pytest refused the run"
    NOTHING_MEASURED = "every benchmark skipped itself"
    SERVER_UPGRADE = "server upgrade failed"
    NO_MEASURE_STEP = "the measure step did not run"
    TEST_CRASHED = "a test crashed"
    CLAIM_REFUSED = "a claim was refused"
    PLAIN_SPECULATES = "the plain arm drafted"
    INTERRUPTED = "interrupted"
    NO_NIGHT_FILE = "no night file came back"
    LOCK_TAMPERED = "a locked hash did not match"
    LOCK_UNINSTALLABLE = "the lock could not be installed"
    AWAITING = "results await acceptance"


@dataclass(frozen=True)
class Finding:
    """One thing a leg's night found, about one claim (or the whole leg)."""

    state: State
    subject: str  # "claim d" or a test's name; "leg" for the whole leg
    message: str
    nodeid: str = ""
    category: str = ""
    history: str = ""  # a text table of the key's history, for undecided and eroding issues
    cause: str = ""  # what changed: the release pair of a result's finding, the refusal's kind of a leg's
    key: str = ""  # the result's baseline key; "" for a finding about the leg or a trend


@dataclass(frozen=True)
class LegNight:
    """One leg's night, as the alert job reads it."""

    backend: str
    machine_class: str
    required: bool
    measured: bool
    reason: str
    findings: tuple[Finding, ...] = ()
    awaiting: int = 0  # results without an accepted baseline tonight
    release_changes: tuple[str, ...] = ()
    budget: str = ""  # what the budget step said (expected duration, claims dropped)
    agreeing: Mapping[str, str] = field(default_factory=dict)  # claim → release, every result agreeing: these clear
    profile: str = ""  # the model profile the leg measured ("" where no run said): part of each alert's key
    # claim → the profile it was measured on, where every row of it tonight was for another profile's claim:
    # shown, never gating, so such a claim's issue (opened before that rule held) is closed
    shown_only: Mapping[str, str] = field(default_factory=dict)
    schema_version: int = NIGHT_SCHEMA_VERSION

    @property
    def red(self) -> list[Finding]:
        """The findings that fail the night (only a required leg's)."""
        return [f for f in self.findings if f.state.turns_red] if self.required else []

    @property
    def warnings(self) -> list[Finding]:
        """Red-worthy findings of an optional leg, and the findings that never turn red."""
        return [f for f in self.findings if not self.required or not f.state.turns_red]


@dataclass(frozen=True)
class Thresholds:
    """How many nights a state may last before it is told (``[tool.specdec.gate]``)."""

    ungated_nights: int = 3
    undecided_nights: int = 3


def subject_of(record: ComparisonRecord) -> str:
    """``claim d``, or the test's name when it states no claim."""
    return f"claim {record.claim_id}" if record.claim_id else record.nodeid.split("::")[-1]


def release_pair(record: ComparisonRecord) -> str:
    """The releases a result's finding is about: ``accepted → tonight's``, or tonight's alone."""
    accepted = record.check.baseline_release if record.check is not None else None
    if not accepted or accepted == record.release:
        return record.release
    name, _, version = record.release.partition(" ")
    same_package = version and accepted.startswith(f"{name} ")
    return f"{accepted} → {version if same_package else record.release}"


def _about(state: State, record: ComparisonRecord, message: str, history: str = "") -> Finding:
    return Finding(
        state,
        subject_of(record),
        message,
        record.nodeid,
        record.category,
        history,
        release_pair(record),
        baseline_key(record),
    )


def history_table(nights: Nights) -> str:
    """The history of one key as a Markdown table (issues cannot carry the plot)."""
    rows = ["| night | release | speedup [CI] | verdict | change |", "|---|---|---|---|---|"]
    for night in nights:
        s = night.speedup
        rows.append(
            f"| {night.time[:16]} | {night.release} | {s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}] | {night.verdict} "
            f"| {night.change or '-'} |"
        )
    return "\n".join(rows)


def trailing(nights: Nights, changes: set[str]) -> int:
    """How many of the last runs (one time stamp each), in a row, had a night whose change is in ``changes``."""
    runs: dict[str, list[Night]] = {}
    for night in sorted(nights, key=lambda n: n.time):
        runs.setdefault(night.time, []).append(night)
    count = 0
    for run in reversed(runs.values()):
        if not any(night.change in changes for night in run):
            break
        count += 1
    return count


RE_RUN = "re-run"  # the call on a flip confirmed by a re-run on the upgraded machine (no old release beside it)


@dataclass(frozen=True)
class FlipCall:
    """What the confirm step said about one flip: confirmed (the release made it) or not, and why."""

    confirmed: bool
    call: str = ""  # change.Call's value, or RE_RUN
    line: str = ""


# A flip the confirm step left no call on (it crashed, or never ran): nothing cleared it, so it stands.
UNCALLED = FlipCall(
    True, "", "the confirm step left no call on this flip (it did not finish: see the leg's log) — the flip stands"
)

# The confirm step's calls that are findings of their own when they do not confirm a flip.
CLEARED = {
    Call.MACHINE_MOVED.value: State.REBASELINE,
    Call.METRIC_CHANGED.value: State.METRIC_CHANGED,
    Call.NOT_CONFIRMED.value: State.NOT_CONFIRMED,
}


def comparison_findings(
    run: RunRecord,
    flips: Mapping[str, FlipCall],
    measurable_baselines: Mapping[str, str],
    history: Nights,
    thresholds: Thresholds,
    *,
    moved: Mapping[str, str] | None = None,
) -> list[Finding]:
    """Findings from tonight's comparisons.

    ``flips`` holds the confirm step's call per result (its baseline key: a sweep's rows are results of
    their own); a flip without one stands; ``measurable_baselines`` names, per result whose accepted baseline was
    measurable, the release it was measured on (for "SD no longer engaged"); ``moved``, per result, what the fingerprints say
    changed since its baseline was accepted (for "re-baseline needed").

    A flip not confirmed is said each night in its own word; once the result has flipped on
    ``undecided_nights`` nights in a row (the runner's history) it is "undecided for nights", with an issue.
    """
    findings: list[Finding] = []
    for record in run.comparisons:
        key = baseline_key(record)
        # A claim made for another model profile is shown in the summary and on the site: its verdict never gates,
        # so neither its flip nor its undecided nights are findings. That SD changed the output or stopped
        # engaging is the engine's doing whatever the claim, and fails such a row in the plugin too.
        verdict_gates = record.judgement.role is not Role.OTHER_PROFILE
        conclusion, check = record.judgement.conclusion, record.check
        if conclusion is Conclusion.FAILED:
            findings.append(_about(State.LOSSY, record, record.judgement.failure or "SD changed the output"))
        elif conclusion is Conclusion.NOT_MEASURABLE and key in measurable_baselines:
            accepted = measurable_baselines[key]
            tonight = "" if accepted == record.release else f"; tonight: {record.release}"
            findings.append(
                _about(
                    State.NOT_ENGAGED,
                    record,
                    f"{record.judgement.failure or 'not measurable'} — its accepted baseline was measured with SD "
                    f"engaged ({accepted}{tonight})",
                )
            )
        elif check is not None and check.change is Change.ACCEPTANCE_FELL:  # the engine's doing, whatever the claim
            findings.append(_about(State.ACCEPTANCE_FELL, record, check.message))
        elif not verdict_gates:
            continue
        elif check is not None and check.change is Change.FLIP and record in run.flips:
            said = flips.get(key, UNCALLED)
            if said.confirmed:  # by the old-versus-new run, or only by a re-run that cannot tell release from machine
                state = State.FLIP_NOT_SEPARATED if said.call == RE_RUN else State.FLIP
                findings.append(_about(state, record, f"{check.message}; {said.line}" if said.line else check.message))
            elif said.call in CLEARED:
                state = CLEARED[said.call]
                line = said.line
                if state is State.REBASELINE:
                    line += (
                        f"; {(moved or {}).get(key) or 'no accepted baseline was read to compare fingerprints with'}"
                    )
                lines = tuple(night for night in history if night.key == key)
                nights = trailing(lines, {Change.FLIP.value})
                if state is State.NOT_CONFIRMED and nights >= thresholds.undecided_nights:
                    message = f"flip not confirmed on {nights} nights in a row: {line}"
                    findings.append(_about(State.UNDECIDED, record, message, history_table(lines[-12:])))
                else:
                    findings.append(_about(state, record, line))
        elif check is not None and check.change is Change.UNDECIDED:
            lines = tuple(n for n in history if n.nodeid == record.nodeid and n.category == record.category)
            nights = trailing(lines, {Change.UNDECIDED.value})
            if nights >= thresholds.undecided_nights:
                message = f"undecided on {nights} nights in a row: {check.message}"
                findings.append(_about(State.UNDECIDED, record, message, history_table(lines[-12:])))
    return findings


AGREES = (Change.UNCHANGED, Change.RECONFIRMED, Change.DRIFT, Change.ACCEPTANCE_FELL)  # the verdict, decided again


def agreeing_subjects(run: RunRecord) -> dict[str, str]:
    """The claims (or tests) whose every gating result tonight decided the same verdict as its accepted baseline,
    with the release they were measured on.

    Only these can clear an alert: an inconclusive re-measurement, a lossy or unmeasured one, or a new
    result says nothing about whether a flip went away; rows shown for another profile or beside the verdict
    (reference rows) gate nothing and decide nothing here.
    """
    verdicts: dict[str, bool] = {}
    releases: dict[str, str] = {}
    for record in run.comparisons:
        if record.judgement.role is not Role.GATING:
            continue
        agrees = (
            record.check is not None
            and record.check.change in AGREES
            and not (record.judgement.conclusion.says_nothing_about_speed)
        )
        subject = subject_of(record)
        verdicts[subject] = verdicts.get(subject, True) and agrees
        releases[subject] = record.release
    return {subject: releases[subject] for subject, agrees in sorted(verdicts.items()) if agrees}


def shown_only_subjects(run: RunRecord) -> dict[str, str]:
    """The claims whose every row tonight was measured for another profile's claim, with the profile measured."""
    roles: dict[str, set[Role]] = {}
    profiles: dict[str, str] = {}
    for record in run.comparisons:
        roles.setdefault(subject_of(record), set()).add(record.judgement.role)
        profiles[subject_of(record)] = record.profile
    return {subject: profiles[subject] for subject, found in sorted(roles.items()) if found == {Role.OTHER_PROFILE}}


def awaiting_acceptance(run: RunRecord) -> int:
    """Results with nothing to compare against: first night, a new machine class, model or γ."""
    waiting = (Change.NEW, Change.REBASELINE)
    return sum(1 for r in run.comparisons if r.check is not None and r.check.change in waiting)


def ungated_finding(awaiting: int, history: Nights, thresholds: Thresholds) -> Finding | None:
    """ "Not yet gated" tonight; red once results have waited ``ungated_nights`` nights in a row."""
    if not awaiting:
        return None
    nights = trailing(history, {Change.NEW.value, Change.REBASELINE.value})
    if nights >= thresholds.ungated_nights:
        return Finding(
            State.UNGATED,
            "leg",
            f"{awaiting} result(s) have had no accepted baseline for {nights} nights in a row — merge the accept "
            "pull request (or run the specdec accept workflow)",
            cause=LegCause.AWAITING,
        )
    return Finding(
        State.NOT_YET_GATED,
        "leg",
        f"not yet gated: {awaiting} result(s) await acceptance (night {max(1, nights)} of "
        f"{thresholds.ungated_nights} before the gate goes red)",
    )


@dataclass(frozen=True)
class NightColour:
    """The whole night: red or green, and the lines that say why."""

    red: bool
    lines: tuple[str, ...] = ()
    warnings: tuple[str, ...] = field(default_factory=tuple)


def artifact_name(runner: str, backend: str) -> str:
    """The artifact a leg's measuring job uploads: ``specdec-<leg>``, or ``specdec-<runner>--<leg>`` in a fleet.

    >>> artifact_name("", "mlx"), artifact_name("specdec-m4pro-48", "mlx")
    ('specdec-mlx', 'specdec-specdec-m4pro-48--mlx')
    """
    return f"specdec-{runner}--{backend}" if runner else f"specdec-{backend}"


def silent_text(runner: str = "") -> str:
    """What a leg that sent no night file tells (the verdict job cannot see the runner, only that nothing came
    back), naming the runner's labels."""
    labels = "self-hosted, macOS, ARM64" + (f", {runner}" if runner else "")
    return (
        "the leg reported nothing: its measuring job did not run or did not finish on the self-hosted runner "
        f"(runs-on: {labels}) — a runner offline or lost, a job cancelled after GitHub's 24–48 h "
        "queue limit, or a night file refused"
    )


def runner_name(runner: str) -> str:
    """What a runner is called where no night file named its machine class (``runner <label>``)."""
    return f"runner {runner}" if runner else "its self-hosted runner"


# What a leg's set-up leaves in its artifact when it stops before any night (gate.sh setup): the one line it said.
SETUP_REFUSALS = {
    "tampered.txt": (State.TAMPERED, LegCause.LOCK_TAMPERED),
    "setup-failed.txt": (State.SETUP_FAILED, LegCause.LOCK_UNINSTALLABLE),
}


def silent_legs(
    legs: Sequence[LegNight], expected: Mapping[str, bool], runner: str = "", artifacts: Path | None = None
) -> list[LegNight]:
    """A leg night, with its one finding, for each planned leg that sent no night file (so it gets its issue): the
    set-up's own refusal where its artifact holds one (:data:`SETUP_REFUSALS`), else "runner did not report"."""
    reported = {leg.backend for leg in legs}
    # In a fleet, by the runner's label: two runners of one machine class each have their own.
    machine = runner_name(runner) if runner else next((leg.machine_class for leg in legs), runner_name(runner))
    silent = []
    for backend, required in sorted(expected.items()):
        if backend in reported:
            continue
        finding = Finding(State.NOT_REPORTED, "leg", silent_text(runner), cause=LegCause.NO_NIGHT_FILE)
        folder = (artifacts / artifact_name(runner, backend)) if artifacts is not None else None
        for name, (state, cause) in SETUP_REFUSALS.items():
            said = _said_line(folder / name) if folder is not None else ""
            if said:
                finding = Finding(state, "leg", said, cause=cause)
                break
        silent.append(LegNight(backend, machine, required, False, "the leg reported nothing", (finding,)))
    return silent


def _said_line(path: Path) -> str:
    """The first line of a small text file a runner wrote, printable only (a runner's file is not trusted)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(2000).decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "".join(ch for ch in head.splitlines()[0] if ch.isprintable())[:500] if head.strip() else ""


def night_colour(legs: Sequence[LegNight], expected: Mapping[str, bool], runner: str = "") -> NightColour:
    """Red when a required leg has a red finding or did not report, or when no leg was measured at all.

    ``expected`` maps each configured leg to whether it is required.
    """
    reported = {leg.backend for leg in legs}
    lines: list[str] = []
    warnings: list[str] = []
    for backend, required in sorted(expected.items()):
        if backend not in reported:
            line = f"{backend}: {State.NOT_REPORTED.value} — leg: {silent_text(runner)}"
            (lines if required else warnings).append(line)
    for leg in legs:
        lines += [f"{leg.backend}: {f.state.value} — {f.subject}: {f.message}" for f in leg.red]
        warnings += [f"{leg.backend}: {f.state.value} — {f.subject}: {f.message}" for f in leg.warnings]
    if not any(leg.measured for leg in legs):
        lines.append("no leg was measured tonight: a night that measures nothing is never green")
    return NightColour(bool(lines), tuple(lines), tuple(warnings))
